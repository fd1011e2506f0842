//! The `jetdetect` command line: parses the arguments and hands each command to its file
//! under `cli/`, which works through the library.

mod cli;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "jetdetect",
    version,
    about = "Low, steady-latency YOLO obstacle detection for NVIDIA Jetson",
    long_about = "Low, steady-latency YOLO obstacle detection for NVIDIA Jetson.\n\n\
        jetdetect grabs the newest frame from each camera (V4L2, CSI through Argus, RTSP, \
        files or a synthetic scene), letterboxes it on the CPU, GPU or DLA, runs a YOLOv5 or \
        YOLOv8/YOLO11 ONNX model (TensorRT FP16 through ONNX Runtime where installed, a built-in \
        CPU engine otherwise), and publishes every frame's detections with timestamps and \
        per-stage latency on a UNIX socket. It pins the board's clocks from a [power] profile \
        and restores them on exit. As a service it runs `jetdetect run` under systemd; the \
        other commands inspect cameras, clocks, configs and models."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: capture, detect and publish on the UNIX socket until stopped.
    Run(cli::run::Args),
    /// Connect to a running daemon and print what it publishes.
    Watch(cli::watch::Args),
    /// List V4L2 devices with their formats, sizes, frame rates and controls.
    ProbeCamera(cli::probe_camera::Args),
    /// Show, apply or restore the board's clocks ([power] profiles).
    Clocks {
        #[command(subcommand)]
        action: cli::clocks::Action,
    },
    /// Validate a config file and print the resolved configuration.
    Check(cli::check::Args),
    /// Detect objects in images and print one JSON line per image.
    Detect(cli::detect::Args),
    /// Score a model against a synthetic source's ground truth (precision, recall).
    Eval(cli::eval::Args),
    /// Latency per stage and end to end (P50/P90/P99/max), FPS, frame age and drops: the
    /// daemon's pipeline (default), the detector frame after frame, or the engine alone.
    Bench(cli::bench::Args),
    /// Record raw frames from a source into a file, for replay with file:// URIs.
    Record(cli::record::Args),
    /// Write synthetic obstacle scenes as a YOLO training set (images + labels + data.yaml).
    Dataset(cli::dataset::Args),
    /// Save the newest frame of a running daemon as JPEG, with its boxes drawn (or --raw),
    /// through its live view server ([view] enabled).
    Snapshot(cli::snapshot::Args),
    /// Every robot on an MQTT broker in one live table (state, FPS, p99, temperature,
    /// throttling, danger zones, last seen); --json for scripts.
    Fleet(cli::fleet::Args),
    /// Write the man pages or a shell's completion script (bash, zsh, fish) into a folder.
    Generate(cli::generate::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let daemon = matches!(cli.command, Command::Run(_));
    if !daemon {
        // One-shot commands end quietly when their output pipe closes (`| head`), like
        // other Unix tools. The daemon keeps SIGPIPE ignored: a client that goes away
        // must be an error on that socket, not the end of the process.
        // SAFETY: setting a signal disposition before any thread is started.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    cli::init_logging(daemon);
    let result = match cli.command {
        Command::Run(a) => cli::run::run(a),
        Command::Watch(a) => cli::watch::run(a),
        Command::ProbeCamera(a) => cli::probe_camera::run(a),
        Command::Clocks { action } => cli::clocks::run(action),
        Command::Check(a) => cli::check::run(a),
        Command::Detect(a) => cli::detect::run(a),
        Command::Eval(a) => cli::eval::run(a),
        Command::Bench(a) => cli::bench::run(a),
        Command::Record(a) => cli::record::run(a),
        Command::Dataset(a) => cli::dataset::run(a),
        Command::Fleet(a) => cli::fleet::run(a),
        Command::Snapshot(a) => cli::snapshot::run(a),
        Command::Generate(a) => cli::generate::run(a, Cli::command()),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("jetdetect: {e}");
            ExitCode::FAILURE
        }
    }
}
