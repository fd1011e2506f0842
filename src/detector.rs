//! One frame in, detections out: preprocess -> engine -> decode.
//!
//! [`Detector`] owns one of each stage and their buffers, times each stage,
//! and is what both the one-shot `detect` command and the daemon run.

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::engine::{self, Engine, EngineConfig, EngineOptions, InputStage, StageDevice};
use crate::error::{Error, Result};
use crate::frame::{encode_rgb, Frame, PixelFormat};
use crate::preprocess::{
    self, graph, CpuPreprocessor, Letterbox, PreprocessConfig, PreprocessError, Preprocessor,
};
use crate::stats::StageTimes;
use crate::yolo::{
    ClassNames, DecodeOptions, Decoder, DetectConfig, Detection, KnownClasses, Layout, LayoutError,
    LayoutHint, Metadata,
};

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

/// Where packages install the default model.
pub const DEFAULT_MODEL: &str = "/usr/share/jetdetect/models/obstacles-v8.onnx";

/// `[model]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// ONNX model file.
    pub path: PathBuf,
    /// Class names file (one per line); default: the model's metadata, else `class<N>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub names: Option<PathBuf>,
    /// Output layout: `auto` (from the metadata and the output shape; an ambiguous shape is
    /// refused), `v5`, `v8` or `end2end`.
    pub layout: LayoutHint,
    /// Input width for models whose input size is not fixed.
    pub input_width: u32,
    /// Input height for models whose input size is not fixed.
    pub input_height: u32,
    /// The largest model file accepted, MiB: a bigger file is refused before an engine reads
    /// it ([`engine::onnx_file`]).
    pub max_mib: u64,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            path: PathBuf::from(DEFAULT_MODEL),
            names: None,
            layout: LayoutHint::Auto,
            input_width: 640,
            input_height: 640,
            max_mib: engine::onnx_file::DEFAULT_MAX_MIB,
        }
    }
}

impl ModelConfig {
    /// Checks the section's own values; `Err((key, message))` names the key (a dotted key is in
    /// a sub-table).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (key, v) in [("input_width", self.input_width), ("input_height", self.input_height)] {
            if !(32..=4096).contains(&v) || v % 32 != 0 {
                return Err((
                    key,
                    format!("{v} is not allowed: use a multiple of 32 from 32 to 4096 (YOLO's stride)"),
                ));
            }
        }
        if !(1..=2048).contains(&self.max_mib) {
            return Err((
                "max_mib",
                format!("{} is out of range: allowed 1 to 2048 (protobuf's own limit)", self.max_mib),
            ));
        }
        Ok(())
    }

    /// Checks the files the section names: the class names a readable file, the model a
    /// readable ONNX model within `max_mib` by its form ([`engine::onnx_file::check`], which
    /// [`Detector::open`] runs too). `check` and `run` both call it, through the config.
    pub fn check_files(&self) -> Result<(), (&'static str, String)> {
        let unreadable = |f: &std::path::Path| {
            format!(
                "'{}' is not a readable file (relative paths are relative to the config file)",
                f.display()
            )
        };
        if !self.path.is_file() {
            return Err(("path", unreadable(&self.path)));
        }
        engine::onnx_file::check(&self.path, self.max_mib << 20).map_err(|m| ("path", m))?;
        match &self.names {
            Some(n) if !n.is_file() => Err(("names", unreadable(n))),
            _ => Ok(()),
        }
    }
}

