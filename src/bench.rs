//! `jetdetect bench`: the detector chain on a source, timed per stage.
//!
//! Unlike the daemon, frames are taken one after another (no newest-frame
//! dropping), so the figures are the cost of each stage on this machine with
//! this engine and these providers: what the daemon can reach at best. Model
//! load (which includes a TensorRT engine build or cache load) and warm-up are
//! timed separately from the steady state.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::config::Config;
use crate::detector::Detector;
use crate::error::{Error, Result};
use crate::frame::Frame;
use crate::source;
use crate::stats::Percentiles;

/// Stages timed per frame: the source's delivery, the detector's three
/// stages, and the detector as a whole.
pub const STAGES: [&str; 5] = ["source", "preprocess", "inference", "decode", "detect"];

/// What a bench run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchReport {
    /// Engine and model.
    pub engine: String,
    /// Where preprocessing ran.
    pub preprocessing: String,
    /// The source and its geometry.
    pub source: String,
    /// Frames timed (after warm-up).
    pub frames: u64,
    /// Seconds to load the model and prepare the engine (a TensorRT build or cache load included).
    pub load_s: f64,
    /// Seconds for the warm-up frames (accelerator preprocessing graphs are built here).
    pub warmup_s: f64,
    /// Frames per second through the detector (source time excluded).
    pub detector_fps: f64,
    /// Mean detections per frame.
    pub detections_per_frame: f64,
    /// Per-stage latency in milliseconds, in [`STAGES`] order.
    pub stages: Vec<(String, Percentiles)>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

fn percentiles(h: &Histogram<u64>) -> Percentiles {
    let ms = |us: f64| (us / 1000.0 * 1000.0).round() / 1000.0;
    Percentiles {
        p50: ms(h.value_at_quantile(0.5) as f64),
        p90: ms(h.value_at_quantile(0.9) as f64),
        p99: ms(h.value_at_quantile(0.99) as f64),
        max: ms(h.max() as f64),
        mean: ms(h.mean()),
    }
}

/// Loads the detector `config` describes, warms it up with `warmup` frames of
/// the source's geometry, then times `frames` frames from `uri`.
pub fn run(config: &Config, uri: &str, frames: u64, warmup: usize) -> Result<BenchReport> {
    if frames == 0 {
        return Err(Error::Other("--frames must be at least 1".into()));
    }
    let mut src = source::open_with(uri, &config.source.controls)?;
    let t = Instant::now();
    let mut detector = Detector::from_config(config)?;
    let load_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    if warmup > 0 {
        match src.geometry() {
            Some(g) => detector.warm_up_for(warmup, g)?,
            None => detector.warm_up(warmup)?,
        }
    }
    let warmup_s = t.elapsed().as_secs_f64();
    let mut hists: Vec<Histogram<u64>> = STAGES.iter().map(|_| histogram()).collect();
    let mut frame = Frame::empty();
    let mut n = 0u64;
    let mut detections = 0usize;
    let mut busy = Duration::ZERO;
    while n < frames {
        let t0 = Instant::now();
        if !src.next_frame(&mut frame)? {
            break;
        }
        let t1 = Instant::now();
        detections += detector.detect(&frame)?.len();
        let t2 = Instant::now();
        busy += t2 - t1;
        let s = detector.times();
        for (h, d) in hists.iter_mut().zip([t1 - t0, s.preprocess, s.inference, s.decode, t2 - t1]) {
            h.saturating_record((d.as_micros() as u64).max(1));
        }
        n += 1;
    }
    if n == 0 {
        return Err(Error::Other(format!("{uri}: the source gave no frames")));
    }
    Ok(BenchReport {
        engine: detector.engine().describe(),
        preprocessing: detector.preprocessing(),
        source: src.describe(),
        frames: n,
        load_s: (load_s * 1000.0).round() / 1000.0,
        warmup_s: (warmup_s * 1000.0).round() / 1000.0,
        detector_fps: ((n as f64 / busy.as_secs_f64().max(1e-9)) * 10.0).round() / 10.0,
        detections_per_frame: ((detections as f64 / n as f64) * 100.0).round() / 100.0,
        stages: STAGES.iter().zip(&hists).map(|(s, h)| (s.to_string(), percentiles(h))).collect(),
    })
}

/// The report as a table for people.
pub fn format_table(r: &BenchReport) -> String {
    let mut s = format!(
        "engine        {}\npreprocessing {}\nsource        {}\nload          {:.3} s (model + engine build or cache)\n\
         warm-up       {:.3} s\nframes        {}  ({:.1} FPS through the detector, {:.2} detections/frame)\n\n\
         {:<11} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
        r.engine,
        r.preprocessing,
        r.source,
        r.load_s,
        r.warmup_s,
        r.frames,
        r.detector_fps,
        r.detections_per_frame,
        "stage (ms)",
        "p50",
        "p90",
        "p99",
        "max",
        "mean"
    );
    for (name, p) in &r.stages {
        s.push_str(&format!(
            "{name:<11} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}\n",
            p.p50, p.p90, p.p99, p.max, p.mean
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_every_stage_of_a_real_model() {
        let mut config = Config::default();
        config.model.path = concat!(env!("CARGO_MANIFEST_DIR"), "/models/obstacles-v8.onnx").into();
        let r = run(&config, "synthetic://?width=320&height=240&fps=0&format=nv12&seed=2", 12, 1).unwrap();
        assert_eq!(r.frames, 12);
        assert_eq!(r.stages.len(), STAGES.len());
        let get = |name: &str| r.stages.iter().find(|(s, _)| s == name).unwrap().1;
        // The detector's total covers its stages; each percentile is ordered.
        assert!(get("detect").p50 >= get("inference").p50, "{r:?}");
        for (_, p) in &r.stages {
            assert!(p.p50 <= p.p90 && p.p90 <= p.p99 && p.p99 <= p.max, "{r:?}");
        }
        assert!(get("inference").p50 > 0.0 && r.detector_fps > 0.0);
        assert!(r.detections_per_frame > 0.5, "the synthetic scene has objects: {r:?}");
        let table = format_table(&r);
        assert!(table.contains("inference") && table.contains("preprocessing cpu"), "{table}");
        // A finite source shorter than asked is measured as far as it goes; an empty one is an error.
        let r = run(&config, "synthetic://?width=64&height=64&fps=0&frames=3", 10, 0).unwrap();
        assert_eq!(r.frames, 3);
        assert!(run(&config, "synthetic://?width=64&height=64&fps=0&frames=3", 0, 0).is_err());
    }
}
