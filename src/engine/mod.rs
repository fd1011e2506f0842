//! Inference engines: a model file in, a tensor out.
//!
//! An [`Engine`] owns its input and output buffers, allocated once when the
//! model is loaded: the preprocessing stage writes into [`Engine::input_mut`],
//! [`Engine::run`] returns the raw output tensor, and the YOLO decoder reads it.
//! Engines know nothing about cameras or boxes. A new backend (ONNX Runtime,
//! TensorRT) is a new module implementing the trait plus one arm in [`open`].

pub mod calibration;
pub mod dla;
pub mod onnx_file;
pub mod onnxruntime;
pub mod tract;
pub mod trt_log;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::named::UnknownName;
use onnxruntime::Precision;

/// `[engine]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// `auto` (ONNX Runtime when its library is found, else tract), `tract` (pure Rust,
    /// CPU, no library) or `onnxruntime` (TensorRT / CUDA / CPU providers).
    pub kind: EngineKind,
    /// ONNX Runtime library; empty: `ORT_DYLIB_PATH`, then the usual JetPack and system places.
    pub library: PathBuf,
    /// ONNX Runtime execution providers in order of preference: `tensorrt`, `cuda`, `cpu`.
    pub providers: Vec<Provider>,
    /// Intra-op threads for ONNX Runtime (0: its default).
    pub threads: usize,
    /// With several cameras and a model whose batch axis is dynamic: the most cameras' frames
    /// one run takes (1..=16; 1: one frame per run, cameras in turn; 0: the engine's measured
    /// choice, 4 for ONNX Runtime and 1 for tract).
    pub max_batch: usize,
    /// `[engine.tensorrt]`
    pub tensorrt: onnxruntime::TensorRtOptions,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            kind: EngineKind::Auto,
            library: PathBuf::new(),
            providers: Provider::ALL.to_vec(),
            threads: 0,
            max_batch: 0,
            tensorrt: Default::default(),
        }
    }
}

impl EngineConfig {
    /// Checks the section's own values; `Err((key, message))` names the key (a dotted key is in
    /// a sub-table).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.providers.is_empty() {
            return Err(("providers", "must list at least one of tensorrt, cuda, cpu".into()));
        }
        let t = &self.tensorrt;
        if t.dla_core.is_some() && t.precision == Precision::Fp32 {
            return Err(("tensorrt.precision", "\"fp32\" cannot run on the DLA, which computes in FP16 and INT8 only: use \"fp16\" (or \"int8\"), \
                 or remove dla_core to run FP32 on the GPU"
                    .into(),
            ));
        }
        if t.cuda_graph {
            return Err(("tensorrt.cuda_graph", "CUDA graphs need the model's input and output bound to fixed device buffers (ONNX Runtime \
                 captures the run once and replays it), but jetdetect binds the output to host memory, where \
                 the decoder reads it: remove cuda_graph (TensorRT's engine runs at the same speed without it; \
                 the graph only saves kernel-launch time)"
                    .into(),
            ));
        }
        if t.builder_optimization_level > 5 {
            return Err((
                "tensorrt.builder_optimization_level",
                format!("{} is out of range: allowed 0 to 5", t.builder_optimization_level),
            ));
        }
        if self.max_batch > 16 {
            return Err((
                "max_batch",
                format!(
                    "{} is out of range: allowed 0 (the engine's choice) to 16 (1: one frame per run)",
                    self.max_batch
                ),
            ));
        }
        Ok(())
    }

    /// Checks the files the section names that the engine will read at start: the INT8
    /// calibration table (read and checked as TensorRT will take it). `check` and `run` both
    /// call it, through the config.
    pub fn check_files(&self) -> Result<(), (&'static str, String)> {
        if let Precision::Int8 { table } = &self.tensorrt.precision {
            calibration::read(table).map_err(|e| ("tensorrt.int8_calibration_table", e.to_string()))?;
        }
        Ok(())
    }
}

