//! Decoding + class-aware NMS for both output layouts at COCO scale (80
//! classes, 640x640 input: YOLOv8 `[1, 84, 8400]`, YOLOv5 `[1, 25200, 85]`),
//! with a realistic scene: 20 objects, each seen by a cluster of overlapping
//! anchors above the threshold (~300 candidates enter NMS), and low background
//! scores everywhere else. Target: < 0.3 ms. And the end-to-end layout (`[1, 300, 6]`,
//! YOLO26 / YOLOv10 `nms=False`, `nms=True` exports) on the same scene as the model's own
//! top-k gives it: the 20 objects first, then 280 rows of background, which the threshold drops.
//!
//! `cargo bench --bench decode`; `cargo test --benches` runs each once.

use criterion::{criterion_group, criterion_main, Criterion};
use jetdetect::preprocess::Letterbox;
use jetdetect::source::synthetic::Rng;
use jetdetect::yolo::{DecodeOptions, Decoder, Layout};

const CLASSES: usize = 80;
const OBJECTS: usize = 20;
const PER_OBJECT: usize = 15;

/// One candidate per anchor: `(cx, cy, w, h, objectness, class scores)`.
fn scene(anchors: usize) -> Vec<([f32; 5], Vec<f32>)> {
    let mut rng = Rng::new(7);
    let mut rows: Vec<([f32; 5], Vec<f32>)> = (0..anchors)
        .map(|_| {
            let b =
                [rng.range(0.0, 640.0), rng.range(0.0, 640.0), rng.range(4.0, 60.0), rng.range(4.0, 60.0)];
            let scores: Vec<f32> = (0..CLASSES).map(|_| rng.range(0.0, 0.05)).collect();
            ([b[0], b[1], b[2], b[3], rng.range(0.0, 0.2)], scores)
        })
        .collect();
    for o in 0..OBJECTS {
        let (cx, cy) = (rng.range(40.0, 600.0), rng.range(40.0, 600.0));
        let (w, h) = (rng.range(20.0, 200.0), rng.range(20.0, 200.0));
        let class = (o * 7) % CLASSES;
        for _ in 0..PER_OBJECT {
            let i = rng.below(anchors as u64) as usize;
            let (jx, jy) = (w * 0.05, h * 0.05);
            let b = [
                cx + rng.range(-jx, jx),
                cy + rng.range(-jy, jy),
                w + rng.range(-jx, jx),
                h + rng.range(-jy, jy),
            ];
            let mut scores: Vec<f32> = (0..CLASSES).map(|_| rng.range(0.0, 0.05)).collect();
            scores[class] = rng.range(0.3, 0.95);
            rows[i] = ([b[0], b[1], b[2], b[3], rng.range(0.6, 0.99)], scores);
        }
    }
    rows
}

fn v8_tensor(anchors: usize) -> Vec<f32> {
    let rows = scene(anchors);
    let mut t = vec![0f32; (4 + CLASSES) * anchors];
    for (i, (b, s)) in rows.iter().enumerate() {
        for k in 0..4 {
            t[k * anchors + i] = b[k];
        }
        for (k, v) in s.iter().enumerate() {
            t[(4 + k) * anchors + i] = *v;
        }
    }
    t
}

fn v5_tensor(anchors: usize) -> Vec<f32> {
    scene(anchors).into_iter().flat_map(|(b, s)| b.into_iter().chain(s)).collect()
}

/// `[300, 6]` rows `x1 y1 x2 y2 score class`, best first: what an end-to-end head's top-k leaves
/// of the scene (one row per object, then background below the threshold).
fn end_to_end_tensor(rows: usize) -> Vec<f32> {
    let mut kept: Vec<[f32; 6]> = Vec::new();
    for (b, s) in scene(8400) {
        let (class, score) =
            s.iter().enumerate().fold((0, 0.0f32), |m, (k, &v)| if v > m.1 { (k, v) } else { m });
        let row =
            [b[0] - b[2] / 2.0, b[1] - b[3] / 2.0, b[0] + b[2] / 2.0, b[1] + b[3] / 2.0, score, class as f32];
        // Each object once (one of its anchors stands for what the model's NMS keeps), then background.
        let object = score > 0.25 && !kept.iter().any(|k| k[5] == row[5] && (k[0] - row[0]).abs() < 30.0);
        if object || (score <= 0.25 && kept.len() < rows) {
            kept.push(row);
        }
    }
    kept.sort_by(|a, b| b[4].total_cmp(&a[4]));
    kept.truncate(rows);
    kept.into_iter().flatten().collect()
}

fn bench(c: &mut Criterion) {
    let lb = Letterbox::new(640, 480, 640, 640);
    let mut g = c.benchmark_group("decode+nms 640x640, 80 classes");
    for (name, layout, tensor) in [
        ("yolov8 [84,8400]", Layout::V8 { anchors: 8400, classes: CLASSES }, v8_tensor(8400)),
        ("yolov5 [25200,85]", Layout::V5 { anchors: 25200, classes: CLASSES }, v5_tensor(25200)),
        (
            "end-to-end [300,6]",
            Layout::EndToEnd { rows: 300, classes: Some(CLASSES) },
            end_to_end_tensor(300),
        ),
    ] {
        let mut decoder = Decoder::new(layout, DecodeOptions::default());
        let mut dets = Vec::new();
        decoder.decode(&tensor, &lb, &mut dets);
        // One detection per object, give or take objects that overlap or were hit by few anchors.
        assert!((OBJECTS - 5..=OBJECTS + 2).contains(&dets.len()), "{name}: {} detections", dets.len());
        g.bench_function(name, |b| b.iter(|| decoder.decode(&tensor, &lb, &mut dets)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
