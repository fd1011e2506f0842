//! `jetdetect eval`: a model scored against a synthetic source's ground truth ([`eval::score`]),
//! with `--hazards` the hazard layer on top of it ([`eval::score_hazards`]), or with `--tracks`
//! the tracker alone over MOTChallenge files ([`eval::score_tracks`]): boxes of real footage
//! in, scored against its labels.

use serde_json::json;

use std::path::{Path, PathBuf};

use jetdetect::config::Config;
use jetdetect::eval::hazards::HazardScore;
use jetdetect::eval::mot::{self, SeqInfo};
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
    /// are scored as fast as the machine goes, each taken at frame / fps seconds) [default: 30].
    /// With --tracks: the sequence's [default: seqinfo.ini's frameRate].
    #[arg(long, value_parser = positive)]
    fps: Option<f64>,
    /// Score the tracker ([hazards.tracking] of the config, or its defaults) over MOTChallenge
    /// files: the boxes of --det in, the objects of --gt to score against (MOTA, IDF1, identity
    /// switches, as py-motmetrics computes them). No model is run.
    #[arg(long, conflicts_with_all = ["hazards", "source", "frames"], requires_all = ["det", "gt"])]
    tracks: bool,
    /// With --tracks: the boxes, MOTChallenge lines (frame,id,left,top,width,height,score,...;
    /// det/det.txt of a sequence, a detector's output, or a tracker's results, whose ids are dropped).
    #[arg(long, value_name = "FILE", requires = "tracks")]
    det: Option<PathBuf>,
    /// With --tracks: the truth, MOTChallenge lines (frame,id,left,top,width,height,flag,...;
    /// gt/gt.txt of a sequence, or a CVAT "MOT 1.1" export). Lines flagged 0 are left out.
    #[arg(long, value_name = "FILE", requires = "tracks")]
    gt: Option<PathBuf>,
    /// With --tracks: the frames' size, WIDTHxHEIGHT [default: seqinfo.ini's imWidth x imHeight,
    /// beside the truth as in a MOTChallenge sequence].
    #[arg(long, value_name = "WxH", value_parser = frame_size, requires = "tracks")]
    size: Option<(u32, u32)>,
    /// With --tracks: also write the tracks to FILE, MOTChallenge lines (for py-motmetrics or
    /// any other scorer).
    #[arg(long, value_name = "FILE", requires = "tracks")]
    save_tracks: Option<PathBuf>,
    /// With --hazards: also write the model's detections to FILE (JSON lines), for --detections.
    #[arg(long, value_name = "FILE", requires = "hazards", conflicts_with = "detections")]
    save_detections: Option<PathBuf>,
    /// With --hazards on a moving camera's scene (synthetic://?speed=..): do not hand the
    /// layer the camera's attitude (as without a flight controller's ATTITUDE).
    #[arg(long, requires = "hazards")]
    no_attitude: bool,
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

fn frame_size(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("'{s}' is not a frame size: give WIDTHxHEIGHT in pixels, e.g. 640x480");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    match (w.trim().parse::<u32>(), h.trim().parse::<u32>()) {
        (Ok(w), Ok(h)) if w > 0 && h > 0 => Ok((w, h)),
        _ => Err(bad()),
    }
}

