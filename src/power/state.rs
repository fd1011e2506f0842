//! The clock state file: the original value of every setting a profile
//! changes (files, the nvpmodel mode, paused services), saved atomically before
//! the first change. Its presence means "clocks are changed": a clean stop
//! restores and deletes it; after a crash, SIGKILL or power loss the next start
//! finds it and restores first. Only settings are recorded, never readings
//! that move on their own (the EMC rate): a restore must always be able to
//! finish, or the next start could not pin.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use super::discover::Discovered;
use super::{read_value, same_value, write_value, PowerError};

const MAGIC: &str = "# jetdetect clock state v1";

/// The state file at a path.
#[derive(Clone, Debug, PartialEq)]
pub struct StateFile {
    /// Where it lives.
    pub path: PathBuf,
}

impl StateFile {
    /// A state file at `path` (not created until [`StateFile::save`]).
    pub fn new(path: impl Into<PathBuf>) -> StateFile {
        StateFile { path: path.into() }
    }

    /// True when a profile's changes are outstanding.
    pub fn exists(&self) -> bool {
        self.path.exists()
    }

    fn err(&self, what: &str, e: impl std::fmt::Display) -> PowerError {
        PowerError(format!("{}: {what}: {e}", self.path.display()))
    }

    /// Records `originals` atomically (temp file, fsync, rename) before they are changed. Where the
    /// file exists already (a run that did not stop cleanly left values it could not restore), its
    /// values are the true originals: they are kept, and only settings it does not hold are added.
    pub fn record(&self, root: &Path, originals: &[(PathBuf, String)]) -> Result<(), PowerError> {
        let mut values = Vec::new();
        if self.exists() {
            let (recorded_root, old) = self.load()?;
            if recorded_root != root {
                return Err(self.err(
                    "clock changes for another root are still recorded here",
                    format!(
                        "restore them first (`jetdetect clocks restore --root {}`)",
                        recorded_root.display()
                    ),
                ));
            }
            values = old;
        }
        for (p, v) in originals {
            if !values.iter().any(|(q, _)| q == p) {
                values.push((p.clone(), v.clone()));
            }
        }
        self.write(root, &values)
    }

