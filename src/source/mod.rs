//! Frame sources, named by URI, behind one trait.
//!
//! | URI | module |
//! |-----|--------|
//! | `synthetic://?width=640&height=480&fps=30&format=yuyv&seed=1&objects=4&frames=0` | [`synthetic`] |
//! | `file://PATH` (a PNG/JPEG image or a folder of them) | [`file`] |
//! | `file://clip.yuv?width=640&height=480&format=yuyv` (raw frames) | [`file`] |
//! | `v4l2:///dev/video0?width=640&height=480&fps=30&format=yuyv&buffers=3`, `v4l2://auto` | [`v4l2`] |
//! | `csi://0?width=1920&height=1080&fps=30` (Argus, on a Jetson) | [`gst`] |
//! | `rtsp://HOST[:PORT]/PATH?transport=tcp&latency_ms=100&credentials=FILE` | [`gst`] |
//! | `gst://PIPELINE` (any GStreamer source part, e.g. `gst://videotestsrc is-live=true`) | [`gst`] |
//!
//! A new kind of source is a new module here that implements [`FrameSource`]
//! plus one arm in [`open`]. Sources know nothing about models or outputs.

pub mod file;
pub mod gst;
pub mod mjpeg;
pub mod synthetic;
pub mod uri;
pub mod v4l2;

use std::collections::BTreeMap;

use crate::frame::{Frame, PixelFormat};
pub use uri::{SourceUri, UriError};

/// Why a source could not open or deliver a frame.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The URI or one of its parameters is malformed or out of range.
    #[error("{0}")]
    Uri(#[from] UriError),
    /// The source cannot be set up as configured; the message says what is allowed.
    #[error("{0}")]
    Config(String),
    /// Reading from the file or device failed.
    #[error("{0}")]
    Io(String),
    /// The data could not be decoded into a frame; later frames may be fine.
    #[error("{0}")]
    Decode(String),
    /// The device is gone, busy or silent for now; the source is retrying and
    /// the next call may succeed.
    #[error("{0}")]
    Unavailable(String),
}

/// A stream of frames: a camera, a file, a generator.
pub trait FrameSource: Send {
    /// What the source is, for logs: its URI and negotiated geometry.
    fn describe(&self) -> String;

    /// Blocks until the next frame is ready and writes it into `frame`,
    /// reusing `frame`'s buffers. Returns `Ok(false)` at the end of the stream.
    fn next_frame(&mut self, frame: &mut Frame) -> Result<bool, SourceError>;

    /// The rate the source delivers frames at, when it has one.
    fn nominal_fps(&self) -> Option<f64> {
        None
    }

    /// The format and size `(format, width, height)` of the frames to come,
    /// when known before the first one (cameras, generators, raw files), so
    /// that the detector can be warmed up, and accelerator graphs built, for it.
    fn geometry(&self) -> Option<(PixelFormat, u32, u32)> {
        None
    }
}

/// Paces a source at a frame rate, like a camera: frames are due every
/// interval, and after a stall the schedule restarts from now instead of
/// catching up with a burst.
#[derive(Clone, Debug)]
pub struct Pacer {
    interval: Option<std::time::Duration>,
    next: Option<std::time::Instant>,
}

impl Pacer {
    /// A pacer for `fps` frames per second; 0 never waits.
    pub fn new(fps: f64) -> Pacer {
        Pacer { interval: (fps > 0.0).then(|| std::time::Duration::from_secs_f64(1.0 / fps)), next: None }
    }

    /// Sleeps until the next frame is due.
    pub fn wait(&mut self) {
        let Some(interval) = self.interval else { return };
        let now = std::time::Instant::now();
        let due = *self.next.get_or_insert(now);
        if due > now {
            std::thread::sleep(due - now);
        }
        self.next = Some((due + interval).max(std::time::Instant::now()));
    }

    /// The rate, when paced.
    pub fn fps(&self) -> Option<f64> {
        self.interval.map(|d| 1.0 / d.as_secs_f64())
    }
}

/// When a source that lost its camera or stream tries to reopen it: 0.25 s after the first
/// failure, the wait doubling with each failure up to 5 s, and back to 0.25 s once it works.
#[derive(Clone, Debug)]
pub struct Reopen {
    backoff: std::time::Duration,
    next_attempt: std::time::Instant,
}

impl Reopen {
    /// The first attempt is due now.
    pub fn new() -> Reopen {
        Reopen { backoff: std::time::Duration::from_millis(250), next_attempt: std::time::Instant::now() }
    }

    /// Sleeps toward the next attempt, at most 0.5 s (so a caller's loop stays responsive);
    /// true when it is due.
    pub fn wait_turn(&self) -> bool {
        let wait = self.next_attempt.saturating_duration_since(std::time::Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait.min(std::time::Duration::from_millis(500)));
        }
        std::time::Instant::now() >= self.next_attempt
    }

    /// An attempt failed: the next is due after the backoff, which doubles.
    pub fn failed(&mut self) {
        self.next_attempt = std::time::Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(std::time::Duration::from_secs(5));
    }

    /// It works again: the next failure is retried after 0.25 s.
    pub fn reset(&mut self) {
        self.backoff = std::time::Duration::from_millis(250);
    }
}

impl Default for Reopen {
    fn default() -> Reopen {
        Reopen::new()
    }
}

