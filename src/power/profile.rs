//! `[power]` profiles, turned into the list of sysfs writes for this board.
//!
//! * `dynamic` — touch nothing (the default).
//! * `max` — like `jetson_clocks`: every CPU's minimum at its maximum, cpuidle
//!   states off, GPU minimum at its maximum and railgating off, EMC locked at
//!   its highest allowed rate.
//! * `locked` — min = max at a chosen GPU frequency (`gpu_mhz`, default the
//!   maximum) and CPU frequency (`cpu_min_mhz`, default the maximum), cpuidle
//!   off, EMC locked: the steadiest latency.
//!
//! Custom fields apply on top of any profile.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::discover::{Discovered, Emc};
use super::{read_value, PowerError};

/// `[power]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PowerConfig {
    /// `dynamic`, `max` or `locked`.
    pub profile: String,
    /// GPU frequency in MHz, snapped to the nearest available one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_mhz: Option<u32>,
    /// CPU minimum frequency in MHz (`locked`: also the maximum).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_min_mhz: Option<u32>,
    /// CPU governor for every core, e.g. `performance`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_governor: Option<String>,
    /// Disable every cpuidle state (less wake-up jitter, more power).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpuidle_off: Option<bool>,
    /// Lock the memory clock at its highest allowed rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emc_lock: Option<bool>,
    /// Keep the GPU powered between frames (no railgating).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_railgate_off: Option<bool>,
    /// Fan PWM, 0..255.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fan_pwm: Option<u8>,
    /// nvpmodel power mode, by name (`MAXN`, `15W`) or id, set before the clocks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvpmodel: Option<String>,
    /// The directory standing for `/` (tests use fixture trees).
    pub root: PathBuf,
    /// Where the original values are kept while a profile is applied.
    pub state_file: PathBuf,
    /// Telemetry sampling period while the daemon runs, in ms (100..=10000).
    pub telemetry_ms: u64,
    /// What the daemon does when the profile cannot be applied (a clock file refuses
    /// the write, the state file cannot be saved): `continue` with the clocks as they
    /// are (logged, and telemetry shows them unpinned), or `exit` with an error.
    pub on_failure: String,
}

/// `[power] on_failure` values.
pub const ON_FAILURE: [&str; 2] = ["continue", "exit"];

impl Default for PowerConfig {
    fn default() -> Self {
        PowerConfig {
            profile: "dynamic".into(),
            gpu_mhz: None,
            cpu_min_mhz: None,
            cpu_governor: None,
            cpuidle_off: None,
            emc_lock: None,
            gpu_railgate_off: None,
            fan_pwm: None,
            nvpmodel: None,
            root: PathBuf::from("/"),
            state_file: PathBuf::from("/var/lib/jetdetect/clocks.state"),
            telemetry_ms: 1000,
            on_failure: "continue".into(),
        }
    }
}

/// Profile names.
pub const PROFILES: [&str; 3] = ["dynamic", "max", "locked"];

/// One sysfs write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// The file.
    pub path: PathBuf,
    /// The value.
    pub value: String,
}

fn w(path: PathBuf, value: impl ToString) -> Write {
    Write { path, value: value.to_string() }
}

/// The available frequency (Hz) nearest to `mhz`, or an error listing them.
pub fn snap_gpu(available: &[u64], mhz: u32, what: &str) -> Result<u64, PowerError> {
    let list = || available.iter().map(|f| format!("{:.1}", *f as f64 / 1e6)).collect::<Vec<_>>().join(", ");
    let (Some(&lo), Some(&hi)) = (available.first(), available.last()) else {
        return Err(PowerError(format!("{what}: the GPU lists no available_frequencies")));
    };
    let hz = mhz as u64 * 1_000_000;
    // Accept anything within half a step of the ends; beyond that it is impossible.
    let slack = if available.len() > 1 { (hi - lo) / (available.len() as u64 - 1) / 2 } else { 1_000_000 };
    if hz + slack < lo || hz > hi + slack {
        return Err(PowerError(format!(
            "{what} = {mhz} MHz is not possible on this GPU: available MHz are {}",
            list()
        )));
    }
    Ok(*available.iter().min_by_key(|f| f.abs_diff(hz)).expect("not empty"))
}

fn snap_cpu(available: &[u64], max_khz: u64, mhz: u32) -> u64 {
    let khz = mhz as u64 * 1000;
    if available.is_empty() {
        return khz.min(max_khz);
    }
    *available.iter().min_by_key(|f| f.abs_diff(khz)).expect("not empty")
}

