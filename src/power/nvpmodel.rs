//! nvpmodel power modes: names and ids from `/etc/nvpmodel.conf`, the current
//! mode from `nvpmodel -q`, switching with `nvpmodel -m ID`. Some switches
//! (core counts, Orin "super" modes) only take effect after a reboot: nvpmodel
//! says so and jetdetect repeats it, never rebooting on its own.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::PowerError;

/// One `< POWER_MODEL ID=n NAME=s >` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mode {
    /// Mode id.
    pub id: u32,
    /// Mode name, e.g. `MAXN` or `15W`.
    pub name: String,
}

/// The modes in an nvpmodel.conf text.
pub fn parse_modes(conf: &str) -> Vec<Mode> {
    conf.lines()
        .filter_map(|l| {
            let l = l.trim();
            let body = l.strip_prefix('<')?.strip_suffix('>')?.trim();
            let rest = body.strip_prefix("POWER_MODEL")?;
            let mut id = None;
            let mut name = None;
            for kv in rest.split_whitespace() {
                match kv.split_once('=') {
                    Some(("ID", v)) => id = v.parse().ok(),
                    Some(("NAME", v)) => name = Some(v.to_string()),
                    _ => {}
                }
            }
            Some(Mode { id: id?, name: name? })
        })
        .collect()
}

/// nvpmodel on this board.
pub struct Nvpmodel {
    /// The nvpmodel program.
    pub program: PathBuf,
    /// Known modes.
    pub modes: Vec<Mode>,
}

impl Nvpmodel {
    /// Finds `usr/sbin/nvpmodel` (or `usr/bin`) and `etc/nvpmodel.conf` under `root`.
    pub fn find(root: &Path) -> Option<Nvpmodel> {
        let program =
            ["usr/sbin/nvpmodel", "usr/bin/nvpmodel"].iter().map(|p| root.join(p)).find(|p| p.is_file())?;
        let conf = std::fs::read_to_string(root.join("etc/nvpmodel.conf")).unwrap_or_default();
        Some(Nvpmodel { program, modes: parse_modes(&conf) })
    }

    /// Resolves a mode given by name or id.
    pub fn resolve(&self, wanted: &str) -> Result<Mode, PowerError> {
        let found =
            self.modes.iter().find(|m| m.name.eq_ignore_ascii_case(wanted) || m.id.to_string() == wanted);
        found.cloned().ok_or_else(|| {
            let list: Vec<String> = self.modes.iter().map(|m| format!("{} ({})", m.id, m.name)).collect();
            PowerError(format!(
                "[power] nvpmodel = '{wanted}': no such mode; this board has {}",
                list.join(", ")
            ))
        })
    }

    fn run(&self, args: &[&str]) -> Result<String, PowerError> {
        let out = Command::new(&self.program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| PowerError(format!("{}: cannot run: {e}", self.program.display())))?;
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            return Err(PowerError(format!(
                "{} {}: {}",
                self.program.display(),
                args.join(" "),
                text.trim()
            )));
        }
        Ok(text)
    }

    /// The current mode id (`nvpmodel -q` prints the name, then the id).
    pub fn current(&self) -> Result<u32, PowerError> {
        let text = self.run(&["-q"])?;
        text.lines().rev().find_map(|l| l.trim().parse::<u32>().ok()).ok_or_else(|| {
            PowerError(format!("{} -q: no mode id in its output: {}", self.program.display(), text.trim()))
        })
    }

    /// Switches to mode `id`; returns true when nvpmodel says a reboot is needed.
    pub fn set(&self, id: u32) -> Result<bool, PowerError> {
        let text = self.run(&["-m", &id.to_string()])?;
        Ok(text.to_ascii_lowercase().contains("reboot"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_read_from_the_conf() {
        let conf =
            "< PARAM TYPE=FILE NAME=CPU_ONLINE >\n< POWER_MODEL ID=0 NAME=MAXN >\nCPU_ONLINE CORE_0 1\n\
                    < POWER_MODEL ID=1 NAME=5W >\n< PM_CONFIG DEFAULT=0 >\n";
        let m = parse_modes(conf);
        assert_eq!(m, vec![Mode { id: 0, name: "MAXN".into() }, Mode { id: 1, name: "5W".into() }]);
    }
}
