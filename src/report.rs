//! What the pipeline hands to its outputs: one frame's report, the counters and the source's
//! health. Outputs read these; only the pipeline fills them.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::frame::GroundTruth;
use crate::hazard::HazardFrame;
use crate::stats::PerStage;
use crate::stats::StageTimes;
use crate::yolo::Detection;

/// A camera as reports name it: its place among the `[[source]]` entries and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CameraId {
    /// Position in the config (0 for a single `[source]`).
    pub index: usize,
    /// `name` of its entry (`cam0` when unnamed).
    pub name: Arc<str>,
}

impl CameraId {
    /// Camera `index` called `name`.
    pub fn new(index: usize, name: &str) -> CameraId {
        CameraId { index, name: Arc::from(name) }
    }
}

impl Default for CameraId {
    fn default() -> Self {
        CameraId::new(0, "cam0")
    }
}

/// What inference hands to the publisher for one frame. Reused between frames.
#[derive(Clone, Debug)]
pub struct FrameReport {
    /// The camera the frame came from.
    pub camera: CameraId,
    /// The frame's sequence number at the source.
    pub seq: u64,
    /// Source frame width.
    pub width: u32,
    /// Source frame height.
    pub height: u32,
    /// When the frame was captured.
    pub captured: Instant,
    /// Wall-clock capture time, ns since the Unix epoch.
    pub captured_wall_ns: u128,
    /// When inference took the frame.
    pub infer_start: Instant,
    /// When decoding finished.
    pub infer_end: Instant,
    /// Time per inference stage.
    pub times: StageTimes,
    /// Detections in source pixels.
    pub detections: Vec<Detection>,
    /// Ground truth, when the source knows it.
    pub truth: Vec<GroundTruth>,
    /// Tracks, times to contact and zones, with `[hazards] enabled` (empty zones otherwise).
    pub hazards: HazardFrame,
}

impl FrameReport {
    /// An empty report, to be filled.
    pub fn new() -> FrameReport {
        let now = Instant::now();
        FrameReport {
            camera: CameraId::default(),
            seq: 0,
            width: 0,
            height: 0,
            captured: now,
            captured_wall_ns: 0,
            infer_start: now,
            infer_end: now,
            times: StageTimes::default(),
            detections: Vec::with_capacity(128),
            truth: Vec::with_capacity(32),
            hazards: HazardFrame::with_capacity(128),
        }
    }

    /// Makes this report a copy of `other`, reusing its buffers.
    pub fn copy_from(&mut self, other: &FrameReport) {
        self.camera.clone_from(&other.camera);
        self.seq = other.seq;
        self.width = other.width;
        self.height = other.height;
        self.captured = other.captured;
        self.captured_wall_ns = other.captured_wall_ns;
        self.infer_start = other.infer_start;
        self.infer_end = other.infer_end;
        self.times = other.times;
        self.detections.clone_from(&other.detections);
        self.truth.clone_from(&other.truth);
        self.hazards.copy_from(&other.hazards);
    }

    /// Microseconds per stage, given the publish time.
    pub fn stage_us(&self, published: Instant) -> PerStage<u64> {
        let us = |d: std::time::Duration| d.as_micros() as u64;
        PerStage([
            us(self.infer_start.saturating_duration_since(self.captured)),
            us(self.times.preprocess),
            us(self.times.inference),
            us(self.times.decode),
            us(published.saturating_duration_since(self.infer_end)),
            us(published.saturating_duration_since(self.captured)),
        ])
    }
}

impl Default for FrameReport {
    fn default() -> Self {
        FrameReport::new()
    }
}

/// Counters for a `stats` message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct FrameCounters {
    /// Frames the source delivered.
    pub captured: u64,
    /// Frames inference processed.
    pub processed: u64,
    /// Frames displaced by a newer one before inference took them.
    pub dropped: u64,
    /// Frame messages published.
    pub published: u64,
    /// Frames that failed in preprocessing, inference or decoding.
    pub errors: u64,
}

/// The source's health, for `stats` messages.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SourceState {
    /// `streaming` or `unavailable` (camera gone, busy or silent: capture is retrying).
    pub state: &'static str,
    /// Why it is unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Times the source became unavailable since start.
    pub faults: u64,
}

named_enum! {
    /// Why no fresh frame came within `[latency] stale_ms`.
    pub enum BlindReason {
        /// The camera is gone, busy or failing (the source says it is unavailable).
        Camera = "camera",
        /// Frames arrive but none got through inference (behind, or stuck).
        Inference = "inference",
        /// The source delivers nothing and reports no error (a silent camera, or none yet).
        NoFrames = "no_frames",
    }
}

impl std::str::FromStr for BlindReason {
    type Err = crate::named::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| {
            crate::named::UnknownName::new("blind reason: ", s, " is not a reason", Self::names(", "))
        })
    }
}

/// A camera cannot see: no fresh frame within its freshness bound (`[latency] stale_ms`, or
/// its entry's `stale_ms`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Blind {
    /// The camera.
    pub camera: String,
    /// Why, for machines.
    pub reason: BlindReason,
    /// Why, for people (the camera's error, or what is missing for how long).
    pub detail: String,
    /// Age of the newest frame published, milliseconds (none yet: since the pipeline started).
    pub for_ms: f64,
    /// The board reports thermal or power throttling (a likely cause when inference is behind).
    pub throttling: bool,
}

/// Frames per second over a stats interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Fps {
    /// Frames the source delivered, per second.
    pub capture: f64,
    /// Frames inference processed, per second.
    pub processed: f64,
}

/// One camera's figures in a `stats` message.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CameraStats {
    /// The camera's name.
    pub name: String,
    /// Its source, as opened.
    pub uri: String,
    /// Its health.
    pub source: SourceState,
    /// Its counters since start.
    pub frames: FrameCounters,
    /// Its rates over the interval (filled by the publisher).
    pub fps: Fps,
    /// Age of its newest published frame, ms (filled by the publisher; none yet: `None`).
    pub frame_age_ms: Option<f64>,
    /// Its freshness bound, ms.
    pub stale_ms: f64,
    /// Its frames' latency per stage over the interval (the whole run at the end), ms (filled
    /// by the publisher; `queue` includes waiting for the other frames of a batch).
    pub latency_ms: std::collections::BTreeMap<&'static str, crate::stats::Percentiles>,
    /// Whether it is blind now, and why.
    pub blind: Option<Blind>,
}

impl SourceState {
    /// One state for several cameras (the `source` of a `stats` message): `unavailable` when
    /// any is, with each one's error after its name; faults added up.
    pub fn combined(cameras: &[CameraStats]) -> SourceState {
        if let [one] = cameras {
            return one.source.clone();
        }
        let errors: Vec<String> = cameras
            .iter()
            .filter_map(|c| c.source.error.as_ref().map(|e| format!("{}: {e}", c.name)))
            .collect();
        SourceState {
            state: if errors.is_empty() { "streaming" } else { "unavailable" },
            error: (!errors.is_empty()).then(|| errors.join("; ")),
            faults: cameras.iter().map(|c| c.source.faults).sum(),
        }
    }
}
