//! `[power]` profiles, turned into the list of sysfs writes for this board.
//!
//! * `dynamic` — touch nothing (the default).
//! * `max` — like `jetson_clocks`: every CPU's minimum at its current maximum
//!   (the nvpmodel mode's ceiling), cpuidle states off, GPU minimum at its
//!   current maximum and railgating off, EMC locked at its highest allowed rate.
//! * `locked` — min = max at a chosen GPU frequency (`gpu_mhz`, default the
//!   mode's ceiling) and CPU frequency (`cpu_min_mhz`, default the ceiling),
//!   cpuidle off, EMC locked: the steadiest latency.
//!
//! Custom fields apply on top of any profile. No profile raises a ceiling: the
//! nvpmodel mode is the power budget, and only `[power] nvpmodel` changes it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::discover::{Discovered, Emc};
use super::nvpmodel::{Mode, ModeContext};
use super::{read_value, PowerError};

named_enum! {
    /// `[power] profile` and `--profile` (the module's doc says what each does).
    pub enum Profile {
        /// Touch nothing (the default).
        Dynamic = "dynamic",
        /// jetson_clocks' settings: every floor at the mode's ceiling.
        Max = "max",
        /// min = max at chosen frequencies: the steadiest latency.
        Locked = "locked",
    }
}

impl std::str::FromStr for Profile {
    type Err = crate::named::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| {
            crate::named::UnknownName::new("[power] profile: ", s, " is not a profile", Self::names(", "))
        })
    }
}

named_enum! {
    /// `[power] on_failure`: what the daemon does when the profile cannot be applied.
    pub enum OnFailure {
        /// Run with the clocks as they are (logged; telemetry shows them unpinned).
        Continue = "continue",
        /// Stop with an error.
        Exit = "exit",
    }
}

impl std::str::FromStr for OnFailure {
    type Err = crate::named::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| {
            crate::named::UnknownName::new("[power] on_failure: ", s, " is not allowed", Self::names(" or "))
        })
    }
}

/// `[power]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PowerConfig {
    /// `dynamic`, `max` or `locked`.
    pub profile: Profile,
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
    pub on_failure: OnFailure,
}

impl Default for PowerConfig {
    fn default() -> Self {
        PowerConfig {
            profile: Profile::Dynamic,
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
            on_failure: OnFailure::Continue,
        }
    }
}

/// Whether a written value is a setting or a reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A setting that reads back as written until changed (frequency floors and ceilings, governors,
    /// lock flags, idle states, railgate, fan PWM once its controller is paused): its original is
    /// saved and restored, and the write is checked by reading it back.
    Static,
    /// A value the hardware moves on its own (the EMC `rate`, which follows the load once unlocked):
    /// written, but neither saved, restored nor required to read back. jetson_clocks likewise saves
    /// only the EMC lock state.
    Dynamic,
}

/// One sysfs write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// The file.
    pub path: PathBuf,
    /// The value.
    pub value: String,
    /// Setting or reading.
    pub kind: Kind,
}

fn w(path: PathBuf, value: impl ToString) -> Write {
    Write { path, value: value.to_string(), kind: Kind::Static }
}

/// What a profile does on this board, in order: pause services, then write files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Services to stop first (and start again on restore, if they ran).
    pub stop_services: Vec<String>,
    /// The writes, in order.
    pub writes: Vec<Write>,
}

