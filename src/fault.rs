//! Fault injection for the fault suite (`tests/it/faults.rs`, docs/reliability.md):
//! failures that cannot be provoked on demand on a real system (a panic in a
//! pipeline thread, a sysfs write refused with `EBUSY`) are injected at fixed
//! points, and then travel the same error paths as the real thing.
//!
//! The environment variable `JETDETECT_FAULT` holds faults separated by `;`:
//!
//! * `panic:<stage>@<n>`: panic in the `capture`, `inference` or `publish`
//!   stage at its n-th frame (counting from 1);
//! * `sysfs-write:<errno>@<path>`: every write to the clock file `<path>`
//!   fails with `EACCES`, `EBUSY`, `ENOENT`, `EROFS` or `EIO`.
//!
//! Compiled into debug builds only (`cargo build`, `cargo test`, `cargo run`: the dev and test
//! profiles, with `debug_assertions`); every release build, which is every build that ships,
//! gets empty points in its place (`lib.rs`). A cargo feature did this before, and made `cargo
//! run` after `cargo test` recompile the crate, the two builds differing in it. In-process tests add faults with [`inject`]. With none set, a point costs two
//! atomic loads (the `Once` and the flag). The variable is read once, at the first point reached.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, RwLock};

/// One injected fault.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Panic in `stage` at its `at`-th frame.
    Panic {
        /// `capture`, `inference` or `publish`.
        stage: String,
        /// The frame (1 = the first).
        at: u64,
    },
    /// Writes to `path` fail with `errno`.
    SysfsWrite {
        /// The clock file.
        path: PathBuf,
        /// The error number returned.
        errno: i32,
    },
}

/// The stages a panic can be injected in.
pub const STAGES: [&str; 3] = ["capture", "inference", "publish"];

const ERRNOS: [(&str, i32); 5] = [
    ("EACCES", libc::EACCES),
    ("EBUSY", libc::EBUSY),
    ("ENOENT", libc::ENOENT),
    ("EROFS", libc::EROFS),
    ("EIO", libc::EIO),
];

static ANY: AtomicBool = AtomicBool::new(false);
static FAULTS: RwLock<Vec<Fault>> = RwLock::new(Vec::new());
static FROM_ENV: Once = Once::new();

/// A `JETDETECT_FAULT` entry that names no fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{spec}': {why} (use panic:<{}>@<frame> or sysfs-write:<{}>@<path>)",
    STAGES.join("|"),
    ERRNOS.map(|(n, _)| n).join("|")
)]
pub struct BadFault {
    /// The entry.
    pub spec: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl Fault {
    /// Parses one fault (`panic:inference@20`, `sysfs-write:EBUSY@/sys/...`).
    pub fn parse(spec: &str) -> Result<Fault, BadFault> {
        let bad = |why: &'static str| BadFault { spec: spec.to_string(), why };
        let (kind, rest) = spec.split_once(':').ok_or_else(|| bad("no ':'"))?;
        let (what, at) = rest.split_once('@').ok_or_else(|| bad("no '@'"))?;
        match kind {
            "panic" => {
                if !STAGES.contains(&what) {
                    return Err(bad("unknown stage"));
                }
                let at =
                    at.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| bad("frame is not 1 or more"))?;
                Ok(Fault::Panic { stage: what.to_string(), at })
            }
            "sysfs-write" => {
                let errno = ERRNOS
                    .iter()
                    .find(|(n, _)| *n == what)
                    .map(|(_, e)| *e)
                    .ok_or_else(|| bad("unknown errno"))?;
                if at.is_empty() {
                    return Err(bad("empty path"));
                }
                Ok(Fault::SysfsWrite { path: PathBuf::from(at), errno })
            }
            _ => Err(bad("unknown fault")),
        }
    }
}

fn load_env() {
    FROM_ENV.call_once(|| {
        let Some(spec) = std::env::var_os("JETDETECT_FAULT") else { return };
        let spec = spec.to_string_lossy();
        for part in spec.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            match Fault::parse(part) {
                Ok(f) => {
                    log::warn!("JETDETECT_FAULT: injecting {f:?}");
                    add(f);
                }
                Err(e) => log::error!("JETDETECT_FAULT: {e}: ignored"),
            }
        }
    });
}

fn add(f: Fault) {
    FAULTS.write().unwrap_or_else(|e| e.into_inner()).push(f);
    ANY.store(true, Ordering::Release);
}

/// Adds a fault in this process (tests).
pub fn inject(f: Fault) {
    load_env();
    add(f);
}

/// Removes every fault injected for `path` (tests).
pub fn clear_sysfs(path: &Path) {
    FAULTS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|f| !matches!(f, Fault::SysfsWrite { path: p, .. } if p == path));
}

fn active() -> bool {
    load_env();
    ANY.load(Ordering::Acquire)
}

/// The injection point of a pipeline stage: panics when a fault says so.
pub fn stage(stage: &str, frame: u64) {
    if !active() {
        return;
    }
    let hit = FAULTS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|f| matches!(f, Fault::Panic { stage: s, at } if s == stage && *at == frame));
    if hit {
        panic!("injected fault: panic in {stage} at frame {frame} (JETDETECT_FAULT)");
    }
}

/// The injection point of a clock-file write: the error to return instead of writing.
pub fn sysfs_write(path: &Path) -> Option<std::io::Error> {
    if !active() {
        return None;
    }
    FAULTS.read().unwrap_or_else(|e| e.into_inner()).iter().find_map(|f| match f {
        Fault::SysfsWrite { path: p, errno } if p == path => Some(std::io::Error::from_raw_os_error(*errno)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_say_what_is_allowed() {
        assert_eq!(
            Fault::parse("panic:inference@20").unwrap(),
            Fault::Panic { stage: "inference".into(), at: 20 }
        );
        assert_eq!(
            Fault::parse("sysfs-write:EBUSY@/sys/x").unwrap(),
            Fault::SysfsWrite { path: "/sys/x".into(), errno: libc::EBUSY }
        );
        for bad in
            ["panic:decode@3", "panic:capture@0", "sysfs-write:EPERM@/x", "sysfs-write:EIO@", "oops", "x:y@z"]
        {
            let e = Fault::parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains("panic:<capture|inference|publish>@<frame>"), "{e}");
        }
    }

    #[test]
    fn an_injected_write_error_is_returned_for_that_path_only() {
        let p = PathBuf::from(format!("/nonexistent/jetdetect-fault-{}", std::process::id()));
        assert!(sysfs_write(&p).is_none());
        inject(Fault::SysfsWrite { path: p.clone(), errno: libc::EBUSY });
        assert_eq!(sysfs_write(&p).unwrap().raw_os_error(), Some(libc::EBUSY));
        assert!(sysfs_write(&p.with_extension("other")).is_none());
        clear_sysfs(&p);
        assert!(sysfs_write(&p).is_none());
    }
}
