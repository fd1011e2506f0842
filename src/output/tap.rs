//! The picture tap: frames, with the report of what was found in them, for someone who wants to
//! look (the live view, `GET /snapshot.jpg`).
//!
//! Inference hands a frame over only while a viewer asked for its camera in the last
//! [`WANT_FOR`], and once per `interval` per camera (the first frame of each slot of a grid
//! `interval` apart: on average one per interval, never two in one slot), so with nobody watching nothing is
//! copied or encoded. Handing over costs inference no copy: the frame's buffer is swapped for a
//! spare one (the one the previous picture came in), and only the report (boxes, tracks, zones,
//! a few hundred bytes) is copied. The consumer (the view's encoder thread) takes the newest
//! picture of each camera; a picture nobody took yet is replaced by a newer one, never queued.
//! The boxes drawn are therefore always those of the frame they were found in.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::clock::mono_ns;
use crate::frame::Frame;

use crate::report::FrameReport;

/// How long one request for pictures of a camera lasts.
pub const WANT_FOR: Duration = Duration::from_secs(3);

/// One frame as captured and the report of what inference found in it.
#[derive(Clone, Debug)]
pub struct Picture {
    /// The frame, as the source delivered it.
    pub frame: Frame,
    /// Its report: detections, tracks, zones, ground truth, timings.
    pub report: FrameReport,
}

#[derive(Default)]
struct Lane {
    /// `CLOCK_MONOTONIC` ns until which this camera's pictures are wanted.
    until_ns: AtomicU64,
    /// When its next frame is due: a grid `interval` apart, so that frames a little early for
    /// one slot (30 fps against 100 ms) still give one picture per interval on average.
    next_ns: AtomicU64,
}

struct State {
    /// Per camera: its newest picture not yet taken.
    pending: Vec<Option<Picture>>,
    /// Pictures given back, for their buffers.
    spares: Vec<Picture>,
    closed: bool,
}

/// Pictures from inference to a viewer (see the module's documentation).
pub struct PictureTap {
    interval_ns: u64,
    lanes: Vec<Lane>,
    state: Mutex<State>,
    ready: Condvar,
}

