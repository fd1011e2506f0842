//! The model file before an engine reads it: its size against a limit, and its form, read from
//! its first bytes and its top-level fields only, so that a file that is not an ONNX model is
//! refused at once, naming what it is, instead of being read whole by an engine that then
//! fails ("protobuf parsing failed" after 1 GiB of RSS for a 1 GiB sparse file).
//!
//! An ONNX model is a protobuf `ModelProto` (onnx/onnx.proto): a sequence of fields, each a
//! varint tag (field number << 3 | wire type) and a value. The walk reads the tags and lengths
//! and seeks over the values: a few reads for a model of any size, nothing held in memory. It
//! needs `graph` (field 7, length-delimited) and `ir_version` (field 1) as a varint, every
//! field whole within the file, and no wire type protobuf does not have. Fields it does not
//! know are allowed (a newer ONNX may add some).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// `[model] max_mib`'s default: 1 GiB. The largest ultralytics detection export (YOLOv8x,
/// FP32) is about 270 MB; protobuf itself stops at 2 GiB.
pub const DEFAULT_MAX_MIB: u64 = 1024;

/// The most top-level fields a model may have (a real one has a few dozen: metadata entries,
/// opset imports); beyond it the file is not a model.
const MAX_FIELDS: u32 = 100_000;

/// `ModelProto.ir_version`.
const IR_VERSION: u64 = 1;
/// `ModelProto.graph`.
const GRAPH: u64 = 7;

/// Checks `path` as an ONNX model of at most `max_bytes`: `Ok(size)`, or what the file is
/// instead and what to do, naming the file.
pub fn check(path: &Path, max_bytes: u64) -> Result<u64, String> {
    let name = path.display();
    let file = File::open(path).map_err(|e| {
        format!("{name}: cannot read the model: {e} (check [model] path in the config or --model)")
    })?;
    let meta = file.metadata().map_err(|e| format!("{name}: cannot read the model: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{name}: not a file: give the .onnx model file"));
    }
    let len = meta.len();
    if len == 0 {
        return Err(format!("{name}: the file is empty, not an ONNX model"));
    }
    if len > max_bytes {
        return Err(format!(
            "{name}: {} MiB, more than [model] max_mib ({} MiB): a YOLO detection model is far smaller \
             (this is not the model, or raise max_mib)",
            len >> 20,
            max_bytes >> 20
        ));
    }
    let mut r = BufReader::with_capacity(64 << 10, file);
    // The first bytes, as the reader holds them (not consumed): what the file is, if not ONNX.
    let first = r.fill_buf().map_err(|e| format!("{name}: cannot read the model: {e}"))?;
    if let Some(what) = other_format(&first[..first.len().min(16)]) {
        return Err(format!("{name}: {what}, not an ONNX model"));
    }
    let not_onnx = |why: String| {
        format!(
            "{name}: not an ONNX model ({why}): export one with ultralytics, e.g. \
             `yolo export model=best.pt format=onnx`"
        )
    };
    let mut walk = Walk { r, at: 0, len };
    let (mut graph, mut ir_version, mut fields) = (false, false, 0u32);
    while walk.at < len {
        fields += 1;
        if fields > MAX_FIELDS {
            return Err(not_onnx(format!("more than {MAX_FIELDS} top-level fields")));
        }
        let start = walk.at;
        let tag = walk.varint().map_err(|e| not_onnx(format!("{e} at byte {start}")))?;
        let (field, wire) = (tag >> 3, tag & 7);
        if field == 0 {
            return Err(not_onnx(format!("field number 0 at byte {start}")));
        }
        match (field, wire) {
            (IR_VERSION, 0) => ir_version = true,
            (GRAPH, 2) => graph = true,
            (IR_VERSION | GRAPH, _) => {
                return Err(not_onnx(format!("field {field} of the wrong kind at byte {start}")));
            }
            _ => {}
        }
        let skip = match wire {
            0 => {
                walk.varint().map_err(|e| not_onnx(format!("{e} at byte {start}")))?;
                0
            }
            1 => 8,
            2 => walk.varint().map_err(|e| not_onnx(format!("{e} at byte {start}")))?,
            5 => 4,
            w => return Err(not_onnx(format!("wire type {w} at byte {start}"))),
        };
        if skip > len - walk.at {
            return Err(format!(
                "{name}: truncated: a field at byte {start} runs {} bytes past the end of the file \
                 ({len} bytes; copied or downloaded only in part?)",
                skip - (len - walk.at)
            ));
        }
        walk.skip(skip).map_err(|e| format!("{name}: cannot read the model: {e}"))?;
    }
    match (ir_version, graph) {
        (true, true) => Ok(len),
        (false, _) => Err(not_onnx("no ir_version".into())),
        (true, false) => Err(not_onnx("no graph".into())),
    }
}

