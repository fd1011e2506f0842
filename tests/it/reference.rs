//! jetdetect against independent references (tests/reference/make_reference.py):
//! ultralytics' letterbox, NumPy decoding + NMS on ONNX Runtime's outputs, and
//! ultralytics' own `predict`, for both the YOLOv8 and the YOLOv5 layout.

use jetdetect::config::Config;
use jetdetect::frame::Frame;
use jetdetect::preprocess::{CpuPreprocessor, Fit, Letterbox, Preprocessor};
use jetdetect::source::{self, file::load_image};
use jetdetect::yolo::{DecodeOptions, Decoder, Detection, Layout, LayoutHint};
use serde_json::Value;

use crate::common::repo as root;

fn reference() -> Value {
    let text = std::fs::read_to_string(root().join("tests/reference/detections.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Loads a fixture the way the product would: images by path, raw frames by URI.
fn load_fixture(name: &str) -> Frame {
    let mut frame = Frame::empty();
    if name.ends_with(".yuyv") || name.ends_with(".nv12") {
        let format = name.rsplit('.').next().unwrap();
        let uri = format!(
            "file://{}?width=320&height=240&format={format}",
            root().join("tests/fixtures/raw").join(name).display()
        );
        assert!(source::open(&uri).unwrap().next_frame(&mut frame).unwrap());
    } else {
        // Landscape and square frames in images/, the portrait one (left/right padding) in portrait/.
        let images = root().join("tests/fixtures/images").join(name);
        let path = if images.exists() { images } else { root().join("tests/fixtures/portrait").join(name) };
        load_image(&path, &mut frame).unwrap();
    }
    frame
}

fn expected(v: &Value) -> Vec<Detection> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| Detection {
            class_id: d["class_id"].as_u64().unwrap() as usize,
            score: d["score"].as_f64().unwrap() as f32,
            x1: d["x1"].as_f64().unwrap() as f32,
            y1: d["y1"].as_f64().unwrap() as f32,
            x2: d["x2"].as_f64().unwrap() as f32,
            y2: d["y2"].as_f64().unwrap() as f32,
        })
        .collect()
}

fn assert_same(what: &str, got: &[Detection], want: &[Detection], px: f32, score: f32) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} detections, reference has {}\n{got:?}\n{want:?}",
        got.len(),
        want.len()
    );
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.class_id, w.class_id, "{what}: class\n{got:?}\n{want:?}");
        assert!((g.score - w.score).abs() <= score, "{what}: score {} vs {}", g.score, w.score);
        for (a, b) in [(g.x1, w.x1), (g.y1, w.y1), (g.x2, w.x2), (g.y2, w.y2)] {
            assert!((a - b).abs() <= px, "{what}: box {g:?} vs {w:?}");
        }
    }
}

fn options(r: &Value) -> DecodeOptions {
    DecodeOptions {
        confidence: r["conf"].as_f64().unwrap() as f32,
        iou: r["iou"].as_f64().unwrap() as f32,
        max_detections: r["max_det"].as_u64().unwrap() as usize,
        ..DecodeOptions::default()
    }
}

fn images(r: &Value, layout: &str) -> Vec<(String, Value)> {
    r["models"][layout]["images"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[test]
fn letterbox_matches_ultralytics_within_one_level() {
    let mut pre = CpuPreprocessor::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(root().join("tests/reference/letterbox")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if name.ends_with(".jpg") {
            // JPEG decoders (OpenCV's libjpeg, Rust's zune-jpeg) may differ by a level or
            // two before any resizing; the end-to-end test covers this image.
            continue;
        }
        let want = image::open(&path).unwrap().into_rgb8();
        let (w, h) = want.dimensions();
        let frame = load_fixture(&name);
        let mut out = vec![0f32; (3 * w * h) as usize];
        pre.run(&frame, Fit::Letterbox, w, h, &mut out).unwrap();
        let plane = (w * h) as usize;
        let mut worst = 0f32;
        for (i, px) in want.pixels().enumerate() {
            for c in 0..3 {
                worst = worst.max((out[c * plane + i] - px[c] as f32 / 255.0).abs());
            }
        }
        assert!(worst <= 1.0 / 255.0 + 1e-6, "{name}: worst difference {} levels", worst * 255.0);
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} letterbox references found");
}

#[test]
fn decoding_matches_numpy_on_the_same_tensors() {
    let r = reference();
    for layout in ["v8", "v5"] {
        for (name, entry) in images(&r, layout) {
            let bytes =
                std::fs::read(root().join(format!("tests/reference/outputs/{layout}__{name}.f32"))).unwrap();
            let out: Vec<f32> =
                bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
            let shape: Vec<usize> = entry["output_shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as usize)
                .collect();
            let layout_found = Layout::detect(&shape, LayoutHint::Auto).unwrap();
            assert_eq!(matches!(layout_found, Layout::V8 { .. }), layout == "v8", "{name}: {layout_found}");
            let (w, h) = (entry["width"].as_u64().unwrap() as u32, entry["height"].as_u64().unwrap() as u32);
            let lb = Letterbox::new(w, h, 256, 256);
            let mut dets = Vec::new();
            Decoder::new(layout_found, options(&r)).decode(&out, &lb, &mut dets);
            assert_same(&format!("{layout} {name}"), &dets, &expected(&entry["numpy"]), 1e-2, 1e-5);
        }
    }
}

#[test]
fn end_to_end_matches_numpy_and_ultralytics_predict() {
    let r = reference();
    for layout in ["v8", "v5"] {
        let mut config = Config::default();
        config.engine.kind = jetdetect::engine::EngineKind::Tract;
        config.model.path = root().join("models").join(r["models"][layout]["file"].as_str().unwrap());
        config.detect.confidence = r["conf"].as_f64().unwrap() as f32;
        config.detect.iou = r["iou"].as_f64().unwrap() as f32;
        config.detect.max_detections = r["max_det"].as_u64().unwrap() as usize;
        let mut detector = jetdetect::daemon::detector(&config).unwrap();
        assert_eq!(detector.names().name(2), "cone", "names come from the model's metadata");
        let mut total = 0;
        for (name, entry) in images(&r, layout) {
            let frame = load_fixture(&name);
            let dets = detector.detect(&frame).unwrap().to_vec();
            // The reference decodes JPEG with libjpeg, jetdetect with zune-jpeg: their
            // IDCT and chroma upsampling differ slightly, so pixels (and scores) may too.
            let score_tol = if name.ends_with(".jpg") { 5e-3 } else { 1e-3 };
            assert_same(
                &format!("{layout} {name} vs NumPy"),
                &dets,
                &expected(&entry["numpy"]),
                1.0,
                score_tol,
            );
            if let Some(ul) = entry.get("ultralytics") {
                assert_same(&format!("{layout} {name} vs ultralytics"), &dets, &expected(ul), 1.0, score_tol);
            }
            total += dets.len();
        }
        assert!(total >= 10, "{layout}: only {total} detections over the fixtures: a weak test");
    }
}

#[test]
fn both_layouts_give_the_same_detections() {
    let dets = |file: &str| {
        let mut config = Config::default();
        config.engine.kind = jetdetect::engine::EngineKind::Tract;
        config.model.path = root().join("models").join(file);
        let mut d = jetdetect::daemon::detector(&config).unwrap();
        let frame = load_fixture("scene_480x480.png");
        d.detect(&frame).unwrap().to_vec()
    };
    let (v8, v5) = (dets("obstacles-v8.onnx"), dets("obstacles-v5.onnx"));
    assert!(!v8.is_empty());
    assert_same("v5 vs v8", &v5, &v8, 1e-3, 1e-5);
}
