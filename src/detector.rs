//! One frame in, detections out: preprocess -> engine -> decode.
//!
//! [`Detector`] owns one of each stage and their buffers, times each stage,
//! and is what both the one-shot `detect` command and the daemon run.

use std::time::{Duration, Instant};

use crate::config::Config;
use crate::engine::{self, Engine, EngineOptions, InputStage, StageDevice};
use crate::error::{Error, Result};
use crate::frame::{encode_rgb, Frame, PixelFormat};
use crate::preprocess::{self, graph, CpuPreprocessor, Letterbox, PreprocessError, Preprocessor};

/// Accelerator graphs kept for frame geometries seen recently (a camera that
/// renegotiates, a folder of differently sized images).
const STAGES_KEPT: usize = 4;

/// Where frames become model input.
enum Preprocessing {
    /// In this process, into [`Engine::input_mut`].
    Host(Box<dyn Preprocessor>),
    /// Graphs from [`graph`] run by the engine on its device, one per frame geometry.
    Device { device: StageDevice, stages: Vec<DeviceStage> },
}

struct DeviceStage {
    geometry: (PixelFormat, u32, u32),
    letterbox: Letterbox,
    stage: Box<dyn InputStage>,
}
use crate::yolo::{ClassNames, DecodeOptions, Decoder, Detection, Layout, LayoutHint};

/// How long each stage took for the last frame.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    /// Colour conversion + letterbox + normalisation.
    pub preprocess: Duration,
    /// The engine run.
    pub inference: Duration,
    /// Candidate extraction + NMS + box mapping.
    pub decode: Duration,
}

/// The DLA cores and SoC of the board at `root` (`[power] root`), as `power` finds them, for
/// the engine.
pub fn dla_board(root: &std::path::Path) -> engine::DlaBoard {
    use crate::power::board::Soc;
    let soc = match crate::power::Board::detect(root).soc {
        Some(Soc::T194) => Some(engine::dla::Soc::Xavier),
        Some(Soc::T234) => Some(engine::dla::Soc::Orin),
        _ => None,
    };
    engine::DlaBoard {
        soc,
        cores: crate::power::dla_cores(root),
        searched: root.join("sys/devices/platform"),
    }
}

/// A YOLO detector: preprocessing, an engine and a decoder, with their buffers.
pub struct Detector {
    engine: Box<dyn Engine>,
    preprocessing: Preprocessing,
    decoder: Decoder,
    names: ClassNames,
    detections: Vec<Detection>,
    times: StageTimes,
    letterbox: Option<Letterbox>,
}

impl Detector {
    /// Loads the model and builds the stages the configuration asks for.
    pub fn from_config(config: &Config) -> Result<Detector> {
        let e = &config.engine;
        let options = EngineOptions {
            dynamic_input: (config.model.input_width, config.model.input_height),
            ort_library: (!e.library.as_os_str().is_empty()).then(|| e.library.clone()),
            providers: e.providers.clone(),
            threads: e.threads,
            tensorrt: e.tensorrt.clone(),
            dla: dla_board(&config.power.root),
        };
        let engine = engine::open(config.engine.kind, &config.model.path, &options)?;
        let names = match &config.model.names {
            Some(p) => Some(ClassNames::from_file(p)?),
            None => None,
        };
        let decode = DecodeOptions {
            confidence: config.detect.confidence,
            iou: config.detect.iou,
            max_detections: config.detect.max_detections,
            ..DecodeOptions::default()
        };
        let mut detector =
            Detector::new(engine, Box::new(CpuPreprocessor::new()), names, config.model.layout, decode)?;
        match config.preprocess.device {
            preprocess::Device::Gpu => detector.preprocess_on(StageDevice::Gpu),
            preprocess::Device::Dla => detector.preprocess_on(StageDevice::Dla),
            preprocess::Device::Cpu => {}
        }
        Ok(detector)
    }

    /// Moves preprocessing onto the engine's device: from the next frame on,
    /// each frame geometry gets a generated graph (built on first sight, or by
    /// [`Detector::warm_up_for`]) that the engine runs, and the CPU only hands
    /// over the frame's bytes.
    pub fn preprocess_on(&mut self, device: StageDevice) {
        self.preprocessing = Preprocessing::Device { device, stages: Vec::new() };
    }

    /// Where preprocessing runs, for logs: `cpu`, or the device and its providers.
    pub fn preprocessing(&self) -> String {
        match &self.preprocessing {
            Preprocessing::Host(_) => "cpu".into(),
            Preprocessing::Device { device, stages } => match stages.last() {
                Some(s) => format!("{device} ({})", s.stage.describe()),
                None => format!("{device}"),
            },
        }
    }

    /// Assembles a detector, checking that the model output is a YOLO layout and
    /// that the class names (given, or from the model's metadata) fit it.
    pub fn new(
        engine: Box<dyn Engine>,
        preprocessor: Box<dyn Preprocessor>,
        names: Option<ClassNames>,
        layout: LayoutHint,
        options: DecodeOptions,
    ) -> Result<Detector> {
        let layout = Layout::detect(engine.output_shape(), layout)
            .map_err(|source| Error::Layout { model: engine.describe(), source })?;
        let classes = layout.classes();
        let names = match names {
            Some(n) if n.len() != classes => {
                return Err(Error::ClassCount {
                    names: n.origin.clone(),
                    listed: n.len(),
                    model: engine.describe(),
                    layout,
                })
            }
            Some(n) => n,
            None => match engine.metadata().get("names").and_then(|m| ClassNames::from_metadata(m)) {
                Some(n) if n.len() == classes => n,
                _ => ClassNames::numbered(classes),
            },
        };
        Ok(Detector {
            engine,
            preprocessing: Preprocessing::Host(preprocessor),
            decoder: Decoder::new(layout, options),
            names,
            detections: Vec::with_capacity(options.max_detections),
            times: StageTimes::default(),
            letterbox: None,
        })
    }

