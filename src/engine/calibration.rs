//! INT8 calibration tables, checked before TensorRT sees them.
//!
//! jetdetect hands TensorRT's own calibration cache to ONNX Runtime with
//! `trt_int8_use_native_calibration_table = 1`. Without that option ONNX
//! Runtime parses the file as its own FlatBuffers table (`ReadDynamicRange`
//! in its TensorRT provider) and a TensorRT cache is read as garbage; with it,
//! a file that is not TensorRT's fails only when the engine is built, minutes
//! into a start on a Jetson. So the table is read here, at start and by
//! `jetdetect check`: TensorRT's format is a text header
//! `TRT-<version>-<calibrator>` (e.g. `TRT-8601-EntropyCalibration2`) and then
//! one `tensor: <scale as 8 hex digits of an IEEE-754 float>` line per tensor.
//! Anything else is refused with what it looks like and how to make the right one.

use std::path::{Path, PathBuf};

/// The calibrators TensorRT writes caches for.
const CALIBRATORS: [&str; 4] =
    ["EntropyCalibration2", "EntropyCalibration", "MinMaxCalibration", "LegacyCalibration"];

/// What a valid table holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalibrationTable {
    /// TensorRT's version number as written in the header (`8601` for 8.6.1, `100300` for 10.3.0).
    pub tensorrt: String,
    /// The calibrator, e.g. `EntropyCalibration2`.
    pub calibrator: String,
    /// How many tensors it gives a scale for.
    pub tensors: usize,
}

/// How to make a table TensorRT reads, for the error messages.
const HOW: &str = "write one with TensorRT's calibrator (e.g. `polygraphy convert MODEL.onnx --int8 \
    --data-loader-script loader.py --calibration-cache FILE`, or an IInt8EntropyCalibrator2), or use \
    precision = \"fp16\"";

/// A calibration table that cannot be used; every message names the file and says how to make one.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    /// The file cannot be read.
    #[error("{}: cannot read the INT8 calibration table: {source}", path.display())]
    Read {
        /// The table.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is something else (what it looks like is `what`).
    #[error("{}: {what}, not TensorRT's calibration cache: {HOW}", path.display())]
    NotTensorRt {
        /// The table.
        path: PathBuf,
        /// What it looks like.
        what: String,
    },
    /// A line after the header is not `tensor: scale`.
    #[error(
        "{}:{line}: '{text}' is not a 'tensor: scale' line of a TensorRT calibration cache \
         (the scale as 8 hexadecimal digits): the file is damaged; {HOW}",
        path.display()
    )]
    Line {
        /// The table.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The line, trimmed.
        text: String,
    },
}

