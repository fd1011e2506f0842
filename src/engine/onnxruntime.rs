//! ONNX Runtime through its C API (the `ort` crate, loaded at run time): the
//! TensorRT execution provider (FP16/INT8, DLA, engine and timing caches, CUDA
//! graphs) on a Jetson, CUDA, or the CPU provider anywhere. The binary builds
//! and runs without the library; it is found at run time in `[engine]
//! library`, `ORT_DYLIB_PATH`, or the usual JetPack and pip locations.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ort::ep;
use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::Session;
use ort::value::{Tensor, TensorRef, ValueType};
use ort::AsPointer;

use super::{dla, trt_log, Engine, EngineError, EngineOptions, InputStage, Provider, StageDevice};

named_enum! {
    /// `[engine.tensorrt] precision` and `--precision` as written; [`Precision`] is what it means.
    pub enum PrecisionName {
        /// FP16 where TensorRT finds it faster (the default).
        Fp16 = "fp16",
        /// FP32 throughout.
        Fp32 = "fp32",
        /// INT8 with FP16 fallback, from a calibration table.
        Int8 = "int8",
    }
}

impl std::str::FromStr for PrecisionName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::from_name(s)
            .ok_or_else(|| format!("[engine.tensorrt] precision: '{s}': use fp16, fp32 or int8"))
    }
}

/// What TensorRT computes in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Precision {
    /// FP16 where faster (TensorRT keeps FP32 where FP16 would not be).
    Fp16,
    /// FP32 throughout.
    Fp32,
    /// INT8 with FP16 fallback.
    Int8 {
        /// The calibration table, in TensorRT's own cache format (`engine::calibration`).
        table: PathBuf,
    },
}

impl Precision {
    /// Its name in the config.
    pub fn name(&self) -> PrecisionName {
        match self {
            Precision::Fp16 => PrecisionName::Fp16,
            Precision::Fp32 => PrecisionName::Fp32,
            Precision::Int8 { .. } => PrecisionName::Int8,
        }
    }

    /// `precision = name` with `int8_calibration_table = table`; INT8 needs the table (a table
    /// given with another precision is not used).
    pub fn new(name: PrecisionName, table: Option<PathBuf>) -> Result<Precision, String> {
        Ok(match name {
            PrecisionName::Fp16 => Precision::Fp16,
            PrecisionName::Fp32 => Precision::Fp32,
            PrecisionName::Int8 => Precision::Int8 {
                table: table.ok_or_else(|| {
                    "[engine.tensorrt] int8_calibration_table: precision = \"int8\" needs a calibration table"
                        .to_string()
                })?,
            },
        })
    }
}

/// `[engine.tensorrt]`: TensorRT execution provider options.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "TensorRtToml", into = "TensorRtToml")]
pub struct TensorRtOptions {
    /// `precision` and, for INT8, `int8_calibration_table`.
    pub precision: Precision,
    /// DLA core to run on (with GPU fallback); none by default.
    pub dla_core: Option<u32>,
    /// Where engine and timing caches live; empty disables caching.
    pub cache_dir: PathBuf,
    /// TensorRT builder optimisation level, 0..=5.
    pub builder_optimization_level: u8,
    /// Capture the run as a CUDA graph. Needs the model's input and output bound to stable device
    /// buffers; jetdetect binds the output to host memory (decoding runs on the CPU), so the
    /// configuration refuses it (see `config.rs`).
    pub cuda_graph: bool,
    /// Builder workspace in MiB.
    pub workspace_mib: usize,
}

impl Default for TensorRtOptions {
    fn default() -> Self {
        TensorRtOptions {
            precision: Precision::Fp16,
            dla_core: None,
            cache_dir: PathBuf::from("/var/cache/jetdetect/tensorrt"),
            builder_optimization_level: 3,
            cuda_graph: false,
            workspace_mib: 1024,
        }
    }
}

/// `[engine.tensorrt]` as written in the file.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
struct TensorRtToml {
    precision: PrecisionName,
    #[serde(skip_serializing_if = "Option::is_none")]
    int8_calibration_table: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dla_core: Option<u32>,
    cache_dir: PathBuf,
    builder_optimization_level: u8,
    cuda_graph: bool,
    workspace_mib: usize,
}

impl Default for TensorRtToml {
    fn default() -> Self {
        TensorRtOptions::default().into()
    }
}

impl TryFrom<TensorRtToml> for TensorRtOptions {
    type Error = String;
    fn try_from(t: TensorRtToml) -> Result<Self, String> {
        Ok(TensorRtOptions {
            precision: Precision::new(t.precision, t.int8_calibration_table)?,
            dla_core: t.dla_core,
            cache_dir: t.cache_dir,
            builder_optimization_level: t.builder_optimization_level,
            cuda_graph: t.cuda_graph,
            workspace_mib: t.workspace_mib,
        })
    }
}

impl From<TensorRtOptions> for TensorRtToml {
    fn from(o: TensorRtOptions) -> Self {
        let (precision, int8_calibration_table) = match o.precision {
            Precision::Int8 { table } => (PrecisionName::Int8, Some(table)),
            p => (p.name(), None),
        };
        TensorRtToml {
            precision,
            int8_calibration_table,
            dla_core: o.dla_core,
            cache_dir: o.cache_dir,
            builder_optimization_level: o.builder_optimization_level,
            cuda_graph: o.cuda_graph,
            workspace_mib: o.workspace_mib,
        }
    }
}

