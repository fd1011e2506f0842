//! `jetdetect clocks show|apply|restore`: the `[power]` profile by hand, and as the service's
//! `ExecStartPre=+`/`ExecStopPost=+` steps. Applying goes through [`power::engage`], the
//! sequence the daemon runs too.

use std::path::PathBuf;

use jetdetect::config::Config;
use jetdetect::{power, Error};

/// `clocks show`, `clocks apply`, `clocks restore`.
#[derive(clap::Subcommand)]
pub enum Action {
    /// Board, frequencies, governors, temperatures, rail power, and whether clocks are pinned.
    Show(ClockArgs),
    /// Apply a profile (the originals are saved first; `clocks restore` puts them back).
    Apply(ApplyArgs),
    /// Put back the values saved by `apply` or by a daemon that did not stop cleanly.
    Restore(ClockArgs),
}

/// What every `clocks` action takes: where the profile comes from and which board.
#[derive(clap::Args)]
pub struct ClockArgs {
    /// Config file whose [power] section to use.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Profile: dynamic, max or locked (overrides [power] profile).
    #[arg(long)]
    profile: Option<power::Profile>,
    /// Directory standing for / (a fixture tree, or a mounted image).
    #[arg(long)]
    root: Option<PathBuf>,
    /// State file (overrides [power] state_file).
    #[arg(long)]
    state_file: Option<PathBuf>,
}

/// `clocks apply`.
#[derive(clap::Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    clocks: ClockArgs,
    /// As the service's ExecStartPre (systemd/jetdetect.service): what the daemon would only warn
    /// of does not fail the start. A refused write fails it only with [power] on_failure = "exit";
    /// settings that did not take and a board that is not a Jetson are warnings.
    #[arg(long)]
    service: bool,
}

