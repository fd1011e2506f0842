//! TensorRT through ONNX Runtime's provider: `[engine.tensorrt]` (precision, INT8 table, DLA
//! core, caches), the provider's options, the DLA checks against the board and the TensorRT
//! release, and the DLA placement TensorRT is expected to make and reports.

use super::*;

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
    type Err = crate::named::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| {
            crate::named::UnknownName::new("[engine.tensorrt] precision: ", s, "", "fp16, fp32 or int8")
        })
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
    pub fn new(name: PrecisionName, table: Option<PathBuf>) -> Result<Precision, NoCalibrationTable> {
        Ok(match name {
            PrecisionName::Fp16 => Precision::Fp16,
            PrecisionName::Fp32 => Precision::Fp32,
            PrecisionName::Int8 => Precision::Int8 { table: table.ok_or(NoCalibrationTable)? },
        })
    }
}

/// `precision = "int8"` without `int8_calibration_table`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("[engine.tensorrt] int8_calibration_table: precision = \"int8\" needs a calibration table")]
pub struct NoCalibrationTable;

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
pub(super) struct TensorRtToml {
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
    type Error = NoCalibrationTable;
    fn try_from(t: TensorRtToml) -> Result<Self, NoCalibrationTable> {
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

/// Checks that DLA core `core` can be used: TensorRT 10.7 was the last
/// release with DLA, and the board must have the core.
pub fn check_dla(core: u32, tensorrt: Option<&str>, board: &DlaBoard) -> Result<(), DlaUnavailable> {
    if let Some(v) = tensorrt {
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        if (major, minor) > (10, 7) {
            return Err(DlaUnavailable::TensorRt { core, tensorrt: v.into() });
        }
    }
    match board.cores {
        0 => Err(DlaUnavailable::NoDla { core, searched: board.searched.clone() }),
        n if core as usize >= n => Err(DlaUnavailable::NoSuchCore { core, cores: n }),
        _ => Ok(()),
    }
}

/// A DLA core that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DlaUnavailable {
    /// TensorRT past 10.7 has no DLA.
    #[error(
        "DLA core {core} was asked for, but TensorRT {tensorrt} has no DLA support (10.7 was the last \
         release with it; JetPack 4.6-6.x ship 8.2-10.3): remove [engine.tensorrt] dla_core and use \
         [preprocess] device = \"gpu\""
    )]
    TensorRt {
        /// The core asked for.
        core: u32,
        /// TensorRT's version.
        tensorrt: String,
    },
    /// A board without DLA.
    #[error(
        "DLA core {core} was asked for, but this board has no DLA (none under {}): DLA exists on \
         Jetson Xavier and Orin AGX/NX, not on Nano, TX2 or Orin Nano; remove [engine.tensorrt] \
         dla_core and use [preprocess] device = \"gpu\"",
        searched.display()
    )]
    NoDla {
        /// The core asked for.
        core: u32,
        /// Where the cores were looked for.
        searched: PathBuf,
    },
    /// A core number past the board's last.
    #[error(
        "DLA core {core} was asked for, but this board has {}",
        if *cores == 1 { "1 DLA core: use 0".to_string() } else { format!("{cores} DLA cores: use 0 to {}", cores - 1) }
    )]
    NoSuchCore {
        /// The core asked for.
        core: u32,
        /// How many the board has.
        cores: usize,
    },
}

/// TensorRT's optimisation profile for a model with a dynamic batch axis: the input shapes its
/// engine is built for (`trt_profile_{min,opt,max}_shapes`), one to `max` images, tuned for
/// `max` (the shape under load). Without one, TensorRT would rebuild its engine for each new
/// batch size it meets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchProfile {
    /// `input:1xCxHxW`.
    pub min: String,
    /// `input:NxCxHxW`.
    pub max: String,
}

/// The profile for `onnx` run with up to `max` images, when its first input's batch axis is
/// dynamic (`None` otherwise, or for `max` 1); `size` is `[model] input_width/height`, for a
/// model whose height and width are dynamic too.
pub fn batch_profile(onnx: &[u8], max: usize, (w, h): (u32, u32)) -> Option<BatchProfile> {
    use prost::Message;
    use tract_onnx::pb::tensor_shape_proto::dimension::Value;
    if max < 2 {
        return None;
    }
    let model = tract_onnx::pb::ModelProto::decode(onnx).ok()?;
    let graph = model.graph?;
    let input = graph.input.iter().find(|i| !graph.initializer.iter().any(|t| t.name == i.name))?;
    let Some(tract_onnx::pb::type_proto::Value::TensorType(t)) = input.r#type.as_ref()?.value.as_ref() else {
        return None;
    };
    let dims: Vec<Option<i64>> = t
        .shape
        .as_ref()?
        .dim
        .iter()
        .map(|d| match d.value {
            Some(Value::DimValue(v)) if v > 0 => Some(v),
            _ => None,
        })
        .collect();
    if dims.len() != 4 || dims[0].is_some() {
        return None;
    }
    let c = dims[1].unwrap_or(3);
    let (h, w) = (dims[2].unwrap_or(h as i64), dims[3].unwrap_or(w as i64));
    let shape = |n: usize| format!("{}:{n}x{c}x{h}x{w}", input.name);
    Some(BatchProfile { min: shape(1), max: shape(max) })
}

