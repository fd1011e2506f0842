//! YOLO decoding of arbitrary tensors (any bit pattern: NaN, infinities,
//! subnormals), layouts (YOLOv8, YOLOv5, end-to-end, both RT-DETR forms), letterboxes (and
//! stretches) and thresholds. Every detection must be finite, inside the frame,
//! above the threshold, of a known class, and there are at most `max_detections`.
#![no_main]

use jetdetect::preprocess::{Fit, Letterbox};
use jetdetect::yolo::{DecodeOptions, Decoder, Layout};
use libfuzzer_sys::fuzz_target;

#[path = "../../tests/common/checks.rs"]
mod checks;

fn u16_at(d: &[u8], i: usize) -> u32 {
    u16::from_le_bytes([d[i], d[i + 1]]) as u32
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 16 {
        return;
    }
    let (head, body) = data.split_at(16);
    let kind = head[0] % 5;
    let classes = 1 + (head[1] % 8) as usize;
    let fit = if head[13] & 1 == 0 { Fit::Letterbox } else { Fit::Stretch };
    let lb = Letterbox::fit(
        fit,
        1 + u16_at(head, 2) % 4096,
        1 + u16_at(head, 4) % 4096,
        1 + u16_at(head, 6) % 1280,
        1 + u16_at(head, 8) % 1280,
    );
    let confidence = head[10] as f32 / 255.0;
    let iou = head[11] as f32 / 255.0;
    let max_detections = 1 + head[12] as usize % 300;
    let values: Vec<f32> =
        body.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let per_anchor = match kind {
        0 | 4 => 4 + classes,
        1 => 5 + classes,
        _ => 6,
    };
    let anchors = values.len() / per_anchor;
    if anchors == 0 {
        return;
    }
    let layout = match kind {
        0 => Layout::V8 { anchors, classes },
        1 => Layout::V5 { anchors, classes },
        2 => Layout::EndToEnd { rows: anchors, classes: Some(classes) },
        3 => Layout::RtDetr { rows: anchors, classes: Some(classes) },
        _ => Layout::RtDetrScores { queries: anchors, classes },
    };
    let options = DecodeOptions { confidence, iou, max_detections, ..DecodeOptions::default() };
    let mut decoder = Decoder::new(layout, options);
    let mut out = Vec::new();
    decoder.decode(&values[..anchors * per_anchor], &lb, &mut out);
    if let Err(e) = checks::detections(&out, classes, confidence, max_detections, &lb) {
        panic!("{e}");
    }
});