/// What a file that is not ONNX is, from its first bytes, when it is something a YOLO user
/// might give by mistake.
fn other_format(head: &[u8]) -> Option<&'static str> {
    let starts = |magic: &[u8]| head.starts_with(magic);
    if starts(b"PK\x03\x04") {
        return Some(
            "a zip archive (a PyTorch .pt checkpoint? export it: `yolo export model=best.pt format=onnx`)",
        );
    }
    if starts(b"ftrt") {
        return Some(
            "a TensorRT engine (jetdetect builds and caches its engines itself from the ONNX model: \
             give the .onnx, and [engine.tensorrt] the options)",
        );
    }
    if head.get(4..8) == Some(b"TFL3") {
        return Some(
            "a TensorFlow Lite model (export the ONNX one: `yolo export model=best.pt format=onnx`)",
        );
    }
    if starts(b"\x89HDF") {
        return Some("an HDF5 file (a Keras model?)");
    }
    if starts(b"\x7fELF") {
        return Some("a program or library (ELF)");
    }
    let text = head.len() >= 4
        && head.iter().all(|&b| b == b'\n' || b == b'\r' || b == b'\t' || (0x20..0x7f).contains(&b));
    if text {
        return Some("a text file");
    }
    None
}

/// The top-level walk over the buffered file.
struct Walk {
    r: BufReader<File>,
    /// The offset of the next byte.
    at: u64,
    len: u64,
}

impl Walk {
    fn byte(&mut self) -> std::io::Result<Option<u8>> {
        if self.at >= self.len {
            return Ok(None);
        }
        let mut one = [0u8];
        self.r.read_exact(&mut one)?;
        self.at += 1;
        Ok(Some(one[0]))
    }

    /// A protobuf varint (at most 10 bytes).
    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.byte().map_err(|e| e.to_string())?.ok_or("the file ends inside a number")?;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a number longer than 10 bytes".into())
    }

    fn skip(&mut self, n: u64) -> std::io::Result<()> {
        self.r.seek_relative(n as i64)?;
        self.at += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("jetdetect-onnx-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn the_shipped_models_pass_and_their_size_is_returned() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for m in ["models/obstacles-v8.onnx", "tests/fixtures/models/not_yolo.onnx"] {
            let p = root.join(m);
            assert_eq!(check(&p, 1 << 30), Ok(std::fs::metadata(&p).unwrap().len()), "{m}");
        }
    }

    #[test]
    fn other_files_are_named_for_what_they_are() {
        let cases: [(&str, &[u8], &str); 8] = [
            ("text", b"[model]\npath = 1\n", "a text file, not an ONNX model"),
            ("zeros", &[0u8; 4096], "field number 0 at byte 0"),
            ("pt", b"PK\x03\x04rest-of-zip", "a zip archive (a PyTorch .pt checkpoint?"),
            ("engine", b"ftrt\x00\x00\x00\x00\x01\x02", "a TensorRT engine"),
            ("empty", b"", "the file is empty"),
            // ir_version 8, then a graph whose length runs past the end.
            (
                "cut",
                &[0x08, 0x08, 0x3a, 0xff, 0x01, 0x00],
                "truncated: a field at byte 2 runs 254 bytes past",
            ),
            ("nograph", &[0x08, 0x08], "no graph"),
            ("wire", &[0x08, 0x08, 0x47], "wire type 7 at byte 2"),
        ];
        for (name, bytes, want) in cases {
            let e = check(&file(name, bytes), 1 << 30).unwrap_err();
            assert!(e.contains(want), "{name}: {e}");
            assert!(e.contains(name), "{name}: the file is named: {e}");
        }
        // ir_version 8 and an empty graph: the form is right (an engine judges the content).
        assert_eq!(check(&file("minimal", &[0x08, 0x08, 0x3a, 0x00]), 1 << 30), Ok(4));
    }

    #[test]
    fn a_file_over_the_limit_is_refused_before_it_is_read() {
        let p = file("big", &[0x08, 0x08, 0x3a, 0x00]);
        let f = File::options().write(true).open(&p).unwrap();
        f.set_len(3 << 20).unwrap(); // sparse: 3 MiB of holes after the first bytes
        let e = check(&p, 2 << 20).unwrap_err();
        assert!(e.contains("3 MiB, more than [model] max_mib (2 MiB)"), "{e}");
        // Within the limit, the holes are zeros: field number 0.
        assert!(check(&p, 4 << 20).unwrap_err().contains("field number 0 at byte 4"));
    }
}
