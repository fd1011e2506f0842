//! The ONNX Runtime engine (CPU provider, the library from the `onnxruntime`
//! PyPI wheel that .ci/run installs) against the pure-Rust engine, and its
//! errors. A test that needs the library is reported as ignored where build.rs found none
//! (`ORT_DYLIB_PATH`, or the wheel under `target/ort`); with `JETDETECT_REQUIRE_ORT=1` (`.ci/run`)
//! it runs, and a missing library fails it.

use std::path::{Path, PathBuf};

use jetdetect::config::Config;
use jetdetect::frame::Frame;
use jetdetect::source::{self, file::load_image};
use jetdetect::yolo::Detection;

use crate::common::ort::library;
use crate::common::repo as root;

fn config(kind: &str, lib: &Path, model: &str) -> Config {
    let mut c = Config::default();
    c.model.path = root().join("models").join(model);
    c.engine.kind = kind.parse().unwrap();
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
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn onnxruntime_cpu_matches_tract_on_fixtures_and_the_synthetic_source() {
    let lib = library();
    for model in ["obstacles-v8.onnx", "obstacles-v5.onnx"] {
        let mut ort = jetdetect::daemon::detector(&config("onnxruntime", &lib, model)).unwrap();
        let mut tract = jetdetect::daemon::detector(&config("tract", &lib, model)).unwrap();
        let described = ort.engine().describe();
        // The version is logged and sent in `hello`: the wheel's library is named for it.
        let version = lib.file_name().unwrap().to_str().unwrap().rsplit(".so.").next().unwrap().to_string();
        assert!(described.starts_with(&format!("onnxruntime {version} [cpu]")), "{described}");
        let runtime = ort.engine().runtime();
        assert_eq!(runtime.get("onnxruntime"), Some(&version), "{runtime:?}");
        assert!(!runtime.contains_key("tensorrt") && !runtime.contains_key("cuda"), "CPU only: {runtime:?}");
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
fn a_missing_or_unloadable_library_is_a_documented_error() {
    let e = jetdetect::daemon::detector(&config(
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
    let err = jetdetect::daemon::detector(&c).err().unwrap();
    let e = err.to_string();
    assert!(e.contains("cannot load ONNX Runtime") || e.contains("already loaded"), "{e}");
    if e.contains("cannot load ONNX Runtime") {
        // The loader's own error is kept under the explanation.
        let loader = std::error::Error::source(&err).and_then(std::error::Error::source);
        assert!(loader.is_some_and(|s| s.is::<ort::LoadDynamicError>()), "{err:?}");
    }
}

/// A library that needs one that is gone (as a Jetson's ONNX Runtime needing `libcudnn.so.9`, or
/// an aarch64 build needing `libstdc++.so.6`): the message has the loader's words, which name the
/// missing file, and the list of what the loader cannot find. Before, it said "dlopen failed".
#[test]
fn a_library_that_will_not_load_names_what_the_loader_could_not_find() {
    let dir = crate::common::fresh_dir("ort", "needs");
    let cc = |args: &[&str]| {
        let out = std::process::Command::new("cc").args(args).current_dir(&dir).output();
        let out = out.expect("needs a C compiler, cc (cargo links with it too)");
        assert!(out.status.success(), "cc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    std::fs::write(dir.join("dep.c"), "int jd_dep(void) { return 1; }\n").unwrap();
    std::fs::write(dir.join("ort.c"), "int jd_dep(void);\nint jd_f(void) { return jd_dep(); }\n").unwrap();
    cc(&["-shared", "-fPIC", "-o", "libjd-gone.so.1", "-Wl,-soname,libjd-gone.so.1", "dep.c"]);
    cc(&["-shared", "-fPIC", "-o", "libonnxruntime.so", "ort.c", "-L.", "-l:libjd-gone.so.1"]);
    std::fs::remove_file(dir.join("libjd-gone.so.1")).unwrap();
    let config = dir.join("jd.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\npath = \"{}\"\n[engine]\nkind = \"onnxruntime\"\nlibrary = \"{}\"\n",
            root().join("models/obstacles-v8.onnx").display(),
            dir.join("libonnxruntime.so").display()
        ),
    )
    .unwrap();
    let (code, err) = crate::common::check_config(&config);
    assert_eq!(code, Some(1), "{err}");
    for want in [
        "libonnxruntime.so: cannot load ONNX Runtime: dlopen failed: libjd-gone.so.1: cannot open shared object file",
        "the loader cannot find what it needs: libjd-gone.so.1 (libjd-gone.so.1: cannot open shared object file",
    ] {
        assert!(err.contains(want), "'{want}' not in: {err}");
    }
}

#[test]
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn missing_providers_and_a_dla_the_board_lacks_are_documented_errors() {
    let lib = library();
    let mut c = config("onnxruntime", &lib, "obstacles-v8.onnx");
    c.engine.providers = vec![jetdetect::engine::Provider::TensorRt];
    let e = jetdetect::daemon::detector(&c).err().unwrap().to_string();
    assert!(e.contains("none of the providers") && e.contains("tensorrt"), "{e}");
    assert!(e.contains("TensorRT execution provider is not enabled in this build"), "{e}");
    // DLA asked for on a machine without one: refused before TensorRT could quietly use the GPU.
    c.engine.tensorrt.dla_core = Some(0);
    c.engine.providers = vec![jetdetect::engine::Provider::TensorRt, jetdetect::engine::Provider::Cpu];
    let e = jetdetect::daemon::detector(&c).err().unwrap().to_string();
    assert!(e.contains("this board has no DLA") && e.contains("remove [engine.tensorrt] dla_core"), "{e}");
    // The board is the one [power] root stands for: an Orin NX 8GB has one DLA core, an AGX
    // Orin two (core 1 passes the check; TensorRT, missing from this build, is passed over for
    // the CPU provider).
    let boards = root().join("tests/fixtures/jetson");
    c.power.root = boards.join("orin-nx-10w");
    c.engine.tensorrt.dla_core = Some(1);
    let e = jetdetect::daemon::detector(&c).err().unwrap().to_string();
    assert!(e.contains("this board has 1 DLA core: use 0"), "{e}");
    c.power.root = boards.join("agx-orin-jp7");
    if let Err(e) = jetdetect::daemon::detector(&c) {
        panic!("DLA core 1 on an AGX Orin: {e}");
    }
    c.power.root = boards.join("nano-jp4");
    let e = jetdetect::daemon::detector(&c).err().unwrap().to_string();
    let nano = boards.join("nano-jp4/sys/devices/platform");
    assert!(e.contains(&format!("no DLA (none under {})", nano.display())), "{e}");
}

/// An ONNX model whose output is its input `[1, 3, h, w]`: running it reads back what a stage wrote.
fn identity_model(w: usize, h: usize) -> PathBuf {
    use prost::Message;
    use tract_onnx::pb;
    let info = |name: &str| {
        use pb::tensor_shape_proto::{dimension::Value, Dimension};
        let dim =
            [1, 3, h, w].map(|d| Dimension { value: Some(Value::DimValue(d as i64)), ..Default::default() });
        pb::ValueInfoProto {
            name: name.into(),
            r#type: Some(pb::TypeProto {
                value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                    elem_type: pb::tensor_proto::DataType::Float as i32,
                    shape: Some(pb::TensorShapeProto { dim: dim.to_vec() }),
                })),
                ..Default::default()
            }),
            ..Default::default()
        }
    };
    let model = pb::ModelProto {
        ir_version: 7,
        opset_import: vec![pb::OperatorSetIdProto { domain: String::new(), version: 13 }],
        graph: Some(pb::GraphProto {
            name: "identity".into(),
            node: vec![pb::NodeProto {
                op_type: "Identity".into(),
                input: vec!["images".into()],
                output: vec!["out".into()],
                ..Default::default()
            }],
            input: vec![info("images")],
            output: vec![info("out")],
            ..Default::default()
        }),
        ..Default::default()
    };
    let dir = std::env::temp_dir().join(format!("jetdetect-identity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("identity_{w}x{h}.onnx"));
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

#[test]
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn preprocessing_graph_in_onnxruntime_equals_cpu_preprocessing() {
    use jetdetect::engine::{self, EngineOptions, StageDevice};
    use jetdetect::frame::PixelFormat;
    use jetdetect::preprocess::{graph, CpuPreprocessor, Fit, Preprocessor};
    let lib = library();
    let (dw, dh) = (256u32, 256u32);
    let options = EngineOptions { ort_library: Some(lib.clone()), ..EngineOptions::default() };
    let mut engine =
        engine::open(jetdetect::engine::EngineKind::OnnxRuntime, &identity_model(256, 256), &options)
            .unwrap();
    let mut cpu = CpuPreprocessor::new();
    let mut want = vec![0f32; 3 * 256 * 256];
    let mut frame = Frame::empty();
    let mut compared = 0;
    for format in PixelFormat::ALL {
        // Downscaled with letterbox rows, upscaled, and an odd size.
        for (w, h) in [(640, 480), (160, 90), (302, 212)] {
            let uri = format!("synthetic://?width={w}&height={h}&fps=0&format={format}&seed=3&frames=2");
            let mut src = source::open(&uri).unwrap();
            let g = graph::build(format, w, h, Fit::Letterbox, dw, dh).unwrap();
            let mut stage = engine.input_stage(&g.onnx, &g.input_shape, StageDevice::Gpu).unwrap();
            assert!(stage.describe().contains("cpu"), "{}", stage.describe());
            while src.next_frame(&mut frame).unwrap() {
                stage.run(&frame.data).unwrap();
                let got = engine.run().unwrap().to_vec();
                let lb = cpu.run(&frame, Fit::Letterbox, dw, dh, &mut want).unwrap();
                assert_eq!(lb, g.letterbox);
                let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(worst <= 1.0 / 255.0 + 1e-6, "{format} {w}x{h}: off by {} levels", worst * 255.0);
                // In FP32 the graph repeats the CPU arithmetic: all but a rare value are identical.
                let differ = got.iter().zip(&want).filter(|(a, b)| (*a - *b).abs() > 1e-5).count();
                assert!(differ * 1000 <= got.len(), "{format} {w}x{h}: {differ} values differ");
                compared += 1;
            }
            // A frame of the wrong size is refused, not read past.
            let e = stage.run(&frame.data[1..]).unwrap_err().to_string();
            assert!(e.contains("the graph takes"), "{e}");
        }
    }
    assert_eq!(compared, 36);
    // With a stage attached, the host input is no longer the engine's input.
    assert!(engine.input_mut().is_empty());
}

#[test]
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn detections_with_accelerated_preprocessing_equal_cpu_preprocessing() {
    let lib = library();
    let mut host = jetdetect::daemon::detector(&config("onnxruntime", &lib, "obstacles-v8.onnx")).unwrap();
    let mut c = config("onnxruntime", &lib, "obstacles-v8.onnx");
    c.preprocess.device = jetdetect::preprocess::Device::Gpu;
    let mut device = jetdetect::daemon::detector(&c).unwrap();
    let mut frame = Frame::empty();
    let mut total = 0;
    for format in ["yuyv", "nv12", "rgb24"] {
        let uri = format!("synthetic://?width=640&height=360&fps=0&format={format}&seed=5&frames=6");
        let mut src = source::open(&uri).unwrap();
        device.warm_up_for(1, (format.parse().unwrap(), 640, 360)).unwrap();
        while src.next_frame(&mut frame).unwrap() {
            let a = device.detect(&frame).unwrap().to_vec();
            let b = host.detect(&frame).unwrap().to_vec();
            same(&a, &b, &format!("{format} frame {}", frame.seq));
            total += a.len();
        }
    }
    assert!(device.preprocessing().starts_with("gpu (onnxruntime [cpu])"), "{}", device.preprocessing());
    assert!(total > 20, "{total} detections compared");
    // A PNG (RGB24, another size) gets its own graph on the fly.
    load_image(&root().join("tests/fixtures/images/scene_301x211.png"), &mut frame).unwrap();
    same(device.detect(&frame).unwrap(), host.detect(&frame).unwrap(), "png");
}

#[test]
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn dla_preprocessing_without_tensorrt_says_what_to_do() {
    let lib = library();
    let mut c = config("onnxruntime", &lib, "obstacles-v8.onnx");
    c.engine.providers = vec![jetdetect::engine::Provider::TensorRt, jetdetect::engine::Provider::Cpu];
    c.preprocess.device = jetdetect::preprocess::Device::Dla;
    let mut d = jetdetect::daemon::detector(&c).unwrap();
    let e = d.warm_up(1).unwrap_err().to_string();
    assert!(
        e.contains("device = \"dla\" runs through TensorRT") && e.contains("use device = \"gpu\""),
        "{e}"
    );
}

#[test]
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn auto_picks_onnxruntime_when_found_and_tract_otherwise() {
    let lib = library();
    let auto = jetdetect::daemon::detector(&config("auto", &lib, "obstacles-v8.onnx")).unwrap();
    assert!(auto.engine().describe().starts_with("onnxruntime"), "{}", auto.engine().describe());
    // A library that is configured but missing (or cannot load) is not fatal for auto: tract runs the model.
    let missing = Path::new("/nonexistent-jd/libonnxruntime.so");
    let mut fallback = jetdetect::daemon::detector(&config("auto", missing, "obstacles-v8.onnx")).unwrap();
    assert!(fallback.engine().describe().starts_with("tract"), "{}", fallback.engine().describe());
    let frame = {
        let mut src = jetdetect::source::open("synthetic://?width=320&height=240&fps=0&seed=3").unwrap();
        let mut f = jetdetect::frame::Frame::empty();
        src.next_frame(&mut f).unwrap();
        f
    };
    assert!(!fallback.detect(&frame).unwrap().is_empty());
    // Asked for by name, a missing library stays an error.
    let e = jetdetect::daemon::detector(&config("onnxruntime", missing, "obstacles-v8.onnx")).err().unwrap();
    assert!(e.to_string().contains("/nonexistent-jd/libonnxruntime.so: no such file"), "{e}");
}

/// An ONNX Runtime 1.16.3 as far as the loader can tell: a library exporting `OrtGetApiBase` whose
/// version string is 1.16.3 (built here with the C compiler that links jetdetect itself). It is what
/// a JetPack 5 install of jetson-containers' default ONNX Runtime presents to jetdetect.
fn old_onnxruntime(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let c = dir.join("fake_ort.c");
    std::fs::write(
        &c,
        "typedef struct { const void* (*GetApi)(unsigned); const char* (*GetVersionString)(void); } Base;\n\
         static const void* api(unsigned v) { (void)v; return 0; }\n\
         static const char* version(void) { return \"1.16.3\"; }\n\
         static const Base base = { api, version };\n\
         const Base* OrtGetApiBase(void) { return &base; }\n",
    )
    .unwrap();
    let lib = dir.join("libonnxruntime.so.1.16.3");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let ok = std::process::Command::new(&cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&c)
        .status()
        .unwrap_or_else(|e| panic!("{cc}: {e} (a C compiler builds the stand-in library)"));
    assert!(ok.success());
    lib
}

#[test]
fn an_onnxruntime_older_than_the_floor_is_one_clear_error_with_the_way_to_a_usable_build() {
    let dir = std::env::temp_dir().join(format!("jd-old-ort-{}", std::process::id()));
    let lib = old_onnxruntime(&dir);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_jetdetect"))
        .args(["detect", "--engine", "onnxruntime", "--model"])
        .arg(root().join("models/obstacles-v8.onnx"))
        .arg("--ort-library")
        .arg(&lib)
        .arg(root().join("tests/fixtures/images/scene_480x480.png"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&lib.display().to_string())
            && err.contains("ONNX Runtime 1.16.3 is older than 1.17")
            && err.contains("JetPack 5.1: an onnxruntime-gpu 1.17 or 1.18 wheel")
            && err.contains("kind = \"tract\""),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_library_is_found_where_jetpack_installs_it() {
    use jetdetect::engine::onnxruntime::installed_libraries;
    let r = std::env::temp_dir().join(format!("jd-ort-search-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&r);
    let put = |rel: &str| {
        let p = r.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"").unwrap();
        p
    };
    assert!(installed_libraries(&r).is_empty());
    // pip wheels on JetPack 5 (Python 3.8) and 6 (3.10): only the versioned name, newest Python first.
    let jp5 = put("usr/local/lib/python3.8/dist-packages/onnxruntime/capi/libonnxruntime.so.1.18.0");
    let jp6 = put("usr/local/lib/python3.10/dist-packages/onnxruntime/capi/libonnxruntime.so.1.20.1");
    put("usr/local/lib/python3.10/dist-packages/onnxruntime/capi/onnxruntime_pybind11_state.so");
    assert_eq!(installed_libraries(&r), [jp6.clone(), jp5.clone()]);
    // A source build (jetson-containers) in /usr/local/lib comes first, the highest version first.
    let old = put("usr/local/lib/libonnxruntime.so.1.17.0");
    let new = put("usr/local/lib/libonnxruntime.so.1.19.2");
    assert_eq!(installed_libraries(&r), [new, old, jp6, jp5]);
    std::fs::remove_dir_all(&r).unwrap();
}

/// The first frame of `n` synthetic scenes (seeds 1..=n), 640x480 in `format`.
fn scenes(format: &str, n: u64) -> Vec<Frame> {
    (1..=n)
        .map(|seed| {
            let uri =
                format!("synthetic://?width=640&height=480&fps=0&format={format}&seed={seed}&objects=5");
            let mut src = source::open(&uri).unwrap();
            let mut f = Frame::empty();
            assert!(src.next_frame(&mut f).unwrap());
            f
        })
        .collect()
}

#[test]
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn a_batched_run_gives_each_camera_what_it_gets_alone_and_device_preprocessing_runs_one() {
    let lib = library();
    let mut c = config("onnxruntime", &lib, "obstacles-v8-batch.onnx");
    // Four cameras: the dynamic batch axis is bound for one to four images.
    c.source.0 = vec![c.source.0[0].clone(); 4];
    let mut ort = jetdetect::daemon::detector(&c).unwrap();
    assert_eq!(ort.max_batch(), 4);
    let frames = scenes("yuyv", 4);
    let alone: Vec<Vec<Detection>> = frames.iter().map(|f| ort.detect(f).unwrap().to_vec()).collect();
    for n in 2..=4 {
        ort.detect_batch(frames[..n].iter()).unwrap();
        for (i, want) in alone[..n].iter().enumerate() {
            same(ort.batch_result(i).unwrap(), want, &format!("onnxruntime, batch of {n}, camera {i}"));
        }
    }
    // The same network with its batch fixed at 2 (an export with batch=2): every run has two
    // slots; one frame runs in the first, two fill both.
    let fixed = crate::common::fixed_batch_model(2, "ort");
    let mut two = jetdetect::daemon::detector(&config("onnxruntime", &lib, fixed.to_str().unwrap())).unwrap();
    assert_eq!(two.max_batch(), 2);
    same(two.detect(&frames[2]).unwrap(), &alone[2], "onnxruntime, fixed batch 2, one frame");
    two.detect_batch(frames[..2].iter()).unwrap();
    for (i, want) in alone[..2].iter().enumerate() {
        same(two.batch_result(i).unwrap(), want, &format!("onnxruntime, fixed batch 2, slot {i}"));
    }
    let _ = std::fs::remove_file(&fixed);
    // `[engine] max_batch = 1`: one camera per run, in turn.
    c.engine.max_batch = 1;
    assert_eq!(jetdetect::daemon::detector(&c).unwrap().max_batch(), 1);
    // Preprocessing on the device writes one image per run: no batches.
    c.engine.max_batch = 4;
    c.preprocess.device = jetdetect::preprocess::Device::Gpu;
    let mut gpu = jetdetect::daemon::detector(&c).unwrap();
    assert_eq!(gpu.max_batch(), 1);
    same(gpu.detect(&frames[0]).unwrap(), &alone[0], "device preprocessing, one image");
}

#[test]
fn a_model_with_a_fixed_batch_runs_all_its_slots_on_tract() {
    // tract needs no library: this runs everywhere.
    let lib = PathBuf::new();
    let fixed = crate::common::fixed_batch_model(2, "tract");
    let mut one = jetdetect::daemon::detector(&config("tract", &lib, "obstacles-v8.onnx")).unwrap();
    let mut two = jetdetect::daemon::detector(&config("tract", &lib, fixed.to_str().unwrap())).unwrap();
    let _ = std::fs::remove_file(&fixed);
    // A fixed batch is the model's, whatever the cameras: one camera's frames run in slot 0.
    assert_eq!((one.max_batch(), two.max_batch()), (1, 2));
    let frames = scenes("nv12", 3);
    let alone: Vec<Vec<Detection>> = frames.iter().map(|f| one.detect(f).unwrap().to_vec()).collect();
    for (i, f) in frames.iter().enumerate() {
        same(two.detect(f).unwrap(), &alone[i], &format!("tract, fixed batch 2, one frame, frame {i}"));
    }
    two.detect_batch(frames[..2].iter()).unwrap();
    for (i, want) in alone[..2].iter().enumerate() {
        same(two.batch_result(i).unwrap(), want, &format!("tract, fixed batch 2, slot {i}"));
    }
    assert!(two.detect_batch(frames.iter()).is_err(), "three frames, two slots");
}
