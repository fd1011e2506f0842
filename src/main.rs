//! The `jetdetect` command line: thin layers over the library.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::json;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use jetdetect::client;
use jetdetect::config::Config;
use jetdetect::detector::Detector;
use jetdetect::engine::onnxruntime::{Precision, PrecisionName};
use jetdetect::engine::{EngineKind, Provider};
use jetdetect::eval::{match_frame, Counts};
use jetdetect::frame::Frame;
use jetdetect::pipeline::{self, RunOptions};
use jetdetect::power;
use jetdetect::source::{self, file::load_image, file::IMAGE_EXTENSIONS};
use jetdetect::yolo::LayoutHint;
use jetdetect::Error;

#[derive(Parser)]
#[command(
    name = "jetdetect",
    version,
    about = "Low, steady-latency YOLO obstacle detection for NVIDIA Jetson"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: capture, detect and publish on the UNIX socket until stopped.
    Run {
        /// The TOML config file.
        #[arg(long, short)]
        config: PathBuf,
        /// Use this source instead of [source] uri.
        #[arg(long)]
        source: Option<String>,
        /// Use this socket path instead of [output] socket.
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Also print each frame's detections on stdout, as `watch` does.
        #[arg(long)]
        echo: bool,
        /// Who applies and restores the [power] profile: "self" (this process, at start and on
        /// exit), or "service" (`clocks apply --service` before it and `clocks restore` after it,
        /// as systemd/jetdetect.service runs them outside the sandbox; this process only reads).
        #[arg(long, value_enum, default_value_t = ClocksBy::Daemon)]
        clocks: ClocksBy,
    },
    /// Connect to a running daemon and print what it publishes.
    Watch {
        /// Socket path (default: [output] socket of --config, else /run/jetdetect/detections.sock).
        #[arg(long, short)]
        socket: Option<PathBuf>,
        /// Config file to take the socket path from.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Print the raw JSON lines instead of a human summary.
        #[arg(long)]
        json: bool,
        /// Exit after this many detections messages.
        #[arg(long)]
        count: Option<u64>,
    },
    /// List V4L2 devices with their formats, sizes, frame rates and controls.
    ProbeCamera {
        /// One device (default: every /dev/video* node).
        device: Option<PathBuf>,
    },
    /// Show, apply or restore the board's clocks ([power] profiles).
    Clocks {
        #[command(subcommand)]
        action: ClocksAction,
    },
    /// Validate a config file and print the resolved configuration.
    Check {
        /// The TOML config file.
        #[arg(long, short)]
        config: PathBuf,
        /// Print nothing when the config is valid (for ExecStartPre=).
        #[arg(long, short)]
        quiet: bool,
    },
    /// Detect objects in images and print one JSON line per image.
    Detect(DetectArgs),
    /// Score a model against a synthetic source's ground truth (precision, recall).
    Eval {
        #[command(flatten)]
        model: ModelArgs,
        /// Source with ground truth.
        #[arg(long, default_value = "synthetic://?width=640&height=480&fps=0&format=yuyv&seed=1")]
        source: String,
        /// Frames to score.
        #[arg(long, default_value_t = 200)]
        frames: u64,
        /// IoU needed for a match.
        #[arg(long, default_value_t = 0.5)]
        match_iou: f32,
    },
    /// Latency per stage and end to end (P50/P90/P99/max), FPS, frame age and drops: the
    /// daemon's pipeline (default), the detector frame after frame, or the engine alone.
    Bench {
        #[command(flatten)]
        model: ModelArgs,
        /// pipeline (the daemon end to end, on a private socket), detector (the chain, frame after
        /// frame, nothing dropped) or engine (the engine alone on one input: the limit).
        #[arg(long, default_value = "pipeline", value_parser = jetdetect::bench::Mode::parse)]
        mode: jetdetect::bench::Mode,
        /// Source (default: the config's; without --config, synthetic 1280x720 YUYV at 30 fps
        /// for the pipeline and unpaced for the other modes).
        #[arg(long)]
        source: Option<String>,
        /// Frames to time.
        #[arg(long, default_value_t = 300)]
        frames: u64,
        /// Warm-up frames before timing (detector and engine modes).
        #[arg(long, default_value_t = 10)]
        warmup: usize,
        /// Clients reading the socket during a pipeline run.
        #[arg(long, default_value_t = 0)]
        clients: usize,
        /// Clients that connect and never read during a pipeline run: what a hung consumer costs the others.
        #[arg(long, default_value_t = 0)]
        stalled: usize,
        /// Also run this config (same mode, source and frames), for comparison; repeatable.
        #[arg(long, value_name = "CONFIG")]
        against: Vec<PathBuf>,
        /// Draw the latency distributions of all runs into this SVG file.
        #[arg(long, value_name = "OUT.svg")]
        plot: Option<PathBuf>,
        /// Print each report as one JSON line.
        #[arg(long)]
        json: bool,
    },
    /// Record raw frames from a source into a file, for replay with file:// URIs.
    Record {
        /// Source URI, e.g. synthetic://?format=nv12 or v4l2:///dev/video0.
        #[arg(long)]
        source: String,
        /// Frames to record.
        #[arg(long, default_value_t = 30)]
        frames: u64,
        /// Output file (frames back to back, no header).
        #[arg(long)]
        out: PathBuf,
    },
    /// Write synthetic obstacle scenes as a YOLO training set (images + labels + data.yaml).
    Dataset {
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Training images.
        #[arg(long, default_value_t = 1500)]
        train: usize,
        /// Validation images.
        #[arg(long, default_value_t = 300)]
        val: usize,
        /// Random seed.
        #[arg(long, default_value_t = 2026)]
        seed: u64,
    },
}

