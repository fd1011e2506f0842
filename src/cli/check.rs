//! `jetdetect check`: validates a config file and the files it names, loads the model on the CPU
//! engine as `run` will read it, and prints what `run` will use and the config resolved.

use std::path::PathBuf;

use jetdetect::config::Config;
use jetdetect::detector::Detector;
use jetdetect::engine::{EngineKind, Provider};
use jetdetect::Error;

/// `jetdetect check`.
#[derive(clap::Args)]
pub struct Args {
    /// The TOML config file.
    #[arg(long, short)]
    config: PathBuf,
    /// Print nothing when the config is valid (for ExecStartPre=).
    #[arg(long, short)]
    quiet: bool,
}

/// `Ok(true)` when the config, the files it names and the model are usable.
pub fn run(args: Args) -> Result<bool, Error> {
    let c = Config::load_for_run(&args.config, |_| Ok::<(), std::convert::Infallible>(()))?;
    let detector = jetdetect::daemon::check(&on_the_cpu(&c))?;
    if !args.quiet {
        print!(
            "# {}: OK\n{}{}{}",
            args.config.display(),
            model_summary(&detector),
            outputs_summary(&c),
            c.to_toml()
        );
    }
    Ok(true)
}

/// The config with the model loaded as `run` loads it, but on the CPU: the same engine kind
/// (ONNX Runtime with its CPU provider alone, so no TensorRT engine is built and no GPU is
/// needed) and preprocessing on the CPU. What the model is (input, layout, classes) does not
/// depend on the provider.
fn on_the_cpu(config: &Config) -> Config {
    let mut c = config.clone();
    if c.engine.kind != EngineKind::Tract {
        c.engine.providers = vec![Provider::Cpu];
    }
    c.preprocess.device = jetdetect::preprocess::Device::Cpu;
    c
}

/// What the robot outputs will send, as comment lines, with the settings that work but
/// probably not as meant.
fn outputs_summary(c: &Config) -> String {
    let Some(m) = &c.output.mavlink else { return String::new() };
    let mut out = format!("# MAVLink: {}\n", m.describe());
    for note in m.notes() {
        out.push_str(&format!("# warning: [output.mavlink] {note}\n"));
    }
    out
}

/// What `run` will use of the model, as comment lines.
fn model_summary(d: &Detector) -> String {
    let e = d.engine();
    let (w, h) = e.input_size();
    let batch = match (e.dynamic_batch(), e.max_batch()) {
        (true, n) => format!("dynamic, up to {n} frames a run"),
        (false, 1) => "1".to_string(),
        (false, n) => format!("fixed at {n} (frames of several cameras share a run)"),
    };
    let names = d.names();
    let listed: Vec<String> = (0..names.len().min(12)).map(|i| names.name(i).into_owned()).collect();
    let more = if names.len() > 12 { format!(", ... ({} in all)", names.len()) } else { String::new() };
    let classes = match names.len() {
        0 => "not known (no names in the model or the config): class ids as the model gives them".into(),
        n => format!("{n} from {}: {}{more}", names.origin, listed.join(", ")),
    };
    let decode = d.decoder_summary();
    format!(
        "# model: {} (loaded on the CPU to check it)\n#   input: {w}x{h}, batch {batch}\n#   layout: {} ({})\n\
         #   classes: {classes}\n#   decoding: {decode}\n",
        e.describe(),
        d.layout(),
        d.layout_why(),
    )
}
