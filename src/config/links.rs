//! Files reached through a symbolic link inside the clock state directory are refused: that
//! directory is the one the service may write, so a link planted there must not choose what
//! the daemon (root) loads.

use std::path::{Path, PathBuf};

use super::error::ConfigError;
use super::locate::locate;

/// The first symbolic link on the way to `path` that sits inside `dir`. Each link is
/// placed by the real location of the folder holding it, so relative paths, `..` and
/// other links on the way (a link elsewhere leading into `dir`) cannot hide one.
pub(super) fn link_inside(dir: &Path, path: &Path) -> Option<PathBuf> {
    // A state directory that does not exist yet holds no links.
    let dir = dir.canonicalize().ok()?;
    let mut p = PathBuf::new();
    for c in std::path::absolute(path).ok()?.components() {
        p.push(c);
        let is_link = std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink());
        if is_link && p.parent().and_then(|d| d.canonicalize().ok()).is_some_and(|d| d.starts_with(&dir)) {
            return Some(p);
        }
    }
    None
}

/// Refuses the first of `files` (`(section, key, path)`; an empty key stands for the config
/// file itself) reached through a symbolic link inside `state_dir`; `path` and `text` are the
/// config's, to name the line.
pub(super) fn refuse_links(
    state_dir: &Path,
    files: &[(&str, &str, &Path)],
    path: &Path,
    text: &str,
) -> Result<(), ConfigError> {
    for &(section, key, file) in files {
        if let Some(link) = link_inside(state_dir, file) {
            let (what, fix) = if key.is_empty() {
                ("the config file".to_string(), "give the config's real path".to_string())
            } else {
                (format!("[{section}] {key}"), format!("point [{section}] {key} at the link's target"))
            };
            return Err(ConfigError {
                file: path.to_path_buf(),
                line: if key.is_empty() { None } else { locate(text, section, key) },
                message: format!(
                    "{what}: {} is a symbolic link inside the state directory {} (writable by the \
                     service): jetdetect does not follow links there; put the file itself there, or {fix}",
                    link.display(),
                    state_dir.display()
                ),
            });
        }
    }
    Ok(())
}
