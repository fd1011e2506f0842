//! `jetdetect bench`: latency per stage and end to end, in three depths.
//!
//! - [`Mode::Pipeline`] (the default) runs the daemon itself
//!   ([`pipeline::run`]: capture, newest-frame handoff, inference, publishing
//!   on a private socket, the config's power profile) for a number of frames,
//!   with optional reading clients, and reports what a client would see: every
//!   stage, end to end, frame age, FPS, drops, and the process's memory and
//!   file descriptors over the run.
//! - [`Mode::Detector`] takes frames one after another through the detector
//!   (no dropping): what each stage costs on this machine.
//! - [`Mode::Engine`] runs the engine alone on one prepared input tensor in a
//!   loop: the limit the rest is measured against.
//!
//! Model load (a TensorRT build or cache load included) and warm-up are timed
//! apart from the steady state. [`plot`] draws the latency distributions of
//! several runs in one SVG.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jetdetect::config::Config;
use jetdetect::daemon::RunOptions;
use jetdetect::error::{Error, Result};
use jetdetect::frame::Frame;
use jetdetect::output::Output;
use jetdetect::report::FrameReport;
use jetdetect::source;
use jetdetect::stats::{LatencyStats, Percentiles};

/// How deep a bench run goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The daemon's pipeline, end to end.
    Pipeline,
    /// The detector chain, frame after frame.
    Detector,
    /// The engine alone on one input tensor.
    Engine,
}

impl Mode {
    /// Parses `pipeline`, `detector` or `engine`.
    pub fn parse(s: &str) -> std::result::Result<Mode, String> {
        match s {
            "pipeline" => Ok(Mode::Pipeline),
            "detector" => Ok(Mode::Detector),
            "engine" => Ok(Mode::Engine),
            _ => Err(format!("'{s}': use pipeline, detector or engine")),
        }
    }

    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Pipeline => "pipeline",
            Mode::Detector => "detector",
            Mode::Engine => "engine",
        }
    }

    /// The stages this mode times, in order; the last one is the whole.
    pub fn stages(self) -> &'static [&'static str] {
        match self {
            Mode::Pipeline => &jetdetect::stats::STAGES,
            Mode::Detector => &DETECTOR_STAGES,
            Mode::Engine => &["inference"],
        }
    }
}

/// Stages timed per frame in [`Mode::Detector`]: the source's delivery, the
/// detector's three stages, and the detector as a whole.
pub const DETECTOR_STAGES: [&str; 5] = ["source", "preprocess", "inference", "decode", "detect"];

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// How deep.
    pub mode: Mode,
    /// Source URI; `None`: the config's source.
    pub source: Option<String>,
    /// Frames to time.
    pub frames: u64,
    /// Warm-up frames before timing (detector and engine modes; the pipeline warms up as the daemon does).
    pub warmup: usize,
    /// Clients reading the socket during a pipeline run.
    pub clients: usize,
    /// Clients that connect and never read during a pipeline run (a hung consumer).
    pub stalled: usize,
    /// Name of the run in tables and plots.
    pub label: String,
}

/// Smallest, last and largest value of a quantity sampled over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Track {
    /// First sample (after warm-up).
    pub first: u64,
    /// Last sample.
    pub last: u64,
    /// Largest sample.
    pub max: u64,
}

impl Track {
    fn add(&mut self, v: u64, first: bool) {
        if first {
            *self = Track { first: v, last: v, max: v };
        } else {
            self.last = v;
            self.max = self.max.max(v);
        }
    }
}

