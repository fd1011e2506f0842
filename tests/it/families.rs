//! Every ultralytics detection family and the exports users make of it, decoded as ultralytics'
//! own `predict` decodes them: small exports made by ultralytics 8.4 from its own model
//! definitions, with `predict`'s detections on the fixture images
//! (tests/reference/make_families.py, tests/reference/families/). Each export runs through the
//! whole detector (letterbox, engine, layout from the model, decoding) on tract and, where the
//! library is present, ONNX Runtime, and must give the same boxes: the same count and classes,
//! corners within 1 px, scores within 1e-3.

use std::path::Path;

use jetdetect::config::Config;
use jetdetect::detector::Detector;
use jetdetect::frame::Frame;
use jetdetect::geometry::iou;
use jetdetect::preprocess::Fit;
use jetdetect::source::file::load_image;
use jetdetect::yolo::{Detection, Layout};
use serde_json::Value;

use crate::common::repo as root;

fn references() -> Value {
    let text = std::fs::read_to_string(root().join("tests/reference/families/references.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn detections(v: &Value) -> Vec<Detection> {
    let f = |d: &Value, k: &str| d[k].as_f64().unwrap() as f32;
    let list = v.as_array().unwrap().iter();
    list.map(|d| Detection {
        class_id: d["class_id"].as_u64().unwrap() as usize,
        score: f(d, "score"),
        x1: f(d, "x1"),
        y1: f(d, "y1"),
        x2: f(d, "x2"),
        y2: f(d, "y2"),
    })
    .collect()
}

/// The detector for `export` as `run` builds it from a config: `kind` engine, the references'
/// thresholds and input size (a dynamic export's size comes from the config).
fn detector(r: &Value, export: &str, kind: &str, library: Option<&Path>) -> Detector {
    let mut c = Config::default();
    c.model.path = root().join("tests/reference/families").join(export);
    c.engine.kind = kind.parse().unwrap();
    if let Some(lib) = library {
        c.engine.library = lib.to_path_buf();
        c.engine.providers = vec![jetdetect::engine::Provider::Cpu];
    }
    let size = r["imgsz"].as_u64().unwrap() as u32;
    (c.model.input_width, c.model.input_height) = (size, size);
    c.detect.confidence = r["conf"].as_f64().unwrap() as f32;
    c.detect.iou = r["iou"].as_f64().unwrap() as f32;
    c.detect.max_detections = r["max_det"].as_u64().unwrap() as usize;
    jetdetect::daemon::detector(&c).unwrap_or_else(|e| panic!("{export} on {kind}: {e}"))
}

/// A fixture image, named by its path under tests/fixtures as the references name it.
fn image(name: &str) -> Frame {
    let mut frame = Frame::empty();
    load_image(&root().join("tests/fixtures").join(name), &mut frame).unwrap();
    frame
}

/// How close two decodings must be.
#[derive(Clone, Copy)]
struct Tolerance {
    /// Score difference.
    score: f32,
    /// Corner difference, in image pixels.
    px: f32,
    /// How close to the confidence threshold a score is a near-tie, which may fall either side.
    tie: f32,
}

/// The figures: scores within 1e-3, corners within 1 px; engines' FP32 arithmetic differs
/// by about 1e-7 in a score, so a near-tie is within 1e-5.
const FP32: Tolerance = Tolerance { score: 1e-3, px: 1.0, tie: 1e-5 };

/// `got` against ultralytics' `want`, box by box, in order. Boxes scoring within `tol.tie` of the
/// threshold `conf`, on one side only, are set aside and counted (named in the output).
fn assert_same(what: &str, got: &[Detection], want: &[Detection], conf: f32, tol: Tolerance) -> usize {
    let near = |d: &Detection| (d.score - conf).abs() <= tol.tie;
    let (got, want, ties): (Vec<Detection>, Vec<Detection>, usize) = match got.len() == want.len() {
        true => (got.to_vec(), want.to_vec(), 0),
        false => {
            let keep = |d: &[Detection]| d.iter().filter(|d| !near(d)).copied().collect::<Vec<_>>();
            let ties = got.iter().chain(want).filter(|d| near(d)).inspect(|d| {
                eprintln!("{what}: near-tie at the threshold {conf}, set aside: {d:?}");
            });
            let ties = ties.count();
            (keep(got), keep(want), ties)
        }
    };
    let show = |d: &[Detection]| d.iter().map(|d| format!("\n  {d:?}")).collect::<String>();
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} boxes, ultralytics {}{}\n--{}",
        got.len(),
        want.len(),
        show(&got),
        show(&want)
    );
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let corners = [(g.x1, w.x1), (g.y1, w.y1), (g.x2, w.x2), (g.y2, w.y2)];
        let ok = g.class_id == w.class_id
            && (g.score - w.score).abs() <= tol.score
            && corners.iter().all(|(a, b)| (a - b).abs() <= tol.px);
        assert!(ok, "{what}: box {i}: {g:?}\n  ultralytics: {w:?}");
    }
    ties
}