named_enum! {
    /// `[engine] kind` and `--engine`: what runs the model.
    pub enum EngineKind {
        /// ONNX Runtime when its library is found, else tract ([`open`]).
        Auto = "auto",
        /// tract: pure Rust, on the CPU, nothing to install.
        Tract = "tract",
        /// ONNX Runtime with its TensorRT, CUDA and CPU providers.
        OnnxRuntime = "onnxruntime",
    }
}

impl FromStr for EngineKind {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        Self::from_name(s).ok_or_else(|| {
            UnknownName::new("[engine] kind: ", s, " is not an engine of this build", Self::names(", "))
        })
    }
}

named_enum! {
    /// `[engine] providers` and `--providers`: ONNX Runtime's execution providers.
    pub enum Provider {
        /// TensorRT (Jetson's GPU and DLA cores).
        TensorRt = "tensorrt",
        /// CUDA kernels on the GPU.
        Cuda = "cuda",
        /// ONNX Runtime's own CPU kernels (MLAS).
        Cpu = "cpu",
    }
}

impl FromStr for Provider {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        Self::from_name(s).ok_or_else(|| {
            UnknownName::new("[engine] providers: ", s, " is not a provider", Self::names(", "))
        })
    }
}

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The model file could not be read.
    #[error("{}: cannot read the model: {source} (check [model] path in the config or --model)", path.display())]
    Read {
        /// The model file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// ONNX Runtime refused: `context` names the model or library and what was being done.
    #[error("{context}: {source}")]
    Ort {
        /// What was being done, with the file.
        context: String,
        /// ONNX Runtime's error.
        source: ort::Error,
    },
    /// tract refused: `context` names the model and what was being done.
    #[error("{context}: {source:#}")]
    Tract {
        /// What was being done, with the file.
        context: String,
        /// tract's error, with its causes.
        #[source]
        source: tract_onnx::prelude::TractError,
    },
    /// The INT8 calibration table cannot be used.
    #[error("{0}")]
    Calibration(#[from] calibration::CalibrationError),
    /// A DLA core that this board or TensorRT release does not have.
    #[error("{0}")]
    Dla(#[from] onnxruntime::DlaUnavailable),
    /// The ONNX Runtime library could not be loaded: `message` says why in the user's terms
    /// (too old, not ONNX Runtime, a missing dependency) and what to do.
    #[error("{message}")]
    Load {
        /// The explanation, naming the library.
        message: String,
        /// `ort`'s loader error.
        #[source]
        source: ort::LoadDynamicError,
    },
    /// A check of jetdetect's own found the model, library or configuration unusable (its
    /// inputs, a fixed size, a provider the stage needs); no library error lies under it.
    #[error("{0}")]
    Model(String),
    /// A check of jetdetect's own failed while running (a frame or output of the wrong size);
    /// errors of the engines themselves are [`EngineError::Ort`] and [`EngineError::Tract`].
    #[error("{0}")]
    Run(String),
}

/// A model whose image input is not `float32`: jetdetect writes `float32` input (and reads
/// `float32` output). ultralytics' `quantize=16` exported on a GPU makes both `float16`; on the
/// CPU it keeps them `float32` (`keep_io_types`) and only the weights are FP16.
pub(crate) fn input_not_f32(path: &Path, found: &str) -> EngineError {
    EngineError::Model(format!(
        "{}: the model's input is {found}, not float32: jetdetect feeds float32 images. An ultralytics \
         export with quantize=16 (half) made on a GPU has float16 input and output: export it on the CPU \
         (device=cpu keeps float32 input and output), or export in FP32 and let TensorRT build FP16 \
         ([engine.tensorrt] precision = \"fp16\")",
        path.display()
    ))
}

/// Engine options taken from the `[engine]` and `[model]` configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineOptions {
    /// Input size `(width, height)` to use when the model's input size is not fixed.
    pub dynamic_input: (u32, u32),
    /// `[engine] max_batch`: the most images one run may take when the model's batch axis is
    /// dynamic; 0: the engine's own choice ([`EngineOptions::batch`]). A fixed batch N is N.
    pub max_batch: usize,
    /// The cameras whose frames may share a run (more images than cameras are never batched).
    pub cameras: usize,
    /// ONNX Runtime library (`[engine] library`); `None`: `ORT_DYLIB_PATH` or the usual places.
    pub ort_library: Option<std::path::PathBuf>,
    /// ONNX Runtime execution providers, in order of preference.
    pub providers: Vec<Provider>,
    /// Intra-op threads (0: the engine's default).
    pub threads: usize,
    /// TensorRT provider options.
    pub tensorrt: onnxruntime::TensorRtOptions,
    /// The board's DLA cores and SoC, as `power` found them under `[power] root`.
    pub dla: DlaBoard,
}

/// What an engine needs to know of the board to use its DLA: how many cores, and which SoC
/// (the layer table differs). `power` finds them (the detector fills this in); engines read
/// no board files.
#[derive(Clone, Debug, PartialEq)]
pub struct DlaBoard {
    /// The SoC, when it has a DLA (Xavier, Orin).
    pub soc: Option<dla::Soc>,
    /// DLA cores found.
    pub cores: usize,
    /// Where they were looked for, for messages.
    pub searched: std::path::PathBuf,
}

impl Default for DlaBoard {
    /// No DLA (nothing was looked up).
    fn default() -> Self {
        DlaBoard { soc: None, cores: 0, searched: std::path::PathBuf::from("/sys/devices/platform") }
    }
}

impl EngineOptions {
    /// The most images per run for a dynamic batch axis: `max_batch`, or `auto` (the engine's
    /// measured choice) where it is 0, never more than the cameras.
    pub fn batch(&self, auto: usize) -> usize {
        let limit = if self.max_batch == 0 { auto } else { self.max_batch };
        limit.min(self.cameras).max(1)
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            dynamic_input: (640, 640),
            max_batch: 0,
            cameras: 1,
            ort_library: None,
            providers: Provider::ALL.to_vec(),
            threads: 0,
            tensorrt: onnxruntime::TensorRtOptions::default(),
            dla: DlaBoard::default(),
        }
    }
}

