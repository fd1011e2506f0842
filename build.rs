//! Says which of the tests' outside requirements this machine has, so a test that cannot run is
//! reported as ignored ("needs mosquitto …") instead of passing while doing nothing.
//!
//! Nothing in the library or the binary reads these settings; only `tests/` does, through
//! `#[cfg_attr(not(jetdetect_has_X), ignore = "needs …")]`. Each `cfg` is set when the tool is
//! found here, or when `JETDETECT_REQUIRE_X` is set (`.ci/run` sets them all): then the test runs,
//! and fails naming what is missing if it is not there after all. The table of suites and what
//! each needs is in docs/reliability.md.
//!
//! The probe reruns when this file, a `JETDETECT_REQUIRE_*` switch, `ORT_DYLIB_PATH`,
//! `JETDETECT_MOTMETRICS` or `CHROMIUM` changes, or when a directory on `PATH` changes (a package
//! installed there): not on every build, which would rebuild the crate each time. After putting a library under `target/ort` (or
//! py-motmetrics under `target/motmetrics`) by hand, `touch build.rs` (or set `ORT_DYLIB_PATH`,
//! `JETDETECT_MOTMETRICS`) to have its tests run.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where the tests look for ONNX Runtime (`ORT_DYLIB_PATH`, or the wheel under `target/ort`).
#[path = "tests/common/ort.rs"]
#[allow(dead_code)] // the tests' `library()`
mod ort;

/// Where the tests look for py-motmetrics (`JETDETECT_MOTMETRICS`, or `target/motmetrics`).
#[path = "tests/common/motmetrics.rs"]
#[allow(dead_code)] // the tests' `path()`, `score()`, `data()`
mod motmetrics;

/// One requirement: its `cfg` name, its `JETDETECT_REQUIRE_*` switch and whether it is here.
struct Requirement {
    cfg: &'static str,
    switch: &'static str,
    present: bool,
}

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    for var in ["ORT_DYLIB_PATH", "CHROMIUM", "JETDETECT_MOTMETRICS"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let path_dirs: Vec<PathBuf> = env::var_os("PATH")
        .map(|p| env::split_paths(&p).filter(|d| d.is_absolute() && d.is_dir()).collect())
        .unwrap_or_default();
    for dir in &path_dirs {
        // A directory's own mtime changes when a program is added to it or removed.
        println!("cargo::rerun-if-changed={}", dir.display());
    }
    let on_path = |name: &str| path_dirs.iter().any(|d| d.join(name).is_file());
    let succeeds = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let root = is_root();
    let gst = on_path("gst-launch-1.0");
    let requirements = [
        Requirement {
            cfg: "jetdetect_has_ort",
            switch: "JETDETECT_REQUIRE_ORT",
            present: ort::find().is_some(),
        },
        Requirement { cfg: "jetdetect_has_gst", switch: "JETDETECT_REQUIRE_GST", present: gst },
        Requirement {
            cfg: "jetdetect_has_rtsp_server",
            switch: "JETDETECT_REQUIRE_GST",
            present: gst
                && succeeds(
                    "/usr/bin/python3",
                    &["-c", "import gi; gi.require_version('GstRtspServer', '1.0')"],
                ),
        },
        Requirement {
            cfg: "jetdetect_has_mosquitto",
            switch: "JETDETECT_REQUIRE_MQTT",
            present: ["mosquitto", "mosquitto_sub", "mosquitto_pub"].iter().all(|p| on_path(p)),
        },
        Requirement {
            cfg: "jetdetect_has_chromium",
            switch: "JETDETECT_REQUIRE_CHROMIUM",
            present: match env::var_os("CHROMIUM") {
                Some(c) if Path::new(&c).is_absolute() => Path::new(&c).is_file(),
                Some(c) => on_path(&c.to_string_lossy()),
                None => on_path("chromium"),
            } && on_path("python3"),
        },
        Requirement {
            cfg: "jetdetect_has_root",
            switch: "JETDETECT_REQUIRE_ROOT",
            present: root && succeeds("unshare", &["-m", "true"]),
        },
        Requirement {
            cfg: "jetdetect_has_fuse",
            switch: "JETDETECT_REQUIRE_FUSE",
            present: root && Path::new("/dev/fuse").exists(),
        },
        Requirement {
            cfg: "jetdetect_has_motmetrics",
            switch: "JETDETECT_REQUIRE_MOTMETRICS",
            present: motmetrics::find().is_some() && on_path("python3"),
        },
        Requirement {
            cfg: "jetdetect_has_python3",
            switch: "JETDETECT_REQUIRE_PYTHON3",
            present: on_path("python3"),
        },
    ];
    for r in &requirements {
        println!("cargo::rustc-check-cfg=cfg({})", r.cfg);
        println!("cargo::rerun-if-env-changed={}", r.switch);
        if r.present || env::var_os(r.switch).is_some() {
            println!("cargo::rustc-cfg={}", r.cfg);
        }
    }
}

/// Whether this build runs as root (the FUSE board emulator and the private mount namespaces
/// need it); read from /proc so that the build script needs no crate.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0"))
            .unwrap_or(false)
    })
}
