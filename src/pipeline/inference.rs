//! The inference thread: the newest frame of each camera in turn (several per engine run where
//! the model batches), through the detector and the camera's hazard layer, into reports for
//! the publisher. Reports and frame buffers are recycled, never made per frame.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::shared::Shared;
use super::slot::LatestSlots;
use crate::clock::mono_ns;
use crate::detector::Detector;
use crate::error::Error;
use crate::frame::Frame;
use crate::hazard::Hazards;
use crate::output::tap::PictureTap;
use crate::report::{CameraId, FrameReport};
use crate::stats::StageTimes;
use crate::yolo::Detection;

/// What inference keeps per camera: its name for the reports and its hazard layer (tracks
/// belong to one camera's view).
pub(super) struct CameraLane {
    pub(super) id: CameraId,
    pub(super) hazards: Option<Hazards>,
}

/// Fills `r` with one frame's results.
fn fill_report(
    r: &mut FrameReport,
    camera: &mut CameraLane,
    frame: &Frame,
    dets: &[Detection],
    times: StageTimes,
    start: Instant,
) {
    if r.camera != camera.id {
        r.camera.clone_from(&camera.id);
    }
    r.detections.clear();
    r.detections.extend_from_slice(dets);
    r.truth.clone_from(&frame.truth);
    r.seq = frame.seq;
    r.width = frame.width;
    r.height = frame.height;
    r.captured = frame.captured;
    r.captured_wall_ns = frame.captured_wall_ns;
    r.infer_start = start;
    r.times = times;
    if let Some(h) = &mut camera.hazards {
        // Tracking is part of decoding boxes into what the robot acts on: its time
        // counts in the decode stage.
        let t = Instant::now();
        // A source that knows its camera's attitude (a moving synthetic scene) tells it as a
        // flight controller would.
        if let Some(a) = frame.attitude {
            h.attitude(frame.captured, a);
        }
        h.update(&r.detections, r.captured, r.width, r.height, &mut r.hazards);
        r.times.decode += t.elapsed();
    } else {
        r.hazards.zones.clear();
    }
    r.infer_end = Instant::now();
}

/// Takes the newest frame of each camera that has one (cameras in turn), runs them through the
/// detector (one engine run for all of them where the model has a batch axis, else one camera
/// per turn) and hands each frame's report to the publisher.
pub(super) fn inference_loop(
    mut detector: Detector,
    mut cameras: Vec<CameraLane>,
    slot: Arc<LatestSlots<Frame>>,
    reports: SyncSender<FrameReport>,
    recycled: Receiver<FrameReport>,
    shared: Arc<Shared>,
    taps: Vec<Arc<PictureTap>>,
) {
    let mut last_error_log: Option<Instant> = None;
    // A failed frame is counted against its camera; the log says so at most every 5 s.
    let mut failed = |lane: usize, frame: &Frame, e: &Error, cameras: &[CameraLane]| {
        shared.cameras[lane].errors.fetch_add(1, Ordering::Relaxed);
        if last_error_log.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
            log::error!("{}: frame {} ({}): {e}", cameras[lane].id.name, frame.seq, frame.label);
            last_error_log = Some(Instant::now());
        }
    };
    // A report the publisher had no room for, filled again with the next frame rather than
    // dropped (a dropped report is a new one to allocate).
    let mut spare: Option<FrameReport> = None;
    // The lane served last: the next turn starts after it.
    let mut last = cameras.len() - 1;
    let max = detector.max_batch().clamp(1, cameras.len());
    let mut taken: Vec<(usize, Frame)> = Vec::with_capacity(max);
    'frames: loop {
        shared.heartbeat.store(mono_ns(Instant::now()), Ordering::Relaxed);
        if slot.take_ready(last, max, Duration::from_millis(200), &mut taken) == 0 {
            match slot.closed() {
                true => break,
                false => continue,
            }
        }
        last = taken[taken.len() - 1].0;
        let start = Instant::now();
        crate::fault::stage("inference", shared.sum(|c| &c.processed) + 1);
        if let Err(e) = detector.detect_batch(taken.iter().map(|(_, f)| f)) {
            for (lane, frame) in &taken {
                failed(*lane, frame, &e, &cameras);
            }
        } else {
            let times = detector.times();
            for (k, (lane, frame)) in taken.iter_mut().enumerate() {
                let dets = match detector.batch_result(k) {
                    Ok(d) => d,
                    Err(e) => {
                        failed(*lane, frame, &e, &cameras);
                        continue;
                    }
                };
                let mut r = spare.take().or_else(|| recycled.try_recv().ok()).unwrap_or_default();
                fill_report(&mut r, &mut cameras[*lane], frame, dets, times, start);
                // Someone is looking: the frame goes to them with its own report (its buffer is
                // swapped for a spare, not copied).
                if let Some(tap) = taps.iter().find(|t| t.due(*lane, frame.captured)) {
                    tap.offer(frame, &r);
                }
                shared.cameras[*lane].processed.fetch_add(1, Ordering::Relaxed);
                match reports.try_send(r) {
                    Ok(()) => {}
                    Err(TrySendError::Full(r)) => {
                        log::warn!("publisher is behind: frame {} not published", frame.seq);
                        spare = Some(r);
                    }
                    Err(TrySendError::Disconnected(_)) => break 'frames,
                }
            }
        }
        for (lane, frame) in taken.drain(..) {
            slot.recycle(lane, frame);
        }
    }
}