/// `jetdetect run --clocks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ClocksBy {
    /// This process applies the profile at start and restores it on exit.
    #[value(name = "self")]
    Daemon,
    /// The service manager's steps around this process do.
    Service,
}

#[derive(Subcommand)]
enum ClocksAction {
    /// Board, frequencies, governors, temperatures, rail power, and whether clocks are pinned.
    Show(ClockArgs),
    /// Apply a profile (the originals are saved first; `clocks restore` puts them back).
    Apply(ApplyArgs),
    /// Put back the values saved by `apply` or by a daemon that did not stop cleanly.
    Restore(ClockArgs),
}

#[derive(clap::Args)]
struct ClockArgs {
    /// Config file whose [power] section to use.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Profile: dynamic, max or locked (overrides [power] profile).
    #[arg(long)]
    profile: Option<power::Profile>,
    /// Directory standing for / (a fixture tree, or a mounted image).
    #[arg(long)]
    root: Option<PathBuf>,
    /// State file (overrides [power] state_file).
    #[arg(long)]
    state_file: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ApplyArgs {
    #[command(flatten)]
    clocks: ClockArgs,
    /// As the service's ExecStartPre (systemd/jetdetect.service): what the daemon would only warn
    /// of does not fail the start. A refused write fails it only with [power] on_failure = "exit";
    /// settings that did not take and a board that is not a Jetson are warnings.
    #[arg(long)]
    service: bool,
}

#[derive(clap::Args)]
struct ModelArgs {
    /// Config file to start from (flags below override it).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// ONNX model (YOLOv5 or YOLOv8/YOLO11 layout).
    #[arg(long, short)]
    model: Option<PathBuf>,
    /// Class names file, one per line (default: the model's metadata).
    #[arg(long)]
    names: Option<PathBuf>,
    /// Confidence threshold, 0 < x < 1.
    #[arg(long)]
    conf: Option<f32>,
    /// NMS IoU threshold, 0 < x <= 1.
    #[arg(long)]
    iou: Option<f32>,
    /// Most detections per image.
    #[arg(long)]
    max_det: Option<usize>,
    /// Output layout: auto, v5 or v8.
    #[arg(long, value_parser = parse_layout)]
    layout: Option<LayoutHint>,
    /// Engine: auto, tract (pure Rust, CPU) or onnxruntime.
    #[arg(long)]
    engine: Option<EngineKind>,
    /// ONNX Runtime providers in order of preference, e.g. tensorrt,cuda,cpu.
    #[arg(long, value_delimiter = ',')]
    providers: Option<Vec<Provider>>,
    /// ONNX Runtime library (libonnxruntime.so).
    #[arg(long)]
    ort_library: Option<PathBuf>,
    /// Where preprocessing runs: cpu, gpu or dla.
    #[arg(long)]
    preprocess: Option<jetdetect::preprocess::Device>,
    /// TensorRT precision: fp16, fp32 or int8 (with the config's int8_calibration_table).
    #[arg(long)]
    precision: Option<PrecisionName>,
    /// TensorRT engine and timing cache folder ("" disables caching).
    #[arg(long)]
    trt_cache: Option<PathBuf>,
    /// Run the TensorRT engine on this DLA core (GPU fallback).
    #[arg(long)]
    dla_core: Option<u32>,
    /// Engine threads (0: the engine's default).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(clap::Args)]
struct DetectArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Images (PNG/JPEG), folders of them, or source URIs such as
    /// file://clip.yuv?width=640&height=480&format=yuyv.
    #[arg(required = true)]
    images: Vec<String>,
}

fn parse_layout(s: &str) -> Result<LayoutHint, String> {
    match s {
        "auto" => Ok(LayoutHint::Auto),
        "v5" => Ok(LayoutHint::V5),
        "v8" => Ok(LayoutHint::V8),
        _ => Err(format!("'{s}': use auto, v5 or v8")),
    }
}

impl ModelArgs {
    /// The config file (or the defaults) with the flags applied and validated.
    fn resolve(&self) -> Result<Config, Error> {
        let (mut config, text, path) = match &self.config {
            Some(p) => {
                let c = Config::load(p)?;
                (c, std::fs::read_to_string(p).unwrap_or_default(), p.clone())
            }
            None => (Config::default(), String::new(), PathBuf::from("<command line>")),
        };
        match (&self.model, &self.config) {
            (Some(m), _) => config.model.path = m.clone(),
            (None, None) => {
                return Err(Error::Other("no model: give --model FILE.onnx or --config FILE".into()))
            }
            _ => {}
        }
        if let Some(n) = &self.names {
            config.model.names = Some(n.clone());
        }
        if let Some(v) = self.conf {
            config.detect.confidence = v;
        }
        if let Some(v) = self.iou {
            config.detect.iou = v;
        }
        if let Some(v) = self.max_det {
            config.detect.max_detections = v;
        }
        if let Some(v) = self.layout {
            config.model.layout = v;
        }
        let e = &mut config.engine;
        if let Some(v) = self.engine {
            e.kind = v;
        }
        if let Some(v) = &self.providers {
            e.providers = v.clone();
        }
        if let Some(v) = &self.ort_library {
            e.library = v.clone();
        }
        if let Some(name) = self.precision {
            let table = match &e.tensorrt.precision {
                Precision::Int8 { table } => Some(table.clone()),
                _ => None,
            };
            e.tensorrt.precision = Precision::new(name, table).map_err(|message| {
                jetdetect::config::ConfigError { file: path.clone(), line: None, message }
            })?;
        }
        if let Some(v) = &self.trt_cache {
            e.tensorrt.cache_dir = v.clone();
        }
        if let Some(v) = self.dla_core {
            e.tensorrt.dla_core = Some(v);
        }
        if let Some(v) = self.threads {
            e.threads = v;
        }
        if let Some(v) = self.preprocess {
            config.preprocess.device = v;
        }
        config.validate(&text, &path)?;
        Ok(config)
    }
}

/// Expands the `detect` arguments: folders into their images, URIs kept as they are.
fn expand_inputs(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for a in args {
        let p = Path::new(a);
        if !a.contains("://") && p.is_dir() {
            let mut found: Vec<String> = std::fs::read_dir(p)
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
                })
                .map(|p| p.display().to_string())
                .collect();
            found.sort();
            if found.is_empty() {
                out.push(a.clone()); // reported as an error when opened
            }
            out.extend(found);
        } else {
            out.push(a.clone());
        }
    }
    out
}