/// Where an [`InputStage`] runs (`[preprocess] device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageDevice {
    /// The engine's GPU (TensorRT or CUDA provider), or wherever the engine runs.
    Gpu,
    /// A DLA core through TensorRT, with GPU fallback for what the DLA cannot run.
    Dla,
}

impl std::fmt::Display for StageDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StageDevice::Gpu => "gpu",
            StageDevice::Dla => "dla",
        })
    }
}

/// A small ONNX graph run on the engine's device that writes the engine's
/// input in place: accelerated preprocessing. Raw bytes go in; the model input
/// never leaves the device.
pub trait InputStage: Send {
    /// The providers the stage runs on, for logs (e.g. `tensorrt dla0 > cuda`).
    fn describe(&self) -> String;

    /// Hands `bytes` (the graph's `uint8` input, exactly its size) to the
    /// device and runs the graph, leaving its output in the engine's input.
    fn run(&mut self, bytes: &[u8]) -> Result<(), EngineError>;
}

/// A loaded model, ready to run one image at a time, or a batch of them where the model has a
/// batch axis ([`Engine::set_batch`]).
pub trait Engine: Send {
    /// The engine and model, for logs (e.g. `tract (models/obstacles-v8.onnx)`).
    fn describe(&self) -> String;

    /// One image's input shape, NCHW with N = 1 and C = 3.
    fn input_shape(&self) -> [usize; 4];

    /// One image's output shape (N = 1): [`Engine::run`] returns one such tensor per image of
    /// the batch, back to back.
    fn output_shape(&self) -> &[usize];

    /// The input buffer to fill before [`Engine::run`]: one image's `3 * H * W` values per slot
    /// of the current batch ([`Engine::set_batch`]), back to back.
    fn input_mut(&mut self) -> &mut [f32];

    /// Runs the model on the current input and returns the output tensor: one image's output
    /// per slot of the current batch, back to back.
    fn run(&mut self) -> Result<&[f32], EngineError>;

    /// The most images one run takes: the model's fixed batch N, or, for a dynamic batch axis,
    /// [`EngineOptions::max_batch`]; 1 for a model of batch 1.
    fn max_batch(&self) -> usize {
        1
    }

