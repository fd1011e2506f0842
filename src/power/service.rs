//! The system services a profile has to pause: JetPack 5/6's `nvfancontrol`
//! rewrites the fan PWM while it runs, so a fixed-fan profile stops it and
//! restore starts it again, as jetson_clocks does (`systemctl stop
//! nvfancontrol`, and `start` when `--restore` finds it was active).
//!
//! `systemctl` is looked up under the root that stands for `/`, like
//! nvpmodel, so the tests drive a stand-in.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::PowerError;

/// The state-file key prefix of a service's original state (`service:nvfancontrol`).
pub const KEY_PREFIX: &str = "service:";

/// systemctl on this system.
pub struct Systemctl {
    /// The program.
    pub program: PathBuf,
}

impl Systemctl {
    /// Finds `usr/bin/systemctl` (or `bin/systemctl`) under `root`.
    pub fn find(root: &Path) -> Option<Systemctl> {
        ["usr/bin/systemctl", "bin/systemctl"]
            .iter()
            .map(|p| root.join(p))
            .find(|p| p.is_file())
            .map(|program| Systemctl { program })
    }

    /// Finds systemctl or says what is missing for `unit`.
    pub fn require(root: &Path, unit: &str) -> Result<Systemctl, PowerError> {
        Systemctl::find(root).ok_or_else(|| {
            PowerError(format!(
                "{unit}.service is installed but systemctl was not found under {}: cannot pause it",
                root.display()
            ))
        })
    }

    fn run(&self, args: &[&str]) -> Result<std::process::Output, PowerError> {
        Command::new(&self.program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| PowerError(format!("{}: cannot run: {e}", self.program.display())))
    }

    /// True when the unit is active (`systemctl is-active` exits 0).
    pub fn is_active(&self, unit: &str) -> Result<bool, PowerError> {
        Ok(self.run(&["is-active", "--quiet", unit])?.status.success())
    }

    /// Starts (`true`) or stops (`false`) the unit.
    pub fn set_running(&self, unit: &str, running: bool) -> Result<(), PowerError> {
        let verb = if running { "start" } else { "stop" };
        let out = self.run(&[verb, unit])?;
        if out.status.success() {
            return Ok(());
        }
        Err(PowerError(format!("systemctl {verb} {unit}: {}", String::from_utf8_lossy(&out.stderr).trim())))
    }
}