fn detections_json(
    detector: &Detector,
    frame: &Frame,
    dets: &[jetdetect::yolo::Detection],
) -> serde_json::Value {
    let list: Vec<_> = dets
        .iter()
        .map(|d| {
            json!({
                "class_id": d.class_id,
                "class": detector.names().name(d.class_id),
                "score": d.score,
                "x1": d.x1, "y1": d.y1, "x2": d.x2, "y2": d.y2,
            })
        })
        .collect();
    json!({ "image": frame.label, "width": frame.width, "height": frame.height, "detections": list })
}

fn cmd_detect(args: &DetectArgs) -> Result<bool, Error> {
    let config = args.model.resolve()?;
    let mut detector = Detector::from_config(&config)?;
    log::info!(
        "{}: {} ({} classes from {})",
        detector.engine().describe(),
        detector.layout(),
        detector.names().len(),
        detector.names().origin
    );
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut all_ok = true;
    let mut frame = Frame::empty();
    for input in expand_inputs(&args.images) {
        let mut emit = |frame: &Frame, detector: &mut Detector| -> Result<(), Error> {
            let dets = detector.detect(frame)?.to_vec();
            let line = detections_json(detector, frame, &dets);
            writeln!(out, "{line}").map_err(|e| Error::Other(format!("stdout: {e}")))
        };
        let result = if input.contains("://") {
            source::open(&input).map_err(Error::from).and_then(|mut src| {
                while src.next_frame(&mut frame)? {
                    emit(&frame, &mut detector)?;
                }
                Ok(())
            })
        } else {
            load_image(Path::new(&input), &mut frame)
                .map_err(Error::from)
                .and_then(|_| emit(&frame, &mut detector))
        };
        if let Err(e) = result {
            eprintln!("jetdetect: {input}: {e}");
            all_ok = false;
        }
    }
    Ok(all_ok)
}