/// What a bench run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchReport {
    /// The run's name.
    pub label: String,
    /// `pipeline`, `detector` or `engine`.
    pub mode: &'static str,
    /// Engine and model.
    pub engine: String,
    /// Where preprocessing ran.
    pub preprocessing: String,
    /// The source and its geometry.
    pub source: String,
    /// Frames timed (published, for the pipeline).
    pub frames: u64,
    /// Seconds from the start to the first timed frame: model load, engine build or cache, warm-up.
    pub startup_s: f64,
    /// Seconds to load the model and prepare the engine (detector and engine modes; a
    /// TensorRT build or cache load included).
    pub load_s: f64,
    /// Seconds of warm-up runs (detector and engine modes; accelerator preprocessing graphs are built here).
    pub warmup_s: f64,
    /// Seconds of the timed part.
    pub seconds: f64,
    /// Frames per second over the timed part.
    pub fps: f64,
    /// Frames the source delivered (pipeline).
    pub captured: u64,
    /// Frames dropped because a newer one arrived first (pipeline).
    pub dropped: u64,
    /// Mean detections per frame.
    pub detections_per_frame: f64,
    /// Per-stage latency in milliseconds, in [`Mode::stages`] order.
    pub stages: Vec<(String, Percentiles)>,
    /// The distribution of the last stage (the whole): `(quantile, ms)` points.
    pub curve: Vec<(f64, f64)>,
    /// Resident memory of the process over the run, KiB.
    pub rss_kib: Track,
    /// Open file descriptors of the process over the run.
    pub fds: Track,
    /// `(frame, RSS KiB)` samples over the run (about 50).
    pub rss_trace: Vec<(u64, u64)>,
    /// Lines each reading client read (pipeline with clients): every message, `hello`, `stats`
    /// and `hazards` ones too.
    pub client_lines: Vec<u64>,
    /// `detections` messages each reading client read, each frame (camera and `seq`) counted
    /// once.
    pub client_frames: Vec<u64>,
    /// Frames each reading client did not get of those published after its first one (a client
    /// connects while the pipeline starts, so what came before it is not counted): a lost
    /// message shows here, where the line count hides it among the other messages.
    pub client_missed: Vec<u64>,
    /// Clients that were connected and never read.
    pub stalled_clients: usize,
    /// Pipeline mode: each camera's figures over the run (its frames, rates, latency).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cameras: Vec<jetdetect::report::CameraStats>,
}

impl BenchReport {
    /// Percentiles of the stage called `name`.
    #[cfg(test)]
    pub fn stage(&self, name: &str) -> Option<Percentiles> {
        self.stages.iter().find(|(s, _)| s == name).map(|(_, p)| *p)
    }
}

/// Resident set size of this process in KiB, from `/proc/self/statm`.
pub fn rss_kib() -> u64 {
    let page_kib = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as u64 / 1024;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()))
        .map_or(0, |pages| pages * page_kib)
}

/// Open file descriptors of this process, from `/proc/self/fd`.
pub fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count().saturating_sub(1) as u64)
}

/// Samples memory and descriptors every `every` frames after `skip` frames.
struct Sampler {
    every: u64,
    skip: u64,
    seen: u64,
    rss: Track,
    fds: Track,
    trace: Vec<(u64, u64)>,
}

impl Sampler {
    fn new(frames: u64) -> Sampler {
        Sampler {
            every: (frames / 50).max(1),
            skip: (frames / 20).min(100),
            seen: 0,
            rss: Track::default(),
            fds: Track::default(),
            trace: Vec::new(),
        }
    }

    fn frame(&mut self) {
        self.seen += 1;
        if self.seen > self.skip && (self.seen - self.skip - 1).is_multiple_of(self.every) {
            let first = self.trace.is_empty();
            let rss = rss_kib();
            self.rss.add(rss, first);
            self.fds.add(open_fds(), first);
            self.trace.push((self.seen, rss));
        }
    }
}

/// Each stage's percentiles, and the distribution of the last stage (the
/// whole) as points: quantiles spaced evenly on the `-log10(1 - q)` scale from
/// 0 to 99.9 %, then the maximum.
#[allow(clippy::type_complexity)]
fn stage_figures(mode: Mode, lat: &LatencyStats) -> (Vec<(String, Percentiles)>, Vec<(f64, f64)>) {
    let names = mode.stages();
    let stages = names.iter().enumerate().map(|(i, s)| (s.to_string(), lat.percentiles(i))).collect();
    let last = names.len() - 1;
    let mut curve: Vec<(f64, f64)> = (0..=60)
        .map(|k| {
            let q = 1.0 - 10f64.powf(-3.0 * k as f64 / 60.0);
            (q, lat.quantile_ms(last, q))
        })
        .collect();
    curve.push((1.0, lat.percentiles(last).max));
    (stages, curve)
}