/// `providers` as written in the config (`tensorrt > cuda`), for messages.
pub fn provider_names(providers: &[Provider], sep: &str) -> String {
    providers.iter().map(|p| p.name()).collect::<Vec<_>>().join(sep)
}

/// Where ONNX Runtime's library is installed, in order of preference, under the root standing for `/`:
/// source builds and jetson-containers (`--build_shared_lib`, installed to `/usr/local/lib`), distribution
/// packages, `/opt`, and the `onnxruntime/capi/` folder of a pip wheel (NVIDIA's and the Jetson Zoo's
/// `onnxruntime-gpu`, PyPI's `onnxruntime`) in a versioned Python's `dist-packages` or `site-packages`.
/// A `*` stands for any `python3.N`; each folder is searched for `libonnxruntime.so` and
/// `libonnxruntime.so.1.N.M` (wheels ship only the versioned name), the highest version first.
pub const SEARCH: [&str; 9] = [
    "usr/local/lib",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib/x86_64-linux-gnu",
    "usr/lib",
    "opt/onnxruntime/lib",
    "usr/local/lib/python3*/dist-packages/onnxruntime/capi",
    "usr/lib/python3/dist-packages/onnxruntime/capi",
    "usr/local/lib/python3*/site-packages/onnxruntime/capi",
    "usr/lib/python3*/site-packages/onnxruntime/capi",
];

/// The oldest ONNX Runtime jetdetect loads: its binding (`ort` 2.0) needs C API level 17.
pub const ORT_FLOOR: &str = "1.17";

/// How to get a usable ONNX Runtime, per JetPack (docs/accelerators.md has the table).
const ORT_WAY: &str = "JetPack 6/7: jetson-containers' onnxruntime (1.17 and newer, TensorRT provider) or \
    NVIDIA's onnxruntime-gpu wheel for your JetPack; JetPack 5.1: an onnxruntime-gpu 1.17 or 1.18 wheel \
    built for JetPack 5 (against its TensorRT 8.5), or ONNX Runtime 1.17+ built from source there \
    (jetson-containers' default for JetPack 5, 1.16.3, is too old); JetPack 4 has no 1.17 build: use \
    [engine] kind = \"tract\"; a PC: pip install \"onnxruntime>=1.17\". Then set [engine] library \
    (docs/accelerators.md)";

/// `libonnxruntime.so` or `libonnxruntime.so.1.N.M` in `dir`, the highest version first.
fn libraries_in(dir: &Path) -> Vec<PathBuf> {
    let version = |name: &str| -> Option<Vec<u32>> {
        let rest = name.strip_prefix("libonnxruntime.so")?;
        if rest.is_empty() {
            return Some(Vec::new());
        }
        rest.strip_prefix('.')?.split('.').map(|p| p.parse().ok()).collect()
    };
    let mut found: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((version(e.file_name().to_str()?)?, e.path())))
        .collect();
    // Highest version first; the unversioned name (a link to one of them) after the versioned ones.
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|(_, p)| p).collect()
}

/// Every ONNX Runtime library under `root`, in the order of [`SEARCH`].
pub fn installed_libraries(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for pattern in SEARCH {
        let dirs: Vec<PathBuf> = match pattern.split_once("python3*") {
            Some((before, after)) => {
                let base = root.join(before);
                let mut pythons: Vec<(u32, PathBuf)> = std::fs::read_dir(&base)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|e| {
                        let minor = e.file_name().to_str()?.strip_prefix("python3.")?.parse().ok()?;
                        Some((minor, e.path().join(after.trim_start_matches('/'))))
                    })
                    .collect();
                pythons.sort_by_key(|p| std::cmp::Reverse(p.0));
                pythons.into_iter().map(|(_, d)| d).collect()
            }
            None => vec![root.join(pattern)],
        };
        for d in dirs {
            out.extend(libraries_in(&d));
        }
    }
    out
}