/// What a [`Detector`] is made from: its sections of the config, and what it must know of the
/// rest (the composition root, `daemon::detector`, fills it from the whole config).
#[derive(Clone, Copy, Debug)]
pub struct DetectorSetup<'a> {
    /// `[model]`.
    pub model: &'a ModelConfig,
    /// `[engine]`.
    pub engine: &'a EngineConfig,
    /// `[preprocess]`.
    pub preprocess: &'a PreprocessConfig,
    /// `[detect]`.
    pub detect: &'a DetectConfig,
    /// How many cameras it serves: a batched engine sizes its runs by them.
    pub cameras: usize,
    /// The board's root (`[power] root`), where the DLA cores are looked for.
    pub board_root: &'a std::path::Path,
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
    /// Why the layout was read as it is (the config, the metadata, the shape).
    layout_why: String,
    detections: Vec<Detection>,
    times: StageTimes,
    letterbox: Option<Letterbox>,
    /// Per frame of the last [`Detector::detect_batch`].
    batch: Vec<BatchSlot>,
}

/// One frame of a batch: where it was placed, its detections, or why it failed.
struct BatchSlot {
    letterbox: Option<Letterbox>,
    detections: Vec<Detection>,
    failed: Option<Error>,
}

impl Detector {
    /// The detector `setup` describes: the engine opened on the model, the class names read,
    /// preprocessing placed where `[preprocess] device` says.
    pub fn open(setup: &DetectorSetup<'_>) -> Result<Detector> {
        let e = setup.engine;
        let options = EngineOptions {
            dynamic_input: (setup.model.input_width, setup.model.input_height),
            max_batch: e.max_batch,
            cameras: setup.cameras,
            ort_library: (!e.library.as_os_str().is_empty()).then(|| e.library.clone()),
            providers: e.providers.clone(),
            threads: e.threads,
            tensorrt: e.tensorrt.clone(),
            dla: dla_board(setup.board_root),
        };
        engine::onnx_file::check(&setup.model.path, setup.model.max_mib << 20)
            .map_err(engine::EngineError::Model)?;
        let engine = engine::open(e.kind, &setup.model.path, &options)?;
        let names = match &setup.model.names {
            Some(p) => Some(ClassNames::from_file(p)?),
            None => None,
        };
        let d = setup.detect;
        let decode = DecodeOptions {
            confidence: d.confidence,
            iou: d.iou,
            max_detections: d.max_detections,
            ..DecodeOptions::default()
        };
        let mut detector =
            Detector::new(engine, Box::new(CpuPreprocessor::new()), names, setup.model.layout, decode)?;
        match setup.preprocess.device {
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

    /// Assembles a detector, deciding the model's output layout ([`Layout::decide`]: from
    /// `layout` where the config forces one, the model's metadata, the output shape) and checking
    /// that the class names (given, or from the model's metadata) fit it.
    pub fn new(
        engine: Box<dyn Engine>,
        preprocessor: Box<dyn Preprocessor>,
        names: Option<ClassNames>,
        layout: LayoutHint,
        options: DecodeOptions,
    ) -> Result<Detector> {
        let meta = Metadata::read(engine.metadata());
        let shape = engine.output_shape();
        let layout_err = |source| Error::Layout { model: engine.describe(), source };
        // The class count from the metadata's names; names that fit no layout of the shape are
        // not the model's (an exporter's mistake): the shape decides alone, and they are not used.
        let known = |n: &ClassNames| KnownClasses { count: n.len(), origin: "model metadata" };
        let decision = match Layout::decide(shape, layout, &meta, meta.names.as_ref().map(known)) {
            Err(LayoutError::NoClasses { .. }) if meta.names.is_some() => {
                Layout::decide(shape, layout, &meta, None).map_err(layout_err)?
            }
            other => other.map_err(layout_err)?,
        };
        // An end-to-end layout's class count is the metadata's, where it has names: a row of
        // another class is an engine's garbage and dropped. A names file does not set it: a row
        // past the file's names is still an obstacle, reported as `class<N>`.
        let layout = decision.layout;
        let from_metadata = meta.names.filter(|m| layout.classes().is_none_or(|c| c == m.len()));
        let names = match (names, layout.classes()) {
            (Some(n), Some(classes)) if n.len() != classes => {
                return Err(Error::ClassCount {
                    names: n.origin.clone(),
                    listed: n.len(),
                    model: engine.describe(),
                    layout,
                    predicts: classes,
                })
            }
            (Some(n), _) => n,
            (None, Some(classes)) => from_metadata.unwrap_or_else(|| ClassNames::numbered(classes)),
            // End-to-end without names in the metadata (which would have given the count) or a
            // file: the class ids are read as they come.
            (None, None) => ClassNames::numbered(0),
        };
        Ok(Detector {
            engine,
            preprocessing: Preprocessing::Host(preprocessor),
            decoder: Decoder::new(layout, options),
            layout_why: decision.why,
            names,
            detections: Vec::with_capacity(options.max_detections),
            times: StageTimes::default(),
            letterbox: None,
            // Slot 0 from the start: one frame at a time needs no allocation on its first run.
            batch: vec![BatchSlot {
                letterbox: None,
                detections: Vec::with_capacity(options.max_detections),
                failed: None,
            }],
        })
    }

    /// The most frames [`Detector::detect_batch`] runs through the engine at once: the model's
    /// batch (fixed N, or dynamic up to the cameras and `[engine] max_batch`); 1 for a model of
    /// batch 1, and while preprocessing runs on a device (its graph writes one image).
    pub fn max_batch(&self) -> usize {
        match self.preprocessing {
            Preprocessing::Host(_) => self.engine.max_batch(),
            Preprocessing::Device { .. } => 1,
        }
    }

    /// Runs the chain on `frames` (at most [`Detector::max_batch`]) with one engine run: each is
    /// preprocessed into its slot of the batch, the engine runs once, each slot's output is
    /// decoded against its frame. Frame `i`'s detections are [`Detector::batch_result`]`(i)`;
    /// a frame that cannot be preprocessed fails alone (its slot is run empty and ignored).
    /// The stage times are the batch's: every frame of it waited for all of it. One frame is
    /// [`Detector::detect`] (on a device too), its result read the same way.
    pub fn detect_batch<'f>(&mut self, mut frames: impl ExactSizeIterator<Item = &'f Frame>) -> Result<()> {
        let n = frames.len();
        if n == 1 {
            let frame = frames.next().expect("one frame");
            self.detect(frame)?;
            let b = &mut self.batch[0];
            // The detections change places with slot 0's buffer: nothing is copied or allocated.
            std::mem::swap(&mut b.detections, &mut self.detections);
            (b.letterbox, b.failed) = (self.letterbox, None);
            return Ok(());
        }
        let Preprocessing::Host(p) = &mut self.preprocessing else {
            return Err(Error::Engine(crate::engine::EngineError::Run(
                "batches need preprocessing on the CPU".into(),
            )));
        };
        let (w, h) = self.engine.input_size();
        let image = 3 * (w as usize) * (h as usize);
        let fit = self.decoder.layout().fit();
        let t0 = Instant::now();
        let slots = self.engine.set_batch(n)?;
        while self.batch.len() < n {
            let detections = Vec::with_capacity(self.detections.capacity());
            self.batch.push(BatchSlot { letterbox: None, detections, failed: None });
        }
        let have = self.engine.input_mut().len();
        if have < n * image {
            return Err(Error::Engine(crate::engine::EngineError::Run(format!(
                "{}: the input holds {have} values, not {n} images of {image}",
                self.engine.describe()
            ))));
        }
        let input = self.engine.input_mut();
        for (i, frame) in frames.enumerate() {
            let slot = &mut input[i * image..(i + 1) * image];
            let b = &mut self.batch[i];
            match p.run(frame, fit, w, h, slot) {
                Ok(lb) => (b.letterbox, b.failed) = (Some(lb), None),
                Err(e) => {
                    slot.fill(0.0);
                    (b.letterbox, b.failed) = (None, Some(e.into()));
                }
            }
        }
        let t1 = Instant::now();
        let output = self.engine.run()?;
        let t2 = Instant::now();
        let per = output.len() / slots;
        for (i, b) in self.batch[..n].iter_mut().enumerate() {
            b.detections.clear();
            if let Some(lb) = &b.letterbox {
                self.decoder.decode(&output[i * per..(i + 1) * per], lb, &mut b.detections);
            }
        }
        let t3 = Instant::now();
        self.times = StageTimes { preprocess: t1 - t0, inference: t2 - t1, decode: t3 - t2 };
        Ok(())
    }

    /// Frame `i` of the last [`Detector::detect_batch`]: its detections in frame pixels, or why
    /// it failed (taken: asked again, it reads as no detections).
    pub fn batch_result(&mut self, i: usize) -> Result<&[Detection]> {
        let b = &mut self.batch[i];
        match b.failed.take() {
            Some(e) => Err(e),
            None => Ok(&b.detections),
        }
    }

    /// Runs the whole chain on one frame; the detections are in frame pixels.
    pub fn detect(&mut self, frame: &Frame) -> Result<&[Detection]> {
        let (w, h) = self.engine.input_size();
        // One image per run (a fixed batch N runs N slots; the first is this frame).
        let slots = self.engine.set_batch(1)?;
        // Placed as the model's authors place frames: letterboxed, or stretched for RT-DETR.
        let fit = self.decoder.layout().fit();
        let t0 = Instant::now();
        let lb = match &mut self.preprocessing {
            Preprocessing::Host(p) => {
                let image = 3 * (w as usize) * (h as usize);
                let input = self.engine.input_mut();
                let len = input.len().min(image);
                p.run(frame, fit, w, h, &mut input[..len])?
            }
            Preprocessing::Device { device, stages } => {
                frame.check_len().map_err(PreprocessError::from)?;
                let geometry = (frame.format, frame.width, frame.height);
                let i = match stages.iter().position(|s| s.geometry == geometry) {
                    Some(i) => i,
                    None => {
                        let stage = build_stage(self.engine.as_mut(), *device, geometry, fit, (w, h))?;
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
        let per = output.len() / slots;
        self.decoder.decode(&output[..per], &lb, &mut self.detections);
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
    pub fn warm_up_for(&mut self, n: usize, geometry: (PixelFormat, u32, u32)) -> Result<()> {
        let frame = grey_frame(geometry);
        for _ in 0..n {
            self.detect(&frame)?;
        }
        Ok(())
    }

    /// Runs every batch size from 2 to `max` ([`Detector::max_batch`] at most) once, with grey
    /// frames of `geometry`: TensorRT's engine for each input shape is built, tract's plans run
    /// and the buffers are sized before the first real batch, not on it.
    pub fn warm_up_batches(&mut self, max: usize, geometry: (PixelFormat, u32, u32)) -> Result<()> {
        let frame = grey_frame(geometry);
        for size in 2..=max.min(self.max_batch()) {
            self.detect_batch(std::iter::repeat_n(&frame, size))?;
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

    /// Why the layout was read as it is: `[model] layout`, the metadata, or the output shape.
    pub fn layout_why(&self) -> &str {
        &self.layout_why
    }

    /// How outputs are decoded, for `check` and the log: thresholds, and NMS or not.
    pub fn decoder_summary(&self) -> String {
        let o = self.decoder.options();
        match self.layout().end_to_end() {
            true => format!(
                "score > {}, at most {} boxes, no NMS (the model's own; [detect] iou is not used)",
                o.confidence, o.max_detections
            ),
            false => format!(
                "score > {}, class-aware NMS at IoU {}, at most {} boxes",
                o.confidence, o.iou, o.max_detections
            ),
        }
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

    /// Stage times of the last frame (or batch).
    pub fn times(&self) -> StageTimes {
        self.times
    }

    /// Where the last frame was placed in the model input.
    pub fn letterbox(&self) -> Option<Letterbox> {
        self.letterbox
    }
}

/// A grey frame (ultralytics' letterbox grey, 114) of `geometry`, for warm-up runs.
fn grey_frame((format, w, h): (PixelFormat, u32, u32)) -> Frame {
    let mut frame = Frame::empty();
    frame.width = w;
    frame.height = h;
    frame.format = format;
    encode_rgb(&vec![114; (w as usize) * (h as usize) * 3], w, h, format, &mut frame.data);
    frame.label = format!("warm-up ({w}x{h} {format})");
    frame
}

/// Generates the preprocessing graph for frames of `geometry` and has the engine compile it.
fn build_stage(
    engine: &mut dyn Engine,
    device: StageDevice,
    geometry: (PixelFormat, u32, u32),
    fit: preprocess::Fit,
    (dst_w, dst_h): (u32, u32),
) -> Result<DeviceStage> {
    let (format, w, h) = geometry;
    // The DLA runs only convolution-shaped layers: its form of the graph gathers on the GPU and
    // does all arithmetic in DLA layers (FP16); the GPU form is one fused graph.
    let g = match device {
        StageDevice::Dla => graph::build_dla(format, w, h, fit, dst_w, dst_h, graph::Precision::Half),
        _ => graph::build(format, w, h, fit, dst_w, dst_h),
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

    /// Three frames of three scenes, formats and sizes.
    fn synthetic_frames() -> Vec<Frame> {
        [("yuyv", 640, 480, 1), ("nv12", 320, 240, 2), ("rgb24", 800, 600, 3)]
            .iter()
            .map(|(format, w, h, seed)| {
                let uri =
                    format!("synthetic://?width={w}&height={h}&fps=0&format={format}&seed={seed}&objects=5");
                let mut src = crate::source::open(&uri).unwrap();
                let mut f = Frame::empty();
                assert!(src.next_frame(&mut f).unwrap());
                f
            })
            .collect()
    }

    fn same(got: &[Detection], want: &[Detection], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (g, w) in got.iter().zip(want) {
            let close = |a: f32, b: f32| (a - b).abs() < 1e-3;
            let ok =
                g.class_id == w.class_id && close(g.score, w.score) && close(g.x1, w.x1) && close(g.y2, w.y2);
            assert!(ok, "{what}: {g:?} {w:?}");
        }
    }

    #[test]
    fn a_batch_gives_each_frame_what_it_gets_alone() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let model =
            ModelConfig { path: root.join("models/obstacles-v8-batch.onnx"), ..ModelConfig::default() };
        // tract's own choice is one image per run: asked for more, and with three cameras, the
        // dynamic batch axis is planned for up to three images.
        let engine =
            EngineConfig { kind: crate::engine::EngineKind::Tract, max_batch: 16, ..EngineConfig::default() };
        let setup = DetectorSetup {
            model: &model,
            engine: &engine,
            preprocess: &PreprocessConfig::default(),
            detect: &DetectConfig::default(),
            cameras: 3,
            board_root: std::path::Path::new("/"),
        };
        let mut d = Detector::open(&setup).unwrap();
        assert_eq!(d.max_batch(), 3);
        let frames = synthetic_frames();
        let alone: Vec<Vec<Detection>> = frames.iter().map(|f| d.detect(f).unwrap().to_vec()).collect();
        assert!(alone.iter().all(|a| a.len() >= 3), "{alone:?}");
        for n in [2, 3] {
            d.detect_batch(frames[..n].iter()).unwrap();
            for (i, want) in alone[..n].iter().enumerate() {
                same(d.batch_result(i).unwrap(), want, &format!("batch of {n}, frame {i}"));
            }
        }
        // A frame that cannot be preprocessed fails alone; the others keep their detections.
        let mut bad = frames[1].clone();
        bad.data.truncate(10);
        d.detect_batch([&frames[0], &bad].into_iter()).unwrap();
        assert_eq!(d.batch_result(0).unwrap().len(), alone[0].len());
        assert!(d.batch_result(1).is_err());
        let four = [&frames[0], &frames[1], &frames[2], &frames[0]];
        assert!(d.detect_batch(four.into_iter()).is_err(), "four frames, three at most");
    }

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
