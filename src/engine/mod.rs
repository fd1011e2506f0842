//! Inference engines: a model file in, a tensor out.
//!
//! An [`Engine`] owns its input and output buffers, allocated once when the
//! model is loaded: the preprocessing stage writes into [`Engine::input_mut`],
//! [`Engine::run`] returns the raw output tensor, and the YOLO decoder reads it.
//! Engines know nothing about cameras or boxes. A new backend (ONNX Runtime,
//! TensorRT) is a new module implementing the trait plus one arm in [`open`].

pub mod onnxruntime;
pub mod tract;

use std::collections::BTreeMap;
use std::path::Path;

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The model file could not be read.
    #[error("{0}")]
    Io(String),
    /// The file is not a usable model (corrupt, unsupported operators, wrong inputs).
    #[error("{0}")]
    Model(String),
    /// Running the model failed.
    #[error("{0}")]
    Run(String),
}

/// Engine options taken from the `[engine]` and `[model]` configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineOptions {
    /// Input size `(width, height)` to use when the model's input size is not fixed.
    pub dynamic_input: (u32, u32),
    /// ONNX Runtime library (`[engine] library`); `None`: `ORT_DYLIB_PATH` or the usual places.
    pub ort_library: Option<std::path::PathBuf>,
    /// ONNX Runtime execution providers, in order of preference.
    pub providers: Vec<String>,
    /// Intra-op threads (0: the engine's default).
    pub threads: usize,
    /// TensorRT provider options.
    pub tensorrt: onnxruntime::TensorRtOptions,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            dynamic_input: (640, 640),
            ort_library: None,
            providers: onnxruntime::PROVIDERS.iter().map(|p| p.to_string()).collect(),
            threads: 0,
            tensorrt: onnxruntime::TensorRtOptions::default(),
        }
    }
}

/// A loaded model, ready to run one image at a time.
pub trait Engine: Send {
    /// The engine and model, for logs (e.g. `tract (models/obstacles-v8.onnx)`).
    fn describe(&self) -> String;

    /// Input shape, NCHW with N = 1 and C = 3.
    fn input_shape(&self) -> [usize; 4];

    /// Shape of the output tensor [`Engine::run`] returns.
    fn output_shape(&self) -> &[usize];

    /// The input buffer (`1 * 3 * H * W` values) to fill before [`Engine::run`].
    fn input_mut(&mut self) -> &mut [f32];

    /// Runs the model on the current input and returns the output tensor.
    fn run(&mut self) -> Result<&[f32], EngineError>;

    /// Metadata stored in the model file (ultralytics stores `names`, `stride`, `imgsz`...).
    fn metadata(&self) -> &BTreeMap<String, String>;

    /// Input `(width, height)`.
    fn input_size(&self) -> (u32, u32) {
        let s = self.input_shape();
        (s[3] as u32, s[2] as u32)
    }
}

/// The engine kinds this build knows, for config validation and messages.
pub const KINDS: [&str; 2] = ["tract", "onnxruntime"];

/// Loads `model` with the engine called `kind`.
pub fn open(kind: &str, model: &Path, options: &EngineOptions) -> Result<Box<dyn Engine>, EngineError> {
    match kind {
        "tract" => Ok(Box::new(tract::TractEngine::load(model, options)?)),
        "onnxruntime" => Ok(Box::new(onnxruntime::OrtEngine::load(model, options)?)),
        other => {
            Err(EngineError::Model(format!("unknown engine '{other}': this build has {}", KINDS.join(", "))))
        }
    }
}