/// Runs `config` as `options` say.
pub fn run(config: &Config, options: &BenchOptions) -> Result<BenchReport> {
    if options.frames == 0 {
        return Err(Error::Command("--frames must be at least 1".into()));
    }
    match options.mode {
        Mode::Pipeline => run_pipeline(config, options),
        Mode::Detector | Mode::Engine => run_detector(config, options),
    }
}

fn run_detector(config: &Config, options: &BenchOptions) -> Result<BenchReport> {
    let uri = options.source.as_deref().unwrap_or(&config.source.first().uri);
    let start = Instant::now();
    let mut src = source::open_with(uri, &config.source.first().controls)?;
    let mut detector = jetdetect::daemon::detector(config)?;
    let load_s = start.elapsed().as_secs_f64();
    let mut frame = Frame::empty();
    let mode = options.mode;
    if options.warmup > 0 || mode == Mode::Engine {
        match src.geometry() {
            Some(g) => detector.warm_up_for(options.warmup.max(1), g)?,
            None => detector.warm_up(options.warmup.max(1))?,
        }
    }
    if mode == Mode::Engine {
        // One real frame leaves a real tensor in the engine's input; then the engine alone.
        if !src.next_frame(&mut frame)? {
            return Err(Error::Command(format!("{uri}: the source gave no frames")));
        }
        detector.detect(&frame)?;
        for _ in 0..options.warmup {
            detector.engine_mut().run()?;
        }
    }
    let startup_s = start.elapsed().as_secs_f64();
    let mut lat = LatencyStats::with_stages(mode.stages().len());
    let mut sampler = Sampler::new(options.frames);
    let (mut n, mut detections) = (0u64, 0usize);
    let timed = Instant::now();
    while n < options.frames {
        if mode == Mode::Engine {
            let t = Instant::now();
            detector.engine_mut().run()?;
            lat.record([t.elapsed().as_micros() as u64]);
        } else {
            let t0 = Instant::now();
            if !src.next_frame(&mut frame)? {
                break;
            }
            let t1 = Instant::now();
            detections += detector.detect(&frame)?.len();
            let t2 = Instant::now();
            let s = detector.times();
            lat.record([t1 - t0, s.preprocess, s.inference, s.decode, t2 - t1].map(|d| d.as_micros() as u64));
        }
        n += 1;
        sampler.frame();
    }
    let seconds = timed.elapsed().as_secs_f64();
    if n == 0 {
        return Err(Error::Command(format!("{uri}: the source gave no frames")));
    }
    let (stages, curve) = stage_figures(mode, &lat);
    // The detector's own rate: its stage, not the source's rendering, is what is measured.
    let busy_s = stages.last().map_or(0.0, |(_, p)| p.mean) * n as f64 / 1e3;
    Ok(BenchReport {
        label: options.label.clone(),
        mode: mode.name(),
        engine: detector.engine().describe(),
        preprocessing: detector.preprocessing(),
        source: src.describe(),
        frames: n,
        startup_s,
        load_s,
        warmup_s: startup_s - load_s,
        seconds,
        fps: n as f64 / busy_s.max(1e-9),
        captured: n,
        dropped: 0,
        detections_per_frame: detections as f64 / n as f64,
        stages,
        curve,
        rss_kib: sampler.rss,
        fds: sampler.fds,
        rss_trace: sampler.trace,
        client_lines: Vec::new(),
        client_frames: Vec::new(),
        client_missed: Vec::new(),
        stalled_clients: 0,
        cameras: Vec::new(),
    })
}

/// Connects `n` clients to `socket` once it exists; each reads (or, unless
/// `read`, holds its connection without reading) until the
/// daemon closes it and counts the lines it got.
/// What a reading client got: lines, and the frames (camera, `seq`) of its `detections` messages.
#[derive(Clone, Debug, Default)]
struct ClientRead {
    lines: u64,
    frames: std::collections::HashSet<(String, u64)>,
}

