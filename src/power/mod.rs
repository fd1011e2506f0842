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
//! * [`apply`]: the whole sequence (stale restore, GPU power-up, nvpmodel
//!   switch, plan, save, write, verify) shared by the daemon and `clocks apply`.
//! * [`nvpmodel`], [`service`]: the power modes, and the services a profile pauses.
//! * [`telemetry`]: frequencies, load, temperatures, rail power, throttling.
//!
//! Every path is read under a root directory standing for `/` (`--root`,
//! `[power] root`), which is how the tests run against fixture trees.

pub mod apply;
pub mod board;
pub mod discover;
pub mod nvpmodel;
pub mod profile;
pub mod service;
pub mod session;
pub mod state;
pub mod telemetry;

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

pub use apply::{apply, engage, Applied, Engaged, Failure};
pub use board::Board;
pub use discover::{dla_cores, Discovered};
pub use profile::{plan, Kind, OnFailure, Plan, PowerConfig, Profile, Write};
pub use session::{ClockControl, PowerSession};
pub use state::StateFile;

/// A power-control problem, worded for the user.
#[derive(Clone, Debug, thiserror::Error)]
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

/// The state-file key that records the original nvpmodel mode.
pub const NVPMODEL_KEY: &str = "nvpmodel";
