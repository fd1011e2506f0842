//! `jetdetect bench`: latency per stage and end to end ([`measure`] times, this prints).

mod measure;

use std::path::PathBuf;

use jetdetect::config::Config;
use jetdetect::Error;

use super::ModelArgs;
use measure::{BenchOptions, Mode};

/// `jetdetect bench`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// pipeline (the daemon end to end, on a private socket), detector (the chain, frame after
    /// frame, nothing dropped) or engine (the engine alone on one input: the limit).
    #[arg(long, default_value = "pipeline", value_parser = measure::Mode::parse)]
    mode: measure::Mode,
    /// Source (default: the config's; without --config, synthetic 1280x720 YUYV at 30 fps
    /// for the pipeline and unpaced for the other modes).
    #[arg(long)]
    source: Option<String>,
    /// Frames to time.
    #[arg(long, default_value_t = 300)]
    frames: u64,
    /// Warm-up frames before timing (detector and engine modes).
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Clients reading the socket during a pipeline run.
    #[arg(long, default_value_t = 0)]
    clients: usize,
    /// Clients that connect and never read during a pipeline run: what a hung consumer costs the others.
    #[arg(long, default_value_t = 0)]
    stalled: usize,
    /// Also run this config (same mode, source and frames), for comparison; repeatable.
    #[arg(long, value_name = "CONFIG")]
    against: Vec<PathBuf>,
    /// Draw the latency distributions of all runs into this SVG file.
    #[arg(long, value_name = "OUT.svg")]
    plot: Option<PathBuf>,
    /// Print each report as one JSON line.
    #[arg(long)]
    json: bool,
}

/// Runs the config (and each `--against` config) and prints a table or JSON lines per run.
pub fn run(args: Args) -> Result<bool, Error> {
    let Args { model, mode, source, frames, warmup, clients, stalled, against, plot, json } = args;
    let options = BenchOptions { mode, source, frames, warmup, clients, stalled, label: String::new() };
    let (model, against, plot) = (&model, &against, plot.as_deref());
    let mode = options.mode;
    let source = options.source.clone().or_else(|| {
        model.config.is_none().then(|| {
            let fps = if mode == Mode::Pipeline { 30 } else { 0 };
            format!("synthetic://?width=1280&height=720&fps={fps}&format=yuyv&seed=1")
        })
    });
    let label = |p: Option<&PathBuf>| {
        p.and_then(|p| p.file_stem())
            .map_or_else(|| "command line".to_string(), |s| s.to_string_lossy().into())
    };
    // A plot that cannot be written is an error now, not after the runs.
    if let Some(dir) = plot.and_then(|p| p.parent()).filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
        return Err(Error::Command(format!(
            "--plot {}: the folder {} does not exist: create it or write the plot elsewhere",
            plot.unwrap_or(dir).display(),
            dir.display()
        )));
    }
    let mut runs = vec![(label(model.config.as_ref()), model.resolve()?)];
    for path in against {
        runs.push((label(Some(path)), Config::load(path)?));
    }
    let mut reports = Vec::new();
    for (label, config) in runs {
        let options = BenchOptions { source: source.clone(), label, ..options.clone() };
        let report = measure::run(&config, &options)?;
        if json {
            let json = serde_json::to_string(&report)
                .map_err(|e| Error::io("cannot write the report as JSON", e.into()))?;
            println!("{json}");
        } else {
            println!("{}", measure::format_table(&report));
        }
        reports.push(report);
    }
    if reports.len() > 1 && !json {
        println!(
            "{:<24} {:>10} {:>10} {:>10} {:>8}   (ms, {})",
            "run",
            "p50",
            "p99",
            "max",
            "FPS",
            mode.name()
        );
        for r in &reports {
            let p = r.stages.last().map(|(_, p)| *p).unwrap_or_default();
            println!("{:<24} {:>10.3} {:>10.3} {:>10.3} {:>8.1}", r.label, p.p50, p.p99, p.max, r.fps);
        }
    }
    if let Some(path) = plot {
        measure::plot(&reports, path)?;
        eprintln!("jetdetect: plot written to {}", path.display());
    }
    Ok(true)
}
