//! `jetdetect eval`: a model scored against a synthetic source's ground truth ([`eval::score`]).

use serde_json::json;

use jetdetect::{eval, Error};

use super::ModelArgs;

/// `jetdetect eval`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Source with ground truth.
    #[arg(long, default_value = "synthetic://?width=640&height=480&fps=0&format=yuyv&seed=1")]
    source: String,
    /// Frames to score.
    #[arg(long, default_value_t = 200)]
    frames: u64,
    /// IoU needed for a match.
    #[arg(long, default_value_t = 0.5)]
    match_iou: f32,
}

/// Prints one JSON line: counts, precision, recall and mean stage times.
pub fn run(args: Args) -> Result<bool, Error> {
    let config = args.model.resolve()?;
    let s = eval::score(&config, &args.source, args.frames, args.match_iou)?;
    let c = s.counts;
    println!(
        "{}",
        json!({
            "source": args.source, "frames": s.frames, "tp": c.tp, "fp": c.fp, "fn": c.fn_,
            "precision": c.precision(), "recall": c.recall(),
            "mean_ms": {"preprocess": s.mean_ms[0], "inference": s.mean_ms[1], "decode": s.mean_ms[2]},
        })
    );
    Ok(true)
}