    /// Runs the whole chain on one frame; the detections are in frame pixels.
    pub fn detect(&mut self, frame: &Frame) -> Result<&[Detection]> {
        let (w, h) = self.engine.input_size();
        let t0 = Instant::now();
        let lb = match &mut self.preprocessing {
            Preprocessing::Host(p) => p.run(frame, w, h, self.engine.input_mut())?,
            Preprocessing::Device { device, stages } => {
                frame.check_len().map_err(PreprocessError::from)?;
                let geometry = (frame.format, frame.width, frame.height);
                let i = match stages.iter().position(|s| s.geometry == geometry) {
                    Some(i) => i,
                    None => {
                        let stage = build_stage(self.engine.as_mut(), *device, geometry, (w, h))?;
                        if stages.len() == STAGES_KEPT {
                            stages.remove(0);
                        }
                        stages.push(stage);
                        stages.len() - 1
                    }
                };
                let s = &mut stages[i];
                s.stage.run(&frame.data)?;
                s.letterbox
            }
        };
        let t1 = Instant::now();
        let output = self.engine.run()?;
        let t2 = Instant::now();
        self.decoder.decode(output, &lb, &mut self.detections);
        let t3 = Instant::now();
        self.times = StageTimes { preprocess: t1 - t0, inference: t2 - t1, decode: t3 - t2 };
        self.letterbox = Some(lb);
        Ok(&self.detections)
    }

    /// Runs `n` frames of grey through the chain, so the first real frame is
    /// not slowed by first-run allocations and page faults.
    pub fn warm_up(&mut self, n: usize) -> Result<()> {
        let (w, h) = self.engine.input_size();
        self.warm_up_for(n, (PixelFormat::Rgb24, w, h))
    }

    /// Like [`Detector::warm_up`], with grey frames of the format and size the
    /// source will deliver: accelerator graphs and their TensorRT engines are
    /// built now, before the service reports ready, not on the first frame.
    pub fn warm_up_for(&mut self, n: usize, (format, w, h): (PixelFormat, u32, u32)) -> Result<()> {
        let mut frame = Frame::empty();
        frame.width = w;
        frame.height = h;
        frame.format = format;
        encode_rgb(&vec![114; (w as usize) * (h as usize) * 3], w, h, format, &mut frame.data);
        frame.label = format!("warm-up ({w}x{h} {format})");
        for _ in 0..n {
            self.detect(&frame)?;
        }
        Ok(())
    }

    /// The class names in use.
    pub fn names(&self) -> &ClassNames {
        &self.names
    }

    /// The output layout the model was read as.
    pub fn layout(&self) -> Layout {
        self.decoder.layout()
    }

    /// The engine, for its description and shapes.
    pub fn engine(&self) -> &dyn Engine {
        self.engine.as_ref()
    }

    /// The engine itself, to run it alone on the input the last frame left
    /// (`jetdetect bench --mode engine`).
    pub fn engine_mut(&mut self) -> &mut dyn Engine {
        self.engine.as_mut()
    }

    /// Stage times of the last frame.
    pub fn times(&self) -> StageTimes {
        self.times
    }

    /// Where the last frame was placed in the model input.
    pub fn letterbox(&self) -> Option<Letterbox> {
        self.letterbox
    }
}

/// Generates the preprocessing graph for frames of `geometry` and has the engine compile it.
fn build_stage(
    engine: &mut dyn Engine,
    device: StageDevice,
    geometry: (PixelFormat, u32, u32),
    (dst_w, dst_h): (u32, u32),
) -> Result<DeviceStage> {
    let (format, w, h) = geometry;
    // The DLA runs only convolution-shaped layers: its form of the graph gathers on the GPU and
    // does all arithmetic in DLA layers (FP16); the GPU form is one fused graph.
    let g = match device {
        StageDevice::Dla => graph::build_dla(format, w, h, dst_w, dst_h, graph::Precision::Half),
        _ => graph::build(format, w, h, dst_w, dst_h),
    }?;
    log::info!(
        "preprocessing on {device}: compiling the graph for {w}x{h} {format} -> {dst_w}x{dst_h} \
         (a TensorRT build takes a while the first time; later starts use the engine cache)"
    );
    let stage = engine.input_stage(&g.onnx, &g.input_shape, device)?;
    Ok(DeviceStage { geometry, letterbox: g.letterbox, stage })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dla_board_is_what_power_finds_under_the_root() {
        use crate::engine::dla::Soc;
        let board =
            |b: &str| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jetson").join(b);
        assert_eq!(dla_board(&board("agx-orin-jp6")).soc, Some(Soc::Orin));
        assert_eq!(dla_board(&board("xavier-nx-10w")).soc, Some(Soc::Xavier));
        assert_eq!(dla_board(&board("nano-jp4")).soc, None);
        assert_eq!(dla_board(&board("no-such-board")).soc, None);
        let cores = |b: &str| dla_board(&board(b)).cores;
        assert_eq!((cores("agx-orin-jp7"), cores("orin-nx-10w"), cores("orin-nano-7w")), (2, 1, 0));
        assert_eq!(dla_board(&board("nano-jp4")).searched, board("nano-jp4/sys/devices/platform"));
    }
}