fn cmd_eval(model: &ModelArgs, uri: &str, frames: u64, match_iou: f32) -> Result<bool, Error> {
    let config = model.resolve()?;
    let mut detector = Detector::from_config(&config)?;
    let mut src = source::open(uri)?;
    let mut frame = Frame::empty();
    let mut counts = Counts::default();
    let mut n = 0;
    let mut ms = [0f64; 3];
    detector.warm_up(2)?;
    while n < frames && src.next_frame(&mut frame)? {
        let dets = detector.detect(&frame)?;
        counts.add(match_frame(dets, &frame.truth, match_iou, 0.5));
        let t = detector.times();
        for (acc, d) in ms.iter_mut().zip([t.preprocess, t.inference, t.decode]) {
            *acc += d.as_secs_f64() * 1e3;
        }
        n += 1;
    }
    let mean = |v: f64| (v / n.max(1) as f64 * 1000.0).round() / 1000.0;
    if counts.tp + counts.fn_ == 0 {
        return Err(Error::Other(format!("{uri}: the source has no ground truth to score against")));
    }
    println!(
        "{}",
        json!({
            "source": uri, "frames": n, "tp": counts.tp, "fp": counts.fp, "fn": counts.fn_,
            "precision": counts.precision(), "recall": counts.recall(),
            "mean_ms": {"preprocess": mean(ms[0]), "inference": mean(ms[1]), "decode": mean(ms[2])},
        })
    );
    Ok(true)
}

fn cmd_record(uri: &str, frames: u64, out: &Path) -> Result<bool, Error> {
    let mut src = source::open(uri)?;
    let io = |e: std::io::Error| Error::Other(format!("{}: {e}", out.display()));
    let mut file = std::io::BufWriter::new(std::fs::File::create(out).map_err(io)?);
    let mut frame = Frame::empty();
    let mut n = 0;
    let mut geometry = None;
    while n < frames && src.next_frame(&mut frame)? {
        let g = (frame.width, frame.height, frame.format);
        if *geometry.get_or_insert(g) != g {
            return Err(Error::Other(format!(
                "{uri}: frame {n} is {}x{} {}, unlike the first; a raw file holds one geometry",
                g.0, g.1, g.2
            )));
        }
        file.write_all(&frame.data).map_err(io)?;
        n += 1;
    }
    file.flush().map_err(io)?;
    match geometry {
        Some((w, h, f)) => {
            eprintln!(
                "wrote {n} frames; replay with file://{}?width={w}&height={h}&format={f}",
                out.display()
            );
            Ok(true)
        }
        None => Err(Error::Other(format!("{uri}: the source delivered no frames"))),
    }
}