impl ClientRead {
    /// Of `published`, the frames this client should have had (each camera's from the first it
    /// got on) and did not.
    fn missed(&self, published: &[(String, u64)]) -> u64 {
        // Each camera's first frame, once (not per published frame).
        let mut first = std::collections::HashMap::<&str, u64>::new();
        for (c, s) in &self.frames {
            first.entry(c).and_modify(|f| *f = (*f).min(*s)).or_insert(*s);
        }
        published
            .iter()
            .filter(|(c, s)| {
                first.get(c.as_str()).is_none_or(|f| s >= f) && !self.frames.contains(&(c.clone(), *s))
            })
            .count() as u64
    }
}

/// The `"camera":"…","seq":N` of a `detections` line, without parsing the whole message (50
/// clients read every frame beside the pipeline: the bench must not become the load).
fn detections_key(line: &[u8]) -> Option<(&[u8], u64)> {
    const HEAD: &[u8] = b"{\"type\":\"detections\"";
    if !line.starts_with(HEAD) {
        return None;
    }
    let find = |pat: &[u8]| line.windows(pat.len()).position(|w| w == pat).map(|i| i + pat.len());
    let cam_at = find(b"\"camera\":\"")?;
    let cam_end = cam_at + line[cam_at..].iter().position(|&b| b == b'"')?;
    let seq_at = find(b"\"seq\":")?;
    let digits = line[seq_at..].iter().take_while(|b| b.is_ascii_digit()).count();
    let seq = std::str::from_utf8(&line[seq_at..seq_at + digits]).ok()?.parse().ok()?;
    Some((&line[cam_at..cam_end], seq))
}