/// An FP16 export (float16 inside, float32 input and output) on tract. ONNX Runtime's CPU provider,
/// which ultralytics' predict runs, rounds every layer's output to float16; tract computes the
/// float16 weights in float32 (engine/tract.rs), closer to the network's float32 self. The two
/// differ in scores by a few 1e-4 and, where scores saturate and box distributions are flat, in
/// corners by several pixels (measured: 6 px on a 640-pixel-wide frame): box by box is the test
/// of ONNX Runtime here, which passes it. On tract, nine in ten boxes of each side must have a
/// counterpart of the same class with an IoU of 0.8 or more.
fn assert_found(what: &str, got: &[Detection], want: &[Detection]) {
    let matched = |a: &[Detection], b: &[Detection]| {
        let close =
            |x: &Detection, y: &Detection| x.class_id == y.class_id && iou(x.corners(), y.corners()) >= 0.8;
        a.iter().filter(|x| b.iter().any(|y| close(x, y))).count()
    };
    let (found, real) = (matched(want, got), matched(got, want));
    assert!(found * 10 >= want.len() * 9, "{what}: {found} of ultralytics' {} boxes found", want.len());
    assert!(real * 10 >= got.len() * 9, "{what}: {real} of {} boxes are ultralytics'", got.len());
}

/// Runs every export on every fixture with `kind`, against ultralytics' predictions; returns the
/// boxes compared box by box. Near-ties at the threshold may differ, at most one in 200 boxes.
fn compare_all(kind: &str, library: Option<&Path>) -> usize {
    let r = references();
    let conf = r["conf"].as_f64().unwrap() as f32;
    let (mut compared, mut ties) = (0, 0);
    for (export, e) in r["exports"].as_object().unwrap() {
        if kind == "tract" && e["args"]["nms"] == Value::Bool(true) {
            // NMS inside the graph: tract fails on ultralytics' NMS graph, refused at load.
            assert_nms_refused_on_tract(&r, export);
            continue;
        }
        let mut d = detector(&r, export, kind, library);
        let rt_detr = e["family"] == "rtdetr";
        let end2end =
            e["end2end"].as_str() == Some("True") || e["args"]["nms"] == Value::Bool(true) || rt_detr;
        assert_eq!(d.layout().end_to_end(), end2end, "{export}: read as {} ({})", d.layout(), d.layout_why());
        for (name, want) in e["images"].as_object().unwrap() {
            let frame = image(name);
            let mut want = detections(want);
            if rt_detr {
                // ultralytics' RT-DETR predictor scales the boxes to the frame without clipping
                // them to it (its YOLO predictor clips); jetdetect clips every box.
                let (w, h) = (frame.width as f32, frame.height as f32);
                for d in &mut want {
                    (d.x1, d.x2) = (d.x1.clamp(0.0, w), d.x2.clamp(0.0, w));
                    (d.y1, d.y2) = (d.y1.clamp(0.0, h), d.y2.clamp(0.0, h));
                }
            }
            let got = d.detect(&frame).unwrap().to_vec();
            let what = format!("{export} on {kind}, {name}");
            match kind == "tract" && e["form"] == "fp16" {
                true => assert_found(&what, &got, &want),
                false => {
                    ties += assert_same(&what, &got, &want, conf, FP32);
                    compared += want.len();
                }
            }
        }
    }
    assert!(ties * 200 <= compared, "{ties} near-ties in {compared} boxes: more than 1 in 200");
    compared
}

