//! The `jetdetect` binary as a user meets it: output formats, exit codes and
//! the error messages for bad input (never a panic).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::repo as root;

fn jetdetect(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jetdetect")).args(args).current_dir(root()).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A failure must exit non-zero with a message, and never panic.
fn assert_clean_failure(o: &Output, needles: &[&str]) {
    let err = stderr(o);
    assert!(!o.status.success(), "expected failure, got success: {err}");
    assert_ne!(o.status.code(), Some(101), "panicked: {err}");
    assert!(!err.contains("panicked"), "panicked: {err}");
    for n in needles {
        assert!(err.contains(n), "'{n}' not in: {err}");
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jetdetect-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

const MODEL: &str = "models/obstacles-v8.onnx";

#[test]
fn detect_prints_one_json_line_per_image_in_the_documented_shape() {
    let o = jetdetect(&[
        "detect",
        "--model",
        MODEL,
        "--names",
        "models/obstacles.names",
        "tests/fixtures/images/scene_480x480.png",
        "tests/fixtures/images/scene_800x600.jpg",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("{\"image\":\"tests/fixtures/images/scene_480x480.png\""), "{}", lines[0]);
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    let dets = v["detections"].as_array().unwrap();
    assert!(!dets.is_empty());
    let keys: Vec<&String> = dets[0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["class_id", "class", "score", "x1", "y1", "x2", "y2"]);
    for d in dets {
        assert!(["box", "ball", "cone"].contains(&d["class"].as_str().unwrap()));
        assert!(d["score"].as_f64().unwrap() > 0.25);
        assert!(d["x2"].as_f64().unwrap() <= 480.0 && d["x1"].as_f64().unwrap() >= 0.0);
    }
}

#[test]
fn detect_reads_folders_and_raw_frame_uris() {
    let o = jetdetect(&[
        "detect",
        "--model",
        MODEL,
        "tests/fixtures/images",
        "file://tests/fixtures/raw/scene_a.nv12?width=320&height=240&format=nv12",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(text.lines().count(), 5, "4 images + 1 raw frame:\n{text}");
    assert!(text.lines().last().unwrap().contains("\"width\":320"));
}

#[test]
fn a_bad_image_is_named_and_the_others_still_run() {
    let bad = tmp("broken.png");
    std::fs::write(&bad, b"\x89PNG but not really").unwrap();
    let o = jetdetect(&[
        "detect",
        "--model",
        MODEL,
        bad.to_str().unwrap(),
        "tests/fixtures/images/scene_480x480.png",
    ]);
    assert_clean_failure(&o, &["broken.png", "not an image this build can decode"]);
    assert_eq!(String::from_utf8(o.stdout).unwrap().lines().count(), 1, "the good image was still processed");
}

#[test]
fn missing_corrupt_and_non_yolo_models_are_clear_errors() {
    let o = jetdetect(&["detect", "--model", "models/nope.onnx", "tests/fixtures/images/scene_480x480.png"]);
    assert_clean_failure(&o, &["models/nope.onnx", "cannot read the model"]);

    let corrupt = tmp("corrupt.onnx");
    let mut bytes = std::fs::read(root().join(MODEL)).unwrap();
    bytes.truncate(bytes.len() / 3);
    std::fs::write(&corrupt, &bytes).unwrap();
    let o = jetdetect(&[
        "detect",
        "--model",
        corrupt.to_str().unwrap(),
        "tests/fixtures/images/scene_480x480.png",
    ]);
    assert_clean_failure(&o, &["corrupt.onnx", "truncated: a field at byte"]);

    let o = jetdetect(&[
        "detect",
        "--model",
        "tests/fixtures/models/not_yolo.onnx",
        "tests/fixtures/images/scene_480x480.png",
    ]);
    assert_clean_failure(&o, &["not_yolo.onnx", "not a YOLO detection output", "[1, 4+C, N]"]);

    let o = jetdetect(&["detect", "--model", "Cargo.toml", "tests/fixtures/images/scene_480x480.png"]);
    assert_clean_failure(&o, &["Cargo.toml", "a text file, not an ONNX model"]);
}

/// The first detection `detect` prints for `image` with `args`.
fn first_detection(args: &[&str], image: &str) -> serde_json::Value {
    let o = jetdetect(&[&["detect"], args, &[image]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["detections"][0].clone()
}

#[test]
fn an_end_to_end_output_is_refused_without_metadata_and_read_right_with_it_or_the_key() {
    // Issue 43's reproduction: a 64 x 64 model whose output is one row [8, 8, 40, 40, 0.9, 3]
    // (x1 y1 x2 y2 score class) and 299 rows of zeros, read as YOLOv5 with one class before.
    let image = "tests/fixtures/images/scene_480x480.png";
    let bare = "tests/fixtures/models/one_row_e2e.onnx";
    let o = jetdetect(&["detect", "--model", bare, image]);
    assert_clean_failure(&o, &["one_row_e2e.onnx", "[1, 300, 6]", "[model] layout", "\"v5\" or \"end2end\""]);
    // The 480 x 480 frame in the 64 x 64 input: gain 64/480, so (8, 8)-(40, 40) is (60, 60)-(300, 300).
    let d = first_detection(&["--model", bare, "--layout", "end2end"], image);
    let got = ["class_id", "x1", "y1", "x2", "y2"].map(|k| d[k].as_f64().unwrap().round());
    assert_eq!(got, [3.0, 60.0, 60.0, 300.0, 300.0], "{d}");
    assert!((d["score"].as_f64().unwrap() - 0.9).abs() < 1e-6, "{d}");
    // A names file names the classes it lists; a row of a class past them is still reported.
    let names = tmp("e2e-two.names");
    std::fs::write(&names, "box\nball\n").unwrap();
    let d =
        first_detection(&["--model", bare, "--layout", "end2end", "--names", names.to_str().unwrap()], image);
    assert_eq!((d["class_id"].as_u64(), d["class"].as_str()), (Some(3), Some("class3")), "{d}");
    // With ultralytics' metadata (end2end True, names) it needs no key, and the class has its name.
    let d = first_detection(&["--model", "tests/fixtures/models/one_row_e2e_meta.onnx"], image);
    assert_eq!((d["class"].as_str(), d["x1"].as_f64().map(f64::round)), (Some("person"), Some(60.0)), "{d}");
}

#[test]
fn a_model_with_float16_input_is_refused_saying_how_to_export_it() {
    let o = jetdetect(&[
        "detect",
        "--engine",
        "tract",
        "--model",
        "tests/fixtures/models/fp16_input.onnx",
        "tests/fixtures/images/scene_480x480.png",
    ]);
    let needles = ["fp16_input.onnx", "not float32", "quantize=16", "device=cpu", "precision = \"fp16\""];
    assert_clean_failure(&o, &needles);
}

#[test]
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn a_model_with_float16_input_is_refused_on_onnxruntime_too() {
    let lib = crate::common::ort::library();
    let lib = lib.to_str().unwrap();
    let model = "tests/fixtures/models/fp16_input.onnx";
    let args = ["--engine", "onnxruntime", "--ort-library", lib, "--providers", "cpu", "--model", model];
    let o = jetdetect(&[&["detect"], &args[..], &["tests/fixtures/images/scene_480x480.png"]].concat());
    let needles = ["fp16_input.onnx", "not float32", "quantize=16", "device=cpu", "precision = \"fp16\""];
    assert_clean_failure(&o, &needles);
}

#[test]
fn check_loads_the_model_and_refuses_what_run_would_refuse_with_the_same_message() {
    let o = jetdetect(&["check", "--config", "configs/demo.toml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    for want in [
        "#   input: 256x256, batch 1",
        "#   layout: YOLOv8 [1, 7, 1344] (output [1, 7, 1344] = [1, 4 + 3 classes (model metadata), N]; \
         metadata end2end = False)",
        "#   classes: 3 from configs/../models/obstacles.names: box, ball, cone",
        "#   decoding: score > 0.25, class-aware NMS at IoU 0.45, at most 100 boxes",
    ] {
        assert!(out.contains(want), "'{want}' not in:\n{out}");
    }
    // Models `run` cannot use: a text file, a classifier, an end-to-end output nothing describes.
    for (model, why) in [
        ("Cargo.toml", "a text file, not an ONNX model"),
        ("tests/fixtures/models/not_yolo.onnx", "not a YOLO detection output"),
        ("tests/fixtures/models/one_row_e2e.onnx", "[model] layout"),
    ] {
        let config = tmp(&format!("check-{}.toml", model.replace('/', "-")));
        let text =
            format!("[model]\npath = \"{}\"\n[engine]\nkind = \"tract\"\n", root().join(model).display());
        std::fs::write(&config, text).unwrap();
        let config = config.to_str().unwrap();
        let checked = jetdetect(&["check", "--config", config, "--quiet"]);
        assert_clean_failure(&checked, &[model.rsplit('/').next().unwrap(), why]);
        let ran = jetdetect(&["detect", "--config", config, "tests/fixtures/images/scene_480x480.png"]);
        // `check` names the config's line and key; the engine's words are the same.
        let message = |o: &Output| stderr(o).lines().last().unwrap_or_default().to_string();
        let engine_words = message(&ran).trim_start_matches("jetdetect: model error: ").to_string();
        assert!(
            message(&checked).contains(":2: [model] path: ") && message(&checked).ends_with(&engine_words),
            "{}\n{}",
            stderr(&checked),
            stderr(&ran)
        );
    }
}

#[test]
fn check_and_run_refuse_the_files_and_pipelines_a_config_names_with_one_message() {
    // What the config names outside itself (checked by its owners, in code both commands call):
    // a model that is not there, a calibration table that is not TensorRT's, a GStreamer
    // source whose options are wrong.
    let table = tmp("calibration.json");
    std::fs::write(&table, "{\"images\": [0.0]}").unwrap();
    let model = root().join(MODEL);
    for (name, body, why) in [
        ("nomodel", "[model]\npath = \"nope.onnx\"\n".to_string(), "[model] path: "),
        (
            "int8",
            format!(
                "[model]\npath = \"{}\"\n[engine.tensorrt]\nprecision = \"int8\"\n\
                 int8_calibration_table = \"{}\"\n",
                model.display(),
                table.display()
            ),
            "[engine.tensorrt] int8_calibration_table: ",
        ),
        (
            "rtsp",
            format!(
                "[model]\npath = \"{}\"\n[source]\nuri = \"rtsp://cam/live?transport=quic\"\n",
                model.display()
            ),
            "transport 'quic' is not tcp or udp",
        ),
    ] {
        let config = tmp(&format!("refused-{name}.toml"));
        std::fs::write(&config, body).unwrap();
        let config = config.to_str().unwrap();
        let checked = jetdetect(&["check", "--config", config, "--quiet"]);
        assert_clean_failure(&checked, &[why]);
        let ran = jetdetect(&[
            "run",
            "--config",
            config,
            "--socket",
            tmp(&format!("{name}.sock")).to_str().unwrap(),
        ]);
        assert_clean_failure(&ran, &[why]);
        assert_eq!(stderr(&checked), stderr(&ran), "{name}: check and run say different things");
    }
}

#[test]
fn names_that_do_not_fit_the_model_are_refused() {
    let names = tmp("two.names");
    std::fs::write(&names, "a\nb\n").unwrap();
    let o = jetdetect(&[
        "detect",
        "--model",
        MODEL,
        "--names",
        names.to_str().unwrap(),
        "tests/fixtures/images/scene_480x480.png",
    ]);
    assert_clean_failure(&o, &["lists 2 class names", "predicts 3 classes"]);
}

#[test]
fn bad_thresholds_are_refused() {
    let o =
        jetdetect(&["detect", "--model", MODEL, "--conf", "1.5", "tests/fixtures/images/scene_480x480.png"]);
    assert_clean_failure(&o, &["confidence", "allowed 0 < confidence < 1"]);
}

#[test]
fn check_prints_the_resolved_config_or_names_the_bad_line() {
    for cfg in ["configs/demo.toml", "configs/jetdetect.toml"] {
        let o = jetdetect(&["check", "--config", cfg]);
        if cfg.ends_with("demo.toml") {
            assert!(o.status.success(), "{cfg}: {}", stderr(&o));
            let out = String::from_utf8(o.stdout).unwrap();
            assert!(out.contains("[detect]") && out.contains("confidence = 0.25"), "{out}");
            assert!(out.contains("models/obstacles-v8.onnx"), "{out}");
        } else if !Path::new("/usr/share/jetdetect/models/obstacles-v8.onnx").exists() {
            // The reference config points at the installed model.
            assert_clean_failure(&o, &["[model] path", "/usr/share/jetdetect/models/obstacles-v8.onnx"]);
        }
    }
    // --quiet (the service's ExecStartPre=): silent when valid, the same error when not.
    let o = jetdetect(&["check", "--config", "configs/demo.toml", "--quiet"]);
    assert!(o.status.success() && o.stdout.is_empty(), "{}", stderr(&o));
    let bad = tmp("bad.toml");
    std::fs::write(&bad, "[detect]\nconfidence = 0.3\niuo = 0.5\n").unwrap();
    let o = jetdetect(&["check", "--config", bad.to_str().unwrap()]);
    assert_clean_failure(&o, &["bad.toml:3", "unknown field `iuo`"]);
    let o = jetdetect(&["check", "--config", bad.to_str().unwrap(), "--quiet"]);
    assert_clean_failure(&o, &["bad.toml:3", "unknown field `iuo`"]);
    let o = jetdetect(&["check", "--config", "configs/missing.toml"]);
    assert_clean_failure(&o, &["configs/missing.toml", "cannot read the config file"]);
}

#[test]
fn every_command_has_help() {
    for cmd in [
        &["--help"][..],
        &["check", "--help"],
        &["detect", "--help"],
        &["eval", "--help"],
        &["record", "--help"],
        &["dataset", "--help"],
        &["run", "--help"],
        &["watch", "--help"],
        &["probe-camera", "--help"],
        &["generate", "--help"],
    ] {
        let o = jetdetect(cmd);
        assert!(o.status.success(), "{cmd:?}");
        assert!(String::from_utf8(o.stdout).unwrap().contains("Usage:"), "{cmd:?}");
    }
    let o = jetdetect(&["--version"]);
    assert!(String::from_utf8(o.stdout).unwrap().starts_with("jetdetect "));
}

/// The commands `jetdetect --help` (or `jetdetect clocks --help`) lists.
fn listed_commands(args: &[&str]) -> Vec<String> {
    let help = String::from_utf8(jetdetect(args).stdout).unwrap();
    let list = help.split("Commands:").nth(1).expect("a Commands: section");
    let list = list.split("\n\n").next().unwrap();
    list.lines()
        .filter_map(|l| l.strip_prefix("  ")?.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

#[test]
fn generate_writes_a_man_page_per_command_and_completions_that_parse() {
    let dir = tmp("generated");
    let _ = std::fs::remove_dir_all(&dir);
    let o = jetdetect(&["generate", "man", "--out", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let commands = listed_commands(&["--help"]);
    assert!(commands.len() >= 13 && commands.contains(&"run".to_string()), "{commands:?}");
    let mut pages = vec!["jetdetect".to_string()];
    for c in &commands {
        pages.push(format!("jetdetect-{c}"));
    }
    for c in listed_commands(&["clocks", "--help"]) {
        pages.push(format!("jetdetect-clocks-{c}"));
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().trim_end_matches(".1").to_string())
        .collect();
    on_disk.sort();
    pages.sort();
    assert_eq!(on_disk, pages, "one page per command, nothing else");
    // Every page names its command and points back; the main page has the daemon's sections.
    let main = std::fs::read_to_string(dir.join("jetdetect.1")).unwrap();
    for section in ["FILES", "ENVIRONMENT", "EXIT STATUS", "SEE ALSO", "/etc/jetdetect/jetdetect.toml"] {
        assert!(main.contains(section), "jetdetect.1 lacks {section}");
    }
    let run = std::fs::read_to_string(dir.join("jetdetect-run.1")).unwrap();
    for needle in [".TH jetdetect-run 1", "\\-\\-config", "\\-\\-source", "\\fBjetdetect\\fR(1)"] {
        assert!(run.contains(needle), "jetdetect-run.1 lacks {needle}");
    }
    // man-db renders each page without a groff warning (what lintian runs), where it is installed.
    if Command::new("man").arg("--version").output().is_ok_and(|o| o.status.success()) {
        for p in &pages {
            let o = Command::new("man")
                .args(["--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z"])
                .arg(dir.join(format!("{p}.1")))
                .env("MANWIDTH", "80")
                .env("LC_ALL", "C.UTF-8")
                .output()
                .unwrap();
            assert!(o.status.success() && o.stderr.is_empty(), "{p}.1: {}", stderr(&o));
        }
    }

    // Completions: each shell's file, naming every command; bash (and zsh, fish where
    // installed) parses it.
    for (shell, file) in [("bash", "jetdetect"), ("zsh", "_jetdetect"), ("fish", "jetdetect.fish")] {
        let o = jetdetect(&["generate", shell, "--out", dir.to_str().unwrap()]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let path = dir.join(file);
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), path.to_str().unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        for c in &commands {
            assert!(text.contains(c.as_str()), "{file} lacks {c}");
        }
        match Command::new(shell).arg("-n").arg(&path).output() {
            Ok(o) => assert!(o.status.success(), "{shell} -n {file}: {}", stderr(&o)),
            Err(_) => assert_ne!(shell, "bash", "bash is needed"),
        }
    }

    // A folder that cannot be made is named.
    let o = jetdetect(&["generate", "bash", "--out", "/proc/jetdetect-no"]);
    assert_clean_failure(&o, &["cannot create the folder /proc/jetdetect-no"]);
}

#[test]
fn record_then_replay_round_trips_frames() {
    let out = tmp("rec.yuyv");
    let o = jetdetect(&[
        "record",
        "--source",
        "synthetic://?width=64&height=48&fps=0&format=yuyv&seed=3",
        "--frames",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("width=64&height=48&format=yuyv"));
    assert_eq!(std::fs::metadata(&out).unwrap().len(), 3 * 64 * 48 * 2);
    // Replayed through file:// (as the log says to), the frames are the synthetic source's,
    // byte for byte, and the file ends after them.
    let frames = |uri: &str, n: usize| {
        let mut src = jetdetect::source::open(uri).unwrap();
        let mut got = Vec::new();
        for _ in 0..n {
            let mut f = jetdetect::frame::Frame::empty();
            if !src.next_frame(&mut f).unwrap() {
                break;
            }
            assert_eq!((f.width, f.height, f.format.to_string().as_str()), (64, 48, "yuyv"), "{uri}");
            got.push(f.data);
        }
        got
    };
    let recorded = frames(&format!("file://{}?width=64&height=48&format=yuyv", out.display()), 4);
    let live = frames("synthetic://?width=64&height=48&fps=0&format=yuyv&seed=3", 3);
    assert_eq!(recorded.len(), 3, "three frames recorded, then the end");
    assert!(recorded == live, "the replayed frames differ from the source's");
}

#[test]
fn clock_and_camera_commands_refuse_bad_targets() {
    let o = jetdetect(&["clocks", "show", "--root", "/nonexistent-jd"]);
    assert_clean_failure(&o, &["/nonexistent-jd", "not a directory"]);
    let o = jetdetect(&["probe-camera", "/dev/null"]);
    assert_clean_failure(&o, &["/dev/null", "not a V4L2 device"]);
    let o = jetdetect(&["probe-camera", "/dev/video-none-jd"]);
    assert_clean_failure(&o, &["/dev/video-none-jd", "cannot open"]);
}

#[test]
fn bench_reports_every_stage_as_json_and_flags_reach_the_config() {
    let o = jetdetect(&[
        "bench",
        "--mode",
        "detector",
        "--model",
        MODEL,
        "--source",
        "synthetic://?width=320&height=240&fps=0&format=uyvy",
        "--frames",
        "8",
        "--warmup",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["frames"], 8);
    assert_eq!(v["preprocessing"], "cpu");
    let stages: Vec<&str> = v["stages"].as_array().unwrap().iter().map(|s| s[0].as_str().unwrap()).collect();
    assert_eq!(stages, ["source", "preprocess", "inference", "decode", "detect"]);
    assert!(v["stages"][2][1]["p99"].as_f64().unwrap() > 0.0);
    // Engine flags go through config validation: accelerated preprocessing needs ONNX Runtime.
    let o = jetdetect(&["bench", "--model", MODEL, "--preprocess", "gpu", "--frames", "1"]);
    assert_clean_failure(&o, &["[preprocess] device", "kind = \"onnxruntime\""]);
    let o = jetdetect(&["bench", "--model", MODEL, "--engine", "onnx", "--frames", "1"]);
    assert_clean_failure(&o, &["[engine] kind"]);
    let o = jetdetect(&["bench", "--model", MODEL, "--mode", "fastest"]);
    assert_clean_failure(&o, &["'fastest'", "pipeline, detector or engine"]);
    let o = jetdetect(&["bench", "--model", MODEL, "--plot", "/nonexistent-jd/latency.svg"]);
    assert_clean_failure(&o, &["/nonexistent-jd/latency.svg", "the folder /nonexistent-jd does not exist"]);
    let o = jetdetect(&["bench", "--config", "configs/demo.toml", "--against", "/nonexistent-jd.toml"]);
    assert_clean_failure(&o, &["/nonexistent-jd.toml", "cannot read the config file"]);
}

#[test]
fn bench_runs_the_pipeline_for_two_configs_and_plots_them() {
    let svg = tmp("bench-latency.svg");
    let o = jetdetect(&[
        "bench",
        "--config",
        "configs/demo.toml",
        "--against",
        "configs/demo.toml",
        "--source",
        "synthetic://?width=320&height=240&fps=60&format=nv12&seed=5",
        "--frames",
        "15",
        "--clients",
        "1",
        "--plot",
        svg.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "one report per config");
    for v in &lines {
        assert_eq!(v["mode"], "pipeline");
        assert_eq!(v["label"], "demo");
        assert!(v["frames"].as_u64().unwrap() >= 15, "{v}");
        let stages: Vec<&str> =
            v["stages"].as_array().unwrap().iter().map(|s| s[0].as_str().unwrap()).collect();
        assert_eq!(stages, ["queue", "preprocess", "inference", "decode", "publish", "end_to_end"]);
        assert!(v["client_lines"][0].as_u64().unwrap() >= 15, "{v}");
    }
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg") && text.contains("latency distribution"), "{text}");
}

#[test]
fn echo_into_a_pipe_that_closes_stops_printing_and_the_daemon_runs_on() {
    use std::io::BufRead;
    let socket = tmp("echo.sock");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_jetdetect"))
        .args(["run", "--config", "configs/demo.toml", "--echo", "--socket"])
        .arg(&socket)
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.starts_with('#') && first.contains("e2e"), "{first}");
    drop(out); // the reader goes away, as `| head -1` does
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(child.try_wait().unwrap().is_none(), "the daemon must run on");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("--echo: stdout") && !err.contains("panicked"), "{err}");
}
