//! The portable CPU engine: [tract](https://github.com/sonos/tract), pure Rust,
//! no system library. Runs anywhere the binary runs, the static aarch64 build included.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use tract_onnx::prelude::tract_data::internal::DimLike;
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::infer::Factoid;

use super::{Engine, EngineError, EngineOptions};

/// One planned form of the model: for one batch size, with its buffers.
struct Planned {
    // Keeps the plan alive for `state` (which also holds it) and documents ownership.
    _plan: Arc<TypedSimplePlan>,
    state: TypedSimpleState,
    /// `[slots, 3, H, W]`.
    shape: [usize; 4],
    input: Vec<f32>,
    input_tensor: Arc<Tensor>,
    /// The output's shape, `[slots, ...]`.
    output_shape: Vec<usize>,
    output: Vec<f32>,
}

/// A model optimised and planned by tract, with its buffers: one plan per batch size it runs
/// (one, or 1..=max for a dynamic batch axis).
pub struct TractEngine {
    /// Plans by batch size: `plans[0]` takes `slots[0]` images, and so on.
    plans: Vec<Planned>,
    /// The plan the next run uses.
    current: usize,
    /// The model's batch axis is dynamic.
    dynamic: bool,
    input_shape: [usize; 4],
    output_shape: Vec<usize>,
    metadata: BTreeMap<String, String>,
    label: String,
}

fn model_err(path: &Path, what: &str, source: TractError) -> EngineError {
    EngineError::Tract { context: format!("{}: {what}", path.display()), source }
}

/// Optimises and plans `model` for inputs of `shape`, with its buffers and output shape.
fn plan(path: &Path, model: InferenceModel, shape: [usize; 4]) -> Result<Planned, EngineError> {
    let model = model
        .with_input_fact(0, f32::fact(shape).into())
        .map_err(|e| model_err(path, "cannot set the input shape", e))?;
    let optimise = |e| model_err(path, "tract cannot optimise this model (unsupported operator?)", e);
    let mut typed = model.into_typed().map_err(optimise)?;
    // FP16 weights (ultralytics' quantize=16, exported on the CPU: float32 input and output,
    // float16 inside) are computed in float32, as ONNX Runtime's CPU provider computes them (on
    // x86 it has no float16 kernels and widens): in float16, tract's scores differed from
    // ultralytics' predict by 3e-3 and moved boxes across the threshold and through NMS
    // (tests/it/families.rs); on a CPU float32 costs nothing in speed that matters here.
    if typed.nodes().iter().any(|n| n.outputs.iter().any(|o| o.fact.datum_type == f16::datum_type())) {
        use tract_onnx::tract_core::{floats::FloatPrecisionTranslator, transform::ModelTransform};
        FloatPrecisionTranslator::new(f16::datum_type(), f32::datum_type())
            .transform(&mut typed)
            .map_err(optimise)?;
    }
    let typed = typed.into_optimized().map_err(optimise)?;
    let output_shape =
        typed.output_fact(0).ok().and_then(|f| f.shape.as_concrete().map(|s| s.to_vec())).ok_or_else(
            || {
                EngineError::Model(format!(
                    "{}: the output shape is not fixed for input {shape:?}",
                    path.display()
                ))
            },
        )?;
    if output_shape.first() != Some(&shape[0]) {
        return Err(EngineError::Model(format!(
            "{}: for {} images in, the output is {output_shape:?}: its first axis should be the batch",
            path.display(),
            shape[0]
        )));
    }
    let plan = typed.into_runnable().map_err(|e| model_err(path, "cannot plan the model", e))?;
    let state = plan.spawn().map_err(|e| model_err(path, "cannot create run state", e))?;
    let input_tensor =
        Arc::new(Tensor::zero::<f32>(&shape).map_err(|e| model_err(path, "cannot allocate input", e))?);
    Ok(Planned {
        _plan: plan,
        state,
        shape,
        input: vec![0.0; shape.iter().product()],
        input_tensor,
        output: vec![0.0; output_shape.iter().product()],
        output_shape,
    })
}

