//! `jetdetect run --echo`: each frame's detections on stdout, one line for a person, as
//! `jetdetect watch` prints them.

use std::io::Write;
use std::time::Instant;

use crate::client;
use crate::output::{Health, Output, Started};
use crate::report::FrameReport;
use crate::yolo::ClassNames;

use super::protocol;

/// Prints every published frame to stdout; when stdout goes away (a pipe into `head`), it
/// says so once and the daemon runs on.
#[derive(Default)]
pub struct Echo {
    names: Option<ClassNames>,
    line: Vec<u8>,
    closed: bool,
    /// Several cameras: each line starts with its camera's name.
    cameras: bool,
}

impl Echo {
    /// Prints the message in `self.line` as `jetdetect watch` would.
    fn print(&mut self) {
        if self.closed {
            return;
        }
        for msg in self.line.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let Some(text) =
                serde_json::from_slice(msg).ok().as_ref().and_then(|m| client::format_human(m, self.cameras))
            else {
                continue;
            };
            if let Err(e) = writeln!(std::io::stdout().lock(), "{text}") {
                log::warn!("--echo: stdout: {e}; no more frames are printed, the daemon runs on");
                self.closed = true;
                return;
            }
        }
    }
}

impl Output for Echo {
    fn ready(&mut self, s: &Started) {
        self.names = Some(s.names.clone());
        self.cameras = s.cameras.len() > 1;
    }

    fn frame(&mut self, report: &FrameReport, dropped: u64, now: Instant) {
        let Some(names) = &self.names else { return };
        if self.closed {
            return;
        }
        self.line.clear();
        protocol::write_detections(&mut self.line, report, names, now, dropped);
        if !report.hazards.zones.is_empty() {
            protocol::write_hazards(&mut self.line, report, names, now);
        }
        self.print();
    }

    fn tick(&mut self, health: &Health) {
        if health.blind_notice {
            for b in health.blind {
                self.line.clear();
                protocol::write_blind(&mut self.line, b, Instant::now());
                self.print();
            }
        }
    }
}
