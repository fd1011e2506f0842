//! `jetdetect run`: the daemon. Loads the config, installs the signal handlers and hands
//! over to [`daemon::run`] until SIGTERM or SIGINT.

use std::path::PathBuf;

use jetdetect::config::Config;
use jetdetect::daemon::{self, RunOptions};
use jetdetect::shutdown::Shutdown;
use jetdetect::{output, power, Error};

/// `jetdetect run`.
#[derive(clap::Args)]
pub struct Args {
    /// The TOML config file.
    #[arg(long, short)]
    config: PathBuf,
    /// Use this source instead of [source] uri.
    #[arg(long)]
    source: Option<String>,
    /// Use this socket path instead of [output] socket.
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Also print each frame's detections on stdout, as `watch` does.
    #[arg(long)]
    echo: bool,
    /// Who applies and restores the [power] profile: "self" (this process, at start and on
    /// exit), or "service" (`clocks apply --service` before it and `clocks restore` after it,
    /// as systemd/jetdetect.service runs them outside the sandbox; this process only reads).
    #[arg(long, value_enum, default_value_t = ClocksBy::Daemon)]
    clocks: ClocksBy,
}

/// `jetdetect run --clocks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ClocksBy {
    /// This process applies the profile at start and restores it on exit.
    #[value(name = "self")]
    Daemon,
    /// The service manager's steps around this process do.
    Service,
}

/// Runs the daemon until it is stopped; `Ok(true)` after a clean stop.
pub fn run(args: Args) -> Result<bool, Error> {
    let Args { config, source, socket, echo, clocks } = args;
    let cfg = Config::load_for_run(&config, |c| {
        if let Some(s) = source {
            c.source.replace_with(s);
        }
        if let Some(s) = socket {
            c.output.socket = s;
        }
        Ok::<(), std::convert::Infallible>(())
    })?;
    let shutdown = Shutdown::new();
    watch_signals(shutdown.clone())?;
    let attitude = daemon::attitude_feed(&cfg);
    let mut outputs = daemon::outputs(&cfg, attitude.as_ref());
    if echo {
        outputs.push(Box::new(output::echo::Echo::default()));
    }
    let options = RunOptions {
        outputs,
        clocks: match clocks {
            ClocksBy::Daemon => power::ClockControl::Daemon,
            ClocksBy::Service => power::ClockControl::Service,
        },
        attitude,
        ..RunOptions::default()
    };
    daemon::run(&cfg, options, shutdown)?;
    Ok(true)
}

/// SIGTERM and SIGINT stop the daemon cleanly (clients get a `bye`, clocks are
/// restored). A second one while it stops restores the clocks and exits at once.
fn watch_signals(shutdown: Shutdown) -> Result<(), Error> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
        .map_err(|e| Error::io("cannot install signal handlers", e))?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut received = 0;
            for sig in signals.forever() {
                let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
                received += 1;
                if received == 1 {
                    log::info!("{name}: stopping (send it again to exit at once)");
                    shutdown.request();
                } else {
                    log::warn!("{name} again: restoring clocks and exiting now");
                    jetdetect::power::session::restore_active();
                    std::process::exit(128 + sig);
                }
            }
        })
        .map_err(|e| Error::io("cannot start the signal thread", e))?;
    Ok(())
}
