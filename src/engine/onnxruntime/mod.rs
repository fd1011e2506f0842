//! ONNX Runtime through its C API (the `ort` crate, loaded at run time): the
//! TensorRT execution provider (FP16/INT8, DLA, engine and timing caches, CUDA
//! graphs) on a Jetson, CUDA, or the CPU provider anywhere. The binary builds
//! and runs without the library; it is found at run time in `[engine]
//! library`, `ORT_DYLIB_PATH`, or the usual JetPack and pip locations.
//!
//! `library` finds and loads it, `tensorrt` holds the TensorRT provider's options and the DLA
//! checks, `stage` runs accelerated preprocessing, `ffi` has every `unsafe` (this module denies
//! it elsewhere).

#![deny(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ort::ep;
use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::Session;
use ort::value::{Tensor, TensorRef, ValueType};
use ort::AsPointer;

use super::{dla, trt_log, DlaBoard, Engine, EngineError, EngineOptions, InputStage, Provider, StageDevice};

// `unsafe` lives in `ffi` alone; anywhere else in this engine it does not compile.
#[allow(unsafe_code)]
mod ffi;
mod library;
mod needed;
mod stage;
mod tensorrt;

use ffi::*;
pub use library::*;
use stage::*;
pub use tensorrt::*;

/// `providers` as written in the config (`tensorrt > cuda`), for messages.
pub fn provider_names(providers: &[Provider], sep: &str) -> String {
    providers.iter().map(|p| p.name()).collect::<Vec<_>>().join(sep)
}