/// The library to load: the configured path, `ORT_DYLIB_PATH`, or the first found in [`SEARCH`].
pub fn find_library(configured: Option<&Path>) -> Result<PathBuf, EngineError> {
    if let Some(p) = configured.filter(|p| !p.as_os_str().is_empty()) {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    installed_libraries(Path::new("/")).into_iter().next().ok_or_else(|| {
        EngineError::Model(format!(
            "ONNX Runtime library not found: set [engine] library or ORT_DYLIB_PATH to libonnxruntime.so \
             ({ORT_FLOOR} or newer; {ORT_WAY}), or use [engine] kind = \"tract\". Looked in: {}",
            searched()
        ))
    })
}

/// The search locations as absolute paths, for messages.
pub fn searched() -> String {
    SEARCH.iter().map(|p| format!("/{p}")).collect::<Vec<_>>().join(", ")
}

/// Says why `library` could not be loaded, and what to do.
fn load_error(library: &Path, e: &ort::LoadDynamicError) -> String {
    let shown = library.display();
    match e {
        ort::LoadDynamicError::BadVersion { version_str, .. } => format!(
            "{shown}: ONNX Runtime {version_str} is older than {ORT_FLOOR}, the oldest jetdetect can load \
             (its ONNX Runtime binding needs C API level 17). {ORT_WAY}"
        ),
        ort::LoadDynamicError::MissingApi { .. } => {
            format!("{shown}: not an ONNX Runtime library (it exports no OrtGetApiBase): set [engine] library to libonnxruntime.so")
        }
        ort::LoadDynamicError::InvalidVersionString => {
            format!("{shown}: its version string is not readable: is it ONNX Runtime? {ORT_WAY}")
        }
        ort::LoadDynamicError::Dlopen { error, .. } => {
            let hint = if cfg!(target_feature = "crt-static") {
                " (this is a statically linked build, which cannot load libraries: use the JetPack/glibc build)"
            } else {
                " (built for another CPU architecture, or a library it needs, such as CUDA, is missing?)"
            };
            format!("{shown}: cannot load ONNX Runtime: {error}{hint}")
        }
    }
}

/// Loads the library once per process and returns its environment. A failed
/// load is not remembered, so a corrected path can be tried again.
fn environment(library: &Path) -> Result<&'static ort::environment::Environment, EngineError> {
    static LOADED: Mutex<Option<(PathBuf, &'static ort::environment::Environment)>> = Mutex::new(None);
    if !library.exists() {
        return Err(EngineError::Model(format!(
            "{}: no such file: set [engine] library or ORT_DYLIB_PATH to libonnxruntime.so, or use [engine] kind = \"tract\"",
            library.display()
        )));
    }
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((p, env)) = loaded.as_ref() {
        return if p == library {
            Ok(*env)
        } else {
            Err(EngineError::Model(format!(
                "ONNX Runtime is already loaded from {}; one process can load only one ({} was asked for)",
                p.display(),
                library.display()
            )))
        };
    }
    let builder = ort::init_from(library).map_err(|e| EngineError::Model(load_error(library, &e)))?;
    // ONNX Runtime's messages (and TensorRT's, which its provider relays) go to jetdetect's log.
    let env =
        builder.with_name("jetdetect").with_logger(Arc::new(super::trt_log::route)).build().map_err(|e| {
            EngineError::Model(format!("{}: cannot initialise ONNX Runtime: {e}", library.display()))
        })?;
    // A custom logger starts at VERBOSE; warnings and errors are what a service logs.
    env.set_log_level(ort::logging::LogLevel::Warning);
    let env: &'static ort::environment::Environment = Box::leak(Box::new(env));
    *loaded = Some((library.to_path_buf(), env));
    Ok(env)
}

/// Folders where the TensorRT provider's `libnvinfer` may be: the loader's
/// path, next to ONNX Runtime (pip wheels), JetPack and CUDA locations.
fn tensorrt_dirs(library: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("LD_LIBRARY_PATH").map(|v| std::env::split_paths(&v).collect()).unwrap_or_default();
    if let Some(capi) = library.parent() {
        dirs.push(capi.to_path_buf());
        if let Some(site) = capi.parent().and_then(Path::parent) {
            dirs.push(site.join("tensorrt_libs"));
        }
    }
    for d in [
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/local/cuda/lib64",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
    ] {
        dirs.push(PathBuf::from(d));
    }
    dirs
}

/// The TensorRT version the provider will load, read from the first
/// `libnvinfer.so.*` found in `dirs` (symlinks resolved: `libnvinfer.so.10` ->
/// `10.3.0`). A cached engine only fits the TensorRT that built it.
pub fn tensorrt_version(dirs: &[PathBuf]) -> Option<String> {
    library_version(dirs, "libnvinfer.so.")
}

/// The version in the name of the first `{prefix}*` library found in `dirs`, links resolved, the
/// longest (most precise) one of its folder: `libcudart.so.12` -> `12.6.68`.
fn library_version(dirs: &[PathBuf], prefix: &str) -> Option<String> {
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        let mut best: Option<String> = None;
        for e in entries.flatten() {
            let path = e.path();
            let real = std::fs::canonicalize(&path).unwrap_or(path);
            let Some(v) = real.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_prefix(prefix))
            else {
                continue;
            };
            if v.split('.').all(|p| p.parse::<u32>().is_ok())
                && best.as_ref().is_none_or(|b| v.split('.').count() > b.split('.').count())
            {
                best = Some(v.to_string());
            }
        }
        if best.is_some() {
            return best;
        }
    }
    None
}

/// DLA engines on this board: host1x client nodes named `*.nvdla<N>` under
/// `<root>/sys/devices/platform` (Xavier, AGX Orin and Orin NX 16GB have two,
/// Orin NX 8GB one; Nano, TX2 and Orin Nano none).
pub fn dla_cores(root: &Path) -> usize {
    fn walk(dir: &Path, depth: usize, found: &mut std::collections::BTreeSet<u32>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if let Some(n) = name.rsplit_once(".nvdla").and_then(|(_, n)| n.parse::<u32>().ok()) {
                found.insert(n);
            } else if depth > 0 && e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&e.path(), depth - 1, found);
            }
        }
    }
    let mut found = std::collections::BTreeSet::new();
    walk(&root.join("sys/devices/platform"), 3, &mut found);
    found.len()
}

