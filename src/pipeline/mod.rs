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
//! stops alone; the others go on. The run ends on a shutdown (SIGTERM/SIGINT, a frame count, a
//! stage that panicked) or when every source has ended; either way the current frame is
//! finished, clients get a `bye`, the socket file is removed and the statistics are printed.
//!
//! The composition root (`daemon::run`) opens what a run needs from the config and hands it
//! over as a [`Pipeline`]; [`run`] is its four steps: [`start`] (warm-up, what runs),
//! [`spawn`] (the capture and inference threads), [`publish`] (the loop on the calling
//! thread) and [`finish`] (join, the last figures). Each thread's loop is a file here:
//! `capture`, `inference`; `publish` is the publisher they feed, `slot` the newest-frame
//! handoff, `shared` their counters, `guard` what a panic does, `blind` why a camera is blind.

pub mod publish;
pub mod slot;

mod blind;
mod capture;
mod guard;
mod inference;
pub mod model_file;
mod shared;

use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::clock::mono_ns;
use crate::detector::Detector;
use crate::error::{Error, Result};
use crate::frame::{Frame, PixelFormat};
use crate::hazard::Hazards;
use crate::output::tap::PictureTap;
use crate::output::{Health, Output, Started};
use crate::power::telemetry::Sampler;
use crate::report::{Blind, CameraId, CameraStats, FrameCounters, FrameReport};
use crate::shutdown::Shutdown;
use crate::source::FrameSource;
use crate::stats::{LatencyConfig, LatencyStats, Stage};
use guard::{panic_message, PanicGuard};
use inference::CameraLane;
use model_file::ModelFile;
use publish::Publisher;
use shared::Shared;
use slot::LatestSlots;

/// Reports queued between inference and the publisher at most.
const REPORTS_QUEUED: usize = 4;

/// What a run is made of, opened from the config by the composition root (`daemon::run`).
pub struct Pipeline {
    /// The cameras, in config order.
    pub cameras: Vec<Camera>,
    /// The detector, not warmed up yet.
    pub detector: Detector,
    /// `[engine] max_batch` as written (the start-up log says why cameras are not batched).
    pub max_batch_asked: usize,
    /// Where frames and statistics go.
    pub outputs: Vec<Box<dyn Output>>,
    /// `[output] stats_interval_s`.
    pub stats_interval: Duration,
    /// `[latency]`.
    pub latency: LatencyConfig,
    /// The model file as it was before the engine read it, watched while the run lasts.
    pub model_file: ModelFile,
    /// Stop after this many published frames (`jetdetect bench`); `None` runs until stopped.
    pub max_frames: Option<u64>,
    /// Do not print the statistics table at the end (the caller reports them).
    pub quiet: bool,
}

/// One camera of a run.
pub struct Camera {
    /// Its name in every message.
    pub name: String,
    /// Its opened source.
    pub source: Box<dyn FrameSource>,
    /// Its freshness bound.
    pub stale: Duration,
    /// Its hazard layer, when `[hazards] enabled`.
    pub hazards: Option<Hazards>,
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

/// Runs `pipeline` until `shutdown` is requested or every source has ended; `telemetry` is
/// the board's sampler, read for the stats and the blind notices.
pub fn run(pipeline: Pipeline, telemetry: &Sampler, shutdown: Shutdown) -> Result<RunSummary> {
    let Pipeline { cameras, mut detector, max_batch_asked, outputs, stats_interval, latency, .. } = pipeline;
    let started = start(&mut detector, &cameras, max_batch_asked)?;
    let summary = Described {
        engine: started.engine.clone(),
        preprocessing: detector.preprocessing(),
        cameras: started.cameras.clone(),
        stale: cameras.iter().map(|c| c.stale).collect(),
    };
    let taps: Vec<Arc<PictureTap>> = outputs.iter().filter_map(|o| o.picture_tap()).collect();
    let mut publisher = Publisher::new(outputs, stats_interval, latency, summary.stale.clone());
    publisher.open()?;
    let running = spawn(cameras, detector, taps, &shutdown)?;
    publisher.ready(&started);
    let watch = Watch {
        model: pipeline.model_file,
        telemetry,
        max_frames: pipeline.max_frames,
        stale: latency.stale(),
        shutdown: &shutdown,
    };
    let tally = publish(&mut publisher, &running, &summary, watch);
    finish(publisher, running, &summary, tally, telemetry, &shutdown, pipeline.quiet)
}

/// What the run serves, as the start described it: for the stats and the summary.
struct Described {
    engine: String,
    preprocessing: String,
    /// Each camera's name and source.
    cameras: Vec<(String, String)>,
    /// Each camera's freshness bound.
    stale: Vec<Duration>,
}

/// Warms the detector up for every frame geometry the cameras announce (and, with several, for
/// batches), logs what runs, and says so in the [`Started`] the outputs get.
pub fn start(detector: &mut Detector, cameras: &[Camera], max_batch_asked: usize) -> Result<Started> {
    let many = cameras.len() > 1;
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
    for g in cameras.iter().filter_map(|c| c.source.geometry()) {
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
            cameras.len(),
            geometries.first().copied().unwrap_or((PixelFormat::Rgb24, iw, ih)),
        )?;
    }
    log::info!(
        "warm-up: 3 runs in {:.0} ms; preprocessing on {}",
        warm.elapsed().as_secs_f64() * 1e3,
        detector.preprocessing()
    );
    if many {
        log_batching(detector, cameras.len(), max_batch_asked);
    }
    let described: Vec<(String, String)> =
        cameras.iter().map(|c| (c.name.clone(), c.source.describe())).collect();
    Ok(Started {
        source: match many {
            false => described[0].1.clone(),
            true => described.iter().map(|(n, d)| format!("{n}: {d}")).collect::<Vec<_>>().join("; "),
        },
        cameras: described,
        engine: detector.engine().describe(),
        runtime,
        input: [iw, ih],
        names: detector.names().clone(),
    })
}

