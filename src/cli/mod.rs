//! The command line's commands, one file each; `main.rs` parses and dispatches. Each file
//! holds its command's arguments (a clap `Args` struct) and a `run` that works through the
//! library and prints. What the commands share is here: the model flags and logging.

pub mod bench;
pub mod check;
pub mod clocks;
pub mod dataset;
pub mod detect;
pub mod eval;
pub mod fleet;
pub mod generate;
pub mod probe_camera;
pub mod record;
pub mod run;
pub mod snapshot;
pub mod watch;

use std::path::PathBuf;

use jetdetect::config::Config;
use jetdetect::engine::onnxruntime::{NoCalibrationTable, Precision, PrecisionName};
use jetdetect::engine::{EngineKind, Provider};
use jetdetect::yolo::LayoutHint;
use jetdetect::Error;

#[derive(clap::Args)]
pub struct ModelArgs {
    /// Config file to start from (flags below override it).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// ONNX model (YOLOv5 or YOLOv8/YOLO11 layout).
    #[arg(long, short)]
    pub model: Option<PathBuf>,
    /// Class names file, one per line (default: the model's metadata).
    #[arg(long)]
    pub names: Option<PathBuf>,
    /// Confidence threshold, 0 < x < 1.
    #[arg(long)]
    pub conf: Option<f32>,
    /// NMS IoU threshold, 0 < x <= 1.
    #[arg(long)]
    pub iou: Option<f32>,
    /// Most detections per image.
    #[arg(long)]
    pub max_det: Option<usize>,
    /// Output layout: auto (from the model's metadata and output shape), v5, v8 or end2end.
    #[arg(long)]
    pub layout: Option<LayoutHint>,
    /// Engine: auto, tract (pure Rust, CPU) or onnxruntime.
    #[arg(long)]
    pub engine: Option<EngineKind>,
    /// ONNX Runtime providers in order of preference, e.g. tensorrt,cuda,cpu.
    #[arg(long, value_delimiter = ',')]
    pub providers: Option<Vec<Provider>>,
    /// ONNX Runtime library (libonnxruntime.so).
    #[arg(long)]
    pub ort_library: Option<PathBuf>,
    /// Where preprocessing runs: cpu, gpu or dla.
    #[arg(long)]
    pub preprocess: Option<jetdetect::preprocess::Device>,
    /// TensorRT precision: fp16, fp32 or int8 (with the config's int8_calibration_table).
    #[arg(long)]
    pub precision: Option<PrecisionName>,
    /// TensorRT engine and timing cache folder ("" disables caching).
    #[arg(long)]
    pub trt_cache: Option<PathBuf>,
    /// Run the TensorRT engine on this DLA core (GPU fallback).
    #[arg(long)]
    pub dla_core: Option<u32>,
    /// Engine threads (0: the engine's default).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl ModelArgs {
    /// The config file (or the defaults) with the flags applied, validated once.
    pub fn resolve(&self) -> Result<Config, Error> {
        if self.model.is_none() && self.config.is_none() {
            return Err(Error::Command("no model: give --model FILE.onnx or --config FILE".into()));
        }
        let adjust = |c: &mut Config| self.apply(c);
        Ok(match &self.config {
            Some(p) => Config::load_with(p, adjust)?,
            None => Config::defaults_with(adjust)?,
        })
    }

    /// Puts the flags given over `config`'s values.
    fn apply(&self, config: &mut Config) -> Result<(), NoCalibrationTable> {
        if let Some(m) = &self.model {
            config.model.path = m.clone();
        }
        if let Some(n) = &self.names {
            config.model.names = Some(n.clone());
        }
        let d = &mut config.detect;
        d.confidence = self.conf.unwrap_or(d.confidence);
        d.iou = self.iou.unwrap_or(d.iou);
        d.max_detections = self.max_det.unwrap_or(d.max_detections);
        config.model.layout = self.layout.unwrap_or(config.model.layout);
        config.preprocess.device = self.preprocess.unwrap_or(config.preprocess.device);
        let e = &mut config.engine;
        e.kind = self.engine.unwrap_or(e.kind);
        if let Some(v) = &self.providers {
            e.providers = v.clone();
        }
        if let Some(v) = &self.ort_library {
            e.library = v.clone();
        }
        e.threads = self.threads.unwrap_or(e.threads);
        let t = &mut e.tensorrt;
        if let Some(name) = self.precision {
            let table = match &t.precision {
                Precision::Int8 { table } => Some(table.clone()),
                _ => None,
            };
            t.precision = Precision::new(name, table)?;
        }
        if let Some(v) = &self.trt_cache {
            t.cache_dir = v.clone();
        }
        t.dla_core = self.dla_core.or(t.dla_core);
        Ok(())
    }
}

/// Logs to stderr: `info` for the daemon, `warn` for the one-shot commands (`RUST_LOG` overrides).
/// The DDS stack under `[output.ros2]` stays quiet unless `RUST_LOG` names it
/// (`RUST_LOG=info,rustdds=warn`): RustDDS warns about peers many times a second (one reachable
/// only over loopback, an interface without multicast) and logs errors at every clean stop
/// (leaving a multicast group it never joined, removing writers after its event loop ended);
/// what matters to the user (a participant that cannot start, a failed publish) jetdetect
/// reports itself. ros2-client's own errors are kept.
pub fn init_logging(daemon: bool) {
    let mut filter =
        std::env::var("RUST_LOG").unwrap_or_else(|_| if daemon { "info" } else { "warn" }.into());
    for (module, level) in [("rustdds", "off"), ("ros2_client", "error")] {
        if !filter.contains(module) {
            filter.push_str(&format!(",{module}={level}"));
        }
    }
    let mut b = env_logger::Builder::new();
    b.parse_filters(&filter);
    // Under systemd the journal stamps every line itself.
    if std::env::var_os("JOURNAL_STREAM").is_some() || std::env::var_os("INVOCATION_ID").is_some() {
        b.format_timestamp(None);
    }
    b.init();
}
