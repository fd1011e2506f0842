//! The daemon's pipeline: capture, inference and publishing on their own threads.
//!
//! ```text
//! capture thread ──put──► LatestSlot (1 frame, newest wins) ──take──► inference thread
//!       ▲                                                              │ FrameReport
//!       └──────────── frame buffers recycled ◄─────────────────────────┤ (bounded channel)
//!                                                                      ▼
//!                              publisher (calling thread): socket, stats, metrics, systemd
//! ```
//!
//! Frames are never queued: when inference is slower than the source, older
//! frames are dropped and counted. Frames and reports circulate through
//! recycling, so the steady state allocates nothing per frame. The run ends
//! on the stop flag (SIGTERM/SIGINT) or at the end of the source's stream;
//! either way the current frame is finished, clients get a `bye`, the socket
//! file is removed and the statistics are printed.

pub mod publish;
pub mod report;
pub mod slot;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::clock::mono_ns;
use crate::config::Config;
use crate::detector::Detector;
use crate::error::{Error, Result};
use crate::frame::Frame;
use crate::hazard::Hazards;
use crate::power::telemetry::Telemetry;
use crate::power::{ClockControl, PowerSession};
use crate::source::{self, FrameSource, SourceError};
use crate::stats::{LatencyStats, Stage};
use publish::{Health, Output, Publisher, Started};
use report::{Blind, BlindReason, FrameCounters, FrameReport, SourceState};
use slot::{LatestSlot, Taken};

/// How a run is started, beyond the config file.
#[derive(Default)]
pub struct RunOptions {
    /// Where frames and statistics go (`output::open`, plus `--echo` or a benchmark's counter).
    pub outputs: Vec<Box<dyn Output>>,
    /// Stop after this many published frames (`jetdetect bench`); `None` runs until stopped.
    pub max_frames: Option<u64>,
    /// Do not print the statistics table at the end (the caller reports them).
    pub quiet: bool,
    /// Who applies and restores the clocks.
    pub clocks: ClockControl,
}

/// What a finished run reports.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// Frame counters.
    pub frames: FrameCounters,
    /// Why it stopped.
    pub reason: String,
    /// Seconds from ready to stop.
    pub seconds: f64,
    /// Every published frame's stage times.
    pub latency: LatencyStats,
    /// The engine, as `Engine::describe` puts it.
    pub engine: String,
    /// Where preprocessing ran.
    pub preprocessing: String,
}

/// Counters shared by the threads.
#[derive(Default)]
struct Shared {
    captured: AtomicU64,
    processed: AtomicU64,
    errors: AtomicU64,
    /// `CLOCK_MONOTONIC` ns of inference's last sign of life.
    heartbeat: AtomicU64,
    source_ended: AtomicBool,
    /// Set while the source is unavailable (camera gone, silent, busy): why.
    source_fault: Mutex<Option<String>>,
    /// Times the source became unavailable.
    source_faults: AtomicU64,
}

/// How many frames a source error is logged once per (they repeat while a camera is away).
const FAULT_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The model file as it was when the engine loaded it. The engine runs from memory,
/// so a file truncated, rewritten or replaced afterwards changes nothing until the
/// next start; a change is logged once, so that nobody is surprised by what runs.
struct ModelFile {
    path: std::path::PathBuf,
    seen: Option<(u64, u64, u64, i64, i64)>,
}

impl ModelFile {
    fn new(path: &std::path::Path) -> ModelFile {
        ModelFile { path: path.to_path_buf(), seen: Self::identity(path) }
    }

    fn identity(path: &std::path::Path) -> Option<(u64, u64, u64, i64, i64)> {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
    }

    fn check(&mut self) {
        let now = Self::identity(&self.path);
        if now != self.seen {
            let what = match (&self.seen, &now) {
                (_, None) => "was removed".to_string(),
                (Some(a), Some(b)) if (a.0, a.1) != (b.0, b.1) => format!("was replaced ({} bytes now)", b.2),
                (_, Some(b)) => format!("was modified ({} bytes now)", b.2),
            };
            log::warn!(
                "{}: the model file {what} since it was loaded; the engine keeps running the model \
                 loaded at start: restart jetdetect to load the new file",
                self.path.display()
            );
            self.seen = now;
        }
    }
}

