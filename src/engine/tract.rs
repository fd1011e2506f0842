//! The portable CPU engine: [tract](https://github.com/sonos/tract), pure Rust,
//! no system library. Runs anywhere the binary runs, the static aarch64 build included.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use tract_onnx::prelude::tract_data::internal::DimLike;
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::infer::Factoid;

use super::{Engine, EngineError, EngineOptions};

/// A model optimised and planned by tract, with its buffers.
pub struct TractEngine {
    // Keeps the plan alive for `state` (which also holds it) and documents ownership.
    _plan: Arc<TypedSimplePlan>,
    state: TypedSimpleState,
    input_shape: [usize; 4],
    input: Vec<f32>,
    input_tensor: Arc<Tensor>,
    output_shape: Vec<usize>,
    output: Vec<f32>,
    metadata: BTreeMap<String, String>,
    label: String,
}

fn model_err(path: &Path, what: &str, source: TractError) -> EngineError {
    EngineError::Tract { context: format!("{}: {what}", path.display()), source }
}

impl TractEngine {
    /// Reads, optimises and plans the ONNX model at `path`.
    ///
    /// The model must take one image input (`[1, 3, H, W]`, any of them symbolic)
    /// and its first output is the one returned by [`Engine::run`].
    pub fn load(path: &Path, options: &EngineOptions) -> Result<TractEngine, EngineError> {
        let bytes = std::fs::read(path).map_err(|source| EngineError::Read { path: path.into(), source })?;
        let onnx = tract_onnx::onnx();
        let mut model = onnx.model_for_read(&mut bytes.as_slice()).map_err(|e| {
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
                "{}: the model has {} inputs; jetdetect needs one image input [1, 3, H, W]",
                path.display(),
                model.inputs.len()
            )));
        }
        let fact = model.input_fact(0).map_err(|e| model_err(path, "cannot read the input", e))?.clone();
        let (dw, dh) = options.dynamic_input;
        // Open shapes (rank unknown) read as four unknown dims.
        let dims: Vec<Option<usize>> = if fact.shape.is_open() {
            vec![None; 4]
        } else {
            fact.shape.dims().map(|d| d.concretize().and_then(|d| d.to_usize().ok())).collect()
        };
        if dims.len() != 4 || dims[0].is_some_and(|n| n != 1) || dims[1].is_some_and(|c| c != 3) {
            return Err(EngineError::Model(format!(
                "{}: the input has shape {:?}; jetdetect needs an image input [1, 3, H, W]",
                path.display(),
                fact.shape
            )));
        }
        let input_shape = [1, 3, dims[2].unwrap_or(dh as usize), dims[3].unwrap_or(dw as usize)];
        model = model
            .with_input_fact(0, f32::fact(input_shape).into())
            .map_err(|e| model_err(path, "cannot set the input shape", e))?;
        let typed = model
            .into_optimized()
            .map_err(|e| model_err(path, "tract cannot optimise this model (unsupported operator?)", e))?;
        let output_shape =
            typed.output_fact(0).ok().and_then(|f| f.shape.as_concrete().map(|s| s.to_vec())).ok_or_else(
                || {
                    EngineError::Model(format!(
                        "{}: the output shape is not fixed for input {input_shape:?}",
                        path.display()
                    ))
                },
            )?;
        let plan = typed.into_runnable().map_err(|e| model_err(path, "cannot plan the model", e))?;
        let state = plan.spawn().map_err(|e| model_err(path, "cannot create run state", e))?;
        let input_tensor = Arc::new(
            Tensor::zero::<f32>(&input_shape).map_err(|e| model_err(path, "cannot allocate input", e))?,
        );
        let n_in: usize = input_shape.iter().product();
        let n_out: usize = output_shape.iter().product();
        Ok(TractEngine {
            _plan: plan,
            state,
            input_shape,
            input: vec![0.0; n_in],
            input_tensor,
            output: vec![0.0; n_out],
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
        &mut self.input
    }

    fn run(&mut self) -> Result<&[f32], EngineError> {
        let run_err = |source: TractError| EngineError::Tract { context: self.label.clone(), source };
        // The run state drops its reference to the input at the end of each run,
        // so the tensor is ours again here and is refilled in place.
        match Arc::get_mut(&mut self.input_tensor) {
            Some(t) => t.try_as_plain_ram_mut().and_then(|mut v| {
                v.as_slice_mut::<f32>()?.copy_from_slice(&self.input);
                Ok(())
            }),
            None => {
                self.input_tensor =
                    Arc::new(Tensor::from_shape(&self.input_shape, &self.input).map_err(run_err)?);
                Ok(())
            }
        }
        .map_err(run_err)?;
        let outputs =
            self.state.run(tvec![TValue::from_const(self.input_tensor.clone())]).map_err(run_err)?;
        let expected = self.output.len();
        let output = &mut self.output;
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
                    "{}: output has {n} values, expected {:?}",
                    self.label, self.output_shape
                )))
            }
        }
        Ok(&self.output)
    }

    fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }
}