/// Shows, applies or restores; `Ok(false)` when a setting did not take (not as the service's step).
pub fn run(action: Action) -> Result<bool, Error> {
    use jetdetect::power::{nvpmodel::ModeContext, telemetry::Telemetry, Board, Discovered, StateFile};
    let (Action::Show(args) | Action::Apply(ApplyArgs { clocks: args, .. }) | Action::Restore(args)) =
        &action;
    let mut cfg = match &args.config {
        Some(p) => Config::load(p)?.power,
        None => power::PowerConfig::default(),
    };
    if let Some(p) = args.profile {
        cfg.profile = p;
    }
    if let Some(r) = &args.root {
        cfg.root = r.clone();
        // A tree keeps its own state: never the host's state directory.
        if args.state_file.is_none() {
            cfg.state_file = r.join("var/lib/jetdetect/clocks.state");
        }
    }
    if let Some(s) = &args.state_file {
        cfg.state_file = s.clone();
    }
    let perr = Error::Clocks;
    if !cfg.root.is_dir() {
        return Err(Error::Command(format!(
            "--root {}: not a directory (it stands for /)",
            cfg.root.display()
        )));
    }
    let board = Board::detect(&cfg.root);
    let disc = Discovered::scan(&cfg.root);
    let state = StateFile::new(&cfg.state_file);
    match action {
        Action::Show(_) => {
            let t = Telemetry::sample(&disc);
            println!("board: {board}");
            let modes = ModeContext::read(&cfg.root);
            match &modes.current {
                Some(m) => println!(
                    "nvpmodel: mode {} ({} modes: {})",
                    m.label(),
                    modes.modes.len(),
                    modes.modes.iter().map(|m| m.label()).collect::<Vec<_>>().join(", ")
                ),
                None if modes.modes.is_empty() => println!("nvpmodel: not installed"),
                None => println!("nvpmodel: current mode unknown (nvpmodel -q did not answer)"),
            }
            if let Some(g) = &disc.gpu {
                let [cur, lo, hi] = t.gpu_mhz.unwrap_or_default();
                println!(
                    "gpu: {cur:.1} MHz (min {lo:.1}, max {hi:.1} = the mode's ceiling), governor {}, load {}, node {}",
                    t.gpu_governor.as_deref().unwrap_or("?"),
                    t.gpu_load_pct.map(|l| format!("{l:.1}%")).unwrap_or_else(|| "?".into()),
                    g.dir.display()
                );
            } else if let Some(r) = &disc.gpu_unregistered {
                println!(
                    "gpu: rail-gated, no devfreq node until powered ({}; `clocks apply` powers it up once)",
                    r.display()
                );
            } else {
                println!("gpu: no devfreq node found");
            }
            let cpus: Vec<String> = t.cpu_mhz.iter().map(|f| format!("{f:.0}")).collect();
            let ceilings: Vec<String> = disc
                .cpus
                .iter()
                .map(|c| {
                    power::read_value(&c.cpufreq.join("scaling_max_freq"))
                        .ok()
                        .and_then(|v| v.parse::<f64>().ok())
                        .map(|k| format!("{:.0}", k / 1e3))
                        .unwrap_or_else(|| "?".into())
                })
                .collect();
            println!(
                "cpu: {} cores online, MHz [{}], ceilings MHz [{}], governor {}",
                disc.cpus.len(),
                cpus.join(" "),
                ceilings.join(" "),
                t.cpu_governor.as_deref().unwrap_or("?")
            );
            if let Some(e) = t.emc_mhz {
                let cap = match &disc.emc {
                    Some(power::discover::Emc::Bpmp { cap: Some(c), .. }) => power::read_value(c)
                        .ok()
                        .and_then(|v| v.parse::<f64>().ok())
                        .filter(|&v| v > 0.0)
                        .map(|v| format!(" (ceiling {:.0} MHz, emc_iso_cap)", v / 1e6)),
                    _ => None,
                };
                println!("emc: {e:.0} MHz{}", cap.unwrap_or_default());
            }
            if let Some(f) = &disc.fan {
                let driver = match (&f.service, &f.temp_control) {
                    (Some(s), _) => format!(", driven by {s}.service while it runs"),
                    (None, Some(_)) => ", driven by the kernel while temp_control is 1".into(),
                    _ => String::new(),
                };
                let pwm = power::read_value(&f.pwm).unwrap_or_else(|_| "?".into());
                println!("fan: pwm {pwm}{driver}");
            }
            let temps: Vec<String> = t.temp_c.iter().map(|(k, v)| format!("{k} {v:.1}C")).collect();
            println!(
                "temperatures: {}",
                if temps.is_empty() { "none found".into() } else { temps.join(", ") }
            );
            let rails: Vec<String> = t.power_mw.iter().map(|(k, v)| format!("{k} {v:.0} mW")).collect();
            println!(
                "power: {}",
                if rails.is_empty() { "no INA3221 rails found".into() } else { rails.join(", ") }
            );
            println!(
                "clocks pinned: {}{}",
                if t.pinned { "yes" } else { "no" },
                if t.throttling {
                    format!("; THROTTLING: {}", t.throttle_reasons.join("; "))
                } else {
                    String::new()
                }
            );
            println!(
                "state file: {} ({})",
                state.path.display(),
                if state.exists() {
                    "clocks changed by jetdetect"
                } else {
                    "none: clocks as the system set them"
                }
            );
            Ok(true)
        }
        Action::Apply(ApplyArgs { service, .. }) => {
            if !board.is_jetson() && args.root.is_none() {
                if service {
                    // The daemon would run with the profile ignored; so does the service.
                    eprintln!("jetdetect: [power] profile '{}' ignored: {board}", cfg.profile);
                    return Ok(true);
                }
                return Err(Error::Command(format!(
                    "{board}; refusing to write clocks (give --root DIR to work on a tree)"
                )));
            }
            let done = match power::engage(&cfg, &state) {
                Ok(done) => done,
                Err(power::Failure::System(e)) if service && cfg.on_failure == power::OnFailure::Continue => {
                    eprintln!(
                        "jetdetect: [power] profile '{}' not applied: {e}; the service runs with the clocks \
                         as they are ([power] on_failure = \"exit\" makes this stop it)",
                        cfg.profile
                    );
                    return Ok(true);
                }
                Err(f) => return Err(perr(f.error().clone())),
            };
            match &done.stale {
                Some(Ok(n)) => eprintln!("restored {n} values left by an earlier run first"),
                Some(Err(e)) => eprintln!("jetdetect: {e}"),
                None => {}
            }
            if let Some(m) = &done.mode {
                println!("nvpmodel = {}", m.label());
            }
            if let Some(r) = &done.applied.reboot_needed {
                eprintln!("jetdetect: {r}");
            }
            if done.plan.is_empty() && done.mode.is_none() {
                println!("profile '{}': nothing to change", cfg.profile);
                return Ok(true);
            }
            for unit in &done.applied.stopped {
                println!("stopped {unit}.service (started again by `clocks restore`)");
            }
            for w in &done.plan.writes {
                println!("{} = {}", power::profile::shown(&cfg.root, &w.path), w.value);
            }
            for (p, want, got) in &done.applied.mismatches {
                eprintln!(
                    "jetdetect: {} did not take: wanted {want}, reads {got}",
                    power::profile::shown(&cfg.root, p)
                );
            }
            println!(
                "profile '{}' applied ({} writes); originals saved in {}",
                cfg.profile,
                done.applied.written,
                state.path.display()
            );
            // The daemon warns of settings that did not take and runs on; as its ExecStartPre, so does this.
            Ok(service || done.applied.mismatches.is_empty())
        }
        Action::Restore(_) => {
            if !state.exists() {
                println!("nothing to restore: {} does not exist", state.path.display());
                return Ok(true);
            }
            let n = state.restore(&cfg.root, &disc).map_err(perr)?;
            println!("restored {n} values from {}", state.path.display());
            Ok(true)
        }
    }
}