/// The writes that `config` means on this board, in order.
pub fn plan(config: &PowerConfig, disc: &Discovered) -> Result<Vec<Write>, PowerError> {
    if !PROFILES.contains(&config.profile.as_str()) {
        return Err(PowerError(format!(
            "[power] profile = '{}': use one of {}",
            config.profile,
            PROFILES.join(", ")
        )));
    }
    let full = config.profile != "dynamic";
    let mut out = Vec::new();

    // GPU: lock the floor (max/locked) or at gpu_mhz.
    let gpu_target = match (&disc.gpu, config.gpu_mhz, full) {
        (Some(g), Some(mhz), _) => Some(snap_gpu(&g.available, mhz, "[power] gpu_mhz")?),
        (Some(g), None, true) => g
            .available
            .last()
            .copied()
            .or(read_value(&g.dir.join("max_freq")).ok().and_then(|v| v.parse().ok())),
        (None, Some(_), _) => {
            return Err(PowerError("[power] gpu_mhz: no GPU devfreq node found on this board".into()))
        }
        _ => None,
    };
    if let (Some(g), Some(f)) = (&disc.gpu, gpu_target) {
        let top = g.available.last().copied().unwrap_or(f);
        // Widen the ceiling first so the floor can move, then pin both.
        out.push(w(g.dir.join("max_freq"), top));
        out.push(w(g.dir.join("min_freq"), f));
        if config.profile == "locked" || config.gpu_mhz.is_some() {
            out.push(w(g.dir.join("max_freq"), f));
        }
    }
    if let Some(g) = &disc.gpu {
        if config.gpu_railgate_off.unwrap_or(full) {
            if let Some(r) = &g.railgate {
                out.push(w(r.clone(), 0));
            }
        }
    }

    // CPU.
    for c in &disc.cpus {
        if let Some(gov) = &config.cpu_governor {
            out.push(w(c.cpufreq.join("scaling_governor"), gov));
        }
        let floor = match (config.cpu_min_mhz, full) {
            (Some(mhz), _) => Some(snap_cpu(&c.available, c.max_khz, mhz)),
            (None, true) => Some(c.max_khz).filter(|&k| k > 0),
            _ => None,
        };
        if let Some(khz) = floor {
            out.push(w(c.cpufreq.join("scaling_max_freq"), c.max_khz.max(khz)));
            out.push(w(c.cpufreq.join("scaling_min_freq"), khz));
            if config.profile == "locked" {
                out.push(w(c.cpufreq.join("scaling_max_freq"), khz));
            }
        }
        if config.cpuidle_off.unwrap_or(full) {
            out.extend(c.idle_states.iter().map(|s| w(s.clone(), 1)));
        }
    }

    // EMC.
    if config.emc_lock.unwrap_or(full) {
        match &disc.emc {
            Some(Emc::Bpmp { dir, cap }) => {
                let max: u64 = read_value(&dir.join("max_rate"))?.parse().unwrap_or(0);
                let cap: u64 = cap
                    .as_deref()
                    .and_then(|c| read_value(c).ok()?.parse().ok())
                    .filter(|&c| c > 0)
                    .unwrap_or(max);
                out.push(w(dir.join("mrq_rate_locked"), 1));
                out.push(w(dir.join("rate"), max.min(cap)));
            }
            Some(Emc::T210 { dir, max_rate }) => {
                out.push(w(dir.join("clk_update_rate"), read_value(max_rate)?));
                out.push(w(dir.join("clk_state"), 1));
            }
            Some(Emc::Devfreq { dir }) => {
                out.push(w(dir.join("min_freq"), read_value(&dir.join("max_freq"))?))
            }
            None if config.emc_lock == Some(true) => {
                return Err(PowerError(
                    "[power] emc_lock: no EMC clock controls found (debugfs not mounted?)".into(),
                ))
            }
            None => {}
        }
    }

    if let Some(pwm) = config.fan_pwm {
        match &disc.fan_pwm {
            Some(p) => out.push(w(p.clone(), pwm)),
            None => return Err(PowerError("[power] fan_pwm: no fan PWM file found on this board".into())),
        }
    }
    Ok(out)
}

/// Checks `[power]` values that do not need the board.
pub fn validate(config: &PowerConfig) -> Result<(), (&'static str, String)> {
    if !PROFILES.contains(&config.profile.as_str()) {
        return Err((
            "profile",
            format!("'{}' is not a profile: use {}", config.profile, PROFILES.join(", ")),
        ));
    }
    if !(100..=10_000).contains(&config.telemetry_ms) {
        return Err((
            "telemetry_ms",
            format!("{} is out of range: allowed 100 to 10000", config.telemetry_ms),
        ));
    }
    if let Some(g) = &config.cpu_governor {
        if g.is_empty() || !g.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err((
                "cpu_governor",
                format!("'{g}' is not a governor name (e.g. performance, schedutil)"),
            ));
        }
    }
    if !ON_FAILURE.contains(&config.on_failure.as_str()) {
        return Err((
            "on_failure",
            format!("'{}' is not allowed: use {}", config.on_failure, ON_FAILURE.join(" or ")),
        ));
    }
    if config.state_file.as_os_str().is_empty() {
        return Err(("state_file", "must not be empty".into()));
    }
    Ok(())
}

/// `path` relative to `root`, for messages.
pub fn shown(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) if root != Path::new("/") => format!("/{}", rel.display()),
        _ => path.display().to_string(),
    }
}
