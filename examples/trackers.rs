//! The tracker comparison behind docs/hazards.md: jetdetect's own tracker (`hazard::track`)
//! against the maintained Rust crates that could have been used instead, on the same
//! detections, scored the same way.
//!
//! ```sh
//! cargo run --example trackers --features tracker-comparison
//! ```
//!
//! The scenes are `synthetic://` scenes (exact ground truth, objects crossing and hiding each
//! other, some closing in), at 30 fps. Detections are made from the truth the way a detector
//! errs: box edges jittered by 3 % of the size, partly hidden objects scored low (a
//! ByteTrack-style tracker must keep them), 5 % of objects missed per frame, and one low-scoring
//! false box every few frames. Each tracker's output boxes are matched to the truth (IoU >= 0.5,
//! optimal matching) and scored as in the CLEAR MOT metrics: misses, false positives, identity
//! switches, MOTA; plus time per frame and heap allocations per frame (counted by this program's
//! allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use jetdetect::frame::GroundTruth;
use jetdetect::geometry::iou;
use jetdetect::hazard::assign::Assignment;
use jetdetect::hazard::track::{Tracker, TrackingConfig};
use jetdetect::source::synthetic::Scene;
use jetdetect::yolo::Detection;

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

const FPS: f64 = 30.0;
const FRAMES: u64 = 900;
const SEEDS: [u64; 6] = [1, 2, 3, 4, 5, 6];

/// A small deterministic generator (the scenes' own is private to them).
struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
    fn normal(&mut self) -> f32 {
        // Irwin-Hall: close enough to a normal for jitter.
        (0..6).map(|_| self.unit()).sum::<f32>() - 3.0
    }
}

/// One frame: the truth (visible objects) and what a detector would report.
struct FrameData {
    truth: Vec<GroundTruth>,
    detections: Vec<Detection>,
}

fn scene_frames(seed: u64) -> Vec<FrameData> {
    let scene = Scene::with_approach(640, 480, 8, 3, seed, 0);
    let (mut rgb, mut ids, mut truth) = (Vec::new(), Vec::new(), Vec::new());
    let mut rng = Rng(seed.wrapping_mul(977));
    (0..FRAMES)
        .map(|t| {
            scene.render(t, &mut rgb, &mut ids, &mut truth);
            let visible: Vec<GroundTruth> = truth.iter().filter(|g| g.visible >= 0.3).copied().collect();
            let mut detections = Vec::new();
            for g in &visible {
                if rng.unit() < 0.05 {
                    continue; // missed
                }
                let (w, h) = (g.x2 - g.x1, g.y2 - g.y1);
                let j = |r: &mut Rng, s: f32| 0.03 * s * r.normal();
                let score = (0.95 - 0.6 * (1.0 - g.visible) + 0.05 * rng.normal()).clamp(0.26, 0.99);
                detections.push(Detection {
                    class_id: g.class_id,
                    score,
                    x1: g.x1 + j(&mut rng, w),
                    y1: g.y1 + j(&mut rng, h),
                    x2: g.x2 + j(&mut rng, w),
                    y2: g.y2 + j(&mut rng, h),
                });
            }
            if rng.unit() < 0.2 {
                let (x, y) = (rng.unit() * 560.0, rng.unit() * 400.0);
                detections.push(Detection {
                    class_id: (rng.unit() * 3.0) as usize % 3,
                    score: 0.3,
                    x1: x,
                    y1: y,
                    x2: x + 60.0,
                    y2: y + 60.0,
                });
            }
            FrameData { truth: visible, detections }
        })
        .collect()
}

/// A tracker under test: the frame's detections in, `(id, box)` per reported track out.
trait Candidate {
    fn name(&self) -> &'static str;
    fn step(&mut self, dets: &[Detection], t: f64, out: &mut Vec<(u64, [f32; 4])>);
}

struct Own(Tracker);
impl Candidate for Own {
    fn name(&self) -> &'static str {
        "jetdetect hazard::track"
    }
    fn step(&mut self, dets: &[Detection], t: f64, out: &mut Vec<(u64, [f32; 4])>) {
        self.0.update(dets, t);
        for tr in self.0.tracks() {
            if let (Some(i), true) = (tr.detection, tr.id != 0) {
                let d = &dets[i];
                out.push((tr.id, d.corners()));
            }
        }
    }
}

struct Trackforge(trackforge::trackers::byte_track::ByteTrack);
impl Candidate for Trackforge {
    fn name(&self) -> &'static str {
        "trackforge 0.5.1 ByteTrack"
    }
    fn step(&mut self, dets: &[Detection], _t: f64, out: &mut Vec<(u64, [f32; 4])>) {
        let input = dets
            .iter()
            .map(|d| ([d.x1, d.y1, d.x2 - d.x1, d.y2 - d.y1], d.score, d.class_id as i64))
            .collect();
        for s in self.0.update(input) {
            let [x, y, w, h] = s.tlwh;
            out.push((s.track_id, [x, y, x + w, y + h]));
        }
    }
}

