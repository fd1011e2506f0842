//! Accelerated preprocessing: the generated graph run in its own session, its output bound to
//! the engine's input on the device ([`InputStage`]).

use super::*;

/// Accelerated preprocessing: the graph from [`crate::preprocess::graph`] in
/// its own session, its output bound to the engine's input on the device.
pub(super) struct OrtStage {
    pub(super) session: Session,
    pub(super) binding: ort::session::IoBinding,
    pub(super) input_cname: CString,
    pub(super) input: Tensor<u8>,
    pub(super) len: usize,
    pub(super) on_gpu: bool,
    pub(super) label: String,
}

impl InputStage for OrtStage {
    fn describe(&self) -> String {
        self.label.clone()
    }

    fn run(&mut self, bytes: &[u8]) -> Result<(), EngineError> {
        let err = |source: ort::Error| EngineError::Ort {
            context: format!("preprocessing on {}", self.label),
            source,
        };
        if bytes.len() != self.len {
            return Err(EngineError::Run(format!(
                "preprocessing on {}: the graph takes {} bytes, the frame has {}",
                self.label,
                self.len,
                bytes.len()
            )));
        }
        let (_, host) = self.input.try_extract_tensor_mut::<u8>().map_err(err)?;
        host.copy_from_slice(bytes);
        if self.on_gpu {
            // Binding is when the bytes are copied to the device.
            bind_input(&self.binding, &self.input_cname, &self.input).map_err(err)?;
        }
        run_with_binding(&self.session, &self.binding).map_err(err)
    }
}

/// Builds the input stage for the preprocessing graph `onnx` on `device`: its own session (on
/// TensorRT's DLA, or the engine's GPU), its output bound to the engine's input there.
pub(super) fn build_stage(
    engine: &mut OrtEngine,
    onnx: &[u8],
    input_shape: &[usize],
    device: StageDevice,
) -> Result<Box<dyn InputStage>, EngineError> {
    let err = |what: &str, source: ort::Error| EngineError::Ort {
        context: format!("preprocessing graph ({device}): {what}"),
        source,
    };
    let mut trt = engine.options.tensorrt.clone();
    match device {
        StageDevice::Dla => {
            if !engine.used.contains(&Provider::TensorRt) {
                return Err(EngineError::Model(format!(
                    "[preprocess] device = \"dla\" runs through TensorRT, but the engine runs on [{}]: \
                     add \"tensorrt\" to [engine] providers on a Jetson with DLA cores (Xavier, Orin; \
                     TensorRT <= 10.7), or use device = \"gpu\"",
                    provider_names(&engine.used, " > ")
                )));
            }
            // DLA computes in FP16 (or INT8) only.
            trt.precision = Precision::Fp16;
            trt.dla_core = Some(trt.dla_core.unwrap_or(0));
            expect_dla_placement(
                onnx,
                engine.runtime.get("tensorrt").map(String::as_str),
                &engine.options.dla,
            );
        }
        StageDevice::Gpu => {
            // The graph reproduces the CPU arithmetic exactly in FP32; it is tiny either way.
            trt.precision = Precision::Fp32;
            trt.dla_core = None;
        }
    }
    if !engine.on_gpu {
        log::warn!(
            "[preprocess] device = \"{device}\": the engine runs on the CPU provider, so the \
             preprocessing graph does too"
        );
    }
    let key = format!("pre{}", model_key(onnx));
    let (builder, used) = session_builder(
        engine.env,
        &engine.library,
        &engine.used,
        TrtSetup { options: &trt, key: &key, profile: None },
        engine.options.threads,
        &engine.options.dla,
    )?;
    // The stage runs just before the engine: threads spinning on after it would take
    // the CPU from the engine's own (measured: +4 ms per frame on 2 cores).
    let mut builder = builder.with_intra_op_spinning(false).map_err(|e| err("session options", e.into()))?;
    let started = std::time::Instant::now();
    let progress = Progress::start(format!("preprocessing graph ({device})"));
    let dla = device == StageDevice::Dla && used[0] == Provider::TensorRt;
    let capture = dla.then(|| {
        // TensorRT's placement lines are INFO; the provider may relay them below WARNING.
        engine.env.set_log_level(ort::logging::LogLevel::Info);
        trt_log::Capture::start()
    });
    let session = builder.commit_from_memory(onnx);
    if let Some(capture) = capture {
        engine.env.set_log_level(ort::logging::LogLevel::Warning);
        let versions = cache_versions(engine.runtime.get("tensorrt").map(String::as_str), &engine.library);
        report_dla_placement(capture.finish(), &trt, &key, &versions);
    }
    let session = session.map_err(|e| err("ONNX Runtime cannot build it (an engine build failure?)", e))?;
    let (Some(input), Some(output)) = (session.inputs().first(), session.outputs().first()) else {
        return Err(EngineError::Model("preprocessing graph: needs one input and one output".into()));
    };
    let (input_name, output_name) = (input.name().to_string(), output.name().to_string());
    // The engine's input moves to its device once; every stage writes there.
    if engine.stage_input.is_none() {
        let tensor = if engine.on_gpu {
            let memory = gpu_memory().map_err(|e| err("GPU memory", e))?;
            let alloc = Allocator::new(&engine.session, memory).map_err(|e| err("GPU allocator", e))?;
            Tensor::<f32>::new(&alloc, engine.input_shape)
        } else {
            Tensor::<f32>::new(&Allocator::default(), engine.input_shape)
        }
        .map_err(|e| err("the engine's input on its device", e))?;
        engine.batches[0]
            .binding
            .bind_input(engine.input_name.as_str(), &tensor)
            .map_err(|e| err("binding the engine's input", e))?;
        engine.stage_input = Some(tensor);
    }
    let host =
        Tensor::<u8>::new(&Allocator::default(), input_shape.to_vec()).map_err(|e| err("input tensor", e))?;
    let mut binding = session.create_binding().map_err(|e| err("I/O binding", e))?;
    binding.bind_input(input_name.as_str(), &host).map_err(|e| err("binding the frame", e))?;
    let shared = engine.stage_input.as_mut().expect("created above");
    binding
        .bind_output(output_name, shared)
        .map_err(|e| err(&format!("binding the output to the engine's input {:?}", engine.input_shape), e))?;
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
        input_cname: CString::new(input_name.as_str()).map_err(|_| {
            EngineError::Model(format!("preprocessing graph ({device}): input name: contains a NUL byte"))
        })?,
        input: host,
        len: input_shape.iter().product(),
    };
    // One run now rather than on the first frame.
    stage.run(&vec![0; stage.len])?;
    drop(progress);
    log::info!("preprocessing graph on {}: ready in {:.1} s", stage.label, started.elapsed().as_secs_f64());
    Ok(Box::new(stage))
}
