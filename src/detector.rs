//! One frame in, detections out: preprocess -> engine -> decode.
//!
//! [`Detector`] owns one of each stage and their buffers, times each stage,
//! and is what both the one-shot `detect` command and the daemon run.

use std::time::{Duration, Instant};

use crate::config::Config;
use crate::engine::{self, Engine, EngineOptions};
use crate::error::{Error, Result};
use crate::frame::Frame;
use crate::preprocess::{CpuPreprocessor, Letterbox, Preprocessor};
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

/// A YOLO detector: preprocessing, an engine and a decoder, with their buffers.
pub struct Detector {
    engine: Box<dyn Engine>,
    preprocessor: Box<dyn Preprocessor>,
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
        };
        let engine = engine::open(&config.engine.kind, &config.model.path, &options)?;
        let names = match &config.model.names {
            Some(p) => Some(ClassNames::from_file(p).map_err(Error::Model)?),
            None => None,
        };
        let decode = DecodeOptions {
            confidence: config.detect.confidence,
            iou: config.detect.iou,
            max_detections: config.detect.max_detections,
            ..DecodeOptions::default()
        };
        Detector::new(engine, Box::new(CpuPreprocessor::new()), names, config.model.layout, decode)
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
            .map_err(|e| Error::Model(format!("{}: {e}", engine.describe())))?;
        let classes = layout.classes();
        let names = match names {
            Some(n) if n.len() != classes => {
                return Err(Error::Model(format!(
                    "{} lists {} class names but the model ({}, {layout}) predicts {classes} classes: \
                     use the names file that belongs to this model",
                    n.origin,
                    n.len(),
                    engine.describe()
                )))
            }
            Some(n) => n,
            None => match engine.metadata().get("names").and_then(|m| ClassNames::from_metadata(m)) {
                Some(n) if n.len() == classes => n,
                _ => ClassNames::numbered(classes),
            },
        };
        Ok(Detector {
            engine,
            preprocessor,
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
        let lb = self.preprocessor.run(frame, w, h, self.engine.input_mut())?;
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
        let mut frame = Frame::empty();
        frame.width = w;
        frame.height = h;
        frame.data = vec![114; (w * h * 3) as usize];
        frame.label = "warm-up".into();
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

    /// Stage times of the last frame.
    pub fn times(&self) -> StageTimes {
        self.times
    }

    /// Where the last frame was placed in the model input.
    pub fn letterbox(&self) -> Option<Letterbox> {
        self.letterbox
    }
}