/// Checks that DLA core `core` can be used: TensorRT 10.7 was the last
/// release with DLA, and the board must have the core.
pub fn check_dla(core: u32, tensorrt: Option<&str>, root: &Path) -> Result<(), String> {
    if let Some(v) = tensorrt {
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        if (major, minor) > (10, 7) {
            return Err(format!(
                "DLA core {core} was asked for, but TensorRT {v} has no DLA support (10.7 was the last \
                 release with it; JetPack 4.6-6.x ship 8.2-10.3): remove [engine.tensorrt] dla_core and use \
                 [preprocess] device = \"gpu\""
            ));
        }
    }
    let n = dla_cores(root);
    if core as usize >= n {
        return Err(if n == 0 {
            format!(
                "DLA core {core} was asked for, but this board has no DLA (none under {}): DLA exists on \
                 Jetson Xavier and Orin AGX/NX, not on Nano, TX2 or Orin Nano; remove [engine.tensorrt] \
                 dla_core and use [preprocess] device = \"gpu\"",
                root.join("sys/devices/platform").display()
            )
        } else {
            let valid = if n == 1 {
                "1 DLA core: use 0".to_string()
            } else {
                format!("{n} DLA cores: use 0 to {}", n - 1)
            };
            format!("DLA core {core} was asked for, but this board has {valid}")
        });
    }
    Ok(())
}

/// The versions a cached engine is tied to, as its name carries them: `trt10.3.0_ort1.19.0`.
fn cache_versions(tensorrt: Option<&str>, library: &Path) -> String {
    format!("trt{}_ort{}", tensorrt.unwrap_or("unknown"), ort_version(library))
}

/// The ONNX Runtime version, from its build information (`git-branch=rel-1.19.0`)
/// or the library's file name.
fn ort_version(library: &Path) -> String {
    let info = ort::info();
    if let Some(v) = info.split("git-branch=rel-").nth(1) {
        return v.split([',', ' ']).next().unwrap_or(v).to_string();
    }
    let real = std::fs::canonicalize(library).unwrap_or_else(|_| library.to_path_buf());
    real.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split(".so.").nth(1))
        .unwrap_or("unknown")
        .to_string()
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