/// tract refuses a model with NMS inside, saying what to do.
fn assert_nms_refused_on_tract(r: &Value, export: &str) {
    let mut c = Config::default();
    c.model.path = root().join("tests/reference/families").join(export);
    c.engine.kind = jetdetect::engine::EngineKind::Tract;
    let size = r["imgsz"].as_u64().unwrap() as u32;
    (c.model.input_width, c.model.input_height) = (size, size);
    let e = jetdetect::daemon::detector(&c).err().expect("refused").to_string();
    for want in [export, "NMS inside", "nms=True", "kind = \"onnxruntime\"", "re-export"] {
        assert!(e.contains(want), "{export}: {e}");
    }
}

#[test]
fn every_family_and_export_decodes_as_ultralytics_predict_on_tract() {
    let n = compare_all("tract", None);
    eprintln!("tract: {n} boxes the same as ultralytics' predict (and the FP16 export matched)");
    assert!(n > 300, "{n} boxes: the references should have hundreds");
}

#[test]
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn every_family_and_export_decodes_as_ultralytics_predict_on_onnxruntime() {
    let lib = crate::common::ort::library();
    let n = compare_all("onnxruntime", Some(&lib));
    eprintln!("onnxruntime: {n} boxes the same as ultralytics' predict");
    assert!(n > 300, "{n} boxes: the references should have hundreds");
}

#[test]
fn end_to_end_and_rt_detr_exports_are_read_from_their_metadata_with_the_names() {
    let r = references();
    let d = detector(&r, "yolo26-e2e.onnx", "tract", None);
    assert_eq!(d.layout(), Layout::EndToEnd { rows: 300, classes: Some(4) });
    assert!(d.layout_why().contains("end2end = True"), "{}", d.layout_why());
    assert_eq!(d.names().name(3), "person");
    let d = detector(&r, "yolo26-default.onnx", "tract", None);
    assert_eq!(d.layout(), Layout::V8 { anchors: 525, classes: 4 });
    // RT-DETR: its head named in the metadata; its frames stretched, as its predictor does.
    let d = detector(&r, "rtdetr-default.onnx", "tract", None);
    assert_eq!(
        (d.layout(), d.layout().fit()),
        (Layout::RtDetr { rows: 300, classes: Some(4) }, Fit::Stretch)
    );
    assert!(d.layout_why().contains("RTDETRDecoder"), "{}", d.layout_why());
}

#[test]
fn a_batch_of_end_to_end_and_dynamic_exports_gives_each_frame_what_it_gets_alone() {
    let r = references();
    for export in ["yolo26-e2e-dynamic.onnx", "yolo11-dynamic.onnx"] {
        let mut c = Config::default();
        c.model.path = root().join("tests/reference/families").join(export);
        c.engine.kind = jetdetect::engine::EngineKind::Tract;
        (c.model.input_width, c.model.input_height) = (160, 160);
        c.engine.max_batch = 3;
        c.source.0 = vec![c.source.0[0].clone(); 3];
        let mut d = jetdetect::daemon::detector(&c).unwrap();
        assert_eq!(d.max_batch(), 3, "{export}");
        let names: Vec<&String> = r["exports"][export]["images"].as_object().unwrap().keys().collect();
        let frames: Vec<Frame> = names.iter().take(3).map(|n| image(n)).collect();
        let alone: Vec<Vec<Detection>> = frames.iter().map(|f| d.detect(f).unwrap().to_vec()).collect();
        d.detect_batch(frames.iter()).unwrap();
        for (i, want) in alone.iter().enumerate() {
            let what = format!("{export}, frame {i} of a batch of 3");
            assert_eq!(
                assert_same(&what, d.batch_result(i).unwrap(), want, 0.25, FP32),
                0,
                "{what}: the same engine"
            );
        }
    }
}