struct Norfair(norfair_rs::Tracker);
impl Candidate for Norfair {
    fn name(&self) -> &'static str {
        "norfair-rs 0.5.2 (IoU, Kalman)"
    }
    fn step(&mut self, dets: &[Detection], _t: f64, out: &mut Vec<(u64, [f32; 4])>) {
        let input: Vec<norfair_rs::Detection> = dets
            .iter()
            .filter_map(|d| {
                let points = nalgebra::DMatrix::from_row_slice(
                    2,
                    2,
                    &[d.x1 as f64, d.y1 as f64, d.x2 as f64, d.y2 as f64],
                );
                let mut det = norfair_rs::Detection::new(points).ok()?;
                det.label = Some(d.class_id.to_string());
                Some(det)
            })
            .collect();
        for o in self.0.update(input, 1, None) {
            let (Some(id), e) = (o.id, o.get_estimate(false)) else { continue };
            out.push((id as u64, [e[(0, 0)] as f32, e[(0, 1)] as f32, e[(1, 0)] as f32, e[(1, 1)] as f32]));
        }
    }
}

#[derive(Default)]
struct Score {
    gt: u64,
    misses: u64,
    false_pos: u64,
    id_switches: u64,
    frames: u64,
    micros: Vec<f64>,
    allocs: u64,
}

fn run(make: &dyn Fn() -> Box<dyn Candidate>) -> (String, Score) {
    let mut score = Score::default();
    let mut name = String::new();
    let mut assignment = Assignment::default();
    let mut out = Vec::with_capacity(128);
    for seed in SEEDS {
        let frames = scene_frames(seed);
        let mut tracker = make();
        name = tracker.name().to_string();
        let mut last_id: std::collections::HashMap<usize, u64> = Default::default();
        for (f, fd) in frames.iter().enumerate() {
            out.clear();
            let before = ALLOCS.load(Ordering::Relaxed);
            let start = Instant::now();
            tracker.step(&fd.detections, f as f64 / FPS, &mut out);
            score.micros.push(start.elapsed().as_secs_f64() * 1e6);
            score.allocs += ALLOCS.load(Ordering::Relaxed) - before;
            score.frames += 1;
            let cost = |r: usize, c: usize| {
                let g = &fd.truth[r];
                1.0 - iou([g.x1, g.y1, g.x2, g.y2], out[c].1) as f64
            };
            assignment.solve(fd.truth.len(), out.len(), 0.5, cost);
            score.gt += fd.truth.len() as u64;
            score.misses += (fd.truth.len() - assignment.pairs.len()) as u64;
            score.false_pos += (out.len() - assignment.pairs.len()) as u64;
            for &(r, c) in &assignment.pairs {
                let object = fd.truth[r].object;
                if let Some(prev) = last_id.insert(object, out[c].0) {
                    if prev != out[c].0 {
                        score.id_switches += 1;
                    }
                }
            }
        }
    }
    (name, score)
}

fn main() {
    let candidates: Vec<Box<dyn Fn() -> Box<dyn Candidate>>> = vec![
        Box::new(|| Box::new(Own(Tracker::new(TrackingConfig::default())))),
        Box::new(|| {
            Box::new(Trackforge(trackforge::trackers::byte_track::ByteTrack::new(0.5, 30, 0.8, 0.6)))
        }),
        Box::new(|| {
            let mut cfg = norfair_rs::TrackerConfig::from_distance_name("iou", 0.8);
            cfg.hit_counter_max = 30;
            cfg.initialization_delay = 1;
            Box::new(Norfair(norfair_rs::Tracker::new(cfg).expect("a valid norfair config")))
        }),
    ];
    println!(
        "{} scenes x {FRAMES} frames at {FPS} fps, 8 objects (3 closing in), detections from the truth with \
         3 % jitter, 5 % misses, low scores when hidden, false boxes",
        SEEDS.len()
    );
    println!("| tracker | MOTA | misses | false positives | identity switches | us/frame p50 | p99 | allocations/frame | visible object-frames |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for make in &candidates {
        let (name, mut s) = run(make.as_ref());
        s.micros.sort_by(f64::total_cmp);
        let q = |p: f64| s.micros[((s.micros.len() - 1) as f64 * p) as usize];
        let mota = 1.0 - (s.misses + s.false_pos + s.id_switches) as f64 / s.gt as f64;
        println!(
            "| {name} | {mota:.3} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {} |",
            s.misses,
            s.false_pos,
            s.id_switches,
            q(0.5),
            q(0.99),
            s.allocs as f64 / s.frames as f64,
            s.gt
        );
    }
}