/// Prints one JSON line: counts, precision, recall and mean stage times; with `--hazards`,
/// the hazard scores and whether they meet the targets; with `--tracks`, the tracking scores.
pub fn run(args: Args) -> Result<bool, Error> {
    if args.tracks {
        // The tracker needs no model: a config only for its [hazards] thresholds.
        let config = match args.model.config {
            Some(_) => args.model.resolve()?,
            None => Config::defaults_with(|_| Ok::<(), Error>(()))?,
        };
        return tracks(&args, &config);
    }
    let config = args.model.resolve()?;
    let fps = args.fps.unwrap_or(30.0);
    if args.hazards {
        let source = args.source.as_deref().unwrap_or(HAZARD_SOURCE);
        let frames = args.frames.unwrap_or(18_000);
        let boxes = match (args.save_detections, args.detections) {
            (Some(path), _) => Boxes::Save(path),
            (None, Some(path)) => Boxes::Replay(path),
            (None, None) => Boxes::Model,
        };
        let s = eval::score_hazards(&config, source, frames, fps, args.match_iou, &boxes, !args.no_attitude)?;
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

/// `--tracks`: the tracker over `--det`, scored against `--gt`.
fn tracks(args: &Args, config: &Config) -> Result<bool, Error> {
    let (det, gt) =
        (args.det.as_deref().expect("clap requires --det"), args.gt.as_deref().expect("and --gt"));
    let detections = mot::read(det, mot::Kind::Detections)?;
    let truth = mot::read(gt, mot::Kind::Truth)?;
    let info_path = SeqInfo::beside(gt);
    let info = match &info_path {
        Some(p) => SeqInfo::read(p).map_err(|e| Error::io(format!("{}: cannot read", p.display()), e))?,
        None => SeqInfo::default(),
    };
    let missing = |what: &str, flag: &str, key: &str| {
        let looked = match &info_path {
            Some(p) => format!("{} has no {key}", p.display()),
            None => format!("no seqinfo.ini beside {} or in its parent folder", gt.display()),
        };
        Error::Command(format!("--tracks needs the frames' {what}: give {flag} ({looked})"))
    };
    let size =
        args.size.or(info.size).ok_or_else(|| missing("size", "--size WIDTHxHEIGHT", "imWidth/imHeight"))?;
    let fps = args.fps.or(info.fps).ok_or_else(|| missing("rate", "--fps", "frameRate"))?;
    let mut save = match &args.save_tracks {
        Some(path) => Some(mot::Writer::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .map_err(|e| Error::io(format!("{}: cannot create", path.display()), e))?,
        ))),
        None => None,
    };
    // Only the writer fails (the tracker does no I/O).
    let write_error = |e| {
        let path = args.save_tracks.as_deref().unwrap_or(Path::new("--save-tracks"));
        Error::io(format!("{}: cannot write", path.display()), e)
    };
    let run =
        eval::score_tracks(&config.hazards, &detections, &truth, size, fps, args.match_iou, save.as_mut())
            .map_err(write_error)?;
    if let Some(w) = save {
        w.finish().map_err(write_error)?;
    }
    println!("{}", tracks_json(det, gt, size, fps, &run));
    Ok(true)
}

/// The `--tracks` line: MOTA, IDF1 and switches at 4 decimals, and the counts behind them
/// under py-motmetrics' names.
fn tracks_json(det: &Path, gt: &Path, size: (u32, u32), fps: f64, run: &eval::TrackRun) -> serde_json::Value {
    let t = &run.score;
    json!({
        "detections": det.display().to_string(), "truth": gt.display().to_string(),
        "size": [size.0, size.1], "fps": fps, "frames": run.frames, "boxes": run.detections,
        "mota": r4(t.mota()), "idf1": r4(t.idf1()), "num_switches": t.id_switches,
        "num_objects": t.objects, "num_predictions": t.tracked, "num_matches": t.matches - t.id_switches,
        "num_misses": t.misses, "num_false_positives": t.false_positives, "idtp": t.idtp,
    })
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
            "lead_recalled": s.danger.lead_recalled, "recall_lead_1s": r4(s.danger.recall_lead()),
            "mean_lead_s": r4(s.danger.mean_lead_s), "pass_alarms": s.danger.pass_alarms,
            "false_danger_per_min": r4(s.false_danger_per_min()),
        },

        "targets": {
            "idf1_at_least_0.9": t.idf1() >= 0.9,
            "switches_at_most_1_per_100_track_s": switches <= 1.0,
            "ttc_median_error_at_most_15pct": s.ttc.compared > 0 && s.ttc.median <= 0.15,
            "danger_recall_at_least_0.95": s.danger.recall() >= 0.95,
            "false_danger_at_most_1_per_min": false_per_min <= 1.0,
            "danger_recall_with_1s_lead_at_least_0.95": s.danger.recall_lead() >= 0.95,
            "false_danger_with_passes_at_most_1_per_min": s.false_danger_per_min() <= 1.0,
        },
    })
}