/// Logs every 15 s while alive, so that a TensorRT engine build (minutes on a
/// Nano) shows it is still going.
struct Progress {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(what: String) -> Progress {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let started = std::time::Instant::now();
        let thread = std::thread::Builder::new()
            .name("build-progress".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    rx.recv_timeout(std::time::Duration::from_secs(15))
                {
                    log::info!("{what}: still preparing after {:.0} s", started.elapsed().as_secs_f64());
                }
            })
            .ok();
        Progress { stop: Some(tx), thread }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A short hash of the model bytes, for engine cache names.
fn model_key(bytes: &[u8]) -> String {
    // FNV-1a 64: stable across builds and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Host input and output tensors for one batch size, bound once: each run reuses them.
struct Batched {
    /// Images they hold.
    slots: usize,
    /// Host input the CPU preprocessing writes.
    input: Tensor<f32>,
    /// Host output, written by each run and lent out by [`Engine::run`].
    output: Tensor<f32>,
    binding: ort::session::IoBinding,
}

impl Batched {
    /// Tensors for `slots` images of `image` (one image's input shape) giving `output` (one
    /// image's output shape), bound to `session`'s `input` and `output`.
    fn bind(
        session: &Session,
        (input_name, output_name): (&str, &str),
        slots: usize,
        image: [usize; 4],
        output: &[usize],
    ) -> ort::Result<Batched> {
        let shape = [slots, image[1], image[2], image[3]];
        let input = Tensor::from_array((shape, vec![0f32; shape.iter().product()]))?;
        let mut out_shape = output.to_vec();
        out_shape[0] = slots;
        let mut output = Tensor::<f32>::new(&Allocator::default(), out_shape)?;
        let mut binding = session.create_binding()?;
        binding.bind_input(input_name, &input)?;
        binding.bind_output(output_name, &mut output)?;
        Ok(Batched { slots, input, output, binding })
    }
}

/// A model loaded in ONNX Runtime.
pub struct OrtEngine {
    session: Session,
    input_name: String,
    /// `input_name` for the C API (re-binding on GPU providers).
    input_cname: CString,
    /// One image's input shape.
    input_shape: [usize; 4],
    /// The model's batch axis is dynamic.
    dynamic: bool,
    /// The bound tensors per batch size: `batches[0]` holds 1 image, or a fixed batch N; a
    /// dynamic batch axis adds 2, 3, ... up to the most images per run.
    batches: Vec<Batched>,
    /// The batch the next run uses (an index into `batches`).
    current: usize,
    /// Input on the engine's device, written by input stages (accelerated preprocessing).
    stage_input: Option<Tensor<f32>>,
    /// The session runs on a GPU provider: host inputs are copied when bound, so bind before each run.
    on_gpu: bool,
    env: &'static ort::environment::Environment,
    library: PathBuf,
    options: EngineOptions,
    used: Vec<Provider>,
    /// One image's output shape.
    output_shape: Vec<usize>,
    metadata: BTreeMap<String, String>,
    label: String,
    /// ONNX Runtime's version, and TensorRT's and CUDA's where a GPU provider runs.
    runtime: BTreeMap<String, String>,
}

/// The versions this session runs on: ONNX Runtime's, and, where TensorRT or CUDA providers were
/// taken, TensorRT's and CUDA's runtime (from the libraries the loader will find).
fn runtime_versions(library: &Path, used: &[Provider]) -> BTreeMap<String, String> {
    let mut v = BTreeMap::from([("onnxruntime".to_string(), ort_version(library))]);
    let dirs = tensorrt_dirs(library);
    let gpu = used.iter().any(|p| *p != Provider::Cpu);
    if used.contains(&Provider::TensorRt) {
        v.insert("tensorrt".into(), tensorrt_version(&dirs).unwrap_or_else(|| "unknown".into()));
    }
    if gpu {
        v.insert("cuda".into(), library_version(&dirs, "libcudart.so.").unwrap_or_else(|| "unknown".into()));
    }
    v
}

/// What the TensorRT provider is set up with for one session.
struct TrtSetup<'a> {
    /// `[engine.tensorrt]`.
    options: &'a TensorRtOptions,
    /// Names the model (and batch) in the engine cache.
    key: &'a str,
    /// The batch sizes one engine serves, for a dynamic batch axis.
    profile: Option<&'a BatchProfile>,
}

/// Creates a session builder with the providers in `providers` (in order of
/// preference) and returns it with the names of those the library accepted.
fn session_builder(
    env: &'static ort::environment::Environment,
    library: &Path,
    providers: &[Provider],
    trt_setup: TrtSetup<'_>,
    threads: usize,
    dla_board: &DlaBoard,
) -> Result<(ort::session::builder::SessionBuilder, Vec<Provider>), EngineError> {
    let TrtSetup { options: tensorrt_options, key, profile } = trt_setup;
    let err = |what: &str, source: ort::Error| EngineError::Ort {
        context: format!("{}: {what}", library.display()),
        source,
    };
    let mut builder = Session::builder(env).map_err(|e| err("cannot create a session", e))?;
    if threads > 0 {
        builder = builder.with_intra_threads(threads).map_err(|e| err("threads", e.into()))?;
    }
    let mut used = Vec::new();
    let mut refused = Vec::new();
    for name in providers {
        let mut note = None;
        let dispatch = match name {
            Provider::TensorRt => {
                let trt = tensorrt_version(&tensorrt_dirs(library));
                if trt.is_none() {
                    log::debug!("no libnvinfer.so.* in LD_LIBRARY_PATH or the usual places");
                }
                if let Some(core) = tensorrt_options.dla_core {
                    // Asked for explicitly: refuse rather than let TensorRT quietly use the GPU.
                    check_dla(core, trt.as_deref(), dla_board)?;
                }
                let versions = cache_versions(trt.as_deref(), library);
                let (dispatch, cache) = tensorrt(tensorrt_options, key, &versions, profile)?;
                note = cache;
                dispatch
            }
            Provider::Cuda => ep::CUDA::default().build().error_on_failure(),
            Provider::Cpu => ep::CPU::default().build().error_on_failure(),
        };
        match builder.with_execution_providers([dispatch]) {
            Ok(b) => {
                builder = b;
                used.push(*name);
                if let Some(n) = note {
                    log::info!("{n}");
                }
            }
            Err(e) => {
                let mut why = e.to_string();
                if *name == Provider::TensorRt && tensorrt_options.dla_core.is_some() {
                    why.push_str(" (DLA needs a Jetson with DLA cores (Xavier, Orin) and TensorRT <= 10.7)");
                }
                // Usually one library the provider needs is missing: name it.
                let provider = needed::provider_library(library, &name.to_string());
                let missing = provider.as_deref().map(needed::missing).unwrap_or_default();
                if !missing.is_empty() {
                    why.push_str(&format!("; the loader cannot find what it needs: {}", missing.join(", ")));
                }
                log::warn!("{}: provider {name} unavailable: {why}", library.display());
                refused.push(format!("{name}: {why}"));
                builder = e.recover();
            }
        }
    }
    if used.is_empty() {
        return Err(EngineError::Model(format!(
            "{}: none of the providers {:?} could be used ({}); add \"cpu\" to [engine] providers to fall back",
            library.display(),
            providers.iter().map(|p| p.name()).collect::<Vec<_>>(),
            refused.join("; ")
        )));
    }
    Ok((builder, used))
}

/// Memory on the engine's GPU (device 0), where TensorRT and CUDA sessions want their inputs.
fn gpu_memory() -> ort::Result<MemoryInfo<'static>> {
    MemoryInfo::new(AllocationDevice::CUDA, 0, AllocatorType::Device, MemoryType::Default)
}

