//! `jetdetect run --echo`: each frame's detections on stdout, one line for a person, as
//! `jetdetect watch` prints them.

use std::io::Write;
use std::time::Instant;

use crate::client;
use crate::pipeline::publish::{Output, Started};
use crate::pipeline::report::FrameReport;
use crate::yolo::ClassNames;

use super::protocol;

/// Prints every published frame to stdout; when stdout goes away (a pipe into `head`), it
/// says so once and the daemon runs on.
#[derive(Default)]
pub struct Echo {
    names: Option<ClassNames>,
    line: Vec<u8>,
    closed: bool,
}

impl Output for Echo {
    fn ready(&mut self, s: &Started) {
        self.names = Some(s.names.clone());
    }

    fn frame(&mut self, report: &FrameReport, dropped: u64, now: Instant) {
        let Some(names) = &self.names else { return };
        if self.closed {
            return;
        }
        self.line.clear();
        protocol::write_detections(&mut self.line, report, names, now, dropped);
        if let Some(text) = serde_json::from_slice(&self.line).ok().as_ref().and_then(client::format_human) {
            if let Err(e) = writeln!(std::io::stdout().lock(), "{text}") {
                log::warn!("--echo: stdout: {e}; no more frames are printed, the daemon runs on");
                self.closed = true;
            }
        }
    }
}