impl Plan {
    /// True when the profile changes nothing.
    pub fn is_empty(&self) -> bool {
        self.stop_services.is_empty() && self.writes.is_empty()
    }
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

fn read_u64(path: &Path) -> Option<u64> {
    read_value(path).ok()?.parse().ok()
}

/// The error for a clock above the current mode's ceiling: names the ceiling, the mode, and the
/// modes whose ceiling would allow it.
fn above_ceiling(
    key: &str,
    wanted_mhz: f64,
    what: &str,
    ceiling_mhz: f64,
    allowing: Vec<&Mode>,
    modes: &ModeContext,
) -> PowerError {
    let way = match allowing.as_slice() {
        [] if modes.modes.is_empty() => "no nvpmodel modes are known on this board".to_string(),
        [] => "no nvpmodel mode on this board allows it".to_string(),
        list => format!(
            "set [power] nvpmodel = \"{}\" (a mode that allows it: {})",
            list[0].name,
            list.iter().map(|m| m.label()).collect::<Vec<_>>().join(", ")
        ),
    };
    PowerError(format!(
        "[power] {key} = {wanted_mhz:.1} MHz is above the {what} ceiling of {}: {ceiling_mhz:.1} MHz. \
         A profile pins clocks inside the power mode and never raises a ceiling (that would overrun the \
         mode's power budget): lower {key}, or {way}",
        modes.current_label()
    ))
}

/// The writes that `config` means on this board, in order, inside the current nvpmodel mode: every
/// floor goes at most to the ceiling the mode set (GPU devfreq `max_freq`, each CPU's
/// `scaling_max_freq`, the EMC's `emc_iso_cap`), and no ceiling is ever raised, as jetson_clocks does.
/// `modes` only words the errors.
pub fn plan(config: &PowerConfig, disc: &Discovered, modes: &ModeContext) -> Result<Plan, PowerError> {
    let full = config.profile != Profile::Dynamic;
    let locked = config.profile == Profile::Locked;
    let mut out = Plan::default();

    // GPU: the floor at the mode's ceiling (max), or min = max at gpu_mhz (locked, or gpu_mhz given).
    match (&disc.gpu, config.gpu_mhz) {
        (Some(g), wanted) if wanted.is_some() || full => {
            let top = g.available.last().copied().unwrap_or(0);
            let ceiling =
                read_u64(&g.dir.join("max_freq")).or(g.available.last().copied()).ok_or_else(|| {
                    PowerError(format!("{}: no max_freq and no available_frequencies", g.dir.display()))
                })?;
            let target = match wanted {
                Some(mhz) => {
                    let f = snap_gpu(&g.available, mhz, "[power] gpu_mhz")?;
                    if f > ceiling {
                        let allowing = modes.allowing(f, top.max(f), |m| m.gpu_max);
                        return Err(above_ceiling(
                            "gpu_mhz",
                            f as f64 / 1e6,
                            "GPU",
                            ceiling as f64 / 1e6,
                            allowing,
                            modes,
                        ));
                    }
                    f
                }
                None => ceiling,
            };
            // The floor first (it is at or below the ceiling), then the ceiling down to it.
            out.writes.push(w(g.dir.join("min_freq"), target));
            if (locked || wanted.is_some()) && target != ceiling {
                out.writes.push(w(g.dir.join("max_freq"), target));
            }
        }
        (None, Some(_)) => {
            return Err(PowerError("[power] gpu_mhz: no GPU devfreq node found on this board".into()))
        }
        _ => {}
    }
    if let Some(g) = &disc.gpu {
        if config.gpu_railgate_off.unwrap_or(full) {
            if let Some(r) = &g.railgate {
                out.writes.push(w(r.clone(), 0));
            }
        }
    }

    // CPU.
    for c in &disc.cpus {
        if let Some(gov) = &config.cpu_governor {
            out.writes.push(w(c.cpufreq.join("scaling_governor"), gov));
        }
        if config.cpu_min_mhz.is_some() || full {
            let ceiling = read_u64(&c.cpufreq.join("scaling_max_freq")).unwrap_or(c.max_khz);
            let target = match config.cpu_min_mhz {
                Some(mhz) => {
                    let khz = snap_cpu(&c.available, c.max_khz, mhz);
                    if khz > ceiling {
                        let allowing = modes.allowing(khz, c.max_khz.max(khz), |m| m.cpu_ceiling(c.index));
                        return Err(above_ceiling(
                            "cpu_min_mhz",
                            khz as f64 / 1e3,
                            &format!("cpu{}", c.index),
                            ceiling as f64 / 1e3,
                            allowing,
                            modes,
                        ));
                    }
                    khz
                }
                None => ceiling,
            };
            if target > 0 {
                out.writes.push(w(c.cpufreq.join("scaling_min_freq"), target));
                if locked && target != ceiling {
                    out.writes.push(w(c.cpufreq.join("scaling_max_freq"), target));
                }
            }
        }
        if config.cpuidle_off.unwrap_or(full) {
            out.writes.extend(c.idle_states.iter().map(|s| w(s.clone(), 1)));
        }
    }

    // EMC: locked at the highest rate the mode allows. Only the lock is a setting; the rate is a reading.
    if config.emc_lock.unwrap_or(full) {
        match &disc.emc {
            Some(Emc::Bpmp { dir, cap }) => {
                let max: u64 = read_value(&dir.join("max_rate"))?.parse().unwrap_or(0);
                let cap = cap.as_deref().and_then(read_u64).filter(|&c| c > 0 && c < max).unwrap_or(max);
                out.writes.push(w(dir.join("mrq_rate_locked"), 1));
                out.writes.push(Write {
                    path: dir.join("rate"),
                    value: cap.to_string(),
                    kind: Kind::Dynamic,
                });
            }
            Some(Emc::T210 { dir, max_rate }) => {
                // clk_update_rate is the override's own setting (it reads back as written, and is inert
                // while clk_state is 0); the live rate is clk_rate, never written.
                out.writes.push(w(dir.join("clk_update_rate"), read_value(max_rate)?));
                out.writes.push(w(dir.join("clk_state"), 1));
            }
            Some(Emc::Devfreq { dir }) => {
                out.writes.push(w(dir.join("min_freq"), read_value(&dir.join("max_freq"))?))
            }
            None if config.emc_lock == Some(true) => {
                return Err(PowerError(
                    "[power] emc_lock: no EMC clock controls found (debugfs not mounted?)".into(),
                ))
            }
            None => {}
        }
    }

    // Fan: pause whatever else drives the PWM, then set it.
    if let Some(pwm) = config.fan_pwm {
        let Some(fan) = &disc.fan else {
            return Err(PowerError("[power] fan_pwm: no fan PWM file found on this board".into()));
        };
        out.stop_services.extend(fan.service.clone());
        if let Some(t) = &fan.temp_control {
            out.writes.push(w(t.clone(), 0));
        }
        out.writes.push(w(fan.pwm.clone(), pwm));
    }
    Ok(out)
}

/// Checks `[power]` values that do not need the board.
pub fn validate(config: &PowerConfig) -> Result<(), (&'static str, String)> {
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
