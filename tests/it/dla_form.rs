//! The DLA form of the preprocessing graph (`[preprocess] device = "dla"`), in FP16 as the DLA
//! computes it, run through tract in place of TensorRT: the detections it leads to must be the
//! CPU path's. No DLA here; `docs/accelerators.md` says what a board has still to show.

use std::path::PathBuf;

use jetdetect::detector::Detector;
use jetdetect::engine::tract::TractEngine;
use jetdetect::engine::EngineOptions;
use jetdetect::frame::{Frame, PixelFormat};
use jetdetect::preprocess::graph::{build_dla, Precision};
use jetdetect::preprocess::{CpuPreprocessor, Fit, Letterbox, PreprocessError, Preprocessor};
use jetdetect::source;
use jetdetect::yolo::{DecodeOptions, Detection, LayoutHint};
use tract_onnx::prelude::*;

/// The DLA form for one frame geometry, loaded in tract.
struct Plan {
    geometry: (PixelFormat, u32, u32),
    letterbox: Letterbox,
    model: Arc<TypedRunnableModel>,
    input_shape: Vec<usize>,
}

/// Runs the DLA form for each geometry it meets (built on the first frame of a geometry).
struct DlaForm {
    plan: Option<Plan>,
}

impl Preprocessor for DlaForm {
    fn run(
        &mut self,
        frame: &Frame,
        fit: Fit,
        dst_w: u32,
        dst_h: u32,
        out: &mut [f32],
    ) -> Result<Letterbox, PreprocessError> {
        let geometry = (frame.format, frame.width, frame.height);
        if self.plan.as_ref().is_none_or(|p| p.geometry != geometry) {
            let g = build_dla(frame.format, frame.width, frame.height, fit, dst_w, dst_h, Precision::Half)
                .unwrap_or_else(|e| panic!("{e}"));
            let model = tract_onnx::onnx()
                .model_for_read(&mut g.onnx.as_slice())
                .and_then(|m| m.into_optimized())
                .and_then(|m| m.into_runnable())
                .expect("the DLA form loads in tract");
            self.plan = Some(Plan { geometry, letterbox: g.letterbox, model, input_shape: g.input_shape });
        }
        let Plan { letterbox, model, input_shape, .. } = self.plan.as_ref().expect("built above");
        let input = tract_ndarray::ArrayD::from_shape_vec(input_shape.clone(), frame.data.clone()).unwrap();
        let result = model.run(tvec!(Tensor::from(input).into_tvalue())).expect("the DLA form runs");
        out.copy_from_slice(result[0].try_as_plain_ram().unwrap().as_slice::<f32>().unwrap());
        Ok(*letterbox)
    }
}

fn detector(pre: Box<dyn Preprocessor>) -> Detector {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/obstacles-v8.onnx");
    let engine = TractEngine::load(&model, &EngineOptions::default()).unwrap();
    Detector::new(Box::new(engine), pre, None, LayoutHint::Auto, DecodeOptions::default()).unwrap()
}

/// Largest score and corner differences between two frames' detections (same count, same classes).
fn compare(a: &[Detection], b: &[Detection], what: &str) -> (f32, f32) {
    assert_eq!(a.len(), b.len(), "{what}: {a:?} vs {b:?}");
    let (mut score, mut corner) = (0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.class_id, y.class_id, "{what}");
        score = score.max((x.score - y.score).abs());
        for (p, q) in [(x.x1, y.x1), (x.y1, y.y1), (x.x2, y.x2), (x.y2, y.y2)] {
            corner = corner.max((p - q).abs());
        }
    }
    (score, corner)
}

#[test]
fn detections_through_the_fp16_dla_form_are_the_cpu_paths() {
    let mut dla = detector(Box::new(DlaForm { plan: None }));
    let mut cpu = detector(Box::new(CpuPreprocessor::new()));
    let (w, h) = dla.engine().input_size();
    assert_eq!((w, h), (256, 256), "the sizes below shrink by whole factors into 256x256");
    let (mut total, mut worst_score, mut worst_corner) = (0, 0f32, 0f32);
    let mut frame = Frame::empty();
    // Shrinking by 2 (two taps a side), 3 and 5 (one), in the formats cameras deliver.
    for (w, h) in [(512, 384), (768, 432), (1280, 720)] {
        for format in ["yuyv", "uyvy", "nv12", "rgb24", "grey"] {
            let uri =
                format!("synthetic://?width={w}&height={h}&fps=0&format={format}&seed=11&objects=5&frames=2");
            let mut src = source::open(&uri).unwrap();
            while src.next_frame(&mut frame).unwrap() {
                let a = dla.detect(&frame).unwrap().to_vec();
                let b = cpu.detect(&frame).unwrap();
                let (s, c) = compare(&a, b, &format!("{w}x{h} {format} frame {}", frame.seq));
                worst_score = worst_score.max(s);
                // In the model's input pixels: a frame 5 times wider shows a difference 5 times larger.
                worst_corner = worst_corner.max(c * 256.0 / w as f32);
                total += a.len();
            }
        }
    }
    // Measured (models of 2026-12-05): 126 detections; scores within 0.0027, corners within
    // 0.16 input px (0.77 px of a 1280x720 frame).
    eprintln!(
        "{total} detections; worst score difference {worst_score:.4}, worst corner {worst_corner:.3} input px"
    );
    assert!(total >= 60, "{total} detections compared");
    assert!(
        worst_score <= 0.005 && worst_corner <= 0.25,
        "score {worst_score}, corner {worst_corner} input px"
    );
}

#[test]
fn a_frame_size_the_dla_form_cannot_take_is_an_error_naming_one_it_can() {
    // 640x480 into 256x256 shrinks by 2.5.
    let e = build_dla(PixelFormat::Yuyv, 640, 480, Fit::Letterbox, 256, 256, Precision::Half)
        .unwrap_err()
        .to_string();
    assert!(e.contains("256x192") && e.contains("512x384") && e.contains("device = \"gpu\""), "{e}");
}
