//! The ONNX Runtime engine (CPU provider, the library from the `onnxruntime`
//! PyPI wheel that .ci/run installs) against the pure-Rust engine, and its
//! errors. Locally, without a library, the comparisons are skipped; in CI
//! (`CI=true`) a missing library fails the test.

use std::path::{Path, PathBuf};

use jetdetect::config::Config;
use jetdetect::detector::Detector;
use jetdetect::frame::Frame;
use jetdetect::source::{self, file::load_image};
use jetdetect::yolo::Detection;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The library, if this machine has one (ORT_DYLIB_PATH or target/ort/).
fn library() -> Option<PathBuf> {
    let from_env = std::env::var_os("ORT_DYLIB_PATH").map(PathBuf::from).filter(|p| p.exists());
    let local = root().join("target/ort/onnxruntime/capi");
    let found = from_env.or_else(|| {
        std::fs::read_dir(&local).ok()?.filter_map(|e| e.ok().map(|e| e.path())).find(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libonnxruntime.so."))
        })
    });
    if found.is_none() {
        assert!(std::env::var("CI").is_err(), "CI must provide ONNX Runtime (see .ci/run)");
        eprintln!("no ONNX Runtime library (set ORT_DYLIB_PATH): skipped");
    }
    found
}

fn config(kind: &str, lib: &Path, model: &str) -> Config {
    let mut c = Config::default();
    c.model.path = root().join("models").join(model);
    c.engine.kind = kind.into();
    c.engine.library = lib.to_path_buf();
    c
}

fn same(a: &[Detection], b: &[Detection], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: {a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.class_id, y.class_id, "{what}");
        assert!((x.score - y.score).abs() < 1e-3, "{what}: {x:?} vs {y:?}");
        for (p, q) in [(x.x1, y.x1), (x.y1, y.y1), (x.x2, y.x2), (x.y2, y.y2)] {
            assert!((p - q).abs() < 0.5, "{what}: {x:?} vs {y:?}");
        }
    }
}

#[test]
fn onnxruntime_cpu_matches_tract_on_fixtures_and_the_synthetic_source() {
    let Some(lib) = library() else { return };
    for model in ["obstacles-v8.onnx", "obstacles-v5.onnx"] {
        let mut ort = Detector::from_config(&config("onnxruntime", &lib, model)).unwrap();
        let mut tract = Detector::from_config(&config("tract", &lib, model)).unwrap();
        assert!(ort.engine().describe().starts_with("onnxruntime [cpu]"), "{}", ort.engine().describe());
        assert_eq!(ort.names().name(1), "ball", "names from the model's metadata");
        let mut frame = Frame::empty();
        let mut total = 0;
        for img in ["scene_480x480.png", "scene_640x360.png", "scene_800x600.jpg", "scene_301x211.png"] {
            load_image(&root().join("tests/fixtures/images").join(img), &mut frame).unwrap();
            let a = ort.detect(&frame).unwrap().to_vec();
            let b = tract.detect(&frame).unwrap().to_vec();
            same(&a, &b, &format!("{model} {img}"));
            total += a.len();
        }
        let mut src =
            source::open("synthetic://?width=640&height=480&fps=0&format=nv12&seed=9&frames=20").unwrap();
        while src.next_frame(&mut frame).unwrap() {
            let a = ort.detect(&frame).unwrap().to_vec();
            let b = tract.detect(&frame).unwrap().to_vec();
            same(&a, &b, &format!("{model} synthetic frame {}", frame.seq));
            total += a.len();
        }
        assert!(total > 50, "{model}: {total} detections compared");
    }
}

#[test]
fn missing_library_and_missing_providers_are_documented_errors() {
    let e = Detector::from_config(&config(
        "onnxruntime",
        Path::new("/nonexistent/libonnxruntime.so"),
        "obstacles-v8.onnx",
    ))
    .err()
    .unwrap()
    .to_string();
    // Either it names the missing file, or this process already loaded a library (one per process).
    assert!(
        e.contains("/nonexistent/libonnxruntime.so: no such file") || e.contains("already loaded"),
        "{e}"
    );
    let mut c = config("onnxruntime", Path::new("/etc/hostname"), "obstacles-v8.onnx");
    c.engine.library = root().join("Cargo.toml");
    let e = Detector::from_config(&c).err().unwrap().to_string();
    assert!(e.contains("cannot load ONNX Runtime") || e.contains("already loaded"), "{e}");
    let Some(lib) = library() else { return };
    let mut c = config("onnxruntime", &lib, "obstacles-v8.onnx");
    c.engine.providers = vec!["tensorrt".into()];
    c.engine.tensorrt.dla_core = Some(0);
    let e = Detector::from_config(&c).err().unwrap().to_string();
    assert!(e.contains("none of the providers") && e.contains("tensorrt"), "{e}");
    assert!(e.contains("TensorRT execution provider is not enabled in this build"), "{e}");
    assert!(e.contains("DLA needs a Jetson"), "{e}");
}
