//! The model file watched while the daemon runs (checked once per stats interval); its identity
//! is taken before the engine reads it.

/// The model file as it was when the engine loaded it. The engine runs from memory,
/// so a file truncated, rewritten or replaced afterwards changes nothing until the
/// next start; a change is logged once, so that nobody is surprised by what runs.
pub struct ModelFile {
    path: std::path::PathBuf,
    seen: Option<(u64, u64, u64, i64, i64)>,
}

impl ModelFile {
    /// The file at `path` as it is now.
    pub fn new(path: &std::path::Path) -> ModelFile {
        ModelFile { path: path.to_path_buf(), seen: Self::identity(path) }
    }

    fn identity(path: &std::path::Path) -> Option<(u64, u64, u64, i64, i64)> {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
    }

    pub(super) fn check(&mut self) {
        let now = Self::identity(&self.path);
        if now != self.seen {
            let what = match (&self.seen, &now) {
                (_, None) => "was removed".to_string(),
                (Some(a), Some(b)) if (a.0, a.1) != (b.0, b.1) => format!("was replaced ({} bytes now)", b.2),
                (_, Some(b)) => format!("was modified ({} bytes now)", b.2),
            };
            log::warn!(
                "{}: the model file {what} since it was loaded; the engine keeps running the model \
                 loaded at start: restart jetdetect to load the new file",
                self.path.display()
            );
            self.seen = now;
        }
    }
}