/// The TensorRT provider with `opts`; `key` names the model (its hash) and the
/// runtime versions, so a cached engine is reused only for the same model,
/// precision, device (DLA core or GPU), TensorRT and ONNX Runtime. (ONNX Runtime
/// adds the GPU's compute capability to the file name itself.)
pub(super) fn tensorrt(
    opts: &TensorRtOptions,
    key: &str,
    versions: &str,
    profile: Option<&BatchProfile>,
) -> Result<(ep::ExecutionProviderDispatch, Option<String>), EngineError> {
    let mut trt = ep::TensorRT::default()
        .with_builder_optimization_level(opts.builder_optimization_level)
        .with_max_workspace_size(opts.workspace_mib << 20)
        .with_cuda_graph(opts.cuda_graph);
    if let Some(p) = profile {
        log::info!("TensorRT: one engine for batches of {} to {}", p.min, p.max);
        trt = trt
            .with_profile_min_shapes(&p.min)
            .with_profile_opt_shapes(&p.max)
            .with_profile_max_shapes(&p.max);
    }
    match &opts.precision {
        Precision::Fp16 => trt = trt.with_fp16(true),
        Precision::Fp32 => {}
        Precision::Int8 { table } => {
            // TensorRT's own cache format: without the native flag ONNX Runtime would parse it as its
            // FlatBuffers table. Checked here, so a wrong file fails at start, not at the engine build.
            let t = crate::engine::calibration::read(table)?;
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
pub(super) fn cache_prefix(key: &str, precision: PrecisionName, device: &str, versions: &str) -> String {
    format!("{key}_{precision}_{device}_{versions}")
}

/// Logs where TensorRT should put the layers of the DLA form of the preprocessing graph on this
/// board and TensorRT, by [`dla::place`], and warns of any DLA-stage layer it would not run there.
pub(super) fn expect_dla_placement(onnx: &[u8], tensorrt: Option<&str>, board: &DlaBoard) {
    use prost::Message;
    let Some(trt) = tensorrt.and_then(dla::TensorRt::parse) else {
        log::info!(
            "preprocessing on DLA: TensorRT's version is not known, so the layer table is not checked"
        );
        return;
    };
    let soc = board.soc.unwrap_or(dla::Soc::Orin);
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
pub(super) fn report_dla_placement(lines: Vec<String>, trt: &TensorRtOptions, key: &str, versions: &str) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_batch_gets_one_profile_from_one_image_to_the_cameras() {
        let model = |m: &str| {
            std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(m)).unwrap()
        };
        let batch = model("obstacles-v8-batch.onnx");
        assert_eq!(
            batch_profile(&batch, 4, (640, 640)),
            Some(BatchProfile { min: "images:1x3x256x256".into(), max: "images:4x3x256x256".into() })
        );
        assert_eq!(batch_profile(&batch, 1, (640, 640)), None, "one camera: no profile");
        assert_eq!(batch_profile(&model("obstacles-v8.onnx"), 4, (640, 640)), None, "batch fixed at 1");
        assert_eq!(batch_profile(b"not a model", 4, (640, 640)), None);
    }

    #[test]
    fn dla_is_checked_against_the_board_and_the_tensorrt_version() {
        let root =
            |name: &str| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jetson").join(name);
        let board = |name: &str| crate::detector::dla_board(&root(name));
        let dla_cores = |b: &DlaBoard| b.cores;
        for b in ["xavier-nx-jp5", "agx-orin-jp6"] {
            assert_eq!(dla_cores(&board(b)), 2, "{b}");
            check_dla(0, Some("10.3.0"), &board(b)).unwrap();
            check_dla(1, Some("8.5.2"), &board(b)).unwrap();
            let e = check_dla(2, Some("8.5.2"), &board(b)).unwrap_err().to_string();
            assert!(e.contains("has 2 DLA cores: use 0 to 1"), "{e}");
        }
        let one = board("orin-nx-10w"); // Orin NX 8GB: one DLA core
        assert_eq!(dla_cores(&one), 1);
        check_dla(0, Some("8.5.2"), &one).unwrap();
        assert!(check_dla(1, Some("8.5.2"), &one).unwrap_err().to_string().contains("has 1 DLA core: use 0"));
        for b in ["nano-jp4", "orin-nano-jp6", "orin-nano-7w", "not-a-jetson"] {
            assert_eq!(dla_cores(&board(b)), 0, "{b}");
            let e = check_dla(0, Some("10.3.0"), &board(b)).unwrap_err().to_string();
            assert!(e.contains("this board has no DLA") && e.contains("device = \"gpu\""), "{e}");
        }
        // JetPack 7 keeps the hardware but its TensorRT has no DLA.
        let e = check_dla(0, Some("10.13.3"), &board("agx-orin-jp7")).unwrap_err().to_string();
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