impl OrtEngine {
    /// Loads `path` with the providers in `options.providers`, in order of preference.
    pub fn load(path: &Path, options: &EngineOptions) -> Result<OrtEngine, EngineError> {
        let library = find_library(options.ort_library.as_deref())?;
        let env = environment(&library)?;
        let bytes = std::fs::read(path).map_err(|source| EngineError::Read { path: path.into(), source })?;
        let model_err = |what: &str, source: ort::Error| EngineError::Ort {
            context: format!("{}: {what}", path.display()),
            source,
        };
        // A dynamic batch axis run with several cameras: TensorRT builds one engine for every
        // batch size (and its cache file says for how many).
        let profile = match options.providers.contains(&Provider::TensorRt) {
            true => batch_profile(&bytes, options.batch(4), options.dynamic_input),
            false => None,
        };
        let key = match &profile {
            Some(_) => format!("{}_b{}", model_key(&bytes), options.batch(4)),
            None => model_key(&bytes),
        };
        let (mut builder, used) = session_builder(
            env,
            &library,
            &options.providers,
            TrtSetup { options: &options.tensorrt, key: &key, profile: profile.as_ref() },
            options.threads,
            &options.dla,
        )?;
        // Session creation builds the TensorRT engine (or loads it from the cache); the first run sizes the output.
        let started = std::time::Instant::now();
        log::info!(
            "{}: preparing with {} (a TensorRT engine build can take minutes the first time)",
            path.display(),
            provider_names(&used, " > ")
        );
        let progress = Progress::start(path.display().to_string());
        let mut session = builder.commit_from_memory(&bytes).map_err(|e| {
            model_err("ONNX Runtime cannot load this model (corrupt, or an engine build failure)", e)
        })?;
        if session.inputs().len() != 1 {
            return Err(EngineError::Model(format!(
                "{}: the model has {} inputs; jetdetect needs one image input [1, 3, H, W]",
                path.display(),
                session.inputs().len()
            )));
        }
        let input = &session.inputs()[0];
        let input_name = input.name().to_string();
        let dims: Vec<i64> = match input.dtype() {
            ValueType::Tensor { ty, .. } if *ty != ort::value::TensorElementType::Float32 => {
                return Err(super::input_not_f32(path, &ty.to_string()));
            }
            ValueType::Tensor { shape, .. } => shape.iter().copied().collect(),
            other => {
                return Err(EngineError::Model(format!(
                    "{}: the input is {other:?}, not a tensor",
                    path.display()
                )))
            }
        };
        let (dw, dh) = options.dynamic_input;
        let dim = |i: usize, default: usize| {
            dims.get(i).copied().filter(|&d| d > 0).map(|d| d as usize).unwrap_or(default)
        };
        if dims.len() != 4 || dims[0] == 0 || dim(1, 3) != 3 {
            return Err(EngineError::Model(format!(
                "{}: the input has shape {dims:?}; jetdetect needs an image input [N, 3, H, W]",
                path.display()
            )));
        }
        // The batch axis: fixed (1 or N), or dynamic (-1, a name): runs of 1 to max_batch images.
        let dynamic_batch = dims[0] < 0;
        let slots = dim(0, 1);
        let input_shape = [slots, 3, dim(2, dh as usize), dim(3, dw as usize)];
        let mut metadata = BTreeMap::new();
        if let Ok(meta) = session.metadata() {
            for k in meta.custom_keys().unwrap_or_default() {
                if let Some(v) = meta.custom(&k) {
                    metadata.insert(k, v);
                }
            }
        }
        let input_buf = vec![0f32; input_shape.iter().product()];
        let output_shape: Vec<usize> = {
            let t = TensorRef::from_array_view((input_shape, &input_buf[..]))
                .map_err(|e| model_err("input", e))?;
            let out = session
                .run(ort::inputs![input_name.as_str() => t])
                .map_err(|e| model_err("the first run failed", e))?;
            let (shape, _) =
                out[0].try_extract_tensor::<f32>().map_err(|e| model_err("the output is not f32", e))?;
            shape.iter().map(|&d| d as usize).collect()
        };
        if output_shape.first() != Some(&slots) {
            return Err(EngineError::Model(format!(
                "{}: for {slots} images in, the output is {output_shape:?}: its first axis should be the batch",
                path.display()
            )));
        }
        drop(progress);
        log::info!("{}: ready in {:.1} s", path.display(), started.elapsed().as_secs_f64());
        // Input and output bound once to tensors allocated here, per batch size: each run
        // reuses them. ONNX Runtime gains from batches (docs/cameras.md: 4 cameras at 30 fps
        // were kept up with on 2 CPU cores only batched): a dynamic batch axis takes up to 4
        // images per run by default.
        let output_name = session.outputs()[0].name().to_string();
        // `slots` images (1, or a fixed N), then 2, 3, ... for a dynamic batch axis.
        let last = if dynamic_batch { options.batch(4) } else { 1 };
        let mut batches = Vec::with_capacity(last);
        for n in std::iter::once(slots).chain(2..=last) {
            let b = Batched::bind(&session, (&input_name, &output_name), n, input_shape, &output_shape)
                .map_err(|e| model_err("binding the input and output tensors", e))?;
            batches.push(b);
        }
        // From here on, shapes are one image's.
        let input_shape = [1, input_shape[1], input_shape[2], input_shape[3]];
        let mut output_shape = output_shape;
        output_shape[0] = 1;
        let input_cname = CString::new(input_name.as_str()).map_err(|_| {
            EngineError::Model(format!("{}: input name: contains a NUL byte", path.display()))
        })?;
        let label = format!(
            "onnxruntime {} [{}] ({})",
            ort_version(&library),
            provider_names(&used, " > "),
            path.display()
        );
        let runtime = runtime_versions(&library, &used);
        Ok(OrtEngine {
            session,
            input_name,
            input_cname,
            input_shape,
            dynamic: dynamic_batch,
            batches,
            current: 0,
            stage_input: None,
            on_gpu: used[0] != Provider::Cpu,
            env,
            library,
            options: options.clone(),
            used: used.clone(),
            output_shape,
            metadata,
            label,
            runtime,
        })
    }
}

