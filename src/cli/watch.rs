//! `jetdetect watch`: prints what a running daemon publishes ([`client::watch`]).

use std::path::PathBuf;

use jetdetect::config::Config;
use jetdetect::output::DEFAULT_SOCKET;
use jetdetect::{client, Error};

/// `jetdetect watch`.
#[derive(clap::Args)]
pub struct Args {
    /// Socket path (default: [output] socket of --config, else /run/jetdetect/detections.sock).
    #[arg(long, short)]
    socket: Option<PathBuf>,
    /// Config file to take the socket path from.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Print the raw JSON lines instead of a human summary.
    #[arg(long)]
    json: bool,
    /// Exit after this many detections messages.
    #[arg(long)]
    count: Option<u64>,
}

/// Connects to the socket named by the flags and prints until `--count` or the daemon's `bye`.
pub fn run(args: Args) -> Result<bool, Error> {
    let path = match (args.socket, args.config) {
        (Some(s), _) => s,
        (None, Some(c)) => Config::load(&c)?.output.socket,
        (None, None) => PathBuf::from(DEFAULT_SOCKET),
    };
    let format = if args.json { client::Format::Json } else { client::Format::Human };
    client::watch(&path, format, args.count, &mut std::io::stdout().lock())
}