/// Held by each pipeline thread: if the thread panics, the others are told to stop
/// (the slot closes, the stop flag is set), so the daemon exits instead of hanging
/// with one stage gone. The panic hook has already put the clocks back.
struct PanicGuard {
    stage: &'static str,
    slot: Arc<LatestSlot<Frame>>,
    stop: Arc<AtomicBool>,
}

impl Drop for PanicGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            log::error!("the {} thread panicked: stopping the pipeline", self.stage);
            self.stop.store(true, Ordering::Relaxed);
            self.slot.close();
        }
    }
}

/// The message of a thread's panic.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

/// Reports queued between inference and the publisher at most.
const REPORTS_QUEUED: usize = 4;

fn capture_loop(
    mut src: Box<dyn FrameSource>,
    slot: Arc<LatestSlot<Frame>>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
) {
    let mut frame = slot.spare().unwrap_or_else(Frame::empty);
    let mut last_log: Option<Instant> = None;
    let set_fault = |fault: Option<String>| {
        let mut f = shared.source_fault.lock().unwrap_or_else(|e| e.into_inner());
        if fault.is_some() && f.is_none() {
            shared.source_faults.fetch_add(1, Ordering::Relaxed);
        }
        *f = fault;
    };
    while !stop.load(Ordering::Relaxed) {
        match src.next_frame(&mut frame) {
            Ok(true) => {
                if shared.source_fault.lock().map(|f| f.is_some()).unwrap_or(false) {
                    log::info!("{}: frames are flowing again", src.describe());
                    set_fault(None);
                    last_log = None;
                }
                let n = shared.captured.fetch_add(1, Ordering::Relaxed) + 1;
                crate::fault::stage("capture", n);
                frame = slot.put(frame).unwrap_or_else(Frame::empty);
            }
            Ok(false) => {
                log::info!("{}: end of stream", src.describe());
                shared.source_ended.store(true, Ordering::Relaxed);
                break;
            }
            Err(SourceError::Unavailable(m)) | Err(SourceError::Decode(m)) => {
                // Transient: the camera is away or a frame was bad. Keep going, log now and then.
                if last_log.is_none_or(|t| t.elapsed() >= FAULT_LOG_INTERVAL) {
                    log::warn!("{m}");
                    last_log = Some(Instant::now());
                }
                set_fault(Some(m));
            }
            Err(e) => {
                log::error!("{}: {e}", src.describe());
                shared.source_ended.store(true, Ordering::Relaxed);
                break;
            }
        }
    }
    slot.close();
}

