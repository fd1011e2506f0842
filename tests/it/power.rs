//! Clock control on fixture trees of real boards (tests/fixtures/jetson/, made by
//! make_trees.py from the sysfs reference): apply, verify, restore byte for
//! byte, stale-state recovery, SIGTERM/SIGKILL/panic, and bad trees.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{snapshot, Daemon, BOARDS};
use jetdetect::power::{self, telemetry::Telemetry, Board, Discovered, PowerConfig, PowerSession, StateFile};

fn fixture(board: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jetson").join(board)
}

/// A private copy of a board's tree (tests write to it).
fn copy(board: &str, tag: &str) -> PathBuf {
    let dst = std::env::temp_dir().join(format!("jd-power-{}-{board}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dst);
    let ok = Command::new("cp").arg("-a").arg(fixture(board)).arg(&dst).status().unwrap().success();
    assert!(ok);
    dst
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

fn config(root: &Path, profile: &str) -> PowerConfig {
    PowerConfig {
        profile: profile.parse().unwrap(),
        root: root.to_path_buf(),
        state_file: root.with_extension("state"),
        ..PowerConfig::default()
    }
}

#[test]
fn boards_are_detected_and_their_files_discovered() {
    let expect = [
        ("nano-jp4", "T210", "R32.7.4", 4, "POM_5V_IN"),
        ("xavier-nx-jp5", "T194", "R35.4.1", 6, "VDD_IN"),
        ("orin-nano-jp6", "T234", "R36.4.3", 6, "VDD_IN"),
        ("agx-orin-jp6", "T234", "R36.4.3", 8, "VIN_SYS_5V0"), // MODE_30W: 8 of 12 cores online
        ("agx-orin-jp7", "T234", "R38.2.0", 12, "VIN_SYS_5V0"),
        ("orin-nano-7w", "T234", "R36.4.3", 4, "VDD_IN"),
        ("orin-nx-10w", "T234", "R36.4.3", 4, "VDD_IN"),
        ("xavier-nx-10w", "T194", "R35.4.1", 4, "VDD_IN"),
    ];
    for (board, soc, l4t, cores, total_rail) in expect {
        let root = fixture(board);
        let b = Board::detect(&root);
        assert_eq!(format!("{:?}", b.soc.unwrap()), soc, "{board}");
        assert_eq!(b.l4t.as_deref(), Some(l4t), "{board}");
        let d = Discovered::scan(&root);
        let g = d.gpu.as_ref().unwrap_or_else(|| panic!("{board}: no GPU"));
        assert!(g.available.len() >= 5 && g.railgate.is_some() && g.load.is_some(), "{board}: {g:?}");
        assert_eq!(d.cpus.len(), cores, "{board}");
        assert!(d.emc.is_some() && d.fan.is_some(), "{board}");
        let t = Telemetry::sample(&d);
        assert!(t.temp_c.len() >= 4, "{board}: {t:?}");
        assert!(t.power_mw.contains_key(total_rail) && t.total_mw.is_some(), "{board}: {t:?}");
        if total_rail == "VIN_SYS_5V0" {
            // AGX Orin has no input rail: the total is every rail summed, as jtop does.
            assert_eq!(t.total_mw, Some(t.power_mw.values().sum()), "{board}: {t:?}");
            assert_eq!(t.total_from.as_deref(), Some("sum of rails"));
        } else {
            assert_eq!(t.total_mw, t.power_mw.get(total_rail).copied(), "{board}");
            assert_eq!(t.total_from.as_deref(), Some(total_rail));
        }
        assert!(!t.pinned && !t.throttling, "{board}: {t:?}");
    }
    let pc = Board::detect(&fixture("not-a-jetson"));
    assert!(!pc.is_jetson());
    assert!(pc.to_string().contains("telemetry only"));
    let t = Telemetry::sample(&Discovered::scan(&fixture("not-a-jetson")));
    assert_eq!(t.temp_c.get("x86_pkg_temp"), Some(&52.0));
}

#[test]
fn every_profile_applies_and_restores_byte_for_byte_on_every_board() {
    for board in BOARDS {
        for profile in ["max", "locked"] {
            let root = copy(board, profile);
            let before = snapshot(&root);
            let cfg = config(&root, profile);
            let disc = Discovered::scan(&root);
            let g = disc.gpu.as_ref().unwrap();
            // The nvpmodel mode's ceilings, which the profile pins to and never raises.
            let gpu_ceiling = read(&g.dir.join("max_freq"));
            let cpu_ceilings: Vec<String> =
                disc.cpus.iter().map(|c| read(&c.cpufreq.join("scaling_max_freq"))).collect();
            let plan = power::plan(&cfg, &disc, &Default::default()).unwrap();
            let state = StateFile::new(&cfg.state_file);
            let done = power::apply(&root, &disc, &plan, &state).unwrap();
            assert!(done.mismatches.is_empty(), "{board} {profile}: {:?}", done.mismatches);
            assert_eq!(
                read(&g.dir.join("min_freq")),
                gpu_ceiling,
                "{board} {profile}: GPU floor at the ceiling"
            );
            assert_eq!(read(&g.dir.join("max_freq")), gpu_ceiling, "{board} {profile}: the ceiling kept");
            assert_eq!(read(g.railgate.as_ref().unwrap()), "0");
            for (c, ceiling) in disc.cpus.iter().zip(&cpu_ceilings) {
                assert_eq!(&read(&c.cpufreq.join("scaling_min_freq")), ceiling);
                assert_eq!(&read(&c.cpufreq.join("scaling_max_freq")), ceiling);
                assert!(c.idle_states.iter().all(|s| read(s) == "1"), "{board}: cpuidle off");
            }
            assert!(Telemetry::sample(&disc).pinned || profile == "max", "{board} {profile}");
            assert!(state.exists());
            let n = state.restore(&root, &disc).unwrap();
            assert!(n > 0 && !state.exists());
            assert!(snapshot(&root) == before, "{board} {profile}: the tree is not byte-for-byte as before");
        }
    }
}

#[test]
fn the_nano_gpu_locks_at_918_mhz_as_921_6_and_impossible_values_list_the_valid_ones() {
    let root = copy("nano-jp4", "918");
    let disc = Discovered::scan(&root);
    let mut cfg = config(&root, "locked");
    cfg.gpu_mhz = Some(918);
    let plan = power::plan(&cfg, &disc, &Default::default()).unwrap();
    power::apply(&root, &disc, &plan, &StateFile::new(&cfg.state_file)).unwrap();
    let g = disc.gpu.as_ref().unwrap();
    assert_eq!(read(&g.dir.join("min_freq")), "921600000");
    assert_eq!(read(&g.dir.join("max_freq")), "921600000");
    cfg.gpu_mhz = Some(2000);
    let e = power::plan(&cfg, &disc, &Default::default()).unwrap_err().to_string();
    assert!(
        e.contains("2000 MHz is not possible") && e.contains("76.8, 153.6") && e.contains("921.6"),
        "{e}"
    );
    StateFile::new(&cfg.state_file).restore(&root, &disc).unwrap();
}

#[test]
fn a_stale_state_file_is_restored_at_the_next_start() {
    let root = copy("orin-nano-jp6", "stale");
    let before = snapshot(&root);
    let cfg = config(&root, "max");
    let disc = Discovered::scan(&root);
    // A run that applied clocks and then died (no restore).
    let plan = power::plan(&cfg, &disc, &Default::default()).unwrap();
    power::apply(&root, &disc, &plan, &StateFile::new(&cfg.state_file)).unwrap();
    assert!(snapshot(&root) != before);
    // The next start, even with the dynamic profile, restores first.
    let _sessions = crate::common::sessions();
    let session = PowerSession::start(&config(&root, "dynamic")).unwrap();
    assert!(!cfg.state_file.exists());
    assert!(snapshot(&root) == before);
    drop(session);
}

#[test]
fn a_panic_restores_the_clocks() {
    let root = copy("xavier-nx-jp5", "panic");
    let before = snapshot(&root);
    let cfg = config(&root, "max");
    let _sessions = crate::common::sessions();
    let r = std::panic::catch_unwind(|| {
        let session = PowerSession::start(&cfg).unwrap();
        std::mem::forget(session); // only the panic hook can restore now
        panic!("boom");
    });
    assert!(r.is_err());
    assert!(!cfg.state_file.exists(), "the panic hook restored and removed the state file");
    assert!(snapshot(&root) == before);
}

#[test]
fn broken_trees_give_clear_errors_and_nothing_is_left_changed() {
    let root = copy("agx-orin-jp6", "broken");
    let before = snapshot(&root);
    let disc = Discovered::scan(&root);
    let g = disc.gpu.clone().unwrap();
    // The GPU floor file turns into a directory: the write fails, the rest is undone.
    let floor = std::fs::read(g.dir.join("min_freq")).unwrap();
    std::fs::remove_file(g.dir.join("min_freq")).unwrap();
    std::fs::create_dir(g.dir.join("min_freq")).unwrap();
    let cfg = config(&root, "max");
    let plan = power::plan(&cfg, &disc, &Default::default()).unwrap();
    let e = power::apply(&root, &disc, &plan, &StateFile::new(&cfg.state_file)).unwrap_err().to_string();
    assert!(e.contains("min_freq: cannot read") || e.contains("min_freq: cannot write"), "{e}");
    std::fs::remove_dir(g.dir.join("min_freq")).unwrap();
    std::fs::write(g.dir.join("min_freq"), floor).unwrap();
    assert!(snapshot(&root) == before, "nothing left changed");
    // A file missing on this JetPack is named.
    std::fs::remove_file(disc.cpus[3].cpufreq.join("scaling_min_freq")).unwrap();
    let e = power::apply(&root, &disc, &plan, &StateFile::new(&cfg.state_file)).unwrap_err().to_string();
    assert!(e.contains("cpu3/cpufreq/scaling_min_freq") && e.contains("missing"), "{e}");
}

#[test]
fn the_cli_refuses_non_jetsons_and_explains_missing_permissions() {
    let bin = env!("CARGO_BIN_EXE_jetdetect");
    let o = Command::new(bin).args(["clocks", "apply", "--profile", "max"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if !Board::detect(Path::new("/")).is_jetson() {
        assert_eq!(o.status.code(), Some(1));
        assert!(err.contains("not a Jetson") && err.contains("refusing"), "{err}");
    }
    // Not root: run as nobody with setpriv (util-linux), where available.
    let root = copy("orin-nano-jp6", "perm");
    let has_setpriv = Command::new("setpriv").arg("--help").output().is_ok();
    let is_root = unsafe { libc::geteuid() } == 0;
    if has_setpriv && is_root {
        let state = std::env::temp_dir().join(format!("jd-perm-{}.state", std::process::id()));
        let o = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                bin,
                "clocks",
                "apply",
                "--profile",
                "max",
                "--root",
            ])
            .arg(&root)
            .arg("--state-file")
            .arg(&state)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("needs root") || err.contains("Permission denied"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn the_daemon_pins_clocks_reports_telemetry_and_restores_on_sigterm_and_after_sigkill() {
    use std::io::BufRead;
    let root = copy("agx-orin-jp7", "daemon");
    let before = snapshot(&root);
    let dir = root.with_extension("run");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let model = crate::common::repo().join("models/obstacles-v8.onnx");
    let cfg = crate::common::locked_profile_config(&dir, &root, &dir.join("clocks.state"), &model, "");

    let d = Daemon::start(&cfg, &[]);
    assert!(snapshot(&root) != before, "the profile was applied");
    assert!(dir.join("clocks.state").exists());
    let mut lines = d.connect().lines();
    let stats: serde_json::Value = loop {
        let v: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if v["type"] == "stats" {
            break v;
        }
    };
    let t = &stats["telemetry"];
    assert_eq!(t["pinned"], true, "{t}");
    assert!(t["temp_c"]["gpu-thermal"].as_f64().unwrap() > 0.0, "{t}");
    assert!(t["power_mw"]["VDD_GPU_SOC"].as_f64().unwrap() > 0.0, "{t}");
    d.signal(libc::SIGTERM);
    let (code, err) = d.wait(std::time::Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    assert!(!dir.join("clocks.state").exists());
    assert!(snapshot(&root) == before, "SIGTERM restored the tree byte for byte");

    // SIGKILL leaves the clocks changed; the next start restores them first.
    let d = Daemon::start(&cfg, &[]);
    d.signal(libc::SIGKILL);
    d.wait(std::time::Duration::from_secs(20));
    assert!(dir.join("clocks.state").exists() && snapshot(&root) != before);
    let _ = std::fs::remove_file(dir.join("d.sock"));
    let o = Command::new(env!("CARGO_BIN_EXE_jetdetect"))
        .args(["clocks", "restore", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(snapshot(&root) == before, "restored after SIGKILL");
}

/// `jetdetect <args>` on `tree` mounted read-only for it alone (a private mount namespace), as
/// the service's sandbox leaves /sys to the daemon. Needs root and unshare(1): a test that calls
/// this runs only where build.rs found them or `JETDETECT_REQUIRE_ROOT` is set.
fn on_a_read_only_tree(tree: &Path, args: &[&str]) -> Command {
    crate::common::need_root_and_unshare("a read-only tree");
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c"])
        .arg("mount --bind \"$1\" \"$1\" && mount -o remount,bind,ro \"$1\" && shift && exec \"$@\"")
        .arg("sh")
        .arg(tree)
        .arg(env!("CARGO_BIN_EXE_jetdetect"))
        .args(args);
    cmd
}

#[test]
fn as_a_service_the_clock_steps_run_around_a_daemon_that_writes_nothing() {
    service_steps(false);
}

#[test]
#[cfg_attr(not(jetdetect_has_root), ignore = "needs root and unshare(1) (docs/reliability.md)")]
fn as_a_service_on_a_read_only_tree_the_daemon_writes_nothing_and_could_not() {
    service_steps(true);
}

/// The service's clock steps (apply, a daemon with `--clocks service`, restore) on a copy of an
/// AGX Orin tree; with `read_only`, the daemon sees the tree read-only, as the unit's sandbox
/// leaves /sys to it, and a daemon left to hold the clocks itself is shown to fail there.
fn service_steps(read_only: bool) {
    use std::io::BufRead;
    let bin = env!("CARGO_BIN_EXE_jetdetect");
    let root = copy("agx-orin-jp7", if read_only { "service-ro" } else { "service" });
    let before = snapshot(&root);
    let dir = root.with_extension("svc");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("clocks.state");
    let model = crate::common::repo().join("models/obstacles-v8.onnx");
    let cfg = crate::common::locked_profile_config(&dir, &root, &state, &model, "");
    let cfg_arg = cfg.to_str().unwrap();

    // ExecStartPre=+jetdetect clocks apply --service
    let o = Command::new(bin).args(["clocks", "apply", "--service", "--config", cfg_arg]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pinned = snapshot(&root);
    assert!(pinned != before && state.exists());
    let saved = std::fs::read(&state).unwrap();

    // ExecStart=jetdetect run --clocks service.
    let args = ["run", "--clocks", "service", "--config", cfg_arg];
    let cmd = if read_only {
        on_a_read_only_tree(&root, &args)
    } else {
        let mut c = Command::new(bin);
        c.args(args);
        c
    };
    let d = Daemon::spawn(cmd, dir.join("d.sock"));
    let mut lines = d.connect().lines();
    let stats: serde_json::Value = loop {
        let v: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if v["type"] == "stats" {
            break v;
        }
    };
    assert_eq!(
        stats["telemetry"]["pinned"], true,
        "the daemon reads the pinned clocks: {}",
        stats["telemetry"]
    );
    d.signal(libc::SIGTERM);
    let (code, err) = d.wait(std::time::Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("applied by the service"), "{err}");
    assert!(!err.contains("not applied") && !err.contains("restored"), "{err}");
    assert!(snapshot(&root) == pinned, "the daemon changed nothing, and left the restore to the service");
    assert_eq!(std::fs::read(&state).unwrap(), saved, "the state file is clocks apply's");

    // The same daemon left to hold the clocks itself cannot, on the read-only tree: the check
    // above could fail.
    if read_only {
        let cmd = on_a_read_only_tree(&root, &["run", "--config", cfg_arg]);
        let _ = std::fs::remove_file(dir.join("d.sock"));
        let d = Daemon::spawn(cmd, dir.join("d.sock"));
        d.signal(libc::SIGTERM);
        let (_, err) = d.wait(std::time::Duration::from_secs(20));
        assert!(err.contains("Read-only file system"), "{err}");
        assert!(snapshot(&root) == pinned);
    }

    // ExecStopPost=+jetdetect clocks restore
    let o = Command::new(bin).args(["clocks", "restore", "--config", cfg_arg]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(snapshot(&root) == before && !state.exists(), "restored byte for byte");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn as_a_service_step_clocks_apply_fails_the_start_only_where_the_daemon_would_stop() {
    let bin = env!("CARGO_BIN_EXE_jetdetect");
    // Not a Jetson (this machine, without --root): the daemon would run with the profile ignored.
    if !Board::detect(Path::new("/")).is_jetson() {
        let o =
            Command::new(bin).args(["clocks", "apply", "--service", "--profile", "max"]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && err.contains("profile 'max' ignored") && err.contains("not a Jetson"),
            "{err}"
        );
    }
    // A clock file the driver refuses: logged, exit 0 with on_failure = "continue" (the default),
    // exit 1 with "exit" and without --service.
    let root = copy("orin-nano-jp6", "svc-busy");
    let before = snapshot(&root);
    let dir = root.with_extension("svc");
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("clocks.state");
    let gpu_min = Discovered::scan(&root).gpu.unwrap().dir.join("min_freq");
    let fault = format!("sysfs-write:EBUSY@{}", gpu_min.display());
    let model = crate::common::repo().join("models/obstacles-v8.onnx");
    for (extra, service, ok) in [("", true, true), ("on_failure = \"exit\"", true, false), ("", false, false)]
    {
        let cfg = crate::common::locked_profile_config(&dir, &root, &state, &model, extra);
        let mut cmd = Command::new(bin);
        cmd.args(["clocks", "apply", "--config"]).arg(&cfg).env("JETDETECT_FAULT", &fault);
        if service {
            cmd.arg("--service");
        }
        let o = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.success(), ok, "{extra} service={service}: {err}");
        assert!(err.contains("the driver is busy"), "{err}");
        if ok {
            assert!(err.contains("the service runs with the clocks as they are"), "{err}");
        }
        assert!(snapshot(&root) == before && !state.exists(), "nothing left changed");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn nvpmodel_modes_switch_by_name_warn_about_reboots_and_are_restored() {
    use jetdetect::power::nvpmodel::Nvpmodel;
    // The fixture's nvpmodel is a stand-in with the real tool's -q / -m interface.
    let root = copy("agx-orin-jp6", "nvp");
    let before = snapshot(&root);
    let nv = Nvpmodel::find(&root).unwrap();
    assert_eq!(nv.current().unwrap(), 2);
    let e = nv.resolve("MODE_99W").unwrap_err().to_string();
    assert!(e.contains("0 (MAXN), 1 (MODE_15W), 2 (MODE_30W), 3 (MODE_50W)"), "{e}");
    let mut cfg = config(&root, "max");
    cfg.nvpmodel = Some("mode_15w".into());
    let state = StateFile::new(&cfg.state_file);
    let done = power::engage(&cfg, &state).unwrap();
    assert!(done.applied.reboot_needed.unwrap().contains("after a reboot"));
    assert_eq!(nv.current().unwrap(), 1);
    state.restore(&root, &done.discovered).unwrap();
    assert_eq!(nv.current().unwrap(), 2, "the original mode is back");
    assert!(snapshot(&root) == before);
}
