//! The checks made on what a decoder or a source returns for arbitrary input:
//! one copy, used by the property tests (tests/it/properties.rs) and by the fuzz
//! targets (fuzz/fuzz_targets/, which include this file by path).
#![allow(dead_code)] // each includer uses its own subset

use jetdetect::frame::{Frame, PixelFormat};
use jetdetect::preprocess::Letterbox;
use jetdetect::source;
use jetdetect::yolo::Detection;

/// Decoded detections are well formed: at most `max_detections`, known classes,
/// finite scores above `confidence`, finite boxes inside the source frame.
pub fn detections(
    out: &[Detection],
    classes: usize,
    confidence: f32,
    max_detections: usize,
    lb: &Letterbox,
) -> Result<(), String> {
    if out.len() > max_detections {
        return Err(format!("{} detections, more than max_detections = {max_detections}", out.len()));
    }
    for d in out {
        if d.class_id >= classes {
            return Err(format!("class out of range: {d:?}"));
        }
        if !(d.score.is_finite() && d.score > confidence) {
            return Err(format!("score not finite or not above {confidence}: {d:?}"));
        }
        for (v, hi) in [(d.x1, lb.src_w), (d.x2, lb.src_w), (d.y1, lb.src_h), (d.y2, lb.src_h)] {
            if !(v.is_finite() && (0.0..=hi as f32).contains(&v)) {
                return Err(format!("{d:?} not inside {lb:?}"));
            }
        }
    }
    Ok(())
}

/// A successfully decoded MJPEG frame is a whole RGB frame of the negotiated size.
pub fn mjpeg_frame(frame: &Frame, expect: (u32, u32)) -> Result<(), String> {
    if (frame.width, frame.height, frame.format) != (expect.0, expect.1, PixelFormat::Rgb24) {
        return Err(format!(
            "{}x{} {:?}, want {}x{} RGB",
            frame.width, frame.height, frame.format, expect.0, expect.1
        ));
    }
    frame.check_len().map_err(|e| e.to_string())
}

/// A raw frame file of `len` bytes, opened as `file://{path}?width=&height=&format=`:
/// opening fails with a message, or exactly `len / frame_len` whole frames are read.
pub fn raw_file(
    path: &std::path::Path,
    len: usize,
    width: u32,
    height: u32,
    format: PixelFormat,
) -> Result<(), String> {
    let uri = format!("file://{}?width={width}&height={height}&format={}", path.display(), format.name());
    let mut src = match source::open(&uri) {
        Err(e) if e.to_string().is_empty() => return Err(format!("{uri}: an error without a message")),
        Err(_) => return Ok(()),
        Ok(src) => src,
    };
    let frame_len =
        format.frame_len(width, height).ok_or_else(|| format!("{uri}: opened, but no frame length"))?;
    let mut frame = Frame::empty();
    let mut n = 0;
    while let Ok(true) = src.next_frame(&mut frame) {
        frame.check_len().map_err(|e| format!("{uri}: {e}"))?;
        n += 1;
        if n > len / frame_len {
            return Err(format!("{uri}: more frames than the file holds"));
        }
    }
    if n != len / frame_len {
        return Err(format!("{uri}: {n} frames read, the file holds {}", len / frame_len));
    }
    Ok(())
}
