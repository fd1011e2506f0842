//! `jetdetect check` refuses what `jetdetect run` would refuse, with the same message naming the
//! file, the line and the key: broken configs and models, each given to both commands (the
//! systemd unit runs `check` as its ExecStartPre=, so what it lets through fails later, on the
//! robot). The table of cases and messages is docs/reliability.md's "check and run" table,
//! which this test keeps true: it writes the table it found to target/check-vs-run.md and fails
//! when the docs differ.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{fresh_dir, repo};

/// One broken input: a name, what is wrong (for the table), the config (placeholders: `{M}` the
/// shipped model, `{N}` its names, `{D}` the case's folder, `{R}` the repository), and a piece
/// of the message both commands must print.
struct Case {
    name: &'static str,
    what: &'static str,
    config: String,
    want: &'static str,
}

/// The shipped model on a synthetic camera, with `extra` after it.
fn base(extra: &str) -> String {
    format!(
        "[source]\nuri = \"synthetic://?fps=30\"\n[model]\npath = \"{{M}}\"\nnames = \"{{N}}\"\n[output]\n\
         socket = \"{{D}}/d.sock\"\n{extra}"
    )
}

/// The shipped model on the camera `uri`.
fn source(uri: &str, extra: &str) -> String {
    base(extra).replace("synthetic://?fps=30", uri)
}

/// The model file `path` (placeholders allowed), no names.
fn model(path: &str) -> String {
    base("").replace("path = \"{M}\"\nnames = \"{N}\"", &format!("path = \"{path}\""))
}

const HAZARDS: &str = "[hazards]\nenabled = true\n[hazards.classes]\nbox = { height_m = 0.5 }\n";