/// The `NonMaxSuppression` node of a graph with NMS inside (ultralytics' `nms=True`), by name.
/// tract plans such a graph but fails running it: ultralytics' NMS graph slices the kept
/// boxes by a length that depends on the data (measured with ultralytics 8.4's export:
/// "Invalid range 0..100 for slicing" on the first frame), so it is refused at load.
fn nms_inside(proto: &tract_onnx::pb::ModelProto) -> Option<String> {
    let graph = proto.graph.as_ref()?;
    graph
        .node
        .iter()
        .find(|n| n.op_type == "NonMaxSuppression")
        .map(|n| format!("NonMaxSuppression {}", n.name))
}

impl TractEngine {
    /// Reads, optimises and plans the ONNX model at `path`.
    ///
    /// The model must take one image input (`[N, 3, H, W]`, any of them symbolic; N is 1, a
    /// fixed batch, or dynamic: planned for 1 to [`EngineOptions::batch`] images) and its first
    /// output is the one returned by [`Engine::run`].
    pub fn load(path: &Path, options: &EngineOptions) -> Result<TractEngine, EngineError> {
        let bytes = std::fs::read(path).map_err(|source| EngineError::Read { path: path.into(), source })?;
        // The shapes an exporter writes for intermediate values (`value_info`) are hints tract's
        // own analysis does without; a dynamic export's are symbolic (`batch`, `height`) and
        // tract, holding them against the concrete input it is given, fails to unify
        // `Sym(batch)` with 1. Fixed and dynamic exports alike run without them.
        let onnx = tract_onnx::onnx().with_ignore_value_info(true);
        let proto = onnx.proto_model_for_read(&mut bytes.as_slice()).map_err(|e| {
            model_err(path, "not a valid ONNX model (corrupt, truncated, or another format?)", e)
        })?;
        if let Some(op) = nms_inside(&proto) {
            return Err(EngineError::Model(format!(
                "{}: the model has NMS inside ({op}: an export with nms=True), which tract cannot run \
                 (its output length depends on the picture): use [engine] kind = \"onnxruntime\", or \
                 re-export without it (yolo export model=... format=onnx, nms unset; or nms=False for an \
                 NMS-free head such as YOLO26's or YOLOv10's)",
                path.display()
            )));
        }
        let model = onnx.model_for_proto_model(&proto).map_err(|e| {
            model_err(path, "not a valid ONNX model (corrupt, truncated, or another format?)", e)
        })?;

        let mut metadata = BTreeMap::new();
        for (k, v) in &model.properties {
            if let Some(key) = k.strip_prefix("onnx.metadata_props.") {
                if let Ok(s) = v.try_as_plain_ram().and_then(|p| p.to_scalar::<String>().cloned()) {
                    metadata.insert(key.to_string(), s);
                }
            }
        }

        if model.inputs.len() != 1 {
            return Err(EngineError::Model(format!(
                "{}: the model has {} inputs; jetdetect needs one image input [N, 3, H, W]",
                path.display(),
                model.inputs.len()
            )));
        }
        let fact = model.input_fact(0).map_err(|e| model_err(path, "cannot read the input", e))?.clone();
        if let Some(t) = fact.datum_type.concretize().filter(|t| *t != f32::datum_type()) {
            return Err(super::input_not_f32(path, &format!("{t:?}")));
        }
        let (dw, dh) = options.dynamic_input;
        // Open shapes (rank unknown) read as four unknown dims.
        let dims: Vec<Option<usize>> = if fact.shape.is_open() {
            vec![None; 4]
        } else {
            fact.shape.dims().map(|d| d.concretize().and_then(|d| d.to_usize().ok())).collect()
        };
        if dims.len() != 4 || dims[0] == Some(0) || dims[1].is_some_and(|c| c != 3) {
            return Err(EngineError::Model(format!(
                "{}: the input has shape {:?}; jetdetect needs an image input [N, 3, H, W]",
                path.display(),
                fact.shape
            )));
        }
        let (h, w) = (dims[2].unwrap_or(dh as usize), dims[3].unwrap_or(dw as usize));
        let batches: Vec<usize> = match dims[0] {
            Some(n) => vec![n],
            // tract runs a batch slower per image than one image at a time (docs/cameras.md:
            // 2 images 2.4x, 4 images 5.8x one image's time): unless asked, one per run.
            None => (1..=options.batch(1)).collect(),
        };
        let mut plans = Vec::with_capacity(batches.len());
        for &n in &batches {
            plans.push(plan(path, model.clone(), [n, 3, h, w])?);
        }
        // One image's output: the planned shape with N = 1 (checked to be the batch axis).
        let mut output_shape = plans[0].output_shape.clone();
        output_shape[0] = 1;
        Ok(TractEngine {
            plans,
            current: 0,
            dynamic: dims[0].is_none(),
            input_shape: [1, 3, h, w],
            output_shape,
            metadata,
            label: format!("tract ({})", path.display()),
        })
    }
}

