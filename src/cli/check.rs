//! `jetdetect check`: validates a config file (and the files it names) and prints it resolved.

use std::path::PathBuf;

use jetdetect::config::Config;
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

/// `Ok(true)` when the config and the files it names are usable.
pub fn run(args: Args) -> Result<bool, Error> {
    let c = Config::load(&args.config)?;
    let text = std::fs::read_to_string(&args.config).unwrap_or_default();
    c.check_files(&args.config, &text)?;
    if !args.quiet {
        print!("# {}: OK\n{}", args.config.display(), c.to_toml());
    }
    Ok(true)
}