fn cmd_run(
    config: &Path,
    source: Option<String>,
    socket: Option<PathBuf>,
    echo: bool,
    clocks: ClocksBy,
) -> Result<bool, Error> {
    let mut cfg = Config::load(config)?;
    if let Some(s) = source {
        cfg.source.uri = s;
    }
    if let Some(s) = socket {
        cfg.output.socket = s;
    }
    let text = std::fs::read_to_string(config).unwrap_or_default();
    cfg.validate(&text, config)?;
    let stop = Arc::new(AtomicBool::new(false));
    watch_signals(stop.clone())?;
    let mut options = RunOptions {
        clocks: match clocks {
            ClocksBy::Daemon => power::ClockControl::Daemon,
            ClocksBy::Service => power::ClockControl::Service,
        },
        ..RunOptions::default()
    };
    if echo {
        options.on_message = Some(Box::new(|line: &[u8], _| {
            if let Some(text) = serde_json::from_slice(line).ok().as_ref().and_then(client::format_human) {
                println!("{text}");
            }
        }));
    }
    pipeline::run(&cfg, options, stop)?;
    Ok(true)
}

/// SIGTERM and SIGINT stop the daemon cleanly (clients get a `bye`, clocks are
/// restored). A second one while it stops restores the clocks and exits at once.
fn watch_signals(stop: Arc<AtomicBool>) -> Result<(), Error> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
        .map_err(|e| Error::Other(format!("cannot install signal handlers: {e}")))?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut received = 0;
            for sig in signals.forever() {
                let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
                received += 1;
                if received == 1 {
                    log::info!("{name}: stopping (send it again to exit at once)");
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                } else {
                    log::warn!("{name} again: restoring clocks and exiting now");
                    jetdetect::power::session::restore_active();
                    std::process::exit(128 + sig);
                }
            }
        })
        .map_err(|e| Error::Other(format!("cannot start the signal thread: {e}")))?;
    Ok(())
}

fn cmd_watch(
    socket: Option<PathBuf>,
    config: Option<PathBuf>,
    json: bool,
    count: Option<u64>,
) -> Result<bool, Error> {
    let path = match (socket, config) {
        (Some(s), _) => s,
        (None, Some(c)) => Config::load(&c)?.output.socket,
        (None, None) => PathBuf::from(jetdetect::config::DEFAULT_SOCKET),
    };
    let stream = std::os::unix::net::UnixStream::connect(&path).map_err(|e| {
        Error::Other(format!(
            "{}: cannot connect: {e} (is the daemon running? `systemctl status jetdetect`, or give --socket / --config)",
            path.display()
        ))
    })?;
    let mut seen = 0u64;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::BufRead::lines(std::io::BufReader::new(stream)) {
        let line = line.map_err(|e| Error::Other(format!("{}: {e}", path.display())))?;
        let msg: serde_json::Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("jetdetect: {}: unreadable message ({e}): {line}", path.display());
                continue;
            }
        };
        let text = if json { Some(line.clone()) } else { client::format_human(&msg) };
        if let Some(t) = text {
            if writeln!(out, "{t}").is_err() {
                return Ok(true); // stdout closed (e.g. piped into head)
            }
        }
        if msg["type"] == "detections" {
            seen += 1;
            if count.is_some_and(|n| seen >= n) {
                return Ok(true);
            }
        }
        if msg["type"] == "bye" {
            return Ok(true);
        }
    }
    eprintln!("jetdetect: {}: the daemon closed the connection", path.display());
    Ok(count.is_none())
}