impl Engine for TractEngine {
    fn describe(&self) -> String {
        self.label.clone()
    }

    fn input_shape(&self) -> [usize; 4] {
        self.input_shape
    }

    fn output_shape(&self) -> &[usize] {
        &self.output_shape
    }

    fn input_mut(&mut self) -> &mut [f32] {
        &mut self.plans[self.current].input
    }

    fn max_batch(&self) -> usize {
        self.plans.iter().map(|p| p.shape[0]).max().unwrap_or(1)
    }

    fn dynamic_batch(&self) -> bool {
        self.dynamic
    }

    fn set_batch(&mut self, n: usize) -> Result<usize, EngineError> {
        // A fixed batch N (one plan of N slots) runs its N slots for any 1..=N images.
        let fixed = self.plans[0].shape[0] > 1;
        let found = match fixed {
            true => (n >= 1 && n <= self.plans[0].shape[0]).then_some(0),
            false => self.plans.iter().position(|p| p.shape[0] == n),
        };
        match found {
            Some(i) => {
                self.current = i;
                Ok(self.plans[i].shape[0])
            }
            None => Err(EngineError::Run(format!(
                "{}: no plan for {n} images per run (at most {})",
                self.label,
                self.max_batch()
            ))),
        }
    }

    fn run(&mut self) -> Result<&[f32], EngineError> {
        let label = &self.label;
        let run_err = |source: TractError| EngineError::Tract { context: label.clone(), source };
        let p = &mut self.plans[self.current];
        // The run state drops its reference to the input at the end of each run,
        // so the tensor is ours again here and is refilled in place.
        match Arc::get_mut(&mut p.input_tensor) {
            Some(t) => t.try_as_plain_ram_mut().and_then(|mut v| {
                v.as_slice_mut::<f32>()?.copy_from_slice(&p.input);
                Ok(())
            }),
            None => {
                p.input_tensor = Arc::new(Tensor::from_shape(&p.shape, &p.input).map_err(run_err)?);
                Ok(())
            }
        }
        .map_err(run_err)?;
        let outputs = p.state.run(tvec![TValue::from_const(p.input_tensor.clone())]).map_err(run_err)?;
        let expected = p.output.len();
        let output = &mut p.output;
        let copied = outputs[0].try_as_plain_ram().and_then(|v| {
            let s = v.as_slice::<f32>()?;
            if s.len() == expected {
                output.copy_from_slice(s);
            }
            Ok(s.len())
        });
        match copied.map_err(run_err)? {
            n if n == expected => {}
            n => {
                return Err(EngineError::Run(format!(
                    "{}: output has {n} values, expected {} images of {:?}",
                    self.label, p.shape[0], self.output_shape
                )))
            }
        }
        Ok(&p.output)
    }

    fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }
}