impl Engine for OrtEngine {
    fn describe(&self) -> String {
        self.label.clone()
    }

    fn runtime(&self) -> BTreeMap<String, String> {
        self.runtime.clone()
    }

    fn input_shape(&self) -> [usize; 4] {
        self.input_shape
    }

    fn output_shape(&self) -> &[usize] {
        &self.output_shape
    }

    fn input_mut(&mut self) -> &mut [f32] {
        if self.stage_input.is_some() {
            return &mut [];
        }
        // A CPU tensor always extracts.
        self.batches[self.current].input.try_extract_tensor_mut::<f32>().map(|(_, d)| d).unwrap_or(&mut [])
    }

    fn run(&mut self) -> Result<&[f32], EngineError> {
        let err = |source: ort::Error| EngineError::Ort { context: self.label.clone(), source };
        let per_image: usize = self.output_shape.iter().product();
        let b = &self.batches[self.current];
        if self.on_gpu && self.stage_input.is_none() {
            // A GPU session copies a host input when it is bound, not when it runs.
            bind_input(&b.binding, &self.input_cname, &b.input).map_err(err)?;
        }
        run_with_binding(&self.session, &b.binding).map_err(err)?;
        host_output(&b.output, per_image * b.slots).map_err(err)
    }

    fn max_batch(&self) -> usize {
        self.batches.last().map_or(1, |b| b.slots)
    }

    fn dynamic_batch(&self) -> bool {
        self.dynamic
    }

    fn set_batch(&mut self, n: usize) -> Result<usize, EngineError> {
        // A fixed batch N runs its N slots for any 1..=N images.
        let fixed = self.batches[0].slots > 1;
        let found = match n {
            _ if fixed => (1..=self.batches[0].slots).contains(&n).then_some(0),
            1 => Some(0),
            _ if self.stage_input.is_some() => None,
            _ => self.batches.iter().position(|b| b.slots == n),
        };
        match found {
            Some(k) => {
                self.current = k;
                Ok(self.batches[k].slots)
            }
            None => Err(EngineError::Run(format!(
                "{}: cannot run {n} images at once (at most {}{})",
                self.label,
                self.max_batch(),
                if self.stage_input.is_some() { "; with device preprocessing, one" } else { "" }
            ))),
        }
    }

    fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    fn input_stage(
        &mut self,
        onnx: &[u8],
        input_shape: &[usize],
        device: StageDevice,
    ) -> Result<Box<dyn InputStage>, EngineError> {
        if self.batches[0].slots > 1 {
            return Err(EngineError::Model(format!(
                "{}: the model takes a fixed batch of {} images; [preprocess] device = \"{device}\" writes one: \
                 use device = \"cpu\", or a model exported with batch 1 or a dynamic batch",
                self.label, self.batches[0].slots
            )));
        }
        self.current = 0;
        build_stage(self, onnx, input_shape, device)
    }
}
