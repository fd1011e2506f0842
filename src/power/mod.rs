//! Clocks, fan and telemetry of a Jetson: discover the board's files, apply a
//! power profile through sysfs, verify it, and always put things back.
//!
//! * [`board`]: which Jetson (SoC, module, L4T/JetPack).
//! * [`discover`]: the GPU devfreq node, CPU cpufreq/cpuidle, EMC, fan, thermal
//!   zones, INA3221 rails, found by scanning, never hard-coded.
//! * [`profile`]: `[power]` profiles (`dynamic`, `max`, `locked`, custom fields)
//!   turned into a list of writes.
//! * [`state`]: the original values, saved atomically before the first write
//!   and written back on stop, on panic, or at the next start after a crash.
//! * [`telemetry`]: frequencies, load, temperatures, rail power, throttling.
//!
//! Every path is read under a root directory standing for `/` (`--root`,
//! `[power] root`), which is how the tests run against fixture trees.

pub mod board;
pub mod discover;
pub mod nvpmodel;
pub mod profile;
pub mod session;
pub mod state;
pub mod telemetry;

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

pub use board::Board;
pub use discover::Discovered;
pub use profile::{plan, PowerConfig, Write};
pub use session::PowerSession;
pub use state::StateFile;

/// A power-control problem, worded for the user.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PowerError(pub String);

/// Reads a sysfs value, trimmed.
pub fn read_value(path: &Path) -> Result<String, PowerError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim_matches(|c: char| c.is_whitespace() || c == '\0').to_string())
        .map_err(|e| PowerError(format!("{}: cannot read: {}", path.display(), explain(&e))))
}

fn explain(e: &std::io::Error) -> String {
    match (e.kind(), e.raw_os_error()) {
        (ErrorKind::PermissionDenied, _) => format!(
            "{e}: clock control needs root (writing sysfs needs CAP_DAC_OVERRIDE, and debugfs clocks are \
             root-only): run `sudo jetdetect clocks ...` or the systemd service"
        ),
        (_, Some(libc::EROFS)) => {
            format!("{e}: the file system is read-only (a container without a writable /sys?)")
        }
        (_, Some(libc::EBUSY)) => {
            format!("{e}: the driver is busy (another tool such as jetson_clocks or nvpmodel?)")
        }
        (ErrorKind::NotFound, _) => format!("{e}: the file is missing on this board/JetPack"),
        _ => e.to_string(),
    }
}

/// Writes one value to a file the discovery found writable.
pub fn write_value(allowed: &[PathBuf], path: &Path, value: &str) -> Result<(), PowerError> {
    if !allowed.iter().any(|a| a == path) {
        return Err(PowerError(format!(
            "{}: not a discovered clock file: refusing to write it",
            path.display()
        )));
    }
    // sysfs ignores the newline; trees that stand for sysfs keep its form.
    crate::fault::sysfs_write(path)
        .map_or_else(|| std::fs::write(path, format!("{value}\n")), Err)
        .map_err(|e| PowerError(format!("{}: cannot write '{value}': {}", path.display(), explain(&e))))
}

/// True when two sysfs values mean the same (numbers compared as numbers).
pub fn same_value(a: &str, b: &str) -> bool {
    match (a.trim().parse::<i64>(), b.trim().parse::<i64>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

/// What applying a profile did.
#[derive(Debug, Default)]
pub struct Applied {
    /// Files written.
    pub written: usize,
    /// `(path, wanted, got)` for writes that did not take.
    pub mismatches: Vec<(PathBuf, String, String)>,
    /// Set when the nvpmodel switch needs a reboot to take full effect.
    pub reboot_needed: Option<String>,
}

/// The state-file key that records the original nvpmodel mode.
pub const NVPMODEL_KEY: &str = "nvpmodel";

/// Applies `writes`, saving the original values to `state` before the first
/// write, then reads every file back.
pub fn apply(
    root: &Path,
    disc: &Discovered,
    writes: &[Write],
    state: &StateFile,
) -> Result<Applied, PowerError> {
    apply_with_mode(root, disc, None, writes, state)
}

/// Like [`apply`], switching the nvpmodel mode first when `mode` is given
/// (nvpmodel resets clocks, so it goes before the clock writes; the original
/// mode is recorded and restored first too).
pub fn apply_with_mode(
    root: &Path,
    disc: &Discovered,
    mode: Option<(&nvpmodel::Nvpmodel, nvpmodel::Mode)>,
    writes: &[Write],
    state: &StateFile,
) -> Result<Applied, PowerError> {
    let allowed = disc.writable();
    let mut originals: Vec<(PathBuf, String)> = Vec::new();
    let mut switch = None;
    if let Some((nv, m)) = mode {
        let current = nv.current()?;
        if current != m.id {
            originals.push((PathBuf::from(NVPMODEL_KEY), current.to_string()));
            switch = Some((nv, m));
        }
    }
    for w in writes {
        if !originals.iter().any(|(p, _)| p == &w.path) {
            originals.push((w.path.clone(), read_value(&w.path)?));
        }
    }
    if originals.is_empty() {
        return Ok(Applied::default());
    }
    state.save(root, &originals)?;
    let mut applied = Applied::default();
    if let Some((nv, m)) = switch {
        match nv.set(m.id) {
            Ok(true) => {
                applied.reboot_needed =
                    Some(format!("nvpmodel mode {} ({}) takes full effect only after a reboot", m.id, m.name))
            }
            Ok(false) => {}
            Err(e) => {
                let _ = state.restore(root, disc);
                return Err(e);
            }
        }
    }
    for w in writes {
        if let Err(e) = write_value(&allowed, &w.path, &w.value) {
            // Undo what was done, then report.
            let _ = state.restore(root, disc);
            return Err(e);
        }
        applied.written += 1;
    }
    // The last write to each path is the value it must hold now.
    let mut finals: Vec<(&PathBuf, &str)> = Vec::new();
    for w in writes.iter().rev() {
        if !finals.iter().any(|(p, _)| *p == &w.path) {
            finals.push((&w.path, &w.value));
        }
    }
    for (p, want) in finals.into_iter().rev() {
        let got = read_value(p)?;
        if !same_value(&got, want) {
            applied.mismatches.push((p.clone(), want.to_string(), got));
        }
    }
    Ok(applied)
}