/// Says how inference serves several cameras: in turn, or batched, and why.
fn log_batching(detector: &Detector, cameras: usize, max_batch_asked: usize) {
    match detector.max_batch().min(cameras) {
        1 => log::info!(
            "inference: one camera per engine run, in turn ({})",
            if max_batch_asked == 1 {
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

/// The threads of a run and what the publisher reads from them.
pub struct Running {
    slot: Arc<LatestSlots<Frame>>,
    shared: Arc<Shared>,
    reports: Receiver<FrameReport>,
    recycle: SyncSender<FrameReport>,
    threads: Vec<(String, JoinHandle<()>)>,
}

/// Starts a capture thread per camera and the inference thread; each stops on `shutdown` (a
/// panicking one requests it for all).
pub fn spawn(
    cameras: Vec<Camera>,
    detector: Detector,
    taps: Vec<Arc<PictureTap>>,
    shutdown: &Shutdown,
) -> Result<Running> {
    let many = cameras.len() > 1;
    let slot = Arc::new(LatestSlots::<Frame>::new(cameras.len()));
    let shared = Arc::new(Shared::new(cameras.len()));
    // Every report that can exist at once is made here: the channel's, the one being published
    // and the one being filled. However the threads are scheduled, none is made per frame.
    let (report_tx, reports) = sync_channel::<FrameReport>(REPORTS_QUEUED);
    let (recycle, recycled) = sync_channel::<FrameReport>(REPORTS_QUEUED + 2);
    for _ in 0..REPORTS_QUEUED + 2 {
        let _ = recycle.try_send(FrameReport::new());
    }
    let mut threads = Vec::with_capacity(cameras.len() + 1);
    let mut lanes = Vec::with_capacity(cameras.len());
    for (lane, camera) in cameras.into_iter().enumerate() {
        let Camera { name: camera_name, source, hazards, .. } = camera;
        let (slot, shared, shutdown) = (slot.clone(), shared.clone(), shutdown.clone());
        // One camera: the thread keeps its old name; several: each is named after its camera.
        let name = match many {
            false => "capture".to_string(),
            true => format!("capture {camera_name}"),
        };
        let stage = name.clone();
        let who = if many { format!("camera {camera_name}: ") } else { String::new() };
        let thread = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let _guard = PanicGuard { stage, slot: slot.clone(), shutdown: shutdown.clone() };
                capture::capture_loop(lane, who, source, slot, shared, shutdown)
            })
            .map_err(|e| Error::io(format!("cannot start the {name} thread"), e))?;
        threads.push((name, thread));
        lanes.push(CameraLane { id: CameraId::new(lane, &camera_name), hazards });
    }
    let inference = {
        let (slot, shared, shutdown) = (slot.clone(), shared.clone(), shutdown.clone());
        std::thread::Builder::new()
            .name("inference".into())
            .spawn(move || {
                let _guard = PanicGuard { stage: "inference".into(), slot: slot.clone(), shutdown };
                inference::inference_loop(detector, lanes, slot, report_tx, recycled, shared, taps)
            })
            .map_err(|e| Error::io("cannot start the inference thread", e))?
    };
    threads.push(("inference".to_string(), inference));
    Ok(Running { slot, shared, reports, recycle, threads })
}

/// What the publish loop watches besides the reports.
struct Watch<'a> {
    model: ModelFile,
    telemetry: &'a Sampler,
    max_frames: Option<u64>,
    /// `[latency] stale_ms`.
    stale: Duration,
    shutdown: &'a Shutdown,
}

/// The publisher's count of what it published.
struct Tally {
    published: u64,
    /// The run's frame count (`max_frames`) was reached.
    reached_max: bool,
    by_camera: Vec<u64>,
    /// Each camera's `captured` count when its newest report was published.
    captured_at_newest: Vec<u64>,
}

impl Running {
    /// The run's counters so far.
    fn counters(&self, published: u64) -> FrameCounters {
        let shared = &self.shared;
        FrameCounters {
            captured: shared.sum(|c| &c.captured),
            processed: shared.sum(|c| &c.processed),
            dropped: self.slot.dropped_total(),
            published,
            errors: shared.sum(|c| &c.errors),
        }
    }

    /// Each camera's figures so far (rates and latency filled in by the publisher).
    fn camera_stats(&self, described: &Described, published_by: &[u64]) -> Vec<CameraStats> {
        self.shared
            .cameras
            .iter()
            .enumerate()
            .map(|(i, c)| CameraStats {
                name: described.cameras[i].0.clone(),
                uri: described.cameras[i].1.clone(),
                source: c.source_state(),
                frames: FrameCounters {
                    captured: c.captured.load(Ordering::Relaxed),
                    processed: c.processed.load(Ordering::Relaxed),
                    dropped: self.slot.dropped(i),
                    published: published_by[i],
                    errors: c.errors.load(Ordering::Relaxed),
                },
                fps: Default::default(),
                frame_age_ms: None,
                stale_ms: described.stale[i].as_secs_f64() * 1e3,
                latency_ms: Default::default(),
                blind: None,
            })
            .collect()
    }
}

/// Hands every report to the outputs as it comes, and between reports (every 20 ms at most)
/// ticks them with the pipeline's health and each stats interval's figures; returns when
/// inference has stopped.
fn publish(
    publisher: &mut Publisher,
    running: &Running,
    described: &Described,
    mut watch: Watch<'_>,
) -> Tally {
    let cameras = described.cameras.len();
    let mut tally = Tally {
        published: 0,
        reached_max: false,
        by_camera: vec![0; cameras],
        captured_at_newest: vec![0; cameras],
    };
    let mut blind: Vec<Blind> = Vec::with_capacity(cameras);
    loop {
        match running.reports.recv_timeout(Duration::from_millis(20)) {
            Ok(report) => {
                let lane = report.camera.index;
                publisher.frame(&report, running.slot.dropped(lane));
                tally.captured_at_newest[lane] =
                    running.shared.cameras[lane].captured.load(Ordering::Relaxed);
                tally.published += 1;
                tally.by_camera[lane] += 1;
                crate::fault::stage("publish", tally.published);
                let _ = running.recycle.try_send(report);
                tally.reached_max = watch.max_frames.is_some_and(|n| tally.published >= n);
                if tally.reached_max && watch.shutdown.request() {
                    log::info!("{} frames published: stopping", tally.published);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let since = mono_ns(Instant::now()).saturating_sub(running.shared.heartbeat.load(Ordering::Relaxed));
        // Only while stale: the source's state and the telemetry are copied to say why.
        blind.clear();
        let mut telemetry_then = None;
        for (i, c) in running.shared.cameras.iter().enumerate() {
            if let Some(age) = publisher.stale_for(i) {
                let captured = c.captured.load(Ordering::Relaxed);
                let since = captured.saturating_sub(tally.captured_at_newest[i]);
                let t = telemetry_then.get_or_insert_with(|| watch.telemetry.latest());
                blind.push(blind::diagnose(&described.cameras[i].0, age, &c.source_state(), since, t));
            }
        }
        publisher.tick(&Health {
            since_progress: Duration::from_nanos(since),
            stopping: watch.shutdown.is_requested(),
            blind: &blind,
            stale: watch.stale,
            blind_notice: false,
        });
        if publisher.interval_due() {
            watch.model.check();
            let mut stats = running.camera_stats(described, &tally.by_camera);
            publisher.interval(running.counters(tally.published), &mut stats, &watch.telemetry.latest());
        }
    }
    tally
}

/// Joins the threads, says why the run ended, gives the outputs the whole run's figures and
/// prints them (unless `quiet`); a panicked thread makes the run an error.
fn finish(
    publisher: Publisher,
    mut running: Running,
    described: &Described,
    tally: Tally,
    telemetry: &Sampler,
    shutdown: &Shutdown,
    quiet: bool,
) -> Result<RunSummary> {
    let mut panicked = None;
    for (stage, thread) in std::mem::take(&mut running.threads) {
        if let Err(payload) = thread.join() {
            panicked
                .get_or_insert(format!("the {stage} thread panicked: {}", panic_message(payload.as_ref())));
        }
    }
    let frames = running.counters(tally.published);
    let ended = running.shared.cameras.iter().all(|c| c.source_ended.load(Ordering::Relaxed));
    let reason = if let Some(p) = &panicked {
        p.clone()
    } else if tally.reached_max {
        "frame count reached".to_string()
    } else if shutdown.is_requested() {
        "signal".to_string()
    } else if ended {
        "end of source".to_string()
    } else {
        "pipeline stopped".to_string()
    };
    let mut last = running.camera_stats(described, &tally.by_camera);
    let (total, seconds) = publisher.finish(frames, &mut last, &telemetry.latest(), &reason);
    if !quiet {
        print_summary(&frames, &last, &total, seconds, &reason);
    }
    if let Some(p) = panicked {
        return Err(Error::Panicked { message: p });
    }
    Ok(RunSummary {
        frames,
        reason,
        seconds,
        latency: total,
        engine: described.engine.clone(),
        preprocessing: described.preprocessing.clone(),
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