/// What opening `uri` would refuse, found without touching a camera, the network or starting a
/// pipeline, by the code [`open_with`] runs: every parameter and its range; for `file://` the
/// file or folder (its geometry, its images); for `v4l2://` the request and the controls'
/// form (the device may appear later: `run` waits for it); for `csi://`, `rtsp://` and `gst://`
/// the GStreamer pipeline as it will be built (every key and value checked, a credentials file
/// read). `check` and `run` both call it, through the config.
pub fn check(uri: &str, controls: &BTreeMap<String, i64>) -> Result<(), SourceError> {
    if through_gstreamer(uri) {
        let platform = gst::Platform::detect(std::path::Path::new("/"));
        return gst::pipeline::build(uri, platform).map(|_| ());
    }
    let parsed = SourceUri::parse(uri)?;
    controls_apply(uri, &parsed, controls)?;
    match parsed.scheme.as_str() {
        "synthetic" => synthetic::SyntheticSource::open(&parsed).map(drop),
        "file" => file::FileSource::open(&parsed).map(drop),
        "v4l2" => v4l2::V4l2Source::configure(&parsed, controls).map(drop),
        other => Err(unknown_scheme(uri, other)),
    }
}

/// Whether `uri` is opened through GStreamer (`gst://`, `csi://`, `rtsp://`, any case): a
/// `gst://` text is a pipeline, not a URI with a query.
pub fn through_gstreamer(uri: &str) -> bool {
    uri.split_once("://")
        .is_some_and(|(s, _)| ["gst", "csi", "rtsp"].iter().any(|g| s.eq_ignore_ascii_case(g)))
}

/// `[source.controls]` are V4L2 controls.
fn controls_apply(
    uri: &str,
    parsed: &SourceUri,
    controls: &BTreeMap<String, i64>,
) -> Result<(), SourceError> {
    if !controls.is_empty() && parsed.scheme != "v4l2" {
        return Err(SourceError::Config(format!("{uri}: [source.controls] apply to v4l2:// cameras only")));
    }
    Ok(())
}

fn unknown_scheme(uri: &str, scheme: &str) -> SourceError {
    SourceError::Config(format!(
        "{uri}: unknown source scheme '{scheme}://': use synthetic://, file://, v4l2://, csi://, rtsp:// or gst://"
    ))
}

/// Opens the source a URI names.
pub fn open(uri: &str) -> Result<Box<dyn FrameSource>, SourceError> {
    open_with(uri, &BTreeMap::new())
}

/// Opens the source a URI names, with camera controls (`[source.controls]`) for V4L2.
pub fn open_with(uri: &str, controls: &BTreeMap<String, i64>) -> Result<Box<dyn FrameSource>, SourceError> {
    // A `gst://` pipeline is GStreamer's syntax, not a URI query: it is not parsed as one.
    let gst = uri.split_once("://").is_some_and(|(s, _)| s.eq_ignore_ascii_case("gst"));
    if gst && controls.is_empty() {
        return Ok(Box::new(gst::GstSource::open(uri)?));
    }
    let parsed = SourceUri::parse(uri)?;
    controls_apply(uri, &parsed, controls)?;
    match parsed.scheme.as_str() {
        "synthetic" => Ok(Box::new(synthetic::SyntheticSource::open(&parsed)?)),
        "file" => Ok(Box::new(file::FileSource::open(&parsed)?)),
        "v4l2" => Ok(Box::new(v4l2::V4l2Source::open(&parsed, controls)?)),
        "csi" | "rtsp" => Ok(Box::new(gst::GstSource::open(uri)?)),
        other => Err(unknown_scheme(uri, other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reopening_waits_longer_after_each_failure_up_to_five_seconds_and_starts_over_once_it_works() {
        let mut r = Reopen::new();
        assert!(r.wait_turn(), "the first attempt is due at once");
        let mut waits = Vec::new();
        for _ in 0..7 {
            let before = std::time::Instant::now();
            r.failed();
            waits.push((r.next_attempt - before).as_millis() as u64);
        }
        let expect = [250, 500, 1000, 2000, 4000, 5000, 5000];
        assert!(waits.iter().zip(expect).all(|(w, e)| (e..e + 50).contains(w)), "{waits:?}");
        assert!(!r.wait_turn(), "not due for 5 s");
        r.reset();
        let before = std::time::Instant::now();
        r.failed();
        assert!((r.next_attempt - before).as_millis() < 300);
    }

    #[test]
    fn open_dispatches_on_scheme_and_names_the_alternatives() {
        assert!(open("synthetic://?fps=0").is_ok());
        let e = open("http://cam").err().unwrap().to_string();
        assert!(e.contains("unknown source scheme 'http://'") && e.contains("rtsp://"), "{e}");
        // A missing camera is not fatal: the source retries, reporting why.
        let mut cam = open("v4l2:///dev/video-none-jd?timeout_ms=100").unwrap();
        let e = cam.next_frame(&mut Frame::empty()).unwrap_err();
        assert!(matches!(e, SourceError::Unavailable(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("/dev/video-none-jd: cannot open") && e.contains("unplugged?"), "{e}");
        let e = open("v4l2:///dev/video0?fromat=yuyv").err().unwrap().to_string();
        assert!(e.contains("unknown key 'fromat'"), "{e}");
        let mut controls = BTreeMap::new();
        controls.insert("gain".to_string(), 3);
        let e = open_with("synthetic://", &controls).err().unwrap().to_string();
        assert!(e.contains("v4l2:// cameras only"), "{e}");
    }
}
