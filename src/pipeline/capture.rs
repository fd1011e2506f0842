//! A camera's capture thread: frames from its source into its lane of the newest-frame slots,
//! the source's faults logged now and then and kept for the stats.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::shared::Shared;
use super::slot::LatestSlots;
use crate::frame::Frame;
use crate::shutdown::Shutdown;
use crate::source::{FrameSource, SourceError};

/// How many frames a source error is logged once per (they repeat while a camera is away).
const FAULT_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Reads one camera into its lane until a shutdown, the end of its stream or a lasting error;
/// `who` starts its log lines (`camera front: ` with several cameras, else nothing).
pub(super) fn capture_loop(
    lane: usize,
    who: String,
    mut src: Box<dyn FrameSource>,
    slot: Arc<LatestSlots<Frame>>,
    all: Arc<Shared>,
    shutdown: Shutdown,
) {
    let shared = &all.cameras[lane];
    let mut frame = slot.spare(lane).unwrap_or_else(Frame::empty);
    let mut last_log: Option<Instant> = None;
    let set_fault = |fault: Option<String>| {
        let mut f = shared.source_fault.lock().unwrap_or_else(|e| e.into_inner());
        if fault.is_some() && f.is_none() {
            shared.source_faults.fetch_add(1, Ordering::Relaxed);
        }
        *f = fault;
    };
    while !shutdown.is_requested() {
        match src.next_frame(&mut frame) {
            Ok(true) => {
                if shared.source_fault.lock().map(|f| f.is_some()).unwrap_or(false) {
                    log::info!("{who}{}: frames are flowing again", src.describe());
                    set_fault(None);
                    last_log = None;
                }
                let n = shared.captured.fetch_add(1, Ordering::Relaxed) + 1;
                crate::fault::stage("capture", n);
                frame = slot.put(lane, frame).unwrap_or_else(Frame::empty);
            }
            Ok(false) => {
                log::info!("{who}{}: end of stream", src.describe());
                shared.source_ended.store(true, Ordering::Relaxed);
                break;
            }
            Err(SourceError::Unavailable(m)) | Err(SourceError::Decode(m)) => {
                // Transient: the camera is away or a frame was bad. Keep going, log now and then.
                if last_log.is_none_or(|t| t.elapsed() >= FAULT_LOG_INTERVAL) {
                    log::warn!("{who}{m}");
                    last_log = Some(Instant::now());
                }
                set_fault(Some(m));
            }
            Err(e) => {
                log::error!(
                    "{who}{}: {e}; {}",
                    src.describe(),
                    match who.is_empty() {
                        true => "stopping",
                        false => "this camera stops, the others go on",
                    }
                );
                set_fault(Some(e.to_string()));
                shared.source_ended.store(true, Ordering::Relaxed);
                break;
            }
        }
    }
    slot.close(lane);
}
