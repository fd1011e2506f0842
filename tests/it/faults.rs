//! The fault suite (issue 9, docs/reliability.md): the real daemon on the board
//! fixture trees, stopped by every signal and by panics in each pipeline thread
//! while a clock profile is applied; clock writes refused with EACCES, EBUSY,
//! ENOENT and EROFS; the state directory full or read-only; the model file
//! changed under a running daemon. Each must end with no crash and no hang, a
//! clear log line, and the clock tree back byte for byte.
//!
//! Faults that cannot be provoked on demand (a panic, EBUSY from a driver) are
//! injected with `JETDETECT_FAULT` (src/fault.rs); the rest are real (signals,
//! tmpfs mounts in a private mount namespace, files rewritten on disk).

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{repo, snapshot, Daemon, BOARDS};

use jetdetect::fault::{self, Fault};
use jetdetect::power::{self, Discovered, PowerConfig, PowerSession, Profile, StateFile};
use serde_json::Value;

/// A private copy of a board's tree, and an empty run directory next to it.
fn copy(board: &str, tag: &str) -> (PathBuf, PathBuf) {
    let base = std::env::temp_dir().join(format!("jd-faults-{}-{board}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let tree = base.join("root");
    let ok = Command::new("cp")
        .arg("-a")
        .arg(repo().join("tests/fixtures/jetson").join(board))
        .arg(&tree)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let run = base.join("run");
    std::fs::create_dir_all(&run).unwrap();
    (tree, run)
}

fn default_model() -> PathBuf {
    repo().join("models/obstacles-v8.onnx")
}

/// Reads messages until `n` detections messages have come; returns the last stats seen, if any.
fn read_detections(r: &mut BufReader<UnixStream>, n: usize) -> Option<Value> {
    let (mut seen, mut stats) = (0, None);
    while seen < n {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "the daemon closed the connection");
        let v: Value = serde_json::from_str(&line).unwrap();
        match v["type"].as_str() {
            Some("detections") => seen += 1,
            Some("stats") => stats = Some(v),
            _ => {}
        }
    }
    stats
}

/// Reads until a stats message comes.
fn read_stats(r: &mut BufReader<UnixStream>) -> Value {
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "the daemon closed the connection");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["type"] == "stats" {
            return v;
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Stop {
    Sigterm,
    Sigint,
    /// SIGINT, then SIGINT again while stopping.
    TwoSigints,
    /// An injected panic in a pipeline stage.
    Panic(&'static str),
    /// SIGKILL: restored at the next start.
    Sigkill,
}

const STOPS: [Stop; 7] = [
    Stop::Sigterm,
    Stop::Sigint,
    Stop::TwoSigints,
    Stop::Panic("capture"),
    Stop::Panic("inference"),
    Stop::Panic("publish"),
    Stop::Sigkill,
];

fn stop_during_profile(board: &str, stop: Stop) -> Result<(), String> {
    let tag = format!("{stop:?}").replace(['(', ')', '"'], "").to_lowercase();
    let (tree, run) = copy(board, &tag);
    let before = snapshot(&tree);
    let state = run.join("clocks.state");
    let cfg = crate::common::locked_profile_config(&run, &tree, &state, &default_model(), "");
    let fault = match stop {
        Stop::Panic(stage) => format!("panic:{stage}@4"),
        _ => String::new(),
    };
    let env: Vec<(&str, &str)> =
        if fault.is_empty() { vec![] } else { vec![("JETDETECT_FAULT", fault.as_str())] };
    let ctx = |what: &str, err: &str| format!("{board}, {stop:?}: {what}\n--- daemon stderr ---\n{err}");
    let d = Daemon::start(&cfg, &env);
    if snapshot(&tree) == before || !state.exists() {
        return Err(ctx("the profile was not applied", ""));
    }
    let mut client = d.connect();
    let (code, _sig, err) = match stop {
        Stop::Sigterm | Stop::Sigint | Stop::TwoSigints => {
            read_detections(&mut client, 2);
            let s = if matches!(stop, Stop::Sigterm) { libc::SIGTERM } else { libc::SIGINT };
            d.signal(s);
            if matches!(stop, Stop::TwoSigints) {
                d.signal(s);
            }
            d.wait_signal(Duration::from_secs(20))
        }
        Stop::Panic(_) => d.wait_signal(Duration::from_secs(60)),
        Stop::Sigkill => {
            read_detections(&mut client, 2);
            d.signal(libc::SIGKILL);
            let (code, sig, err) = d.wait_signal(Duration::from_secs(20));
            if sig != Some(libc::SIGKILL) || !state.exists() || snapshot(&tree) == before {
                return Err(ctx("SIGKILL should leave the clocks changed and the state file", &err));
            }
            // The next start restores first, then applies again; a clean stop restores.
            let _ = std::fs::remove_file(run.join("d.sock"));
            let d = Daemon::start(&cfg, &[]);
            read_detections(&mut d.connect(), 1);
            d.signal(libc::SIGTERM);
            let (code2, _, err2) = d.wait_signal(Duration::from_secs(20));
            if code2 != Some(0)
                || !err2.contains("clock values from an unclean exit were still changed: restored them first")
            {
                return Err(ctx("the start after SIGKILL did not restore first", &err2));
            }
            (code, sig, err)
        }
    };
    let lines: Vec<&str> = err.lines().collect();
    let tail = lines[lines.len().saturating_sub(12)..].join("\n");
    if err.contains("clock restore failed") {
        return Err(ctx("restore failed", &tail));
    }
    match stop {
        Stop::Sigterm | Stop::Sigint => {
            if code != Some(0) || !err.contains("stopping (send it again to exit at once)") {
                return Err(ctx(&format!("exit {code:?}, want 0 and the stop logged"), &tail));
            }
        }
        Stop::TwoSigints => {
            // The second signal may come after the clean stop has finished: either exit is fine.
            if code != Some(0) && code != Some(128 + libc::SIGINT) {
                return Err(ctx(&format!("exit {code:?}, want 0 or {}", 128 + libc::SIGINT), &tail));
            }
        }
        Stop::Panic(stage) => {
            let said = err.contains(&format!("injected fault: panic in {stage} at frame 4"))
                && err.contains("restored ")
                && err.contains("clock values");
            let code_ok = match stage {
                // The main thread panicking ends the process with Rust's panic status.
                "publish" => code == Some(101),
                _ => code == Some(1) && err.contains(&format!("the {stage} thread panicked")),
            };
            if !said || !code_ok {
                return Err(ctx(&format!("exit {code:?} or the log is not as expected"), &tail));
            }
        }
        Stop::Sigkill => {}
    }
    if state.exists() {
        return Err(ctx("the state file is left behind", &tail));
    }
    if snapshot(&tree) != before {
        return Err(ctx("the clock tree is not back byte for byte", &tail));
    }
    let _ = std::fs::remove_dir_all(tree.parent().unwrap());
    Ok(())
}

#[test]
fn signals_and_panics_during_a_clock_profile_restore_the_clocks_on_every_board() {
    // One thread per board; each runs the seven ways to stop in turn.
    let threads: Vec<_> = BOARDS
        .iter()
        .map(|board| {
            std::thread::spawn(move || {
                STOPS.iter().filter_map(|stop| stop_during_profile(board, *stop).err()).collect::<Vec<_>>()
            })
        })
        .collect();
    let failures: Vec<String> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        BOARDS.len() * STOPS.len(),
        failures.join("\n\n")
    );
}

fn power_config(tree: &Path, state: &Path, on_failure: &str) -> PowerConfig {
    PowerConfig {
        profile: Profile::Locked,
        root: tree.to_path_buf(),
        state_file: state.to_path_buf(),
        on_failure: on_failure.parse().unwrap(),
        ..PowerConfig::default()
    }
}

/// What the error message must say for each errno.
const ERRNOS: [(&str, &str); 4] = [
    ("EACCES", "clock control needs root"),
    ("EBUSY", "the driver is busy"),
    ("ENOENT", "missing on this board/JetPack"),
    ("EROFS", "read-only"),
];

#[test]
fn clock_writes_refused_by_the_system_are_named_undone_and_retried() {
    // In one test: a power session is process-wide (the panic hook restores the active one).
    let _sessions = crate::common::sessions();
    for (i, (errno, says)) in ERRNOS.iter().enumerate() {
        let board = BOARDS[i % BOARDS.len()];
        let (tree, run) = copy(board, &format!("errno-{errno}"));
        let before = snapshot(&tree);
        let state = run.join("clocks.state");
        let disc = Discovered::scan(&tree);
        let plan = power::plan(&power_config(&tree, &state, "exit"), &disc, &Default::default()).unwrap();
        assert!(plan.writes.len() >= 3, "{board}: {} writes", plan.writes.len());
        // The last setting written refuses: the earlier writes are undone.
        let victim = plan.writes.iter().rev().find(|w| w.kind == power::Kind::Static).unwrap().path.clone();
        let f = Fault::parse(&format!("sysfs-write:{errno}@{}", victim.display())).unwrap();
        fault::inject(f.clone());

        // At apply, `exit`: an error naming the file and the cause; nothing changed.
        let e =
            PowerSession::start(&power_config(&tree, &state, "exit")).err().expect("must fail").to_string();
        assert!(e.contains(&victim.display().to_string()) && e.contains(says), "{board} {errno}: {e}");
        assert!(snapshot(&tree) == before, "{board} {errno}: the earlier writes were not undone");
        assert!(!state.exists(), "{board} {errno}: state file left");

        // At apply, `continue`: the session runs unpinned; nothing changed.
        let s = PowerSession::start(&power_config(&tree, &state, "continue")).unwrap();
        assert!(!s.applied());
        drop(s);
        assert!(snapshot(&tree) == before && !state.exists(), "{board} {errno}");

        // At restore: the profile is applied, then the file refuses the original value.
        fault::clear_sysfs(&victim);
        let s = PowerSession::start(&power_config(&tree, &state, "exit")).unwrap();
        assert!(s.applied() && snapshot(&tree) != before);
        fault::inject(f);
        drop(s); // restores all but the victim, logs, keeps the state file
        assert!(state.exists(), "{board} {errno}: the state file must stay for the next start");
        let sf = StateFile::new(&state);
        let e = sf.restore(&tree, &disc).unwrap_err().to_string();
        assert!(
            e.contains("could not restore 1 of")
                && e.contains(&victim.display().to_string())
                && e.contains(says),
            "{board} {errno}: {e}"
        );
        // The system accepts writes again: the next start restores everything first.
        fault::clear_sysfs(&victim);
        let s = PowerSession::start(&PowerConfig {
            profile: Profile::Dynamic,
            ..power_config(&tree, &state, "exit")
        })
        .unwrap();
        drop(s);
        assert!(
            !state.exists() && snapshot(&tree) == before,
            "{board} {errno}: not restored at the next start"
        );
        let _ = std::fs::remove_dir_all(tree.parent().unwrap());
    }
}

#[test]
fn the_daemon_keeps_detecting_unpinned_when_a_clock_file_is_busy() {
    let (tree, run) = copy("orin-nano-jp6", "busy");
    let before = snapshot(&tree);
    let state = run.join("clocks.state");
    let disc = Discovered::scan(&tree);
    let gpu_min = disc.gpu.as_ref().unwrap().dir.join("min_freq");
    let cfg = crate::common::locked_profile_config(&run, &tree, &state, &default_model(), "");
    let fault = format!("sysfs-write:EBUSY@{}", gpu_min.display());
    let d = Daemon::start(&cfg, &[("JETDETECT_FAULT", &fault)]);
    let mut client = d.connect();
    read_detections(&mut client, 3);
    let stats = read_stats(&mut client);
    assert_eq!(stats["telemetry"]["pinned"], false, "{}", stats["telemetry"]);
    assert!(snapshot(&tree) == before && !state.exists());
    d.signal(libc::SIGTERM);
    let (code, _, err) = d.wait_signal(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("[power] profile 'locked' not applied")
            && err.contains(&format!("{}: cannot write", gpu_min.display()))
            && err.contains("the driver is busy"),
        "{err}"
    );
    assert!(snapshot(&tree) == before);
    let _ = std::fs::remove_dir_all(tree.parent().unwrap());
}

/// `jetdetect run --config cfg` in a private mount namespace, with a 64 KiB tmpfs at
/// `mount` made full (`how` = "full": the state file's write fails with ENOSPC) or
/// read-only. Needs root and unshare(1): a test that calls this runs only where build.rs found
/// them or `JETDETECT_REQUIRE_ROOT` is set.
fn run_with_state_dir(cfg: &Path, mount: &Path, how: &str) -> Command {
    crate::common::need_root_and_unshare("a full or read-only state directory");
    std::fs::create_dir_all(mount).unwrap();
    let setup = match how {
        "full" => "mount -t tmpfs -o size=64k jd-state \"$1\" && (head -c 1048576 /dev/zero >\"$1/fill\" 2>/dev/null; true)",
        _ => "mount -t tmpfs -o ro,size=64k jd-state \"$1\"",
    };
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!("{setup} && exec \"$2\" run --config \"$3\""))
        .arg("sh")
        .arg(mount)
        .arg(env!("CARGO_BIN_EXE_jetdetect"))
        .arg(cfg);
    cmd
}

#[test]
#[cfg_attr(not(jetdetect_has_root), ignore = "needs root and unshare(1) (docs/reliability.md)")]
fn a_full_or_read_only_state_directory_leaves_the_clocks_alone_and_detection_goes_on() {
    for (how, says) in [("full", "No space left on device"), ("read-only", "Read-only file system")] {
        let (tree, run) = copy("xavier-nx-jp5", how);
        let before = snapshot(&tree);
        let state_dir = run.join("state");
        let state = state_dir.join("clocks.state");
        let cfg = crate::common::locked_profile_config(&run, &tree, &state, &default_model(), "");
        let cmd = run_with_state_dir(&cfg, &state_dir, how);
        let d = Daemon::spawn(cmd, run.join("d.sock"));
        let mut client = d.connect();
        read_detections(&mut client, 3);
        assert_eq!(read_stats(&mut client)["telemetry"]["pinned"], false);
        assert!(snapshot(&tree) == before, "{how}: a clock was changed without its original saved");
        d.signal(libc::SIGTERM);
        let (code, _, err) = d.wait_signal(Duration::from_secs(20));
        assert_eq!(code, Some(0), "{how}: {err}");
        assert!(
            err.contains("not applied")
                && err.contains("cannot save the original clock values (nothing was changed)")
                && err.contains(says),
            "{how}: {err}"
        );
        assert!(snapshot(&tree) == before);

        // With on_failure = "exit", the same start is an error naming the state file.
        let _ = std::fs::remove_file(run.join("d.sock"));
        let cfg = crate::common::locked_profile_config(
            &run,
            &tree,
            &state,
            &default_model(),
            "on_failure = \"exit\"",
        );
        let out = run_with_state_dir(&cfg, &state_dir, how).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{how}: {err}");
        assert!(err.contains(&state.display().to_string()) && err.contains(says), "{how}: {err}");
        assert!(snapshot(&tree) == before);
        let _ = std::fs::remove_dir_all(tree.parent().unwrap());
    }
}

#[test]
fn a_model_file_truncated_or_replaced_while_running_changes_nothing_and_is_logged() {
    let (tree, run) = copy("nano-jp4", "model");
    let model = run.join("model.onnx");
    std::fs::copy(default_model(), &model).unwrap();
    let state = run.join("clocks.state");
    let cfg = crate::common::locked_profile_config(&run, &tree, &state, &model, "");
    let d = Daemon::start(&cfg, &[]);
    let mut client = d.connect();
    read_detections(&mut client, 2);
    // Truncated in place (a copy interrupted half-way).
    std::fs::OpenOptions::new().write(true).open(&model).unwrap().set_len(100).unwrap();
    read_stats(&mut client);
    read_detections(&mut client, 3);
    // Replaced by another file (rename over it), here garbage.
    let tmp = run.join("model.onnx.new");
    std::fs::write(&tmp, b"this is not an ONNX model").unwrap();
    std::fs::rename(&tmp, &model).unwrap();
    read_stats(&mut client);
    read_detections(&mut client, 3);
    let s = read_stats(&mut client);
    assert_eq!(s["frames"]["errors"], 0, "{s}");
    d.signal(libc::SIGTERM);
    let (code, _, err) = d.wait_signal(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    let path = model.display().to_string();
    assert!(err.contains(&format!("{path}: the model file was modified (100 bytes now)")), "{err}");
    assert!(err.contains(&format!("{path}: the model file was replaced (25 bytes now)")), "{err}");
    assert!(err.contains("restart jetdetect to load the new file"), "{err}");
    let _ = std::fs::remove_dir_all(tree.parent().unwrap());
}

#[test]
fn a_truncated_raw_file_is_played_to_its_last_whole_frame_and_said_so() {
    let (tree, run) = copy("nano-jp4", "rawfile");
    let (w, h) = (64u32, 48u32);
    let frame_len = (w * h * 2) as usize; // YUYV
    let clip = run.join("clip.yuv");
    // Two whole frames and a third cut short (a recording interrupted, a copy not finished).
    std::fs::write(&clip, vec![0x80u8; 2 * frame_len + frame_len / 3]).unwrap();
    let cfg = run.join("jd.toml");
    std::fs::write(
        &cfg,
        format!(
            "[source]\nuri = \"file://{}?width={w}&height={h}&format=yuyv\"\n[model]\npath = \"{}\"\n\
             [output]\nsocket = \"d.sock\"\n",
            clip.display(),
            default_model().display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_jetdetect"))
        .args(["run", "--config"])
        .arg(&cfg)
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "2 whole {w}x{h} yuyv frames and {} trailing bytes, which are ignored",
            frame_len / 3
        )),
        "{err}"
    );
    // An unpaced file source runs at disk speed, and the newest frame wins: a frame may be dropped.
    assert!(err.contains("stopped (end of source)") && err.contains(": 2 captured,"), "{err}");
    assert!(err.contains("last frame is truncated (2048 of 6144 bytes) and was skipped"), "{err}");
    // A file shorter than one frame is refused at start, naming it.
    std::fs::write(&clip, vec![0x80u8; frame_len - 1]).unwrap();
    let out =
        Command::new(env!("CARGO_BIN_EXE_jetdetect")).args(["run", "--config"]).arg(&cfg).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&clip.display().to_string()) && !err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(tree.parent().unwrap());
}