fn cases() -> Vec<Case> {
    let c = |name, what, config: String, want| Case { name, what, config, want };
    vec![
        // The TOML layer.
        c("syntax", "a string left open", base("[detect]\nconfidence = \"0.3\n"), "jd.toml:9: [detect] confidence: invalid basic string"),
        c("unknown-key", "a misspelt key", base("[detect]\niuo = 0.5\n"), "[detect] iuo: unknown field `iuo`"),
        c("wrong-type", "a word for a number", base("[detect]\nconfidence = \"high\"\n"), "[detect] confidence: invalid type: string \"high\""),
        c("negative", "a negative count", base("").replace("socket = ", "stats_interval_s = -5\nsocket = "), "[output] stats_interval_s: "),
        c("duplicate", "a key given twice", base("[detect]\niou = 0.5\niou = 0.6\n"), "[detect] iou: duplicate key"),
        c("unknown-table", "a table that does not exist", base("[detection]\niou = 0.5\n"), "unknown field `detection`"),
        // Values.
        c("range", "confidence out of range", base("[detect]\nconfidence = 1.5\n"), "[detect] confidence: 1.5 is out of range"),
        c("input-size", "an input size YOLO cannot take", base("").replace("names = \"{N}\"", "names = \"{N}\"\ninput_width = 300"), "[model] input_width: 300 is not allowed"),
        c("engine-kind", "an engine that does not exist", base("[engine]\nkind = \"tensorflow\"\n"), "use auto, tract, onnxruntime"),
        c("providers", "no providers", base("[engine]\nproviders = []\n"), "[engine] providers: must list at least one"),
        c("gpu-on-tract", "GPU preprocessing with tract", base("[engine]\nkind = \"tract\"\n[preprocess]\ndevice = \"gpu\"\n"), "[preprocess] device: \"gpu\" runs the preprocessing graph in ONNX Runtime"),
        c("view-no-server", "the live view without the HTTP server", base("[view]\nenabled = true\n"), "[view] enabled: the view is served by the HTTP server"),
        c("max-mib", "a model size limit out of range", base("").replace("names = \"{N}\"", "names = \"{N}\"\nmax_mib = 0"), "[model] max_mib: 0 is out of range"),
        // Cameras.
        c("scheme", "a camera URL jetdetect cannot read", source("http://cam", ""), "[source] uri: unknown scheme 'http://'"),
        c("synthetic-width", "a synthetic camera 100 000 pixels wide", source("synthetic://?width=100000", ""), "'width' = 100000 is out of range"),
        c("synthetic-key", "a misspelt camera parameter", source("synthetic://?fsp=30", ""), "fsp"),
        c("file-missing", "a recording that is not there", source("file://{D}/nothere.yuv?width=640&height=480&format=yuyv", ""), "nothere.yuv"),
        c("file-short", "a raw recording shorter than one frame", source("file://{D}/short.yuv?width=640&height=480&format=yuyv", ""), "less than one 640x480 yuyv frame"),
        c("v4l2-buffers", "100 V4L2 buffers", source("v4l2:///dev/video0?buffers=100", ""), "'buffers' = 100 is out of range"),
        c("rtsp-transport", "an RTSP transport that does not exist", source("rtsp://cam/live?transport=quic", ""), "transport 'quic' is not tcp or udp"),
        c("csi-exposure", "a CSI exposure that is not a range", source("csi://0?exposure_us=9", ""), "not a range"),
        c("controls-synthetic", "V4L2 controls on a synthetic camera", base("[source.controls]\nexposure_absolute = 200\n"), "[source.controls] apply to v4l2:// cameras only"),
        c("same-name", "two cameras with one name", "[[source]]\nname = \"a\"\nuri = \"synthetic://\"\n[[source]]\nname = \"a\"\nuri = \"synthetic://?seed=2\"\n[model]\npath = \"{M}\"\n[output]\nsocket = \"{D}/d.sock\"\n".into(), "'a' is already the name of [[source]] #1"),
        c("same-device", "two cameras on one V4L2 device", "[[source]]\nuri = \"v4l2:///dev/video0\"\n[[source]]\nuri = \"v4l2:///dev/video0?width=320&height=240\"\n[model]\npath = \"{M}\"\n[output]\nsocket = \"{D}/d.sock\"\n".into(), "v4l2:///dev/video0 is already the camera of [[source]] #1"),
        // Models.
        c("model-missing", "a model that is not there", model("{D}/nope.onnx"), "[model] path: '"),
        c("model-text", "a text file as the model", model("{R}/Cargo.toml"), "a text file, not an ONNX model"),
        c("model-sparse", "a 1 GiB sparse file as the model", model("{D}/sparse.onnx"), "not an ONNX model (field number 0 at byte 0)"),
        c("model-big", "a model over [model] max_mib", model("{D}/sparse.onnx").replace("sparse.onnx\"", "sparse.onnx\"\nmax_mib = 512"), "1024 MiB, more than [model] max_mib (512 MiB)"),
        c("model-pt", "a PyTorch checkpoint as the model", model("{D}/best.pt"), "a zip archive (a PyTorch .pt checkpoint?"),
        c("model-classifier", "a model that is not a detector", model("{R}/tests/fixtures/models/not_yolo.onnx").replace("[output]", "[engine]\nkind = \"tract\"\n[output]"), "[model] path: tract"),
        c("names-missing", "a class-names file that is not there", base("").replace("names = \"{N}\"", "names = \"{D}/nope.names\""), "[model] names: '"),
        c("names-count", "class names that do not fit the model", base("[engine]\nkind = \"tract\"\n").replace("names = \"{N}\"", "names = \"{D}/two.names\""), "lists 2 class names but the model (tract"),
        c("ort-library", "an ONNX Runtime library that is not there", base("[engine]\nkind = \"onnxruntime\"\nlibrary = \"{D}/nope/libonnxruntime.so\"\n"), "[engine] library: "),
        c("int8-json", "an INT8 table that is not TensorRT's", base("[engine.tensorrt]\nprecision = \"int8\"\nint8_calibration_table = \"{D}/calibration.json\"\n"), "[engine.tensorrt] int8_calibration_table: "),
        // The board.
        c("nvpmodel-mode", "an nvpmodel mode the board does not have", base("[power]\nroot = \"{R}/tests/fixtures/jetson/agx-orin-jp6\"\nnvpmodel = \"MODE_99W\"\nstate_file = \"{D}/clocks.json\"\n"), "0 (MAXN), 1 (MODE_15W), 2 (MODE_30W), 3 (MODE_50W)"),
        // The hazard layer and the outputs.
        c("hazard-class", "a [hazards.classes] name the model lacks", base(&HAZARDS.replace("box =", "boxx =")), "[hazards.classes] boxx: not a class of this model"),
        c("mavlink-port", "a MAVLink address with no port", base(&format!("{HAZARDS}[output.mavlink]\nurl = \"udpout:127.0.0.1\"\nautopilot = \"px4\"\n")), "[output.mavlink] url: \"udpout:127.0.0.1\": give udpout:HOST:PORT"),
        c("mavlink-no-hazards", "MAVLink without the hazard layer", base("[output.mavlink]\nurl = \"udpout:127.0.0.1:14550\"\nautopilot = \"px4\"\n"), "[output.mavlink] url: the MAVLink output sends the hazard layer's obstacles"),
        c("mqtt-url", "an MQTT broker URL that is not one", base("[output.mqtt]\nurl = \"http://broker\"\n"), "[output.mqtt] url: \"http://broker\""),
        c("mqtt-password", "an MQTT password file with an empty first line", base("[output.mqtt]\nurl = \"mqtt://127.0.0.1:1\"\nusername = \"r\"\npassword_file = \"{D}/empty.pw\"\n"), "[output.mqtt] password_file: "),
        c("ros2-frame", "two cameras sharing one ROS 2 frame id", "[[source]]\nuri = \"synthetic://\"\n[[source]]\nuri = \"synthetic://?seed=2\"\n[model]\npath = \"{M}\"\n[output]\nsocket = \"{D}/d.sock\"\n[output.ros2]\nframe_id = \"camera\"\n".into(), "[output.ros2] frame_id: 'camera' would stamp every camera's detections with one frame"),
    ]
}