    fn write(&self, root: &Path, values: &[(PathBuf, String)]) -> Result<(), PowerError> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| self.err("cannot create its folder (StateDirectory)", e))?;
        }
        let mut text = format!("{MAGIC}\nroot\t{}\npid\t{}\n", root.display(), std::process::id());
        for (p, v) in values {
            if v.contains(['\n', '\t']) {
                return Err(self.err("cannot record a value with a tab or newline", p.display()));
            }
            text.push_str(&format!("{}\t{v}\n", p.display()));
        }
        let tmp = self.path.with_extension("state.tmp");
        let write = || -> std::io::Result<()> {
            // The state directory may be writable by others: never follow a link planted at the
            // temporary name (as root, that would overwrite its target). Remove whatever is there
            // (a link is removed, not followed) and create the file exclusively.
            match std::fs::remove_file(&tmp) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            if let Some(dir) = self.path.parent() {
                if let Ok(d) = std::fs::File::open(dir) {
                    let _ = d.sync_all();
                }
            }
            Ok(())
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            self.err("cannot save the original clock values (nothing was changed)", e)
        })
    }

    /// The recorded root and `(path, original value)` pairs, in the order they were recorded.
    pub fn load(&self) -> Result<(PathBuf, Vec<(PathBuf, String)>), PowerError> {
        let meta = std::fs::symlink_metadata(&self.path).map_err(|e| self.err("cannot read", e))?;
        if meta.file_type().is_symlink() {
            return Err(self
                .err("is a symbolic link", "refusing to follow it; remove it if you did not put it there"));
        }
        let text = std::fs::read_to_string(&self.path).map_err(|e| self.err("cannot read", e))?;
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            // Not ours, or cut short: it can restore nothing, and left in place it would stop every
            // later start from pinning. Keep it aside for a look, and go on without it.
            let aside = self.path.with_extension("state.bad");
            let moved = std::fs::rename(&self.path, &aside);
            return Err(self.err(
                "not a jetdetect clock state file",
                match moved {
                    Ok(()) => format!(
                        "moved aside to {} (the clocks it stood for are as they are now)",
                        aside.display()
                    ),
                    Err(e) => format!("and it cannot be moved aside ({e}): remove it"),
                },
            ));
        }
        let mut root = PathBuf::from("/");
        let mut values = Vec::new();
        for line in lines {
            let Some((k, v)) = line.split_once('\t') else { continue };
            match k {
                "root" => root = PathBuf::from(v),
                "pid" => {}
                path => values.push((PathBuf::from(path), v.to_string())),
            }
        }
        Ok((root, values))
    }

    /// Puts one recorded value back; `Ok(true)` when it holds (or there is nothing left to put back).
    fn put_back(root: &Path, allowed: &[PathBuf], key: &Path, value: &str) -> Result<bool, PowerError> {
        let name = key.to_string_lossy();
        if name == super::NVPMODEL_KEY {
            let (Some(nv), Ok(id)) = (super::nvpmodel::Nvpmodel::find(root), value.parse::<u32>()) else {
                return Err(PowerError(format!("cannot restore nvpmodel mode {value}: nvpmodel not found")));
            };
            return nv.set(id).map(|_| true);
        }
        if let Some(unit) = name.strip_prefix(super::service::KEY_PREFIX) {
            let ctl = super::service::Systemctl::require(root, unit)?;
            ctl.set_running(unit, value == "active")?;
            return Ok(true);
        }
        match read_value(key) {
            // Already at the original value (e.g. the write that changed it never happened).
            Ok(cur) if same_value(&cur, value) => Ok(true),
            Ok(_) => write_value(allowed, key, value)
                .and_then(|_| read_value(key))
                .map(|got| same_value(&got, value)),
            // Gone (a core taken offline, a GPU not registered after a reboot): the setting is not in
            // effect, so there is nothing to put back.
            Err(_) if !key.exists() => {
                log::info!("{}: no longer present; nothing to restore", key.display());
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }

    /// Writes the originals back, last changed first (an undo: a ceiling lowered after its floor
    /// went up is raised before the floor comes down; a service paused before its PWM was set is
    /// started after the PWM is back; the nvpmodel mode goes back last), with further passes for
    /// what the kernel refused while its neighbours were in the way. Only files the discovery under
    /// `root` found writable are touched. Then the file is deleted; what could not be restored
    /// stays recorded (and only that), so the next start retries it, and a profile applied meanwhile
    /// keeps its originals. Returns how many values were restored.
    pub fn restore(&self, root: &Path, disc: &Discovered) -> Result<usize, PowerError> {
        let (recorded_root, values) = self.load()?;
        if recorded_root != root {
            return Err(self.err(
                "was written for another root",
                format!(
                    "{} (give --root {} to restore it)",
                    recorded_root.display(),
                    recorded_root.display()
                ),
            ));
        }
        let allowed = disc.writable();
        let mut pending: Vec<&(PathBuf, String)> = values.iter().rev().collect();
        let mut last_error = None;
        for _ in 0..3 {
            let mut left = Vec::new();
            for item in pending {
                match Self::put_back(root, &allowed, &item.0, &item.1) {
                    Ok(true) => {}
                    Ok(false) => left.push(item),
                    Err(e) => {
                        last_error = Some(e);
                        left.push(item);
                    }
                }
            }
            pending = left;
            if pending.is_empty() {
                break;
            }
        }
        if !pending.is_empty() {
            let names: Vec<String> = pending.iter().map(|(p, v)| format!("{} = {v}", p.display())).collect();
            let keep: Vec<(PathBuf, String)> =
                pending.iter().rev().map(|&(p, v)| (p.clone(), v.clone())).collect();
            let kept =
                self.write(root, &keep).map(|_| "is kept with only these, so the next start retries them");
            return Err(PowerError(format!(
                "could not restore {} of {} clock values ({}){}; {} {}",
                pending.len(),
                values.len(),
                names.join(", "),
                last_error.map(|e| format!(": {e}")).unwrap_or_default(),
                self.path.display(),
                kept.unwrap_or("is kept as it was")
            )));
        }
        std::fs::remove_file(&self.path).map_err(|e| self.err("restored, but cannot remove", e))?;
        Ok(values.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_link_planted_in_the_state_directory_is_not_followed() {
        let dir = std::env::temp_dir().join(format!("jetdetect-state-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let state = StateFile::new(dir.join("clocks.state"));
        std::os::unix::fs::symlink(&victim, state.path.with_extension("state.tmp")).unwrap();
        state.record(Path::new("/"), &[(PathBuf::from("/sys/x"), "1".into())]).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(!std::fs::symlink_metadata(&state.path).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::metadata(&state.path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(state.load().unwrap().1, vec![(PathBuf::from("/sys/x"), "1".to_string())]);

        // A link at the state file's own name is refused when read, never followed.
        std::fs::remove_file(&state.path).unwrap();
        std::os::unix::fs::symlink(&victim, &state.path).unwrap();
        let e = state.load().unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