fn cmd_clocks(action: ClocksAction) -> Result<bool, Error> {
    use jetdetect::power::{nvpmodel::ModeContext, telemetry::Telemetry, Board, Discovered, StateFile};
    let (ClocksAction::Show(args)
    | ClocksAction::Apply(ApplyArgs { clocks: args, .. })
    | ClocksAction::Restore(args)) = &action;
    let mut cfg = match &args.config {
        Some(p) => Config::load(p)?.power,
        None => power::PowerConfig::default(),
    };
    if let Some(p) = args.profile {
        cfg.profile = p;
    }
    if let Some(r) = &args.root {
        cfg.root = r.clone();
        // A tree keeps its own state: never the host's state directory.
        if args.state_file.is_none() {
            cfg.state_file = r.join("var/lib/jetdetect/clocks.state");
        }
    }
    if let Some(s) = &args.state_file {
        cfg.state_file = s.clone();
    }
    let perr = |e: power::PowerError| Error::Other(e.0);
    if !cfg.root.is_dir() {
        return Err(Error::Other(format!(
            "--root {}: not a directory (it stands for /)",
            cfg.root.display()
        )));
    }
    let board = Board::detect(&cfg.root);
    let disc = Discovered::scan(&cfg.root);
    let state = StateFile::new(&cfg.state_file);
    match action {
        ClocksAction::Show(_) => {
            let t = Telemetry::sample(&disc);
            println!("board: {board}");
            let modes = ModeContext::read(&cfg.root);
            match &modes.current {
                Some(m) => println!(
                    "nvpmodel: mode {} ({} modes: {})",
                    m.label(),
                    modes.modes.len(),
                    modes.modes.iter().map(|m| m.label()).collect::<Vec<_>>().join(", ")
                ),
                None if modes.modes.is_empty() => println!("nvpmodel: not installed"),
                None => println!("nvpmodel: current mode unknown (nvpmodel -q did not answer)"),
            }
            if let Some(g) = &disc.gpu {
                let [cur, lo, hi] = t.gpu_mhz.unwrap_or_default();
                println!(
                    "gpu: {cur:.1} MHz (min {lo:.1}, max {hi:.1} = the mode's ceiling), governor {}, load {}, node {}",
                    t.gpu_governor.as_deref().unwrap_or("?"),
                    t.gpu_load_pct.map(|l| format!("{l:.1}%")).unwrap_or_else(|| "?".into()),
                    g.dir.display()
                );
            } else if let Some(r) = &disc.gpu_unregistered {
                println!(
                    "gpu: rail-gated, no devfreq node until powered ({}; `clocks apply` powers it up once)",
                    r.display()
                );
            } else {
                println!("gpu: no devfreq node found");
            }
            let cpus: Vec<String> = t.cpu_mhz.iter().map(|f| format!("{f:.0}")).collect();
            let ceilings: Vec<String> = disc
                .cpus
                .iter()
                .map(|c| {
                    power::read_value(&c.cpufreq.join("scaling_max_freq"))
                        .ok()
                        .and_then(|v| v.parse::<f64>().ok())
                        .map(|k| format!("{:.0}", k / 1e3))
                        .unwrap_or_else(|| "?".into())
                })
                .collect();
            println!(
                "cpu: {} cores online, MHz [{}], ceilings MHz [{}], governor {}",
                disc.cpus.len(),
                cpus.join(" "),
                ceilings.join(" "),
                t.cpu_governor.as_deref().unwrap_or("?")
            );
            if let Some(e) = t.emc_mhz {
                let cap = match &disc.emc {
                    Some(power::discover::Emc::Bpmp { cap: Some(c), .. }) => power::read_value(c)
                        .ok()
                        .and_then(|v| v.parse::<f64>().ok())
                        .filter(|&v| v > 0.0)
                        .map(|v| format!(" (ceiling {:.0} MHz, emc_iso_cap)", v / 1e6)),
                    _ => None,
                };
                println!("emc: {e:.0} MHz{}", cap.unwrap_or_default());
            }
            if let Some(f) = &disc.fan {
                let driver = match (&f.service, &f.temp_control) {
                    (Some(s), _) => format!(", driven by {s}.service while it runs"),
                    (None, Some(_)) => ", driven by the kernel while temp_control is 1".into(),
                    _ => String::new(),
                };
                let pwm = power::read_value(&f.pwm).unwrap_or_else(|_| "?".into());
                println!("fan: pwm {pwm}{driver}");
            }
            let temps: Vec<String> = t.temp_c.iter().map(|(k, v)| format!("{k} {v:.1}C")).collect();
            println!(
                "temperatures: {}",
                if temps.is_empty() { "none found".into() } else { temps.join(", ") }
            );
            let rails: Vec<String> = t.power_mw.iter().map(|(k, v)| format!("{k} {v:.0} mW")).collect();
            println!(
                "power: {}",
                if rails.is_empty() { "no INA3221 rails found".into() } else { rails.join(", ") }
            );
            println!(
                "clocks pinned: {}{}",
                if t.pinned { "yes" } else { "no" },
                if t.throttling {
                    format!("; THROTTLING: {}", t.throttle_reasons.join("; "))
                } else {
                    String::new()
                }
            );
            println!(
                "state file: {} ({})",
                state.path.display(),
                if state.exists() {
                    "clocks changed by jetdetect"
                } else {
                    "none: clocks as the system set them"
                }
            );
            Ok(true)
        }
        ClocksAction::Apply(ApplyArgs { service, .. }) => {
            if !board.is_jetson() && args.root.is_none() {
                if service {
                    // The daemon would run with the profile ignored; so does the service.
                    eprintln!("jetdetect: [power] profile '{}' ignored: {board}", cfg.profile);
                    return Ok(true);
                }
                return Err(Error::Other(format!(
                    "{board}; refusing to write clocks (give --root DIR to work on a tree)"
                )));
            }
            let done = match power::engage(&cfg, &state) {
                Ok(done) => done,
                Err(power::Failure::System(e)) if service && cfg.on_failure == power::OnFailure::Continue => {
                    eprintln!(
                        "jetdetect: [power] profile '{}' not applied: {e}; the service runs with the clocks \
                         as they are ([power] on_failure = \"exit\" makes this stop it)",
                        cfg.profile
                    );
                    return Ok(true);
                }
                Err(f) => return Err(perr(f.error().clone())),
            };
            match &done.stale {
                Some(Ok(n)) => eprintln!("restored {n} values left by an earlier run first"),
                Some(Err(e)) => eprintln!("jetdetect: {e}"),
                None => {}
            }
            if let Some(m) = &done.mode {
                println!("nvpmodel = {}", m.label());
            }
            if let Some(r) = &done.applied.reboot_needed {
                eprintln!("jetdetect: {r}");
            }
            if done.plan.is_empty() && done.mode.is_none() {
                println!("profile '{}': nothing to change", cfg.profile);
                return Ok(true);
            }
            for unit in &done.applied.stopped {
                println!("stopped {unit}.service (started again by `clocks restore`)");
            }
            for w in &done.plan.writes {
                println!("{} = {}", power::profile::shown(&cfg.root, &w.path), w.value);
            }
            for (p, want, got) in &done.applied.mismatches {
                eprintln!(
                    "jetdetect: {} did not take: wanted {want}, reads {got}",
                    power::profile::shown(&cfg.root, p)
                );
            }
            println!(
                "profile '{}' applied ({} writes); originals saved in {}",
                cfg.profile,
                done.applied.written,
                state.path.display()
            );
            // The daemon warns of settings that did not take and runs on; as its ExecStartPre, so does this.
            Ok(service || done.applied.mismatches.is_empty())
        }
        ClocksAction::Restore(_) => {
            if !state.exists() {
                println!("nothing to restore: {} does not exist", state.path.display());
                return Ok(true);
            }
            let n = state.restore(&cfg.root, &disc).map_err(perr)?;
            println!("restored {n} values from {}", state.path.display());
            Ok(true)
        }
    }
}

