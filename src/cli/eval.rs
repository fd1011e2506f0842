//! `jetdetect eval`: a model scored against a synthetic source's ground truth ([`eval::score`]),
//! or with `--hazards` the hazard layer on top of it ([`eval::score_hazards`]).

use serde_json::json;

use std::path::PathBuf;

use jetdetect::eval::hazards::HazardScore;
use jetdetect::eval::recorded::Boxes;
use jetdetect::{eval, Error};

use super::ModelArgs;

/// The source `eval` scores by default.
const SOURCE: &str = "synthetic://?width=640&height=480&fps=0&format=yuyv&seed=1";

/// The source `eval --hazards` scores by default: six objects, three of them closing in, all
/// coming and going.
const HAZARD_SOURCE: &str =
    "synthetic://?width=640&height=480&fps=0&format=yuyv&seed=1&objects=6&approach=3&leave=1";

/// `jetdetect eval`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Source with ground truth [default: synthetic://?width=640&height=480&fps=0&format=yuyv&seed=1;
    /// with --hazards, six objects of which three close in, all coming and going: ...&objects=6&approach=3&leave=1].
    #[arg(long)]
    source: Option<String>,
    /// Frames to score [default: 200; with --hazards 18000, 10 minutes at 30 fps].
    #[arg(long)]
    frames: Option<u64>,
    /// IoU needed for a match.
    #[arg(long, default_value_t = 0.5)]
    match_iou: f32,
    /// Score the hazard layer ([hazards] of the config): tracking (MOTA, IDF1, identity
    /// switches), time to contact and danger alarms.
    #[arg(long)]
    hazards: bool,
    /// With --hazards: the source's frame rate, which turns frame numbers into time (frames
    /// are scored as fast as the machine goes, each taken at frame / fps seconds).
    #[arg(long, default_value_t = 30.0, value_parser = positive)]
    fps: f64,
    /// With --hazards: also write the model's detections to FILE (JSON lines), for --detections.
    #[arg(long, value_name = "FILE", requires = "hazards", conflicts_with = "detections")]
    save_detections: Option<PathBuf>,
    /// With --hazards: take each frame's detections from FILE, written by --save-detections on
    /// the same source and model, instead of running the model (tuning the hazard layer in
    /// seconds a run).
    #[arg(long, value_name = "FILE", requires = "hazards")]
    detections: Option<PathBuf>,
}

fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("'{s}' is not a frame rate above 0 (e.g. 30)")),
    }
}

/// Prints one JSON line: counts, precision, recall and mean stage times; with `--hazards`,
/// the hazard scores and whether they meet the targets.
pub fn run(args: Args) -> Result<bool, Error> {
    let config = args.model.resolve()?;
    if args.hazards {
        let source = args.source.as_deref().unwrap_or(HAZARD_SOURCE);
        let frames = args.frames.unwrap_or(18_000);
        let boxes = match (args.save_detections, args.detections) {
            (Some(path), _) => Boxes::Save(path),
            (None, Some(path)) => Boxes::Replay(path),
            (None, None) => Boxes::Model,
        };
        let s = eval::score_hazards(&config, source, frames, args.fps, args.match_iou, &boxes)?;
        println!("{}", hazards_json(source, &s));
        return Ok(true);
    }
    let source = args.source.as_deref().unwrap_or(SOURCE);
    let s = eval::score(&config, source, args.frames.unwrap_or(200), args.match_iou)?;
    let c = s.counts;
    println!(
        "{}",
        json!({
            "source": source, "frames": s.frames, "tp": c.tp, "fp": c.fp, "fn": c.fn_,
            "precision": c.precision(), "recall": c.recall(),
            "mean_ms": {"preprocess": s.mean_ms[0], "inference": s.mean_ms[1], "decode": s.mean_ms[2]},
        })
    );
    Ok(true)
}

/// Rounds to 4 decimals for printing.
fn r4(v: f64) -> f64 {
    (v * 1e4).round() / 1e4
}

/// The `--hazards` line, with the targets of docs/hazards.md.
fn hazards_json(source: &str, s: &HazardScore) -> serde_json::Value {
    let t = &s.tracking;
    let switches = s.switches_per_100_track_s();
    let false_per_min = s.false_alarms_per_min();
    json!({
        "source": source, "frames": s.frames, "seconds": r4(s.seconds),
        "tracking": {
            "mota": r4(t.mota()), "idf1": r4(t.idf1()), "id_switches": t.id_switches,
            "switches_per_100_track_s": r4(switches), "track_seconds": r4(s.track_seconds),
            "objects": t.objects, "misses": t.misses, "false_positives": t.false_positives,
        },
        "ttc": {
            "closing": s.ttc.closing, "compared": s.ttc.compared, "coverage": r4(s.ttc.coverage()),
            "median_rel_error": r4(s.ttc.median), "p90_rel_error": r4(s.ttc.p90),
            "within_15pct": r4(s.ttc.within_15),
        },
        "danger": {
            "episodes": s.danger.episodes, "recalled": s.danger.recalled, "recall": r4(s.danger.recall()),
            "short_episodes": s.danger.short_episodes, "short_recalled": s.danger.short_recalled,
            "recall_all": r4(s.danger.recall_all()),
            "detected_episodes": s.danger.detected_episodes, "detected_recalled": s.danger.detected_recalled,
            "recall_detected": r4(s.danger.recall_detected()),
            "alarms": s.danger.alarms, "false_alarms": s.danger.false_alarms, "early_alarms": s.danger.early_alarms,
            "false_per_min": r4(false_per_min), "mean_delay_s": r4(s.danger.mean_delay_s),
        },
        "targets": {
            "idf1_at_least_0.9": t.idf1() >= 0.9,
            "switches_at_most_1_per_100_track_s": switches <= 1.0,
            "ttc_median_error_at_most_15pct": s.ttc.compared > 0 && s.ttc.median <= 0.15,
            "danger_recall_at_least_0.95": s.danger.recall() >= 0.95,
            "false_danger_at_most_1_per_min": false_per_min <= 1.0,
        },
    })
}
