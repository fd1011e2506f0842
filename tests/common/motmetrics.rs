//! py-motmetrics, the reference the tracking scores are checked against, and the real pedestrian
//! sequences it ships (TUD-Campus, TUD-Stadtmitte: truth and a tracker's results, MOTChallenge
//! files): `JETDETECT_MOTMETRICS` (a folder to put on `PYTHONPATH`), or the one `.ci/run`
//! installs under `target/motmetrics` (the same two places build.rs looks before it sets
//! `jetdetect_has_motmetrics`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder holding the `motmetrics` package, where there is one.
pub fn find() -> Option<PathBuf> {
    let from_env = std::env::var_os("JETDETECT_MOTMETRICS").map(PathBuf::from);
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/motmetrics");
    from_env.into_iter().chain([local]).find(|d| d.join("motmetrics/__init__.py").is_file())
}

/// The folder. A test that asks for it runs only where build.rs found one or
/// `JETDETECT_REQUIRE_MOTMETRICS` is set, so its absence here is a failure that says what to do.
pub fn path() -> PathBuf {
    find().unwrap_or_else(|| {
        panic!(
            "no py-motmetrics: pip install --target target/motmetrics motmetrics==1.4.0 numpy==1.26.4 \
             pandas==2.2.3 scipy==1.13.1 (or set JETDETECT_MOTMETRICS; docs/reliability.md)"
        )
    })
}

/// `python3 tests/mot/motmetrics_score.py ARGS` with py-motmetrics on the path: its stdout.
pub fn score(args: &[&Path]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mot/motmetrics_score.py");
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .env("PYTHONPATH", path())
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "motmetrics_score.py: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The sequences' folder inside the package (`motmetrics/data`).
pub fn data() -> PathBuf {
    path().join("motmetrics/data")
}
