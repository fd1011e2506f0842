//! The clock state file: the original value of every file a profile writes,
//! saved atomically before the first write. Its presence means "clocks are
//! changed": a clean stop restores and deletes it; after a crash, SIGKILL or
//! power loss the next start finds it and restores first.

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

    /// Saves `originals` atomically (temp file, fsync, rename). An existing
    /// state file is kept: its values are the true originals.
    pub fn save(&self, root: &Path, originals: &[(PathBuf, String)]) -> Result<(), PowerError> {
        if self.exists() {
            return Err(self.err(
                "clock changes from an earlier run are still recorded here",
                "restore them first (`jetdetect clocks restore`)",
            ));
        }
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| self.err("cannot create its folder (StateDirectory)", e))?;
        }
        let mut text = format!("{MAGIC}\nroot\t{}\npid\t{}\n", root.display(), std::process::id());
        for (p, v) in originals {
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

    /// The recorded root and `(path, original value)` pairs.
    pub fn load(&self) -> Result<(PathBuf, Vec<(PathBuf, String)>), PowerError> {
        let meta = std::fs::symlink_metadata(&self.path).map_err(|e| self.err("cannot read", e))?;
        if meta.file_type().is_symlink() {
            return Err(self
                .err("is a symbolic link", "refusing to follow it; remove it if you did not put it there"));
        }
        let text = std::fs::read_to_string(&self.path).map_err(|e| self.err("cannot read", e))?;
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err(self.err("not a jetdetect clock state file", "remove it if it is stale"));
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

    /// Writes the originals back (several passes, since frequency floors and
    /// ceilings constrain each other), then deletes the file. Only files the
    /// discovery under `root` found writable are touched. Returns how many
    /// files were restored.
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
        let mut pending: Vec<&(PathBuf, String)> = values.iter().collect();
        let mut last_error = None;
        for _ in 0..3 {
            let mut left = Vec::new();
            for item in pending {
                let (p, v) = item;
                if p.as_os_str() == super::NVPMODEL_KEY {
                    let ok = match (super::nvpmodel::Nvpmodel::find(root), v.parse::<u32>()) {
                        (Some(nv), Ok(id)) => nv.set(id).map(|_| true),
                        _ => Err(PowerError(format!("cannot restore nvpmodel mode {v}: nvpmodel not found"))),
                    };
                    if let Err(e) = ok {
                        last_error = Some(e);
                        left.push(item);
                    }
                    continue;
                }
                // Already at the original value (e.g. the write that changed it never happened) counts as restored.
                let ok = match read_value(p) {
                    Ok(cur) if same_value(&cur, v) => Ok(true),
                    _ => {
                        write_value(&allowed, p, v).and_then(|_| read_value(p)).map(|got| same_value(&got, v))
                    }
                };
                match ok {
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
            return Err(PowerError(format!(
                "could not restore {} of {} clock values ({}){}; {} is kept so the next start retries",
                pending.len(),
                values.len(),
                names.join(", "),
                last_error.map(|e| format!(": {e}")).unwrap_or_default(),
                self.path.display()
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
        state.save(Path::new("/"), &[(PathBuf::from("/sys/x"), "1".into())]).unwrap();
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