fn spawn_clients(
    socket: &Path,
    n: usize,
    read: bool,
    give_up: Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<ClientRead>> {
    (0..n)
        .map(|_| {
            let (path, give_up) = (socket.to_path_buf(), give_up.clone());
            std::thread::spawn(move || {
                let mut stream = loop {
                    if let Ok(s) = UnixStream::connect(&path) {
                        break s;
                    }
                    if give_up.load(Ordering::Relaxed) {
                        return ClientRead::default();
                    }
                    std::thread::sleep(Duration::from_millis(20));
                };
                if !read {
                    while !give_up.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    drop(stream);
                    return ClientRead::default();
                }
                let mut got = ClientRead::default();
                let mut reader = std::io::BufReader::with_capacity(64 * 1024, &mut stream);
                let mut line = Vec::with_capacity(4096);
                while let Ok(k) = std::io::BufRead::read_until(&mut reader, b'\n', &mut line) {
                    if k == 0 {
                        break;
                    }
                    got.lines += 1;
                    if let Some((camera, seq)) = detections_key(&line) {
                        got.frames.insert((String::from_utf8_lossy(camera).into_owned(), seq));
                    }
                    line.clear();
                }
                got
            })
        })
        .collect()
}

fn run_pipeline(config: &Config, options: &BenchOptions) -> Result<BenchReport> {
    let mut config = config.clone();
    if let Some(uri) = &options.source {
        config.source.replace_with(uri.clone());
    }
    // A private socket, so a bench can run beside the service; no metrics endpoint.
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let socket: PathBuf = std::env::temp_dir().join(format!(
        "jetdetect-bench-{}-{}.sock",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    config.output.socket = socket.clone();
    config.output.socket_group.clear();
    config.metrics.listen.clear();

    let give_up = Arc::new(AtomicBool::new(false));
    let clients = spawn_clients(&socket, options.clients, true, give_up.clone());
    let stalled = spawn_clients(&socket, options.stalled, false, give_up.clone());
    let start = Instant::now();
    /// What the hook sees of the published messages.
    struct Seen {
        first: Option<Instant>,
        sampler: Sampler,
        detections: u64,
        /// The frames published, (camera, seq).
        published: Vec<(String, u64)>,
    }
    let seen = Arc::new(Mutex::new(Seen {
        first: None,
        sampler: Sampler::new(options.frames),
        detections: 0,
        published: Vec::with_capacity(options.frames as usize),
    }));
    /// Counts what the pipeline publishes, beside the socket the clients read.
    struct Counter(Arc<Mutex<Seen>>);
    impl Output for Counter {
        fn frame(&mut self, report: &FrameReport, _: u64, _: Instant) {
            if let Ok(mut s) = self.0.lock() {
                s.first.get_or_insert_with(Instant::now);
                s.sampler.frame();
                s.detections += report.detections.len() as u64;
                s.published.push((report.camera.name.to_string(), report.seq));
            }
        }
    }
    let mut outputs = jetdetect::daemon::outputs(&config, None);
    outputs.push(Box::new(Counter(seen.clone())));
    let run_options =
        RunOptions { outputs, max_frames: Some(options.frames), quiet: true, ..Default::default() };
    let result = jetdetect::daemon::run(&config, run_options, jetdetect::shutdown::Shutdown::new());
    give_up.store(true, Ordering::Relaxed);
    let reads: Vec<ClientRead> = clients.into_iter().map(|c| c.join().unwrap_or_default()).collect();
    let client_lines: Vec<u64> = reads.iter().map(|r| r.lines).collect();
    let client_frames: Vec<u64> = reads.iter().map(|r| r.frames.len() as u64).collect();
    stalled.into_iter().for_each(|c| drop(c.join()));
    let summary = result?;
    let published = summary.frames.published;
    if published == 0 {
        return Err(Error::Command(format!("{}: no frame was published", config.source.first().uri)));
    }
    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    let client_missed: Vec<u64> = reads.iter().map(|r| r.missed(&seen.published)).collect();
    let (stages, curve) = stage_figures(Mode::Pipeline, &summary.latency);
    Ok(BenchReport {
        label: options.label.clone(),
        mode: Mode::Pipeline.name(),
        engine: summary.engine.clone(),
        preprocessing: summary.preprocessing.clone(),
        source: config.source.first().uri.clone(),
        frames: published,
        startup_s: seen.first.unwrap_or(start).duration_since(start).as_secs_f64(),
        load_s: 0.0,
        warmup_s: 0.0,
        seconds: summary.seconds,
        fps: summary.frames.processed as f64 / summary.seconds.max(1e-9),
        captured: summary.frames.captured,
        dropped: summary.frames.dropped,
        detections_per_frame: seen.detections as f64 / published as f64,
        stages,
        curve,
        rss_kib: seen.sampler.rss,
        fds: seen.sampler.fds,
        rss_trace: std::mem::take(&mut seen.sampler.trace),
        client_lines,
        client_frames,
        client_missed,
        stalled_clients: options.stalled,
        cameras: summary.cameras.clone(),
    })
}

/// The report as a table for people.
pub fn format_table(r: &BenchReport) -> String {
    let mut s = format!(
        "run           {} ({} mode)\nengine        {}\npreprocessing {}\nsource        {}\n\
         startup       {:.3} s (model load, engine build or cache, warm-up)\n\
         frames        {} in {:.2} s: {:.1} FPS, {:.2} detections/frame\n",
        r.label,
        r.mode,
        r.engine,
        r.preprocessing,
        r.source,
        r.startup_s,
        r.frames,
        r.seconds,
        r.fps,
        r.detections_per_frame,
    );
    if r.mode == "pipeline" {
        s.push_str(&format!("captured      {}, dropped {} (newest frame wins)\n", r.captured, r.dropped));
    }
    if !r.client_lines.is_empty() || r.stalled_clients > 0 {
        let lines = match (r.client_lines.iter().min(), r.client_lines.iter().max()) {
            (Some(lo), Some(hi)) if r.client_lines.len() > 4 => format!("min {lo}, max {hi}"),
            _ => format!("{:?}", r.client_lines),
        };
        s.push_str(&format!(
            "clients       {} reading, {} stalled (never reading); lines read {lines}\n",
            r.client_lines.len(),
            r.stalled_clients,
        ));
    }
    s.push_str(&format!(
        "memory        RSS {} -> {} KiB (max {}), open fds {} -> {} (max {})\n\n",
        r.rss_kib.first, r.rss_kib.last, r.rss_kib.max, r.fds.first, r.fds.last, r.fds.max
    ));
    s.push_str(&format!(
        "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
        "stage (ms)", "p50", "p90", "p99", "max", "mean"
    ));
    for (name, p) in &r.stages {
        let name = if name == "queue" { "frame_age" } else { name };
        s.push_str(&format!(
            "{name:<12} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}\n",
            p.p50, p.p90, p.p99, p.max, p.mean
        ));
    }
    s
}

/// Draws the distribution of each run's last stage (end to end, detect or
/// inference) as latency against percentile, in one SVG.
pub fn plot(reports: &[BenchReport], path: &Path) -> Result<()> {
    use plotters::prelude::*;
    let err = |e: DrawingAreaErrorKind<std::io::Error>| {
        Error::io(format!("{}: cannot draw the plot", path.display()), std::io::Error::other(e))
    };
    let top = reports.iter().flat_map(|r| r.curve.iter().map(|p| p.1)).fold(0.0f64, f64::max);
    let y_max = if top > 0.0 { top * 1.1 } else { 1.0 };
    let x = |q: f64| -(1.0 - q).max(1e-4).log10();
    let root = SVGBackend::new(path, (960, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut what: Vec<&str> = reports.iter().map(|r| r.mode).collect();
    what.dedup();
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("jetdetect bench: latency distribution ({})", what.join(", ")), ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..3.6f64, 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("percentile (log scale of 1 - p; the last point is the maximum)")
        .y_desc("latency (ms)")
        .x_labels(8)
        .x_label_formatter(&|v| {
            let p = 100.0 * (1.0 - 10f64.powf(-v));
            if *v > 3.05 {
                "max".to_string()
            } else if p >= 99.0 {
                format!("{p:.1}%")
            } else {
                format!("{p:.0}%")
            }
        })
        .draw()
        .map_err(err)?;
    let colours = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(23, 190, 207),
    ];
    for (i, r) in reports.iter().enumerate() {
        let colour = colours[i % colours.len()];
        let points: Vec<(f64, f64)> =
            r.curve.iter().map(|&(q, ms)| (if q >= 1.0 { 3.5 } else { x(q) }, ms)).collect();
        let whole = r.stages.last().map(|(s, p)| (s.clone(), *p)).unwrap_or_default();
        let label = format!(
            "{} [{} {}]: p50 {:.2} p99 {:.2} max {:.2} ms",
            r.label, r.mode, whole.0, whole.1.p50, whole.1.p99, whole.1.max
        );
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_client_misses_what_was_published_after_its_first_frame_and_not_read() {
        let published: Vec<(String, u64)> = (3..10).map(|s| ("cam0".to_string(), s)).collect();
        let read = |seqs: &[u64]| super::ClientRead {
            lines: 0,
            frames: seqs.iter().map(|&s| ("cam0".to_string(), s)).collect(),
        };
        // Connected at frame 5: 3 and 4 were before it; 7 was lost.
        assert_eq!(read(&[5, 6, 8, 9]).missed(&published), 1);
        assert_eq!(read(&[3, 4, 5, 6, 7, 8, 9]).missed(&published), 0);
        // Nothing read at all: everything is missed.
        assert_eq!(read(&[]).missed(&published), 7);
    }

    #[test]
    fn a_detections_line_gives_its_camera_and_seq_and_no_other_line_does() {
        let line = br#"{"type":"detections","schema":1,"camera":"front","seq":114,"width":640}"#;
        assert_eq!(super::detections_key(line), Some((&b"front"[..], 114)));
        assert_eq!(super::detections_key(br#"{"type":"stats","camera":"front","seq":3}"#), None);
        assert_eq!(super::detections_key(br#"{"type":"detections","camera":"a"}"#), None);
    }

    use super::*;

    fn config() -> Config {
        let mut config = Config::default();
        config.model.path = concat!(env!("CARGO_MANIFEST_DIR"), "/models/obstacles-v8.onnx").into();
        config
    }

    fn options(mode: Mode, source: &str, frames: u64) -> BenchOptions {
        BenchOptions {
            mode,
            source: Some(source.into()),
            frames,
            warmup: 1,
            clients: 0,
            stalled: 0,
            label: format!("test-{}", mode.name()),
        }
    }

    #[test]
    fn detector_mode_times_every_stage_of_a_real_model() {
        let config = config();
        let src = "synthetic://?width=320&height=240&fps=0&format=nv12&seed=2";
        let r = run(&config, &options(Mode::Detector, src, 12)).unwrap();
        assert_eq!(r.frames, 12);
        assert_eq!(r.stages.len(), DETECTOR_STAGES.len());
        let get = |name: &str| r.stage(name).unwrap();
        // The detector's total covers its stages; each percentile is ordered.
        assert!(get("detect").p50 >= get("inference").p50, "{r:?}");
        for (_, p) in &r.stages {
            assert!(p.p50 <= p.p90 && p.p90 <= p.p99 && p.p99 <= p.max, "{r:?}");
        }
        assert!(get("inference").p50 > 0.0 && r.fps > 0.0);
        assert!(r.detections_per_frame > 0.5, "the synthetic scene has objects: {r:?}");
        assert!(r.rss_kib.max > 1000 && r.fds.max >= 3, "{r:?}");
        let table = format_table(&r);
        assert!(table.contains("inference") && table.contains("preprocessing cpu"), "{table}");
        // The curve rises with the quantile and ends at the maximum.
        assert!(r.curve.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "{:?}", r.curve);
        assert_eq!(r.curve.last().unwrap().1, get("detect").max);
        // A finite source shorter than asked is measured as far as it goes; an empty one is an error.
        let r = run(&config, &options(Mode::Detector, "synthetic://?width=64&height=64&fps=0&frames=3", 10))
            .unwrap();
        assert_eq!(r.frames, 3);
        assert!(run(&config, &options(Mode::Detector, src, 0)).is_err());
    }

    #[test]
    fn engine_mode_times_the_engine_alone() {
        let config = config();
        let r = run(&config, &options(Mode::Engine, "synthetic://?width=320&height=240&fps=0", 8)).unwrap();
        assert_eq!((r.frames, r.stages.len()), (8, 1));
        assert!(r.stage("inference").unwrap().p50 > 0.0, "{r:?}");
    }

    #[test]
    fn pipeline_mode_runs_the_daemon_with_clients_and_plots() {
        let config = config();
        let mut o =
            options(Mode::Pipeline, "synthetic://?width=320&height=240&fps=60&format=yuyv&seed=4", 20);
        o.clients = 2;
        let r = run(&config, &o).unwrap();
        assert!(r.frames >= 20, "{r:?}");
        assert_eq!(r.stages.len(), jetdetect::stats::STAGES.len());
        let e2e = r.stage("end_to_end").unwrap();
        let inference = r.stage("inference").unwrap();
        assert!(e2e.p50 >= inference.p50 && e2e.max > 0.0, "{r:?}");
        assert!(r.captured >= r.frames, "{r:?}");
        // Each client got the hello, every detections message, the final stats and bye.
        assert_eq!(r.client_lines.len(), 2);
        for &lines in &r.client_lines {
            assert!(lines >= r.frames, "{r:?}");
        }
        // ... and, from its first detections message on, every published frame.
        assert_eq!(r.client_missed, vec![0, 0], "{r:?}");
        assert!(r.client_frames.iter().all(|&n| n > 0 && n <= r.frames), "{r:?}");
        let table = format_table(&r);
        assert!(table.contains("frame_age") && table.contains("dropped"), "{table}");

        let svg = std::env::temp_dir().join(format!("jetdetect-bench-test-{}.svg", std::process::id()));
        let mut other = r.clone();
        other.label = "second".into();
        plot(&[r, other], &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        std::fs::remove_file(&svg).unwrap();
        assert!(text.starts_with("<svg") && text.contains("polyline"), "{}", &text[..200.min(text.len())]);
        assert!(text.contains("second [pipeline end_to_end]"), "the legend names each run");
    }
}