fn run(cli: Cli) -> Result<bool, Error> {
    match cli.command {
        Command::Run { config, source, socket, echo, clocks } => {
            cmd_run(&config, source, socket, echo, clocks)
        }
        Command::Watch { socket, config, json, count } => cmd_watch(socket, config, json, count),
        Command::Check { config, quiet } => {
            let c = Config::load(&config)?;
            let text = std::fs::read_to_string(&config).unwrap_or_default();
            c.check_files(&config, &text)?;
            if !quiet {
                print!("# {}: OK\n{}", config.display(), c.to_toml());
            }
            Ok(true)
        }
        Command::Detect(args) => cmd_detect(&args),
        Command::Clocks { action } => cmd_clocks(action),
        Command::ProbeCamera { device } => {
            let text = jetdetect::source::v4l2::probe(device.as_deref()).map_err(Error::Other)?;
            print!("{text}");
            Ok(true)
        }
        Command::Eval { model, source, frames, match_iou } => cmd_eval(&model, &source, frames, match_iou),
        Command::Bench { model, mode, source, frames, warmup, clients, stalled, against, plot, json } => {
            let options = jetdetect::bench::BenchOptions {
                mode,
                source,
                frames,
                warmup,
                clients,
                stalled,
                label: String::new(),
            };
            cmd_bench(&model, options, &against, plot.as_deref(), json)
        }
        Command::Record { source, frames, out } => cmd_record(&source, frames, &out),
        Command::Dataset { out, train, val, seed } => {
            let n = jetdetect::dataset::write_dataset(&out, train, val, seed).map_err(Error::Other)?;
            eprintln!("wrote {train} + {val} images with {n} labelled objects to {}", out.display());
            Ok(true)
        }
    }
}

