//! Property tests: arbitrary input to every parser and decoder that reads
//! data from outside (config files, source URIs, model outputs, MJPEG frames,
//! raw frame files). None may panic, hang or allocate without bound; each must
//! give either a well-formed result or an error that names its input.
//!
//! These run in `cargo test` (256 cases each; `PROPTEST_CASES=100000` for a
//! longer run). Coverage-guided fuzzing of the same entry points is in `fuzz/`
//! where a nightly toolchain is available; see docs/reliability.md.

use crate::common::checks;
use jetdetect::config::Config;
use jetdetect::frame::{Frame, PixelFormat};
use jetdetect::preprocess::Letterbox;
use jetdetect::source::{self, mjpeg, SourceUri};
use jetdetect::yolo::{DecodeOptions, Decoder, Layout};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

use crate::common::repo as root;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jetdetect-prop-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Lines of the shipped config, to mutate: the parser sees near-valid files, not only noise.
fn config_lines() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("configs/jetdetect.toml")).unwrap();
    text.lines().map(str::to_string).collect()
}

/// A value a config line might get instead of its own.
fn any_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        Just("nan".to_string()),
        Just("-inf".to_string()),
        Just("\"\"".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        "\"[ -~]{0,40}\"",
        "[\\PC]{0,20}",
    ]
}

fn letterbox() -> impl Strategy<Value = Letterbox> {
    (1u32..4000, 1u32..4000, 1u32..1280, 1u32..1280)
        .prop_map(|(sw, sh, dw, dh)| Letterbox::new(sw, sh, dw, dh))
}

fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => -2.0f32..2.0,
        2 => -1000.0f32..2000.0,
        1 => Just(f32::NAN),
        1 => Just(f32::INFINITY),
        1 => Just(f32::NEG_INFINITY),
        1 => Just(f32::MAX),
        1 => any::<f32>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// The shipped config with lines dropped, values replaced and noise inserted.
    #[test]
    fn config_parsing_never_panics_and_errors_name_the_file(
        edits in prop::collection::vec((0usize..200, 0u8..3, any_value()), 0..6)
    ) {
        let mut lines = config_lines();
        for (at, how, value) in edits {
            let i = at % lines.len().max(1);
            match how {
                0 => { lines.remove(i); }
                1 => {
                    if let Some((key, _)) = lines[i].split_once('=') {
                        lines[i] = format!("{key}= {value}");
                    }
                }
                _ => lines.insert(i, value),
            }
            if lines.is_empty() { break; }
        }
        let text = lines.join("\n");
        let path = Path::new("/etc/jetdetect/fuzzed.toml");
        if let Err(e) = Config::parse(&text, path) {
            prop_assert!(e.to_string().starts_with("/etc/jetdetect/fuzzed.toml"), "{e}");
            prop_assert!(!e.message.is_empty());
        }
    }

    /// The model file's form check (`engine::onnx_file`) on the shipped model with bytes changed
    /// and the end cut, and on noise: never a panic; `Ok` is the file's length, and an error
    /// names the file.
    #[test]
    fn the_model_form_check_never_panics_and_names_the_file(
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in any::<usize>(),
        noise in prop::collection::vec(any::<u8>(), 0..64),
        use_noise in any::<bool>(),
    ) {
        let mut bytes = if use_noise { noise } else { std::fs::read(root().join("models/obstacles-v8.onnx")).unwrap() };
        for (at, b) in flips {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] = b;
            }
        }
        if !bytes.is_empty() && cut % 3 == 0 {
            bytes.truncate(cut % bytes.len());
        }
        let path = tmp("onnx-form").join("m.onnx");
        std::fs::write(&path, &bytes).unwrap();
        match jetdetect::engine::onnx_file::check(&path, 1 << 30) {
            Ok(len) => prop_assert_eq!(len, bytes.len() as u64),
            Err(e) => prop_assert!(e.contains("m.onnx"), "{}", e),
        }
    }

    /// Arbitrary text, including non-ASCII characters around the error position.
    #[test]
    fn config_noise_never_panics(text in "[\\PC\n=\\[\\]\"']{0,300}") {
        let _ = Config::parse(&text, Path::new("noise.toml"));
    }

    #[test]
    fn uri_parsing_never_panics(text in "[\\PC]{0,80}") {
        if let Ok(uri) = SourceUri::parse(&text) {
            prop_assert!(uri.scheme.chars().all(|c| c.is_ascii_alphanumeric()));
            let _ = uri.get::<u32>("width", 0);
            let _ = uri.get_in("fps", 0.0f64, 0.0, 1000.0);
        }
    }

    /// Structured URIs with keys the sources know, values valid or not. Opening
    /// never panics, and a synthetic source that opens gives well-formed frames.
    #[test]
    fn opening_sources_never_panics(
        scheme in prop_oneof![
            prop::sample::select(vec!["synthetic", "file", "v4l2", "rtsp"]).prop_map(String::from),
            "[a-z]{1,6}",
        ],
        location in prop_oneof![Just(String::new()), Just("/nonexistent/x.yuv".to_string()), "[\\PC]{0,12}"],
        params in prop::collection::vec((
            prop_oneof![Just("width"), Just("height"), Just("fps"), Just("format"), Just("seed"),
                        Just("objects"), Just("frames"), Just("loop"), Just("bogus")],
            prop_oneof![Just("16".to_string()), Just("64".to_string()), Just("0".to_string()),
                        Just("-1".to_string()), Just("99999999999".to_string()), Just("nv12".to_string()),
                        Just("true".to_string()), Just("%zz".to_string()), "[\\PC]{0,6}"],
        ), 0..5)
    ) {
        let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let text = format!("{scheme}://{location}?{}", query.join("&"));
        // Never a real device: a random location must not open /dev nodes.
        prop_assume!(scheme != "v4l2" || !location.starts_with("/dev"));
        if let Ok(mut src) = source::open(&text) {
            // A paced source would sleep a frame period per case: take a frame only from unpaced ones.
            if src.nominal_fps().is_some_and(|f| f > 0.0) {
                return Ok(());
            }
            let mut frame = Frame::empty();
            if let Ok(true) = src.next_frame(&mut frame) {
                prop_assert!(frame.check_len().is_ok(), "{text}");
            }
        }
    }

    /// YOLOv8 `[4 + C, N]` and YOLOv5 `[N, 5 + C]` tensors of arbitrary values,
    /// NaN and infinities included: every detection is finite, inside the frame,
    /// above the threshold, and there are at most `max_detections`.
    #[test]
    fn decoding_arbitrary_tensors_gives_well_formed_detections(
        v8 in any::<bool>(),
        classes in 1usize..6,
        anchors in 1usize..40,
        seed_values in prop::collection::vec(any_f32(), 1..64),
        lb in letterbox(),
        confidence in 0.0f32..1.0,
        iou in 0.0f32..1.0,
        max_detections in 1usize..20,
    ) {
        let (layout, len) = if v8 {
            (Layout::V8 { anchors, classes }, anchors * (4 + classes))
        } else {
            (Layout::V5 { anchors, classes }, anchors * (5 + classes))
        };
        let tensor: Vec<f32> = (0..len).map(|i| seed_values[i % seed_values.len()]).collect();
        let options = DecodeOptions { confidence, iou, max_detections, ..DecodeOptions::default() };
        let mut decoder = Decoder::new(layout, options);
        let mut out = Vec::new();
        decoder.decode(&tensor, &lb, &mut out);
        checks::detections(&out, classes, confidence, max_detections, &lb).map_err(TestCaseError::fail)?;
    }

    /// Garbage, and a real JPEG with bytes flipped, cut or its size fields
    /// rewritten: an error or a frame of the negotiated size, never a panic or
    /// an allocation the header asks for.
    #[test]
    fn mjpeg_decoding_never_panics(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in any::<prop::sample::Index>(),
        cut_it in any::<bool>(),
        noise in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = std::fs::read(root().join("tests/fixtures/images/scene_800x600.jpg")).unwrap();
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        if cut_it {
            bytes.truncate(cut.index(bytes.len()));
        }
        let mut frame = Frame::empty();
        if mjpeg::decode(&bytes, &mut frame, (800, 600)).is_ok() {
            checks::mjpeg_frame(&frame, (800, 600)).map_err(TestCaseError::fail)?;
        }
        let _ = mjpeg::decode(&noise, &mut frame, (800, 600));
    }

    /// Raw frame files of any length and geometries valid or not: opening fails
    /// with a message, or every frame read is whole and the count is what the
    /// file holds.
    #[test]
    fn raw_frame_files_read_whole_frames_or_fail_clearly(
        len in 0usize..20_000,
        width in 0u32..70,
        height in 0u32..70,
        format in prop::sample::select(PixelFormat::ALL.to_vec()),
    ) {
        let dir = tmp("raw");
        let path = dir.join(format!("{len}-{width}x{height}.{}", format.name()));
        std::fs::write(&path, vec![0x80u8; len]).unwrap();
        checks::raw_file(&path, len, width, height, format).map_err(TestCaseError::fail)?;
        let _ = std::fs::remove_file(&path);
    }
}