fn inference_loop(
    mut detector: Detector,
    mut hazards: Option<Hazards>,
    slot: Arc<LatestSlot<Frame>>,
    reports: SyncSender<FrameReport>,
    recycled: Receiver<FrameReport>,
    shared: Arc<Shared>,
) {
    let mut last_error_log: Option<Instant> = None;
    // A report the publisher had no room for, filled again with the next frame rather than
    // dropped (a dropped report is a new one to allocate).
    let mut spare: Option<FrameReport> = None;
    loop {
        shared.heartbeat.store(mono_ns(Instant::now()), Ordering::Relaxed);
        let frame = match slot.take(Duration::from_millis(200)) {
            Taken::Item(f) => f,
            Taken::Timeout => continue,
            Taken::Closed => break,
        };
        let start = Instant::now();
        crate::fault::stage("inference", shared.processed.load(Ordering::Relaxed) + 1);
        match detector.detect(&frame) {
            Ok(dets) => {
                let mut r = spare.take().or_else(|| recycled.try_recv().ok()).unwrap_or_default();
                r.detections.clear();
                r.detections.extend_from_slice(dets);
                r.truth.clone_from(&frame.truth);
                r.seq = frame.seq;
                r.width = frame.width;
                r.height = frame.height;
                r.captured = frame.captured;
                r.captured_wall_ns = frame.captured_wall_ns;
                r.infer_start = start;
                r.times = detector.times();
                if let Some(h) = &mut hazards {
                    // Tracking is part of decoding boxes into what the robot acts on: its time
                    // counts in the decode stage.
                    let t = Instant::now();
                    h.update(&r.detections, r.captured, r.width, r.height, &mut r.hazards);
                    r.times.decode += t.elapsed();
                } else {
                    r.hazards.zones.clear();
                }
                r.infer_end = Instant::now();
                shared.processed.fetch_add(1, Ordering::Relaxed);
                match reports.try_send(r) {
                    Ok(()) => {}
                    Err(TrySendError::Full(r)) => {
                        log::warn!("publisher is behind: frame {} not published", frame.seq);
                        spare = Some(r);
                    }
                    Err(TrySendError::Disconnected(_)) => break,
                }
            }
            Err(e) => {
                shared.errors.fetch_add(1, Ordering::Relaxed);
                if last_error_log.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
                    log::error!("frame {} ({}): {e}", frame.seq, frame.label);
                    last_error_log = Some(Instant::now());
                }
            }
        }
        slot.recycle(frame);
    }
}

/// Why the daemon is blind, `age` after its newest frame (or its start): the camera's error,
/// frames captured since the newest published one (inference behind), or nothing at all.
fn diagnose(age: Duration, source: &SourceState, captured_since: u64, telemetry: &Telemetry) -> Blind {
    let ms = age.as_secs_f64() * 1e3;
    let (reason, detail) = match (&source.error, captured_since) {
        (Some(e), _) => (BlindReason::Camera, e.clone()),
        (None, n) if n > 0 => (
            BlindReason::Inference,
            format!("{n} frames captured in {ms:.0} ms but none got through inference"),
        ),
        (None, _) => (BlindReason::NoFrames, format!("the source delivered no frame for {ms:.0} ms")),
    };
    Blind { reason, detail, for_ms: (ms * 10.0).round() / 10.0, throttling: telemetry.throttling }
}

fn source_state(shared: &Shared) -> SourceState {
    let fault = shared.source_fault.lock().map(|f| f.clone()).unwrap_or(None);
    SourceState {
        state: if fault.is_some() { "unavailable" } else { "streaming" },
        error: fault,
        faults: shared.source_faults.load(Ordering::Relaxed),
    }
}

