//! The hazard layer's cost per frame on the inference thread (`Hazards::update`: ByteTrack
//! association, the Kalman filters, time to contact, bearings, zones), in steady state with
//! 20 objects: 14 drifting across a 640x480 picture and 6 closing in, each with box jitter, a
//! new frame every 33 ms. Target (issue 18): at most 50 us per frame. The same again with
//! `[vehicle] width_m` and the flight controller's ATTITUDE at 100 Hz (issue 48: the collision
//! course of every track, its box edges levelled; the same target).
//!
//! `cargo bench --bench hazards`; `cargo test --benches` runs each once.

use std::time::{Duration, Instant};

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use jetdetect::hazard::HazardFrame;
use jetdetect::source::synthetic::Rng;
use jetdetect::yolo::Detection;

const OBJECTS: usize = 20;
const CLOSING: usize = 6;

/// One object's motion: centre, velocity in px per frame, half size, and for an object closing
/// in its time to contact at frame 0, in frames (it starts over every half of that).
struct Motion {
    x: f32,
    y: f32,
    vx: f32,
    vy: f32,
    half: f32,
    class_id: usize,
    closing: Option<f32>,
}

/// The 20 objects' boxes in frame `k`, with up to 2 % jitter.
fn frame(objects: &[Motion], k: u64, rng: &mut Rng, out: &mut Vec<Detection>) {
    out.clear();
    for o in objects {
        let grow = match o.closing {
            Some(t) => t / (t - (k as f32).rem_euclid(t / 2.0)),
            None => 1.0,
        };
        let half = o.half * grow;
        // Back and forth over the picture, so the scene never runs out.
        let wave = |p: f32, v: f32, span: f32| {
            let q = (p + v * k as f32).rem_euclid(2.0 * span);
            if q > span {
                2.0 * span - q
            } else {
                q
            }
        };
        let cx = 60.0 + wave(o.x, o.vx, 520.0);
        let cy = 60.0 + wave(o.y, o.vy, 360.0);
        let j = |r: &mut Rng| 1.0 + r.range(-0.02, 0.02);
        out.push(Detection {
            class_id: o.class_id,
            score: rng.range(0.55, 0.95),
            x1: cx - half * j(rng),
            y1: cy - half * j(rng),
            x2: cx + half * j(rng),
            y2: cy + half * j(rng),
        });
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("hazards per frame");
    for (name, vehicle) in
        [("20 objects, 6 closing in (update only)", false), ("the same, with [vehicle] and ATTITUDE", true)]
    {
        bench_one(&mut g, name, vehicle);
    }
    g.finish();
}

fn bench_one(g: &mut criterion::BenchmarkGroup<criterion::measurement::WallTime>, name: &str, vehicle: bool) {
    let mut hazards = common::hazards();
    if vehicle {
        let v = jetdetect::hazard::course::VehicleConfig { width_m: Some(0.6), ..Default::default() };
        hazards = hazards.with_vehicle(&v);
    }
    // The attitude of a drone shaking by half a degree, heading slowly turning, every 10 ms.
    let attitude = |ms: u64| {
        let t = ms as f64 / 1000.0;
        let shake = 0.5f64.to_radians() * (std::f64::consts::TAU * 17.0 * t).sin();
        jetdetect::frame::Attitude { roll: shake / 2.0, pitch: shake, yaw: 0.1 * t + shake }
    };
    let mut rng = Rng::new(11);
    let objects: Vec<Motion> = (0..OBJECTS)
        .map(|i| Motion {
            x: rng.range(0.0, 520.0),
            y: rng.range(0.0, 360.0),
            vx: rng.range(-3.0, 3.0),
            vy: rng.range(-2.0, 2.0),
            half: rng.range(12.0, 30.0),
            class_id: i % 3,
            closing: (i < CLOSING).then(|| rng.range(60.0, 150.0)),
        })
        .collect();
    let mut dets = Vec::with_capacity(OBJECTS);
    let mut out = HazardFrame::with_capacity(64);
    let t0 = Instant::now();
    let mut k = 0u64;
    // Into steady state: every object a confirmed track with a full time-to-contact window.
    for _ in 0..90 {
        frame(&objects, k, &mut rng, &mut dets);
        if vehicle {
            for ms in [33 * k, 33 * k + 10, 33 * k + 20] {
                hazards.attitude(t0 + Duration::from_millis(ms), attitude(ms));
            }
        }
        hazards.update(&dets, t0 + Duration::from_millis(33 * k), 640, 480, &mut out);
        k += 1;
    }
    if vehicle {
        assert!(
            out.obstacles.iter().any(|o| o.course.is_some()),
            "no track has a course: nothing is measured"
        );
    }
    let tracked = out.track_of.iter().filter(|&&t| t != 0).count();
    assert!(tracked >= OBJECTS - 2, "{tracked} of {OBJECTS} boxes tracked: the scene is not in steady state");

    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                frame(&objects, k, &mut rng, &mut dets);
                let captured = t0 + Duration::from_millis(33 * k);
                let start = Instant::now();
                if vehicle {
                    // The link's three ATTITUDE messages since the last frame count too.
                    for ms in [33 * k, 33 * k + 10, 33 * k + 20] {
                        hazards.attitude(t0 + Duration::from_millis(ms), attitude(ms));
                    }
                }
                hazards.update(&dets, captured, 640, 480, &mut out);
                spent += start.elapsed();
                k += 1;
            }
            spent
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