fn cmd_bench(
    model: &ModelArgs,
    options: jetdetect::bench::BenchOptions,
    against: &[PathBuf],
    plot: Option<&Path>,
    json: bool,
) -> Result<bool, Error> {
    use jetdetect::bench::{self, BenchOptions, Mode};
    let mode = options.mode;
    let source = options.source.clone().or_else(|| {
        model.config.is_none().then(|| {
            let fps = if mode == Mode::Pipeline { 30 } else { 0 };
            format!("synthetic://?width=1280&height=720&fps={fps}&format=yuyv&seed=1")
        })
    });
    let label = |p: Option<&PathBuf>| {
        p.and_then(|p| p.file_stem())
            .map_or_else(|| "command line".to_string(), |s| s.to_string_lossy().into())
    };
    // A plot that cannot be written is an error now, not after the runs.
    if let Some(dir) = plot.and_then(|p| p.parent()).filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
        return Err(Error::Other(format!(
            "--plot {}: the folder {} does not exist: create it or write the plot elsewhere",
            plot.unwrap_or(dir).display(),
            dir.display()
        )));
    }
    let mut runs = vec![(label(model.config.as_ref()), model.resolve()?)];
    for path in against {
        runs.push((label(Some(path)), Config::load(path)?));
    }
    let mut reports = Vec::new();
    for (label, config) in runs {
        let options = BenchOptions { source: source.clone(), label, ..options.clone() };
        let report = bench::run(&config, &options)?;
        if json {
            println!("{}", serde_json::to_string(&report).map_err(|e| Error::Other(e.to_string()))?);
        } else {
            println!("{}", bench::format_table(&report));
        }
        reports.push(report);
    }
    if reports.len() > 1 && !json {
        println!(
            "{:<24} {:>10} {:>10} {:>10} {:>8}   (ms, {})",
            "run",
            "p50",
            "p99",
            "max",
            "FPS",
            mode.name()
        );
        for r in &reports {
            let p = r.stages.last().map(|(_, p)| *p).unwrap_or_default();
            println!("{:<24} {:>10.3} {:>10.3} {:>10.3} {:>8.1}", r.label, p.p50, p.p99, p.max, r.fps);
        }
    }
    if let Some(path) = plot {
        bench::plot(&reports, path)?;
        eprintln!("jetdetect: plot written to {}", path.display());
    }
    Ok(true)
}

fn init_logging(daemon: bool) {
    let mut b = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(if daemon {
        "info"
    } else {
        "warn"
    }));
    // Under systemd the journal stamps every line itself.
    if std::env::var_os("JOURNAL_STREAM").is_some() || std::env::var_os("INVOCATION_ID").is_some() {
        b.format_timestamp(None);
    }
    b.init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let daemon = matches!(cli.command, Command::Run { .. });
    if !daemon {
        // One-shot commands end quietly when their output pipe closes (`| head`), like
        // other Unix tools. The daemon keeps SIGPIPE ignored: a client that goes away
        // must be an error on that socket, not the end of the process.
        // SAFETY: setting a signal disposition before any thread is started.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    init_logging(daemon);
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("jetdetect: {e}");
            ExitCode::FAILURE
        }
    }
}