    /// Whether the model's batch axis is dynamic (whatever [`Engine::max_batch`] was chosen).
    fn dynamic_batch(&self) -> bool {
        false
    }

    /// Makes the next runs take `n` images (`1..=max_batch`); returns the slots the input and
    /// output hold (`n`, or N for a fixed batch N, whose slots past `n` are run and ignored).
    fn set_batch(&mut self, n: usize) -> Result<usize, EngineError> {
        match n {
            1 => Ok(1),
            _ => Err(EngineError::Run(format!(
                "{}: the model takes one image per run, not {n}",
                self.describe()
            ))),
        }
    }

    /// Metadata stored in the model file (ultralytics stores `names`, `stride`, `imgsz`...).
    fn metadata(&self) -> &BTreeMap<String, String>;

    /// The runtime libraries and their versions (`onnxruntime`, `tensorrt`, `cuda`), for the log and
    /// the `hello` message; empty for an engine built into jetdetect.
    fn runtime(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    /// Compiles `onnx` (one `uint8` input of `input_shape`, one `f32` output
    /// shaped like this engine's input) to run on `device` with its output
    /// bound to this engine's input. After this, [`Engine::input_mut`] is
    /// empty: the input is written by stages only. Engines without an
    /// accelerator path say so.
    fn input_stage(
        &mut self,
        onnx: &[u8],
        input_shape: &[usize],
        device: StageDevice,
    ) -> Result<Box<dyn InputStage>, EngineError> {
        let _ = (onnx, input_shape);
        Err(EngineError::Model(format!(
            "{}: [preprocess] device = \"{device}\" needs [engine] kind = \"onnxruntime\" \
             (this engine runs on the CPU; use device = \"cpu\")",
            self.describe()
        )))
    }

    /// Input `(width, height)`.
    fn input_size(&self) -> (u32, u32) {
        let s = self.input_shape();
        (s[3] as u32, s[2] as u32)
    }
}

/// Loads `model` with the engine `kind`.
pub fn open(kind: EngineKind, model: &Path, options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError> {
    match kind {
        EngineKind::Auto => open_auto(model, options),
        EngineKind::Tract => Ok(Box::new(tract::TractEngine::load(model, options)?)),
        EngineKind::OnnxRuntime => Ok(Box::new(onnxruntime::OrtEngine::load(model, options)?)),
    }
}

/// `kind = "auto"`: ONNX Runtime when its library can be found (`[engine]
/// library`, `ORT_DYLIB_PATH`, or a usual place, see [`onnxruntime::SEARCH`]),
/// else tract. ONNX Runtime is the faster engine on every machine measured (4x
/// tract's speed on x86 CPUs, docs/benchmarks.md) and the only way to the GPU;
/// tract needs nothing installed and is the only engine of the static build.
/// A library that is found but cannot run the model is logged, and tract runs it.
fn open_auto(model: &Path, options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError> {
    let tract = |why: String| -> Result<Box<dyn Engine>, EngineError> {
        log::info!("engine: tract (pure Rust, CPU): {why}");
        Ok(Box::new(tract::TractEngine::load(model, options)?))
    };
    if cfg!(target_feature = "crt-static") {
        return tract("this static build cannot load ONNX Runtime".into());
    }
    let library = match onnxruntime::find_library(options.ort_library.as_deref()) {
        Ok(l) => l,
        Err(_) => {
            return tract(format!(
                "no ONNX Runtime library (looked at [engine] library, ORT_DYLIB_PATH, {})",
                onnxruntime::searched()
            ))
        }
    };
    let mut ort_options = options.clone();
    ort_options.ort_library = Some(library.clone());
    match onnxruntime::OrtEngine::load(model, &ort_options) {
        Ok(e) => {
            log::info!("engine: {} (kind = \"auto\" found {})", e.describe(), library.display());
            Ok(Box::new(e))
        }
        Err(e) => {
            log::warn!("engine: ONNX Runtime found but not usable, falling back to tract: {e}");
            tract(format!("ONNX Runtime at {} could not run the model", library.display()))
        }
    }
}