impl PictureTap {
    /// A tap for `cameras` cameras, handing over one frame per camera per `interval` slot.
    pub fn new(cameras: usize, interval: Duration) -> PictureTap {
        PictureTap {
            interval_ns: interval.as_nanos() as u64,
            lanes: (0..cameras).map(|_| Lane::default()).collect(),
            state: Mutex::new(State {
                pending: (0..cameras).map(|_| None).collect(),
                spares: Vec::new(),
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A viewer wants camera `camera`'s pictures for the next [`WANT_FOR`].
    pub fn want(&self, camera: usize) {
        if let Some(l) = self.lanes.get(camera) {
            l.until_ns.fetch_max(mono_ns(Instant::now() + WANT_FOR), Ordering::Relaxed);
        }
    }

    /// Whether anyone wants camera `camera`'s pictures now.
    pub fn watched(&self, camera: usize) -> bool {
        self.lanes.get(camera).is_some_and(|l| l.until_ns.load(Ordering::Relaxed) > mono_ns(Instant::now()))
    }

    /// Inference: whether camera `camera`'s frame captured now is to be handed over (someone
    /// watches and the interval has passed). Two atomic loads when nobody watches.
    pub fn due(&self, camera: usize, now: Instant) -> bool {
        let Some(l) = self.lanes.get(camera) else { return false };
        let now = mono_ns(now);
        if l.until_ns.load(Ordering::Relaxed) <= now {
            return false;
        }
        let next = l.next_ns.load(Ordering::Relaxed);
        if now < next {
            return false;
        }
        // The next slot on the grid; after a pause (nobody watched), a new grid from now.
        let after = next.saturating_add(self.interval_ns);
        l.next_ns.store(if after > now { after } else { now + self.interval_ns }, Ordering::Relaxed);
        true
    }

    /// Inference: hands over `frame` (swapped for a spare buffer, which the caller recycles in
    /// its place) with a copy of its `report`. A picture of the same camera not yet taken is
    /// replaced.
    pub fn offer(&self, frame: &mut Frame, report: &FrameReport) {
        let lane = report.camera.index;
        let mut s = self.lock();
        if s.closed || lane >= s.pending.len() {
            return;
        }
        let mut p =
            s.spares.pop().unwrap_or_else(|| Picture { frame: Frame::empty(), report: FrameReport::new() });
        std::mem::swap(&mut p.frame, frame);
        p.report.copy_from(report);
        if let Some(old) = s.pending[lane].replace(p) {
            s.spares.push(old);
        }
        drop(s);
        self.ready.notify_all();
    }

    /// The consumer: the newest picture of any camera, waiting up to `wait`; `None` on timeout
    /// or once closed.
    pub fn take(&self, wait: Duration) -> Option<Picture> {
        let until = Instant::now() + wait;
        let mut s = self.lock();
        loop {
            if s.closed {
                return None;
            }
            if let Some(p) = s.pending.iter_mut().find_map(Option::take) {
                return Some(p);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            s = self.ready.wait_timeout(s, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Gives a taken picture back, so that its buffers carry the next one.
    pub fn give_back(&self, picture: Picture) {
        let mut s = self.lock();
        // One per camera pending, one being drawn, one in flight: more is never needed.
        if s.spares.len() < self.lanes.len() + 2 {
            s.spares.push(picture);
        }
    }

    /// No more pictures: a waiting consumer returns.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(seq: u64, fill: u8) -> Frame {
        let mut f = Frame::empty();
        f.width = 4;
        f.height = 2;
        f.data = vec![fill; 24];
        f.seq = seq;
        f
    }

    #[test]
    fn nothing_is_due_while_nobody_watches() {
        let tap = PictureTap::new(2, Duration::from_millis(100));
        assert!(!tap.due(0, Instant::now()));
        assert!(!tap.watched(0));
        tap.want(1);
        assert!(!tap.due(0, Instant::now()), "camera 0 is not watched");
        assert!(tap.watched(1));
        let t = Instant::now();
        assert!(tap.due(1, t));
        assert!(!tap.due(1, t + Duration::from_millis(50)), "within the interval");
        assert!(tap.due(1, t + Duration::from_millis(100)));
        assert!(!tap.due(1, t + WANT_FOR + Duration::from_millis(200)), "the request lapsed");
    }

    #[test]
    fn a_camera_slightly_faster_than_the_grid_still_gives_one_picture_per_interval() {
        // 30 fps against 100 ms: every third frame is a hair early for its slot. Handing over
        // "100 ms after the last" would take every fourth (7.5 per second); the grid takes 10.
        let tap = PictureTap::new(1, Duration::from_millis(100));
        tap.want(0);
        let t = Instant::now();
        let frame = |k: u64| t + Duration::from_nanos(k * 33_333_333);
        let due = (0..30).filter(|&k| tap.due(0, frame(k))).count();
        assert_eq!(due, 10, "30 frames at 30 fps over one second");
    }

    #[test]
    fn hands_over_without_copying_and_keeps_the_newest() {
        let tap = PictureTap::new(1, Duration::ZERO);
        let mut report = FrameReport::new();
        let mut f = frame(1, 7);
        report.seq = 1;
        tap.offer(&mut f, &report);
        assert!(f.data.is_empty(), "the caller gets a spare buffer back");
        let mut g = frame(2, 9);
        let ptr = g.data.as_ptr();
        report.seq = 2;
        tap.offer(&mut g, &report);
        let p = tap.take(Duration::ZERO).unwrap();
        assert_eq!((p.frame.seq, p.report.seq, p.frame.data[0]), (2, 2, 9), "the newest wins");
        assert!(tap.take(Duration::ZERO).is_none());
        tap.give_back(p);
        // The picture given back carries the next hand-over: its frame buffer (the second
        // frame's) goes back to the caller, to be filled by the camera.
        let mut h = frame(3, 1);
        tap.offer(&mut h, &report);
        assert_eq!(h.data.as_ptr(), ptr, "the given-back buffer is reused, not a new one");
        tap.close();
        assert!(tap.take(Duration::from_secs(5)).is_none(), "closed: no wait");
    }
}