/// Runs the daemon until `stop` is set or the source ends.
pub fn run(config: &Config, options: RunOptions, stop: Arc<AtomicBool>) -> Result<RunSummary> {
    // Before anything else: put back clocks an unclean exit left changed, then
    // apply the profile. Dropping the session (any return below) restores them.
    let power = match options.clocks {
        ClockControl::Daemon => PowerSession::start(&config.power)?,
        ClockControl::Service => PowerSession::observe(&config.power),
    };
    let telemetry = Arc::new(Mutex::new(Telemetry::default()));
    let telemetry_stop = Arc::new(AtomicBool::new(false));
    let telemetry_thread = {
        let (disc, t, stop) = (power.discovered.clone(), telemetry.clone(), telemetry_stop.clone());
        let period = Duration::from_millis(config.power.telemetry_ms);
        std::thread::Builder::new()
            .name("telemetry".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let sample = Telemetry::sample(&disc);
                    if let Ok(mut slot) = t.lock() {
                        *slot = sample;
                    }
                    let until = Instant::now() + period;
                    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            })
            .map_err(|e| Error::io("cannot start the telemetry thread", e))?
    };
    let src = source::open_with(&config.source.uri, &config.source.controls)?;
    log::info!("source: {}", src.describe());
    let mut model_file = ModelFile::new(&config.model.path);
    let mut detector = Detector::from_config(config)?;
    let (iw, ih) = detector.engine().input_size();
    log::info!(
        "model: {}, {}, input {iw}x{ih}, {} classes ({})",
        detector.engine().describe(),
        detector.layout(),
        detector.names().len(),
        detector.names().origin
    );
    let runtime = detector.engine().runtime();
    if !runtime.is_empty() {
        let v: Vec<String> = runtime.iter().map(|(k, v)| format!("{k} {v}")).collect();
        log::info!("runtime: {}", v.join(", "));
    }
    let warm = Instant::now();
    match src.geometry() {
        Some(g) => detector.warm_up_for(3, g)?,
        None => detector.warm_up(3)?,
    }
    log::info!(
        "warm-up: 3 runs in {:.0} ms; preprocessing on {}",
        warm.elapsed().as_secs_f64() * 1e3,
        detector.preprocessing()
    );
    let (engine_described, preprocessing) = (detector.engine().describe(), detector.preprocessing());
    let started = Started {
        source: src.describe(),
        engine: engine_described.clone(),
        runtime,
        input: [iw, ih],
        names: detector.names().clone(),
    };
    let hazards = match config.hazards.enabled {
        true => Some(Hazards::new(&config.hazards, &config.camera, detector.names())?),
        false => None,
    };
    let mut publisher =
        Publisher::new(options.outputs, Duration::from_secs(config.output.stats_interval_s), config.latency);
    publisher.open()?;

    let slot = Arc::new(LatestSlot::<Frame>::new());
    let shared = Arc::new(Shared::default());
    shared.heartbeat.store(mono_ns(Instant::now()), Ordering::Relaxed);
    // Every report that can exist at once is made here: the channel's, the one being published
    // and the one being filled. However the threads are scheduled, none is made per frame.
    let (report_tx, report_rx) = sync_channel::<FrameReport>(REPORTS_QUEUED);
    let (recycle_tx, recycle_rx) = sync_channel::<FrameReport>(REPORTS_QUEUED + 2);
    for _ in 0..REPORTS_QUEUED + 2 {
        let _ = recycle_tx.try_send(FrameReport::new());
    }
    let capture = {
        let (slot, shared, stop) = (slot.clone(), shared.clone(), stop.clone());
        std::thread::Builder::new()
            .name("capture".into())
            .spawn(move || {
                let _guard = PanicGuard { stage: "capture", slot: slot.clone(), stop: stop.clone() };
                capture_loop(src, slot, shared, stop)
            })
            .map_err(|e| Error::io("cannot start the capture thread", e))?
    };
    let inference = {
        let (slot, shared, stop) = (slot.clone(), shared.clone(), stop.clone());
        std::thread::Builder::new()
            .name("inference".into())
            .spawn(move || {
                let _guard = PanicGuard { stage: "inference", slot: slot.clone(), stop };
                inference_loop(detector, hazards, slot, report_tx, recycle_rx, shared)
            })
            .map_err(|e| Error::io("cannot start the inference thread", e))?
    };

    publisher.ready(&started);
    let mut published = 0u64;
    let counters = |published: u64| FrameCounters {
        captured: shared.captured.load(Ordering::Relaxed),
        processed: shared.processed.load(Ordering::Relaxed),
        dropped: slot.dropped(),
        published,
        errors: shared.errors.load(Ordering::Relaxed),
    };
    let max_frames = options.max_frames;
    let reached = |published: u64| max_frames.is_some_and(|n| published >= n);
    let telemetry_now = || telemetry.lock().map(|t| t.clone()).unwrap_or_default();
    let mut captured_at_newest = 0;
    loop {
        match report_rx.recv_timeout(Duration::from_millis(20)) {
            Ok(report) => {
                publisher.frame(&report, slot.dropped());
                captured_at_newest = shared.captured.load(Ordering::Relaxed);
                published += 1;
                crate::fault::stage("publish", published);
                let _ = recycle_tx.try_send(report);
                if reached(published) && !stop.swap(true, Ordering::Relaxed) {
                    log::info!("{published} frames published: stopping");
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let since = mono_ns(Instant::now()).saturating_sub(shared.heartbeat.load(Ordering::Relaxed));
        // Only while stale: the source's state and the telemetry are copied to say why.
        let blind = publisher.stale_for().map(|age| {
            let captured = shared.captured.load(Ordering::Relaxed);
            diagnose(age, &source_state(&shared), captured - captured_at_newest, &telemetry_now())
        });
        publisher.tick(&Health {
            since_progress: Duration::from_nanos(since),
            stopping: stop.load(Ordering::Relaxed),
            blind: blind.as_ref(),
            stale: config.latency.stale(),
            blind_notice: false,
        });
        if publisher.interval_due() {
            model_file.check();
            publisher.interval(counters(published), &source_state(&shared), &telemetry_now());
        }
    }
    let mut panicked = None;
    for (stage, thread) in [("capture", capture), ("inference", inference)] {
        if let Err(payload) = thread.join() {
            panicked
                .get_or_insert(format!("the {stage} thread panicked: {}", panic_message(payload.as_ref())));
        }
    }
    let frames = counters(published);
    let reason = if let Some(p) = &panicked {
        p.clone()
    } else if reached(published) {
        "frame count reached".to_string()
    } else if stop.load(Ordering::Relaxed) {
        "signal".to_string()
    } else if shared.source_ended.load(Ordering::Relaxed) {
        "end of source".to_string()
    } else {
        "pipeline stopped".to_string()
    };
    let (total, seconds) = publisher.finish(frames, &source_state(&shared), &telemetry_now(), &reason);
    telemetry_stop.store(true, Ordering::Relaxed);
    let _ = telemetry_thread.join();
    if !options.quiet {
        print_summary(&frames, &total, seconds, &reason);
    }
    drop(power);
    if let Some(p) = panicked {
        return Err(Error::Panicked { message: p });
    }
    Ok(RunSummary { frames, reason, seconds, latency: total, engine: engine_described, preprocessing })
}

/// Prints the run's statistics (to stderr, so stdout stays machine-readable).
fn print_summary(frames: &FrameCounters, total: &LatencyStats, seconds: f64, reason: &str) {
    eprintln!(
        "jetdetect: stopped ({reason}) after {seconds:.1} s: {} captured, {} processed ({:.1} fps), {} dropped, {} published, {} errors",
        frames.captured,
        frames.processed,
        frames.processed as f64 / seconds.max(1e-9),
        frames.dropped,
        frames.published,
        frames.errors
    );
    eprintln!("{:<12} {:>9} {:>9} {:>9} {:>9}   (ms)", "stage", "p50", "p90", "p99", "max");
    for stage in Stage::ALL {
        let p = total.stage(stage);
        eprintln!("{stage:<12} {:>9.3} {:>9.3} {:>9.3} {:>9.3}", p.p50, p.p90, p.p99, p.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blindness_is_put_down_to_the_camera_to_inference_or_to_nothing_coming() {
        let streaming = SourceState { state: "streaming", error: None, faults: 0 };
        let gone = SourceState {
            state: "unavailable",
            error: Some("/dev/video0: cannot open: No such device".into()),
            faults: 1,
        };
        let mut t = Telemetry::default();
        let age = Duration::from_millis(750);
        let b = diagnose(age, &gone, 0, &t);
        assert_eq!(
            (b.reason, b.detail.as_str(), b.for_ms),
            (BlindReason::Camera, "/dev/video0: cannot open: No such device", 750.0)
        );
        let b = diagnose(age, &streaming, 12, &t);
        assert_eq!(b.reason, BlindReason::Inference);
        assert!(
            b.detail.contains("12 frames captured in 750 ms but none got through inference"),
            "{}",
            b.detail
        );
        t.throttling = true;
        let b = diagnose(age, &streaming, 0, &t);
        assert_eq!((b.reason, b.throttling), (BlindReason::NoFrames, true));
        assert!(b.detail.contains("no frame for 750 ms"), "{}", b.detail);
    }
}
