//! The daemon's pipeline: capture, inference and publishing on their own threads.
//!
//! ```text
//! capture thread, per camera ──put──► LatestSlots (1 frame per camera, newest wins)
//!       ▲                                   │ take_ready: the cameras in turn (several per run: a batch)
//!       │                                   ▼
//!       └── frame buffers recycled ◄── inference thread (one Detector; one Hazards per camera)
//!                                           │ FrameReport (bounded channel)
//!                                           ▼
//!                              publisher (calling thread): socket, stats, metrics, systemd
//! ```
//!
//! Frames are never queued: when inference is slower than the sources, each camera's older
//! frames are dropped and counted. One inference thread serves the cameras in turn, so none
//! starves however fast another is. Frames and reports circulate through recycling, so the
//! steady state allocates nothing per frame. A camera whose stream ends or fails for good
//! stops alone; the others go on. The run ends on the stop flag (SIGTERM/SIGINT) or when
//! every source has ended; either way the current frame is finished, clients get a `bye`,
//! the socket file is removed and the statistics are printed.

pub mod publish;
pub mod slot;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::clock::mono_ns;
use crate::config::Config;
use crate::detector::Detector;
use crate::error::{Error, Result};
use crate::frame::{Frame, PixelFormat};
use crate::hazard::Hazards;
use crate::output::tap::PictureTap;
use crate::output::{Health, Output, Started};
use crate::power::telemetry::Telemetry;
use crate::power::{ClockControl, PowerSession};
use crate::report::{Blind, BlindReason, CameraId, CameraStats, FrameCounters, FrameReport, SourceState};
use crate::source::{self, FrameSource, SourceError};
use crate::stats::StageTimes;
use crate::stats::{LatencyStats, Stage};
use crate::yolo::Detection;
use publish::Publisher;
use slot::LatestSlots;

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
    /// Each camera's figures over the whole run.
    pub cameras: Vec<CameraStats>,
}

/// One camera's counters, shared by its capture thread, inference and the publisher.
#[derive(Default)]
struct CameraShared {
    captured: AtomicU64,
    processed: AtomicU64,
    errors: AtomicU64,
    source_ended: AtomicBool,
    /// Set while the source is unavailable (camera gone, silent, busy): why.
    source_fault: Mutex<Option<String>>,
    /// Times the source became unavailable.
    source_faults: AtomicU64,
}

impl CameraShared {
    fn source_state(&self) -> SourceState {
        let fault = self.source_fault.lock().map(|f| f.clone()).unwrap_or(None);
        SourceState {
            state: if fault.is_some() { "unavailable" } else { "streaming" },
            error: fault,
            faults: self.source_faults.load(Ordering::Relaxed),
        }
    }
}

/// Counters shared by the threads.
struct Shared {
    /// `CLOCK_MONOTONIC` ns of inference's last sign of life.
    heartbeat: AtomicU64,
    /// Per camera, in config order (the slots' lanes).
    cameras: Vec<CameraShared>,
}

impl Shared {
    fn new(cameras: usize) -> Shared {
        Shared {
            heartbeat: AtomicU64::new(mono_ns(Instant::now())),
            cameras: (0..cameras).map(|_| CameraShared::default()).collect(),
        }
    }

    fn sum(&self, f: impl Fn(&CameraShared) -> &AtomicU64) -> u64 {
        self.cameras.iter().map(|c| f(c).load(Ordering::Relaxed)).sum()
    }
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
    stage: String,
    slot: Arc<LatestSlots<Frame>>,
    stop: Arc<AtomicBool>,
}

impl Drop for PanicGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            log::error!("the {} thread panicked: stopping the pipeline", self.stage);
            self.stop.store(true, Ordering::Relaxed);
            self.slot.close_all();
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