/// A model loaded in ONNX Runtime.
pub struct OrtEngine {
    session: Session,
    binding: ort::session::IoBinding,
    input_name: String,
    /// `input_name` for the C API (re-binding on GPU providers).
    input_cname: CString,
    input_shape: [usize; 4],
    /// Host input the CPU preprocessing writes.
    input: Tensor<f32>,
    /// Input on the engine's device, written by input stages (accelerated preprocessing).
    stage_input: Option<Tensor<f32>>,
    /// The session runs on a GPU provider: host inputs are copied when bound, so bind before each run.
    on_gpu: bool,
    env: &'static ort::environment::Environment,
    library: PathBuf,
    options: EngineOptions,
    used: Vec<Provider>,
    output_shape: Vec<usize>,
    /// Host output tensor of `output_shape`, bound once: each run writes it, [`Engine::run`] lends it out.
    output: Tensor<f32>,
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

/// The TensorRT provider with `opts`; `key` names the model (its hash) and the
/// runtime versions, so a cached engine is reused only for the same model,
/// precision, device (DLA core or GPU), TensorRT and ONNX Runtime. (ONNX Runtime
/// adds the GPU's compute capability to the file name itself.)
fn tensorrt(
    opts: &TensorRtOptions,
    key: &str,
    versions: &str,
) -> Result<(ep::ExecutionProviderDispatch, Option<String>), EngineError> {
    let mut trt = ep::TensorRT::default()
        .with_builder_optimization_level(opts.builder_optimization_level)
        .with_max_workspace_size(opts.workspace_mib << 20)
        .with_cuda_graph(opts.cuda_graph);
    match &opts.precision {
        Precision::Fp16 => trt = trt.with_fp16(true),
        Precision::Fp32 => {}
        Precision::Int8 { table } => {
            // TensorRT's own cache format: without the native flag ONNX Runtime would parse it as its
            // FlatBuffers table. Checked here, so a wrong file fails at start, not at the engine build.
            let t = super::calibration::read(table).map_err(EngineError::Model)?;
            log::info!(
                "INT8 calibration table {}: TensorRT {} {}, {} tensors",
                table.display(),
                t.tensorrt,
                t.calibrator,
                t.tensors
            );
            trt = trt
                .with_int8(true)
                .with_fp16(true)
                .with_int8_calibration_table_name(table.display())
                .with_int8_use_native_calibration_table(true);
        }
    }
    if let Some(core) = opts.dla_core {
        // The detailed build log is where TensorRT says which layers it put on the DLA.
        trt = trt.with_dla(true).with_dla_core(core).with_detailed_build_log(true);
    }
    let mut note = None;
    if !opts.cache_dir.as_os_str().is_empty() {
        if let Err(e) = std::fs::create_dir_all(&opts.cache_dir) {
            log::warn!(
                "{}: cannot create the TensorRT cache folder ({e}): engines will be rebuilt at each start",
                opts.cache_dir.display()
            );
        } else {
            let dir = opts.cache_dir.display().to_string();
            let dla = opts.dla_core.map(|c| format!("dla{c}")).unwrap_or_else(|| "gpu".into());
            let prefix = cache_prefix(key, opts.precision.name(), &dla, versions);
            let cached = std::fs::read_dir(&opts.cache_dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .find(|n| n.starts_with(&prefix) && n.ends_with(".engine"));
            note = Some(match cached {
                Some(name) => format!("TensorRT: cached engine {dir}/{name}"),
                None => format!(
                    "TensorRT: no cached engine {dir}/{prefix}*: building one (seconds to minutes; the next start loads it)"
                ),
            });
            trt = trt
                .with_engine_cache(true)
                .with_engine_cache_path(&dir)
                .with_engine_cache_prefix(prefix)
                .with_timing_cache(true)
                .with_timing_cache_path(&dir);
        }
    }
    Ok((trt.build().error_on_failure(), note))
}

/// The engine cache file prefix: `{model hash}_{precision}_{gpu|dlaN}_trt{version}_ort{version}`.
fn cache_prefix(key: &str, precision: PrecisionName, device: &str, versions: &str) -> String {
    format!("{key}_{precision}_{device}_{versions}")
}

/// Creates a session builder with the providers in `providers` (in order of
/// preference) and returns it with the names of those the library accepted.
fn session_builder(
    env: &'static ort::environment::Environment,
    library: &Path,
    providers: &[Provider],
    tensorrt_options: &TensorRtOptions,
    key: &str,
    threads: usize,
    board_root: &Path,
) -> Result<(ort::session::builder::SessionBuilder, Vec<Provider>), EngineError> {
    let err = |what: &str, e: &dyn std::fmt::Display| {
        EngineError::Model(format!("{}: {what}: {e}", library.display()))
    };
    let mut builder = Session::builder(env).map_err(|e| err("cannot create a session", &e))?;
    if threads > 0 {
        builder = builder.with_intra_threads(threads).map_err(|e| err("threads", &e))?;
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
                    check_dla(core, trt.as_deref(), board_root).map_err(EngineError::Model)?;
                }
                let versions = cache_versions(trt.as_deref(), library);
                let (dispatch, cache) = tensorrt(tensorrt_options, key, &versions)?;
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
        let bytes = std::fs::read(path).map_err(|e| {
            EngineError::Io(format!(
                "{}: cannot read the model: {e} (check [model] path or --model)",
                path.display()
            ))
        })?;
        let key = model_key(&bytes);
        let model_err = |what: &str, e: &dyn std::fmt::Display| {
            EngineError::Model(format!("{}: {what}: {e}", path.display()))
        };
        let (mut builder, used) = session_builder(
            env,
            &library,
            &options.providers,
            &options.tensorrt,
            &key,
            options.threads,
            &options.board_root,
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
            model_err("ONNX Runtime cannot load this model (corrupt, or an engine build failure)", &e)
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
        if dims.len() != 4 || dim(0, 1) != 1 || dim(1, 3) != 3 {
            return Err(EngineError::Model(format!(
                "{}: the input has shape {dims:?}; jetdetect needs an image input [1, 3, H, W]",
                path.display()
            )));
        }
        let input_shape = [1, 3, dim(2, dh as usize), dim(3, dw as usize)];
        let mut metadata = BTreeMap::new();
        if let Ok(meta) = session.metadata() {
            for k in ["names", "stride", "imgsz", "task", "description"] {
                if let Some(v) = meta.custom(k) {
                    metadata.insert(k.to_string(), v);
                }
            }
        }
        let input_buf = vec![0f32; input_shape.iter().product()];
        let output_shape: Vec<usize> = {
            let t = TensorRef::from_array_view((input_shape, &input_buf[..]))
                .map_err(|e| model_err("input", &e))?;
            let out = session
                .run(ort::inputs![input_name.as_str() => t])
                .map_err(|e| model_err("the first run failed", &e))?;
            let (shape, _) =
                out[0].try_extract_tensor::<f32>().map_err(|e| model_err("the output is not f32", &e))?;
            shape.iter().map(|&d| d as usize).collect()
        };
        drop(progress);
        log::info!("{}: ready in {:.1} s", path.display(), started.elapsed().as_secs_f64());
        // Input and output bound once to tensors allocated here: each run reuses them.
        let input =
            Tensor::from_array((input_shape, input_buf)).map_err(|e| model_err("input tensor", &e))?;
        let mut output = Tensor::<f32>::new(&Allocator::default(), output_shape.clone())
            .map_err(|e| model_err("output tensor", &e))?;
        let output_name = session.outputs()[0].name().to_string();
        let mut binding = session.create_binding().map_err(|e| model_err("I/O binding", &e))?;
        binding.bind_input(&input_name, &input).map_err(|e| model_err("binding the input", &e))?;
        binding.bind_output(&output_name, &mut output).map_err(|e| model_err("binding the output", &e))?;
        let input_cname =
            CString::new(input_name.as_str()).map_err(|_| model_err("input name", &"contains a NUL byte"))?;
        let label = format!(
            "onnxruntime {} [{}] ({})",
            ort_version(&library),
            provider_names(&used, " > "),
            path.display()
        );
        let runtime = runtime_versions(&library, &used);
        Ok(OrtEngine {
            session,
            binding,
            input_name,
            input_cname,
            input_shape,
            input,
            stage_input: None,
            on_gpu: used[0] != Provider::Cpu,
            env,
            library,
            options: options.clone(),
            used: used.clone(),
            output_shape,
            output,
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
        self.input.try_extract_tensor_mut::<f32>().map(|(_, d)| d).unwrap_or(&mut [])
    }

    fn run(&mut self) -> Result<&[f32], EngineError> {
        let err = |e: String| EngineError::Run(format!("{}: {e}", self.label));
        if self.on_gpu && self.stage_input.is_none() {
            // A GPU session copies a host input when it is bound, not when it runs.
            bind_input(&self.binding, &self.input_cname, &self.input).map_err(err)?;
        }
        run_with_binding(&self.session, &self.binding).map_err(err)?;
        let data = self.output.data_ptr().cast::<f32>();
        if data.is_null() {
            return Err(err("the output tensor has no data".into()));
        }
        // SAFETY: `output` is a host tensor of `output_shape` f32 values allocated by ONNX
        // Runtime's CPU allocator, owned by `self` and bound as the session's output; the run
        // above has finished writing it, and the borrow of `self` keeps it alive and unbound.
        Ok(unsafe { std::slice::from_raw_parts(data, self.output_shape.iter().product()) })
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
        let err = |what: &str, e: &dyn std::fmt::Display| {
            EngineError::Model(format!("preprocessing graph ({device}): {what}: {e}"))
        };
        let mut trt = self.options.tensorrt.clone();
        match device {
            StageDevice::Dla => {
                if !self.used.contains(&Provider::TensorRt) {
                    return Err(EngineError::Model(format!(
                        "[preprocess] device = \"dla\" runs through TensorRT, but the engine runs on [{}]: \
                         add \"tensorrt\" to [engine] providers on a Jetson with DLA cores (Xavier, Orin; \
                         TensorRT <= 10.7), or use device = \"gpu\"",
                        provider_names(&self.used, " > ")
                    )));
                }
                // DLA computes in FP16 (or INT8) only.
                trt.precision = Precision::Fp16;
                trt.dla_core = Some(trt.dla_core.unwrap_or(0));
                expect_dla_placement(
                    onnx,
                    self.runtime.get("tensorrt").map(String::as_str),
                    &self.options.board_root,
                );
            }
            StageDevice::Gpu => {
                // The graph reproduces the CPU arithmetic exactly in FP32; it is tiny either way.
                trt.precision = Precision::Fp32;
                trt.dla_core = None;
            }
        }
        if !self.on_gpu {
            log::warn!(
                "[preprocess] device = \"{device}\": the engine runs on the CPU provider, so the \
                 preprocessing graph does too"
            );
        }
        let key = format!("pre{}", model_key(onnx));
        let (builder, used) = session_builder(
            self.env,
            &self.library,
            &self.used,
            &trt,
            &key,
            self.options.threads,
            &self.options.board_root,
        )?;
        // The stage runs just before the engine: threads spinning on after it would take
        // the CPU from the engine's own (measured: +4 ms per frame on 2 cores).
        let mut builder = builder.with_intra_op_spinning(false).map_err(|e| err("session options", &e))?;
        let started = std::time::Instant::now();
        let progress = Progress::start(format!("preprocessing graph ({device})"));
        let dla = device == StageDevice::Dla && used[0] == Provider::TensorRt;
        let capture = dla.then(|| {
            // TensorRT's placement lines are INFO; the provider may relay them below WARNING.
            self.env.set_log_level(ort::logging::LogLevel::Info);
            trt_log::Capture::start()
        });
        let session = builder.commit_from_memory(onnx);
        if let Some(capture) = capture {
            self.env.set_log_level(ort::logging::LogLevel::Warning);
            let versions = cache_versions(self.runtime.get("tensorrt").map(String::as_str), &self.library);
            report_dla_placement(capture.finish(), &trt, &key, &versions);
        }
        let session =
            session.map_err(|e| err("ONNX Runtime cannot build it (an engine build failure?)", &e))?;
        let (Some(input), Some(output)) = (session.inputs().first(), session.outputs().first()) else {
            return Err(EngineError::Model("preprocessing graph: needs one input and one output".into()));
        };
        let (input_name, output_name) = (input.name().to_string(), output.name().to_string());
        // The engine's input moves to its device once; every stage writes there.
        if self.stage_input.is_none() {
            let tensor = if self.on_gpu {
                let memory = gpu_memory().map_err(|e| err("GPU memory", &e))?;
                let alloc = Allocator::new(&self.session, memory).map_err(|e| err("GPU allocator", &e))?;
                Tensor::<f32>::new(&alloc, self.input_shape)
            } else {
                Tensor::<f32>::new(&Allocator::default(), self.input_shape)
            }
            .map_err(|e| err("the engine's input on its device", &e))?;
            self.binding
                .bind_input(self.input_name.as_str(), &tensor)
                .map_err(|e| err("binding the engine's input", &e))?;
            self.stage_input = Some(tensor);
        }
        let host = Tensor::<u8>::new(&Allocator::default(), input_shape.to_vec())
            .map_err(|e| err("input tensor", &e))?;
        let mut binding = session.create_binding().map_err(|e| err("I/O binding", &e))?;
        binding.bind_input(input_name.as_str(), &host).map_err(|e| err("binding the frame", &e))?;
        let shared = self.stage_input.as_mut().expect("created above");
        binding.bind_output(output_name, shared).map_err(|e| {
            err(&format!("binding the output to the engine's input {:?}", self.input_shape), &e)
        })?;
        let mut stage = OrtStage {
            on_gpu: used[0] != Provider::Cpu,
            label: format!(
                "onnxruntime [{}]",
                used.iter()
                    .map(|p| match (*p, trt.dla_core) {
                        (Provider::TensorRt, Some(core)) if device == StageDevice::Dla =>
                            format!("tensorrt dla{core}"),
                        _ => p.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(" > ")
            ),
            session,
            binding,
            input_cname: CString::new(input_name.as_str())
                .map_err(|_| err("input name", &"contains a NUL byte"))?,
            input: host,
            len: input_shape.iter().product(),
        };
        // One run now rather than on the first frame.
        stage.run(&vec![0; stage.len])?;
        drop(progress);
        log::info!(
            "preprocessing graph on {}: ready in {:.1} s",
            stage.label,
            started.elapsed().as_secs_f64()
        );
        Ok(Box::new(stage))
    }
}

/// Logs where TensorRT should put the layers of the DLA form of the preprocessing graph on this
/// board and TensorRT, by [`dla::place`], and warns of any DLA-stage layer it would not run there.
fn expect_dla_placement(onnx: &[u8], tensorrt: Option<&str>, board_root: &Path) {
    use prost::Message;
    let Some(trt) = tensorrt.and_then(dla::TensorRt::parse) else {
        log::info!(
            "preprocessing on DLA: TensorRT's version is not known, so the layer table is not checked"
        );
        return;
    };
    let soc = dla::Soc::detect(board_root).unwrap_or(dla::Soc::Orin);
    let Ok(model) = tract_onnx::pb::ModelProto::decode(onnx) else { return };
    let placed = dla::place(&model, trt, soc);
    let on_dla = placed.iter().filter(|n| n.placement == dla::Placement::Dla).count();
    log::info!(
        "preprocessing on DLA: by TensorRT {trt}'s DLA table ({soc:?}), {on_dla} of {} layers run on the DLA \
         (the arithmetic); the rest move data on the GPU",
        placed.len()
    );
    for n in placed.iter().filter(|n| n.name.starts_with("dla/")) {
        if let dla::Placement::Gpu(why) = &n.placement {
            log::warn!("preprocessing on DLA: {} ({}) will run on the GPU: {why}", n.name, n.op);
        }
    }
}

/// Logs where TensorRT put the DLA stage's layers, from its build log (`lines`), and saves the
/// report next to the engine cache; an engine loaded from the cache has no build log, so its
/// saved report is logged instead.
fn report_dla_placement(lines: Vec<String>, trt: &TensorRtOptions, key: &str, versions: &str) {
    let saved = (!trt.cache_dir.as_os_str().is_empty()).then(|| {
        let core = trt.dla_core.map(|c| format!("dla{c}")).unwrap_or_else(|| "gpu".into());
        trt.cache_dir
            .join(format!("{}.placement.txt", cache_prefix(key, trt.precision.name(), &core, versions)))
    });
    let placement = trt_log::Placement::parse(&lines);
    let placement = if placement.is_empty() {
        match saved.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
            Some(text) => {
                let path = saved.as_ref().expect("read above").display();
                log::info!(
                    "preprocessing on DLA: placement when the cached engine was built ({path}):\n{text}"
                );
                return;
            }
            None => {
                log::info!(
                    "preprocessing on DLA: TensorRT reported no placement (a cached engine from before \
                     jetdetect saved it? delete it from {} to rebuild and see)",
                    trt.cache_dir.display()
                );
                return;
            }
        }
    } else {
        placement
    };
    log::info!(
        "preprocessing on DLA: TensorRT put {} layer group(s) on DLA core {} and {} layer(s) on the GPU",
        placement.dla.len(),
        trt.dla_core.unwrap_or(0),
        placement.gpu.len()
    );
    for layer in placement.off_the_dla("dla/") {
        log::warn!("preprocessing on DLA: TensorRT runs a layer meant for the DLA on the GPU: {layer}");
    }
    if let Some(path) = saved {
        if let Err(e) = std::fs::write(&path, placement.to_text()) {
            log::warn!("{}: cannot save the DLA placement report: {e}", path.display());
        }
    }
}

/// Accelerated preprocessing: the graph from [`crate::preprocess::graph`] in
/// its own session, its output bound to the engine's input on the device.
struct OrtStage {
    session: Session,
    binding: ort::session::IoBinding,
    input_cname: CString,
    input: Tensor<u8>,
    len: usize,
    on_gpu: bool,
    label: String,
}

impl InputStage for OrtStage {
    fn describe(&self) -> String {
        self.label.clone()
    }

    fn run(&mut self, bytes: &[u8]) -> Result<(), EngineError> {
        let err = |e: String| EngineError::Run(format!("preprocessing on {}: {e}", self.label));
        if bytes.len() != self.len {
            return Err(EngineError::Run(format!(
                "preprocessing on {}: the graph takes {} bytes, the frame has {}",
                self.label,
                self.len,
                bytes.len()
            )));
        }
        let (_, host) = self.input.try_extract_tensor_mut::<u8>().map_err(|e| err(e.to_string()))?;
        host.copy_from_slice(bytes);
        if self.on_gpu {
            // Binding is when the bytes are copied to the device.
            bind_input(&self.binding, &self.input_cname, &self.input).map_err(err)?;
        }
        run_with_binding(&self.session, &self.binding).map_err(err)
    }
}

/// The message of an ONNX Runtime status, which is released; `Ok` for success (null).
fn status(api: &ort::sys::OrtApi, status: ort::sys::OrtStatusPtr) -> Result<(), String> {
    if status.0.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null status from the C API carries a NUL-terminated message, and is
    // released exactly once, here, after the message is copied.
    unsafe {
        let message =
            std::ffi::CStr::from_ptr((api.GetErrorMessage)(status.0)).to_string_lossy().into_owned();
        (api.ReleaseStatus)(status.0);
        Err(message)
    }
}

/// Runs `session` on the inputs and outputs bound in `binding`, through the C API's
/// `RunWithBinding`. `ort`'s `run_binding` also gathers the bound outputs into a new
/// `SessionOutputs` (heap allocations on every frame); here the outputs are tensors the
/// caller owns and reads in place, so the run is all that is needed.
fn run_with_binding(session: &Session, binding: &ort::session::IoBinding) -> Result<(), String> {
    let api = ort::api();
    // SAFETY: both pointers come from live objects the caller owns; `&mut self` at every call
    // site keeps a session from running on its binding twice at once.
    status(api, unsafe { (api.RunWithBinding)(session.ptr().cast_mut(), std::ptr::null(), binding.ptr()) })
}

/// Binds `value` to the input `name` again (`ort`'s `bind_input` also records the value
/// under a new `String` each time). The binding already holds `value` from the first bind
/// and keeps it alive; on GPU providers binding is when the host data is copied over.
fn bind_input(
    binding: &ort::session::IoBinding,
    name: &CString,
    value: &impl AsPointer<Sys = ort::sys::OrtValue>,
) -> Result<(), String> {
    let api = ort::api();
    // SAFETY: live binding and value; the name is NUL-terminated.
    status(api, unsafe { (api.BindInput)(binding.ptr().cast_mut(), name.as_ptr(), value.ptr()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensorrt_version_comes_from_the_resolved_libnvinfer() {
        let root = std::env::temp_dir().join(format!("jetdetect-trt-{}", std::process::id()));
        let (empty, jetpack, wheel) = (root.join("empty"), root.join("jetpack"), root.join("wheel"));
        for d in [&empty, &jetpack, &wheel] {
            std::fs::create_dir_all(d).unwrap();
        }
        // JetPack: libnvinfer.so.8 -> libnvinfer.so.8.5.2 (plus unrelated libraries).
        std::fs::write(jetpack.join("libnvinfer.so.8.5.2"), b"").unwrap();
        let _ = std::fs::remove_file(jetpack.join("libnvinfer.so.8"));
        std::os::unix::fs::symlink("libnvinfer.so.8.5.2", jetpack.join("libnvinfer.so.8")).unwrap();
        std::fs::write(jetpack.join("libnvinfer_plugin.so.8.5.2"), b"").unwrap();
        // A pip wheel ships only the major-version name.
        std::fs::write(wheel.join("libnvinfer.so.10"), b"").unwrap();
        assert_eq!(
            tensorrt_version(&[empty.clone(), jetpack.clone(), wheel.clone()]).as_deref(),
            Some("8.5.2")
        );
        assert_eq!(tensorrt_version(&[root.join("missing"), wheel]).as_deref(), Some("10"));
        assert_eq!(tensorrt_version(&[empty]), None);
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn dla_is_checked_against_the_board_and_the_tensorrt_version() {
        let board =
            |name: &str| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jetson").join(name);
        for b in ["xavier-nx-jp5", "agx-orin-jp6"] {
            assert_eq!(dla_cores(&board(b)), 2, "{b}");
            check_dla(0, Some("10.3.0"), &board(b)).unwrap();
            check_dla(1, Some("8.5.2"), &board(b)).unwrap();
            let e = check_dla(2, Some("8.5.2"), &board(b)).unwrap_err();
            assert!(e.contains("has 2 DLA cores: use 0 to 1"), "{e}");
        }
        let one = board("orin-nx-10w"); // Orin NX 8GB: one DLA core
        assert_eq!(dla_cores(&one), 1);
        check_dla(0, Some("8.5.2"), &one).unwrap();
        assert!(check_dla(1, Some("8.5.2"), &one).unwrap_err().contains("has 1 DLA core: use 0"));
        for b in ["nano-jp4", "orin-nano-jp6", "orin-nano-7w", "not-a-jetson"] {
            assert_eq!(dla_cores(&board(b)), 0, "{b}");
            let e = check_dla(0, Some("10.3.0"), &board(b)).unwrap_err();
            assert!(e.contains("this board has no DLA") && e.contains("device = \"gpu\""), "{e}");
        }
        // JetPack 7 keeps the hardware but its TensorRT has no DLA.
        let e = check_dla(0, Some("10.13.3"), &board("agx-orin-jp7")).unwrap_err();
        assert!(e.contains("TensorRT 10.13.3 has no DLA support"), "{e}");
        assert!(check_dla(0, Some("11.4"), &board("agx-orin-jp7")).is_err());
        check_dla(0, Some("10.7.0"), &board("agx-orin-jp7")).unwrap();
        check_dla(0, None, &board("agx-orin-jp6")).unwrap();
    }

    #[test]
    fn cache_names_separate_models_precisions_devices_and_versions() {
        let a = cache_prefix(&model_key(b"model a"), PrecisionName::Fp16, "gpu", "trt10.3.0_ort1.19.0");
        assert!(a.ends_with("_fp16_gpu_trt10.3.0_ort1.19.0"), "{a}");
        let others = [
            cache_prefix(&model_key(b"model b"), PrecisionName::Fp16, "gpu", "trt10.3.0_ort1.19.0"),
            cache_prefix(&model_key(b"model a"), PrecisionName::Int8, "gpu", "trt10.3.0_ort1.19.0"),
            cache_prefix(&model_key(b"model a"), PrecisionName::Fp16, "dla0", "trt10.3.0_ort1.19.0"),
            cache_prefix(&model_key(b"model a"), PrecisionName::Fp16, "gpu", "trt8.5.2_ort1.19.0"),
        ];
        for o in others {
            assert!(!o.starts_with(&a) && !a.starts_with(&o), "{a} vs {o}");
        }
        assert_eq!(model_key(b"model a"), model_key(b"model a"));
    }
}