/// The files the cases name.
fn files(dir: &Path) {
    std::fs::write(dir.join("short.yuv"), [0u8; 1000]).unwrap();
    let sparse = std::fs::File::create(dir.join("sparse.onnx")).unwrap();
    sparse.set_len(1 << 30).unwrap();
    std::fs::write(dir.join("best.pt"), b"PK\x03\x04archive/data.pkl").unwrap();
    std::fs::write(dir.join("two.names"), "a\nb\n").unwrap();
    std::fs::write(dir.join("calibration.json"), "{\"images\": [0.0]}").unwrap();
    std::fs::write(dir.join("empty.pw"), "\nsecond\n").unwrap();
}

fn stderr_of(cmd: &mut Command, limit: Duration) -> (Option<i32>, String) {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read as _;
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return (status.code(), err);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return (None, format!("still running after {} s", limit.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The last line, which is the error (`run` logs before it).
fn last_line(s: &str) -> String {
    s.lines().last().unwrap_or_default().to_string()
}

#[test]
fn check_refuses_what_run_refuses_with_the_same_message() {
    let dir = fresh_dir("check-run", "cases");
    files(&dir);
    let (root, model, names) =
        (repo(), repo().join("models/obstacles-v8.onnx"), repo().join("models/obstacles.names"));
    let mut table =
        String::from("| case | what is wrong | what `check` and `run` both print |\n|---|---|---|\n");
    let mut wrong = Vec::new();
    for case in cases() {
        let d = dir.join(case.name);
        std::fs::create_dir_all(&d).unwrap();
        let text = case
            .config
            .replace("{M}", &model.display().to_string())
            .replace("{N}", &names.display().to_string())
            .replace("{D}", &dir.display().to_string())
            .replace("{R}", &root.display().to_string());
        let config = d.join("jd.toml");
        std::fs::write(&config, text).unwrap();
        let bin = env!("CARGO_BIN_EXE_jetdetect");
        let (code, checked) = stderr_of(
            Command::new(bin).args(["check", "--quiet", "--config"]).arg(&config),
            Duration::from_secs(60),
        );
        let (run_code, ran) = stderr_of(
            Command::new(bin).args(["run", "--config"]).arg(&config).env("RUST_LOG", "warn"),
            Duration::from_secs(60),
        );
        let (c, r) = (last_line(&checked), last_line(&ran));
        if code != Some(1) || run_code != Some(1) || c != r || !c.contains(case.want) {
            wrong.push(format!(
                "{}: check exited {code:?}, run {run_code:?}; want '{}' in both\n  check: {c}\n  run:   {r}",
                case.name, case.want
            ));
        }
        let shown = c
            .replace(&dir.display().to_string(), "<dir>")
            .replace(&root.display().to_string(), "<repo>")
            .replace('|', "\\|");
        table.push_str(&format!(
            "| {} | {} | `` {} `` |\n",
            case.name,
            case.what,
            shown.trim_start_matches("jetdetect: ")
        ));
    }
    let _ = std::fs::remove_file(dir.join("sparse.onnx"));
    std::fs::write(repo().join("target/check-vs-run.md"), &table).unwrap();
    assert!(wrong.is_empty(), "{} of the cases differ:\n{}", wrong.len(), wrong.join("\n"));
    let docs = std::fs::read_to_string(repo().join("docs/reliability.md")).unwrap();
    assert!(
        docs.contains(&table),
        "docs/reliability.md's check-and-run table is not what the commands print now: put \
         target/check-vs-run.md in its place"
    );
}