/// Reads one camera into its lane until `stop`, the end of its stream or a lasting error;
/// `who` starts its log lines (`camera front: ` with several cameras, else nothing).
fn capture_loop(
    lane: usize,
    who: String,
    mut src: Box<dyn FrameSource>,
    slot: Arc<LatestSlots<Frame>>,
    all: Arc<Shared>,
    stop: Arc<AtomicBool>,
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
    while !stop.load(Ordering::Relaxed) {
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

/// What inference keeps per camera: its name for the reports and its hazard layer (tracks
/// belong to one camera's view).
struct CameraLane {
    id: CameraId,
    hazards: Option<Hazards>,
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
fn inference_loop(
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

/// Why `camera` is blind, `age` after its newest frame (or the start): the camera's error,
/// frames captured since its newest published one (inference behind), or nothing at all.
fn diagnose(
    camera: &str,
    age: Duration,
    source: &SourceState,
    captured_since: u64,
    telemetry: &Telemetry,
) -> Blind {
    let ms = age.as_secs_f64() * 1e3;
    let (reason, detail) = match (&source.error, captured_since) {
        (Some(e), _) => (BlindReason::Camera, e.clone()),
        (None, n) if n > 0 => (
            BlindReason::Inference,
            format!("{n} frames captured in {ms:.0} ms but none got through inference"),
        ),
        (None, _) => (BlindReason::NoFrames, format!("the source delivered no frame for {ms:.0} ms")),
    };
    Blind {
        camera: camera.to_string(),
        reason,
        detail,
        for_ms: (ms * 10.0).round() / 10.0,
        throttling: telemetry.throttling,
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
    let sources = &config.source.0;
    let many = sources.len() > 1;
    let mut opened = Vec::with_capacity(sources.len());
    for s in sources {
        let src = source::open_with(&s.uri, &s.controls).map_err(|e| match many {
            true => Error::Camera { camera: s.name.clone(), source: Box::new(e) },
            false => Error::Source(e),
        })?;
        match many {
            true => log::info!("source {}: {}", s.name, src.describe()),
            false => log::info!("source: {}", src.describe()),
        }
        opened.push(src);
    }
    let mut model_file = ModelFile::new(&config.model.path);
    let mut detector = crate::daemon::detector(config)?;
    let (iw, ih) = detector.engine().input_size();
    log::info!(
        "model: {}, {} ({}), input {iw}x{ih}, {} classes ({})",
        detector.engine().describe(),
        detector.layout(),
        detector.layout_why(),
        detector.names().len(),
        detector.names().origin
    );
    let runtime = detector.engine().runtime();
    if !runtime.is_empty() {
        let v: Vec<String> = runtime.iter().map(|(k, v)| format!("{k} {v}")).collect();
        log::info!("runtime: {}", v.join(", "));
    }
    let warm = Instant::now();
    // Every frame geometry the cameras announce is warmed up (accelerator graphs are built per
    // geometry); with none announced, the model's own input size.
    let mut geometries = Vec::new();
    for g in opened.iter().filter_map(|s| s.geometry()) {
        if !geometries.contains(&g) {
            geometries.push(g);
        }
    }
    if geometries.is_empty() {
        detector.warm_up(3)?;
    }
    for g in &geometries {
        detector.warm_up_for(3, *g)?;
    }
    // Batches are laid out by the model's input, not the frames: one geometry warms them all.
    if many {
        detector.warm_up_batches(
            sources.len(),
            geometries.first().copied().unwrap_or((PixelFormat::Rgb24, iw, ih)),
        )?;
    }
    log::info!(
        "warm-up: 3 runs in {:.0} ms; preprocessing on {}",
        warm.elapsed().as_secs_f64() * 1e3,
        detector.preprocessing()
    );
    if many {
        let batch = detector.max_batch().min(sources.len());
        match batch {
            1 => log::info!(
                "inference: one camera per engine run, in turn ({})",
                if config.engine.max_batch == 1 {
                    "[engine] max_batch = 1"
                } else if detector.engine().max_batch() > 1 {
                    "preprocessing on a device writes one image per run"
                } else if detector.engine().dynamic_batch() {
                    "this engine runs frames one by one faster than in batches (docs/cameras.md); \
                     [engine] max_batch = N batches them anyway"
                } else {
                    "the model takes one image per run: export it with a dynamic batch axis to batch cameras"
                }
            ),
            n => log::info!(
                "inference: the newest frame of up to {n} cameras per engine run (the model's batch axis),                  cameras in turn"
            ),
        }
    }
    let (engine_described, preprocessing) = (detector.engine().describe(), detector.preprocessing());
    let cameras: Vec<(String, String)> =
        sources.iter().zip(&opened).map(|(s, src)| (s.name.clone(), src.describe())).collect();
    let started = Started {
        source: match many {
            false => cameras[0].1.clone(),
            true => cameras.iter().map(|(n, d)| format!("{n}: {d}")).collect::<Vec<_>>().join("; "),
        },
        cameras: cameras.clone(),
        engine: engine_described.clone(),
        runtime,
        input: [iw, ih],
        names: detector.names().clone(),
    };
    let mut lanes = Vec::with_capacity(sources.len());
    for (i, s) in sources.iter().enumerate() {
        let hazards = match config.hazards.enabled {
            true => Some(Hazards::new(
                &config.hazards,
                s.camera.as_ref().unwrap_or(&config.camera),
                detector.names(),
            )?),
            false => None,
        };
        lanes.push(CameraLane { id: CameraId::new(i, &s.name), hazards });
    }
    let stale: Vec<Duration> = sources
        .iter()
        .map(|s| s.stale_ms.map_or(config.latency.stale(), |ms| Duration::from_secs_f64(ms / 1e3)))
        .collect();
    let taps: Vec<Arc<PictureTap>> = options.outputs.iter().filter_map(|o| o.picture_tap()).collect();
    let mut publisher = Publisher::new(
        options.outputs,
        Duration::from_secs(config.output.stats_interval_s),
        config.latency,
        stale.clone(),
    );
    publisher.open()?;

    let slot = Arc::new(LatestSlots::<Frame>::new(sources.len()));
    let shared = Arc::new(Shared::new(sources.len()));
    // Every report that can exist at once is made here: the channel's, the one being published
    // and the one being filled. However the threads are scheduled, none is made per frame.
    let (report_tx, report_rx) = sync_channel::<FrameReport>(REPORTS_QUEUED);
    let (recycle_tx, recycle_rx) = sync_channel::<FrameReport>(REPORTS_QUEUED + 2);
    for _ in 0..REPORTS_QUEUED + 2 {
        let _ = recycle_tx.try_send(FrameReport::new());
    }
    let mut threads = Vec::with_capacity(sources.len() + 1);
    for (lane, src) in opened.into_iter().enumerate() {
        let (slot, shared, stop) = (slot.clone(), shared.clone(), stop.clone());
        // One camera: the thread keeps its old name; several: each is named after its camera.
        let name = match many {
            false => "capture".to_string(),
            true => format!("capture {}", sources[lane].name),
        };
        let stage = name.clone();
        let who = if many { format!("camera {}: ", sources[lane].name) } else { String::new() };
        let thread = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let _guard = PanicGuard { stage, slot: slot.clone(), stop: stop.clone() };
                capture_loop(lane, who, src, slot, shared, stop)
            })
            .map_err(|e| Error::io(format!("cannot start the {name} thread"), e))?;
        threads.push((name, thread));
    }
    let inference = {
        let (slot, shared, stop) = (slot.clone(), shared.clone(), stop.clone());
        std::thread::Builder::new()
            .name("inference".into())
            .spawn(move || {
                let _guard = PanicGuard { stage: "inference".into(), slot: slot.clone(), stop };
                inference_loop(detector, lanes, slot, report_tx, recycle_rx, shared, taps)
            })
            .map_err(|e| Error::io("cannot start the inference thread", e))?
    };
    threads.push(("inference".to_string(), inference));

    publisher.ready(&started);
    let mut published = 0u64;
    let counters = |published: u64| FrameCounters {
        captured: shared.sum(|c| &c.captured),
        processed: shared.sum(|c| &c.processed),
        dropped: slot.dropped_total(),
        published,
        errors: shared.sum(|c| &c.errors),
    };
    let mut published_by = vec![0u64; sources.len()];
    let camera_stats = |published_by: &[u64]| -> Vec<CameraStats> {
        shared
            .cameras
            .iter()
            .enumerate()
            .map(|(i, c)| CameraStats {
                name: cameras[i].0.clone(),
                uri: cameras[i].1.clone(),
                source: c.source_state(),
                frames: FrameCounters {
                    captured: c.captured.load(Ordering::Relaxed),
                    processed: c.processed.load(Ordering::Relaxed),
                    dropped: slot.dropped(i),
                    published: published_by[i],
                    errors: c.errors.load(Ordering::Relaxed),
                },
                fps: Default::default(),
                frame_age_ms: None,
                stale_ms: stale[i].as_secs_f64() * 1e3,
                latency_ms: Default::default(),
                blind: None,
            })
            .collect()
    };
    let max_frames = options.max_frames;
    let reached = |published: u64| max_frames.is_some_and(|n| published >= n);
    let telemetry_now = || telemetry.lock().map(|t| t.clone()).unwrap_or_default();
    let mut captured_at_newest = vec![0u64; sources.len()];
    let mut blind: Vec<Blind> = Vec::with_capacity(sources.len());
    loop {
        match report_rx.recv_timeout(Duration::from_millis(20)) {
            Ok(report) => {
                let lane = report.camera.index;
                publisher.frame(&report, slot.dropped(lane));
                captured_at_newest[lane] = shared.cameras[lane].captured.load(Ordering::Relaxed);
                published += 1;
                published_by[lane] += 1;
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
        blind.clear();
        let mut telemetry_then = None;
        for (i, c) in shared.cameras.iter().enumerate() {
            if let Some(age) = publisher.stale_for(i) {
                let captured = c.captured.load(Ordering::Relaxed);
                let since = captured.saturating_sub(captured_at_newest[i]);
                let t = telemetry_then.get_or_insert_with(telemetry_now);
                blind.push(diagnose(&cameras[i].0, age, &c.source_state(), since, t));
            }
        }
        publisher.tick(&Health {
            since_progress: Duration::from_nanos(since),
            stopping: stop.load(Ordering::Relaxed),
            blind: &blind,
            stale: config.latency.stale(),
            blind_notice: false,
        });
        if publisher.interval_due() {
            model_file.check();
            publisher.interval(counters(published), &mut camera_stats(&published_by), &telemetry_now());
        }
    }
    let mut panicked = None;
    for (stage, thread) in threads {
        if let Err(payload) = thread.join() {
            panicked
                .get_or_insert(format!("the {stage} thread panicked: {}", panic_message(payload.as_ref())));
        }
    }
    let frames = counters(published);
    let ended = shared.cameras.iter().all(|c| c.source_ended.load(Ordering::Relaxed));
    let reason = if let Some(p) = &panicked {
        p.clone()
    } else if reached(published) {
        "frame count reached".to_string()
    } else if stop.load(Ordering::Relaxed) {
        "signal".to_string()
    } else if ended {
        "end of source".to_string()
    } else {
        "pipeline stopped".to_string()
    };
    let mut last = camera_stats(&published_by);
    let (total, seconds) = publisher.finish(frames, &mut last, &telemetry_now(), &reason);
    telemetry_stop.store(true, Ordering::Relaxed);
    let _ = telemetry_thread.join();
    if !options.quiet {
        print_summary(&frames, &last, &total, seconds, &reason);
    }
    drop(power);
    if let Some(p) = panicked {
        return Err(Error::Panicked { message: p });
    }
    Ok(RunSummary {
        frames,
        reason,
        seconds,
        latency: total,
        engine: engine_described,
        preprocessing,
        cameras: last,
    })
}

/// Prints the run's statistics (to stderr, so stdout stays machine-readable).
fn print_summary(
    frames: &FrameCounters,
    cameras: &[CameraStats],
    total: &LatencyStats,
    seconds: f64,
    reason: &str,
) {
    eprintln!(
        "jetdetect: stopped ({reason}) after {seconds:.1} s: {} captured, {} processed ({:.1} fps), {} dropped, {} published, {} errors",
        frames.captured,
        frames.processed,
        frames.processed as f64 / seconds.max(1e-9),
        frames.dropped,
        frames.published,
        frames.errors
    );
    if cameras.len() > 1 {
        for c in cameras {
            eprintln!(
                "  {}: {} captured, {} processed ({:.1} fps), {} dropped, {} published, {} errors{}",
                c.name,
                c.frames.captured,
                c.frames.processed,
                c.fps.processed,
                c.frames.dropped,
                c.frames.published,
                c.frames.errors,
                c.source.error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default()
            );
        }
    }
    eprintln!("{:<12} {:>9} {:>9} {:>9} {:>9}   (ms)", "stage", "p50", "p90", "p99", "max");
    for stage in Stage::ALL {
        let p = total.stage(stage);
        eprintln!("{:<12} {:>9.3} {:>9.3} {:>9.3} {:>9.3}", stage.to_string(), p.p50, p.p90, p.p99, p.max);
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
        let b = diagnose("cam0", age, &gone, 0, &t);
        assert_eq!(
            (b.reason, b.detail.as_str(), b.for_ms),
            (BlindReason::Camera, "/dev/video0: cannot open: No such device", 750.0)
        );
        let b = diagnose("cam0", age, &streaming, 12, &t);
        assert_eq!(b.reason, BlindReason::Inference);
        assert!(
            b.detail.contains("12 frames captured in 750 ms but none got through inference"),
            "{}",
            b.detail
        );
        t.throttling = true;
        let b = diagnose("cam0", age, &streaming, 0, &t);
        assert_eq!((b.reason, b.throttling), (BlindReason::NoFrames, true));
        assert!(b.detail.contains("no frame for 750 ms"), "{}", b.detail);
    }
}