/// Reads and checks the table at `path` (named in every error).
pub fn read(path: &Path) -> Result<CalibrationTable, CalibrationError> {
    let bytes =
        std::fs::read(path).map_err(|source| CalibrationError::Read { path: path.to_path_buf(), source })?;
    let refuse =
        |what: &str| CalibrationError::NotTensorRt { path: path.to_path_buf(), what: what.to_string() };
    if bytes.is_empty() {
        return Err(refuse("the file is empty"));
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return Err(refuse(
            "a binary file (ONNX Runtime's own FlatBuffers table, calibration.flatbuffers from \
             onnxruntime.quantization, looks like this)",
        ));
    };
    if text.contains('\0') {
        return Err(refuse("a binary file (ONNX Runtime's FlatBuffers table, calibration.flatbuffers?)"));
    }
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or_else(|| refuse("the file has only blank lines"))?;
    let header = header.trim();
    if header.starts_with('{') {
        return Err(refuse("JSON (ONNX Runtime's calibration.json, from onnxruntime.quantization?)"));
    }
    let parsed = header
        .strip_prefix("TRT-")
        .and_then(|rest| rest.split_once('-'))
        .filter(|(v, c)| !v.is_empty() && v.chars().all(|d| d.is_ascii_digit()) && CALIBRATORS.contains(c));
    let Some((version, calibrator)) = parsed else {
        let looks_like_ort = header.split_whitespace().count() == 2
            && header.split_whitespace().nth(1).is_some_and(|v| v.parse::<f64>().is_ok());
        return Err(if looks_like_ort {
            refuse(&format!(
                "a 'tensor value' text table (ONNX Runtime's calibration.cache from onnxruntime.quantization; \
                 first line '{header}')"
            ))
        } else {
            refuse(&format!(
                "its first line '{}' is not TensorRT's header TRT-<version>-<calibrator> \
                 (e.g. TRT-8601-EntropyCalibration2)",
                header.chars().take(60).collect::<String>()
            ))
        });
    };
    let mut tensors = 0;
    for (n, line) in lines {
        // ONNX Runtime splits each line at its first ':' and reads the rest as hexadecimal.
        let scale = line.split_once(':').map(|(name, v)| (name.trim(), v.trim()));
        match scale {
            Some((name, v))
                if !name.is_empty()
                    && (1..=8).contains(&v.len())
                    && v.chars().all(|c| c.is_ascii_hexdigit()) =>
            {
                tensors += 1
            }
            _ => {
                return Err(CalibrationError::Line {
                    path: path.to_path_buf(),
                    line: n + 1,
                    text: line.trim().into(),
                })
            }
        }
    }
    if tensors == 0 {
        return Err(refuse("a TensorRT header with no tensor scales after it"));
    }
    Ok(CalibrationTable { tensorrt: version.into(), calibrator: calibrator.into(), tensors })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str, bytes: &[u8]) -> Result<CalibrationTable, String> {
        let p = std::env::temp_dir().join(format!("jd-calib-{}-{name}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        let r = read(&p).map_err(|e| e.to_string());
        std::fs::remove_file(&p).unwrap();
        r
    }

    #[test]
    fn a_tensorrt_cache_is_read_and_anything_else_is_refused_with_what_it_is() {
        let ok = table(
            "trt",
            b"TRT-8601-EntropyCalibration2\nimages: 3c010a14\n/model.0/conv/Conv_output_0: 3d8d7b56\n",
        )
        .unwrap();
        assert_eq!(
            ok,
            CalibrationTable {
                tensorrt: "8601".into(),
                calibrator: "EntropyCalibration2".into(),
                tensors: 2
            }
        );
        assert_eq!(table("trt10", b"TRT-100300-MinMaxCalibration\nimages: 3c010a14\n").unwrap().tensors, 1);

        let cases: [(&str, &[u8], &str); 7] = [
            ("flat", b"\x10\x00\x00\x00\x0c\x00\x10\x00\xff\xfe", "FlatBuffers"),
            ("json", b"{\"images\": [0.0, 1.0]}\n", "calibration.json"),
            (
                "ortcache",
                b"images 0.99\n/model.0/conv/Conv_output_0 4.5\n",
                "ONNX Runtime's calibration.cache",
            ),
            ("header", b"# calibration for yolov8\nimages: 3c010a14\n", "is not TensorRT's header"),
            ("empty", b"", "empty"),
            ("nothing", b"TRT-8601-EntropyCalibration2\n", "no tensor scales"),
            ("damaged", b"TRT-8601-EntropyCalibration2\nimages: 3c010a14\nimages 0.5\n", ":3: 'images 0.5'"),
        ];
        for (name, bytes, says) in cases {
            let e = table(name, bytes).unwrap_err();
            assert!(
                e.contains(says) && e.contains(&format!("jd-calib-{}-{name}", std::process::id())),
                "{name}: {e}"
            );
            if name != "damaged" {
                assert!(
                    e.contains("not TensorRT's calibration cache") && e.contains("polygraphy"),
                    "{name}: {e}"
                );
            }
        }
        assert!(read(Path::new("/nonexistent/calib.cache")).unwrap_err().to_string().contains("cannot read"));
    }
}
