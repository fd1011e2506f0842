//! Clock control on boards that behave (tests/emulator: a FUSE filesystem over a fixture's sys/
//! answering as the kernel and NVIDIA's services do): profiles stay inside the nvpmodel mode, the
//! EMC rate is a reading, a rail-gated GPU is powered up to be found, the fan's controller is
//! paused and resumed, an nvpmodel switch is followed by a new plan, and the daemon itself pins
//! and restores. Each needs root and /dev/fuse: where build.rs found neither they are reported as
//! ignored, unless `JETDETECT_REQUIRE_FUSE=1` (`.ci/run`), which makes a missing emulator a failure.

use std::path::Path;
use std::process::Command;

use crate::common::snapshot;
use jetdetect::power::{self, telemetry::Telemetry, Discovered, PowerConfig, StateFile};

/// The GPU devfreq node of the Orin fixtures (under sys/), and its class link.
const ORIN_GPU: &str = "devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu";

fn config(root: &Path, profile: &str) -> PowerConfig {
    PowerConfig {
        profile: profile.parse().unwrap(),
        root: root.to_path_buf(),
        state_file: root.join("var/lib/jetdetect/clocks.state"),
        ..PowerConfig::default()
    }
}

/// The tree's settings, read through the emulator (readings by name only), with the state folder left out.
fn settings(root: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    snapshot(root).into_iter().filter(|(p, _)| !p.starts_with("var/lib/jetdetect")).collect()
}

/// A board in a low-power nvpmodel mode, and what that mode allows.
struct LowPower {
    board: &'static str,
    /// `id (NAME)` of the mode it is in.
    mode: &'static str,
    gpu_cap_hz: u64,
    cpu_cap_khz: u64,
    cores: usize,
    emc_cap_hz: u64,
    /// A GPU clock above the ceiling (MHz asked, MHz as snapped to the table), and the lowest mode allowing it.
    above: (u32, &'static str, &'static str),
}

const LOW_POWER: [LowPower; 3] = [
    LowPower {
        board: "orin-nano-7w",
        mode: "3 (7W)",
        gpu_cap_hz: 408_000_000,
        cpu_cap_khz: 960_000,
        cores: 4,
        emc_cap_hz: 2_133_000_000,
        above: (918, "918.0", "25W"),
    },
    LowPower {
        board: "orin-nx-10w",
        mode: "1 (10W)",
        gpu_cap_hz: 612_000_000,
        cpu_cap_khz: 1_497_600,
        cores: 4,
        emc_cap_hz: 2_133_000_000,
        above: (714, "714.0", "20W"),
    },
    LowPower {
        board: "xavier-nx-10w",
        mode: "4 (MODE_10W_4CORE)",
        gpu_cap_hz: 510_000_000,
        cpu_cap_khz: 1_190_400,
        cores: 4,
        emc_cap_hz: 1_600_000_000,
        above: (918, "905.2", "MODE_15W_6CORE"),
    },
];

#[test]
#[cfg_attr(
    not(jetdetect_has_fuse),
    ignore = "needs root and /dev/fuse for the board emulator (docs/reliability.md)"
)]
fn max_and_locked_pin_inside_the_nvpmodel_mode_and_never_raise_a_ceiling() {
    for LowPower { board, gpu_cap_hz: gpu_cap, cpu_cap_khz: cpu_cap, cores, emc_cap_hz: emc_cap, .. } in
        LOW_POWER
    {
        for profile in ["max", "locked"] {
            let b = emulated!(board, profile);
            let root = b.root().to_path_buf();
            let before = settings(&root);
            let cfg = config(&root, profile);
            let state = StateFile::new(&cfg.state_file);
            let done = power::engage(&cfg, &state).unwrap_or_else(|e| panic!("{board} {profile}: {e:?}"));
            assert!(done.applied.mismatches.is_empty(), "{board} {profile}: {:?}", done.applied.mismatches);
            let d = &done.discovered;
            assert_eq!(d.cpus.len(), cores, "{board}: the mode's online cores");
            let g = d.gpu.as_ref().unwrap();
            let gdir = g.dir.strip_prefix(root.join("sys")).unwrap().display().to_string();
            assert_eq!(
                b.value(&format!("{gdir}/max_freq")),
                gpu_cap.to_string(),
                "{board} {profile}: GPU ceiling kept"
            );
            assert_eq!(
                b.value(&format!("{gdir}/min_freq")),
                gpu_cap.to_string(),
                "{board} {profile}: GPU floor at it"
            );
            for c in 0..cores {
                let f = format!("devices/system/cpu/cpu{c}/cpufreq");
                assert_eq!(
                    b.value(&format!("{f}/scaling_max_freq")),
                    cpu_cap.to_string(),
                    "{board} cpu{c} ceiling"
                );
                assert_eq!(
                    b.value(&format!("{f}/scaling_min_freq")),
                    cpu_cap.to_string(),
                    "{board} cpu{c} floor"
                );
            }
            let emc = "kernel/debug/bpmp/debug/clk/emc";
            assert_eq!(b.value(&format!("{emc}/mrq_rate_locked")), "1");
            assert_eq!(
                b.value(&format!("{emc}/rate")),
                emc_cap.to_string(),
                "{board}: EMC locked at the mode's cap"
            );
            assert!(Telemetry::sample(d).pinned, "{board} {profile}");
            state.restore(&root, d).unwrap();
            assert!(settings(&root) == before, "{board} {profile}: every setting back");
        }
    }
}

#[test]
#[cfg_attr(
    not(jetdetect_has_fuse),
    ignore = "needs root and /dev/fuse for the board emulator (docs/reliability.md)"
)]
fn a_clock_above_the_modes_ceiling_is_an_error_naming_the_ceiling_and_a_mode_that_allows_it() {
    for LowPower {
        board,
        mode,
        gpu_cap_hz: gpu_cap,
        cpu_cap_khz: cpu_cap,
        above: (mhz, snapped, allows),
        ..
    } in LOW_POWER
    {
        let b = emulated!(board, "ceiling");
        let root = b.root().to_path_buf();
        let before = settings(&root);
        let mut cfg = config(&root, "locked");
        cfg.gpu_mhz = Some(mhz);
        let state = StateFile::new(&cfg.state_file);
        let e = power::engage(&cfg, &state).unwrap_err();
        assert!(matches!(e, power::Failure::Config(_)), "{board}: a configuration error: {e:?}");
        let e = e.error().to_string();
        let cap = format!("{:.1} MHz", gpu_cap as f64 / 1e6);
        assert!(
            e.contains(&format!("gpu_mhz = {snapped} MHz"))
                && e.contains(&cap)
                && e.contains(&format!("nvpmodel mode {mode}"))
                && e.contains(&format!("nvpmodel = \"{allows}\"")),
            "{board}: {e}"
        );
        cfg.gpu_mhz = None;
        cfg.cpu_min_mhz = Some(1_700);
        let e = power::engage(&cfg, &state).unwrap_err().error().to_string();
        assert!(
            e.contains("cpu_min_mhz") && e.contains(&format!("{:.1} MHz", cpu_cap as f64 / 1e3)),
            "{board}: {e}"
        );
        assert!(settings(&root) == before && !state.exists(), "{board}: nothing changed");
    }
}

#[test]
#[cfg_attr(
    not(jetdetect_has_fuse),
    ignore = "needs root and /dev/fuse for the board emulator (docs/reliability.md)"
)]
fn the_emc_rate_is_a_reading_a_restore_always_finishes_and_the_next_start_pins() {
    let b = emulated!("agx-orin-jp6", "emc");
    let root = b.root().to_path_buf();
    let emc = "kernel/debug/bpmp/debug/clk/emc";
    // Unlocked, the rate moves on its own.
    let (r1, r2) = (b.value(&format!("{emc}/rate")), b.value(&format!("{emc}/rate")));
    assert_ne!(r1, r2, "the emulated EMC follows the load");
    let cfg = config(&root, "max");
    let state = StateFile::new(&cfg.state_file);
    let done = power::engage(&cfg, &state).unwrap();
    let recorded = std::fs::read_to_string(&cfg.state_file).unwrap();
    assert!(recorded.contains("mrq_rate_locked\t0") && !recorded.contains("emc/rate\t"), "{recorded}");
    state.restore(&root, &done.discovered).unwrap();
    assert!(!state.exists(), "the restore finished");
    assert_eq!(b.value(&format!("{emc}/mrq_rate_locked")), "0");

    // A state file left with a value the board refuses for good (an earlier version's, or a
    // hand-edited one) does not keep the next start from pinning: it is retried, and kept alone.
    state.record(&root, &[(root.join("sys").join(emc).join("mrq_rate_locked"), "7".into())]).unwrap();
    let done = power::engage(&cfg, &state).unwrap();
    let stale = done.stale.unwrap().unwrap_err().to_string();
    assert!(stale.contains("could not restore 1 of 1") && stale.contains("next start retries"), "{stale}");
    assert!(Telemetry::sample(&done.discovered).pinned, "pinned all the same");
    assert_eq!(b.value(&format!("{emc}/mrq_rate_locked")), "1");
}

#[test]
#[cfg_attr(
    not(jetdetect_has_fuse),
    ignore = "needs root and /dev/fuse for the board emulator (docs/reliability.md)"
)]
fn a_rail_gated_gpu_is_powered_up_to_be_found_and_its_railgate_put_back() {
    let b = emulated!("agx-orin-jp6", "railgate", &[ORIN_GPU, "class/devfreq/17000000.gpu"]);
    let root = b.root().to_path_buf();
    let before = settings(&root);
    let d = Discovered::scan(&root);
    assert!(d.gpu.is_none() && d.gpu_unregistered.is_some(), "rail-gated: no devfreq node yet: {d:?}");
    let mut cfg = config(&root, "locked");
    cfg.gpu_railgate_off = Some(false);
    let state = StateFile::new(&cfg.state_file);
    let done = power::engage(&cfg, &state).unwrap();
    let g = done.discovered.gpu.as_ref().expect("found once powered");
    assert_eq!(b.value(&format!("{ORIN_GPU}/min_freq")), b.value(&format!("{ORIN_GPU}/max_freq")), "{g:?}");
    assert_eq!(b.value("devices/platform/gpu.0/railgate_enable"), "1", "the railgate setting is put back");
    let order: Vec<String> =
        b.model().writes.iter().filter(|w| w.0.ends_with("railgate_enable")).map(|w| w.1.clone()).collect();
    assert_eq!(order, ["0", "1"], "powered up once, then put back");
    state.restore(&root, &done.discovered).unwrap();
    // Registered once powered, the devfreq node stays (until a reboot); everything else is as before.
    let registered = |p: &Path| {
        p.starts_with(Path::new("sys").join(ORIN_GPU)) || p.ends_with("class/devfreq/17000000.gpu")
    };
    let after: Vec<_> = settings(&root).into_iter().filter(|(p, _)| !registered(p)).collect();
    assert!(after == before);
}

#[test]
#[cfg_attr(
    not(jetdetect_has_fuse),
    ignore = "needs root and /dev/fuse for the board emulator (docs/reliability.md)"
)]
fn a_fixed_fan_pauses_its_controller_and_resumes_it_on_restore() {
    // JetPack 5/6: nvfancontrol rewrites pwm1 while it runs.
    let b = emulated!("orin-nano-jp6", "fan");
    let root = b.root().to_path_buf();
    let before = settings(&root);
    let pwm = "devices/platform/pwm-fan/hwmon/hwmon3/pwm1";
    assert!(b.service_active("nvfancontrol"));
    let mut cfg = config(&root, "dynamic");
    cfg.fan_pwm = Some(200);
    let state = StateFile::new(&cfg.state_file);
    let done = power::engage(&cfg, &state).unwrap();
    assert_eq!(done.applied.stopped, ["nvfancontrol"]);
    assert!(
        !b.service_active("nvfancontrol") && done.applied.mismatches.is_empty(),
        "{:?}",
        done.applied.mismatches
    );
    assert_eq!(b.value(pwm), "200", "the fan holds its PWM");
    state.restore(&root, &done.discovered).unwrap();
    assert!(b.service_active("nvfancontrol"), "started again");
    assert_ne!(b.value(pwm), "200", "nvfancontrol drives the fan again");
    assert!(settings(&root) == before);

    // JetPack 4: temp_control goes to 0 first, and back to 1 after.
    let b = emulated!("nano-jp4", "fan");
    let root = b.root().to_path_buf();
    let before = settings(&root);
    let mut cfg = config(&root, "dynamic");
    cfg.fan_pwm = Some(200);
    let state = StateFile::new(&cfg.state_file);
    let done = power::engage(&cfg, &state).unwrap();
    assert!(done.applied.mismatches.is_empty(), "{:?}", done.applied.mismatches);
    assert_eq!(
        (b.value("devices/pwm-fan/temp_control").as_str(), b.value("devices/pwm-fan/target_pwm").as_str()),
        ("0", "200")
    );
    state.restore(&root, &done.discovered).unwrap();
    assert_eq!(b.value("devices/pwm-fan/temp_control"), "1");
    assert!(settings(&root) == before);
}

#[test]
#[cfg_attr(
    not(jetdetect_has_fuse),
    ignore = "needs root and /dev/fuse for the board emulator (docs/reliability.md)"
)]
fn an_nvpmodel_switch_is_followed_by_discovery_and_a_new_plan_and_undone_last() {
    for profile in ["max", "locked"] {
        let b = emulated!("orin-nano-7w", profile);
        let root = b.root().to_path_buf();
        let before = settings(&root);
        let mut cfg = config(&root, profile);
        cfg.nvpmodel = Some("25W".into());
        // Locked below 25W's ceiling, so that the ceiling itself is changed and recorded.
        let gpu = if profile == "locked" {
            cfg.gpu_mhz = Some(714);
            "714000000"
        } else {
            "918000000"
        };
        let state = StateFile::new(&cfg.state_file);
        let done = power::engage(&cfg, &state).unwrap();
        assert_eq!(done.mode.as_ref().unwrap().name, "25W");
        assert_eq!(done.discovered.cpus.len(), 6, "25W brings cores 4 and 5 online: discovered again");
        for c in 0..6 {
            let f = format!("devices/system/cpu/cpu{c}/cpufreq/scaling_min_freq");
            assert_eq!(b.value(&f), "1344000", "{profile}: cpu{c} pinned at 25W's ceiling");
        }
        assert_eq!(b.value(&format!("{ORIN_GPU}/min_freq")), gpu, "{profile}: the GPU inside 25W");
        state.restore(&root, &done.discovered).unwrap();
        assert_eq!(b.value("devices/system/cpu/cpu5/online"), "0", "{profile}: back in 7W");
        // Undone last-first: the clocks inside 25W, then the mode; never 25W's values over 7W's.
        assert_eq!(b.value(&format!("{ORIN_GPU}/max_freq")), "408000000", "{profile}: 7W's ceiling");
        assert!(settings(&root) == before, "{profile}: clocks restored inside 25W, then the mode");
    }
}

#[test]
#[cfg_attr(
    not(jetdetect_has_fuse),
    ignore = "needs root and /dev/fuse for the board emulator (docs/reliability.md)"
)]
fn the_daemon_pins_inside_the_mode_on_an_emulated_board_and_restores_on_sigterm() {
    let b = emulated!("orin-nx-10w", "daemon");
    let root = b.root().to_path_buf();
    let before = settings(&root);
    let run = root.join("run/jd");
    std::fs::create_dir_all(&run).unwrap();
    let model = crate::common::repo().join("models/obstacles-v8.onnx");
    let cfg = crate::common::locked_profile_config(&run, &root, &run.join("clocks.state"), &model, "");
    let d = crate::common::Daemon::start(&cfg, &[]);
    assert_eq!(b.value(&format!("{ORIN_GPU}/min_freq")), "612000000", "locked at 10W's GPU ceiling");
    assert_eq!(b.value(&format!("{ORIN_GPU}/max_freq")), "612000000");
    d.signal(libc::SIGTERM);
    let (code, err) = d.wait(std::time::Duration::from_secs(30));
    assert_eq!(code, Some(0), "{err}");
    assert!(!run.join("clocks.state").exists(), "{err}");
    let after: Vec<_> = settings(&root).into_iter().filter(|(p, _)| !p.starts_with("run/jd")).collect();
    let before: Vec<_> = before.into_iter().filter(|(p, _)| !p.starts_with("run/jd")).collect();
    assert!(after == before, "SIGTERM put every setting back");
}

#[test]
#[cfg_attr(
    not(jetdetect_has_fuse),
    ignore = "needs root and /dev/fuse for the board emulator (docs/reliability.md)"
)]
fn clocks_show_prints_the_mode_and_its_ceilings_and_a_tree_keeps_its_own_state() {
    let bin = env!("CARGO_BIN_EXE_jetdetect");
    let tree = crate::common::repo().join("tests/fixtures/jetson/orin-nano-7w");
    let o = Command::new(bin).args(["clocks", "show", "--root"]).arg(&tree).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("nvpmodel: mode 3 (7W)") && out.contains("2 (MAXN_SUPER)"), "{out}");
    assert!(out.contains("max 408.0 = the mode's ceiling"), "{out}");
    assert!(out.contains("4 cores online") && out.contains("ceilings MHz [960 960 960 960]"), "{out}");
    assert!(out.contains("ceiling 2133 MHz, emc_iso_cap") && out.contains("driven by nvfancontrol"), "{out}");

    // `clocks apply --root` without --state-file: the state goes under the tree, never the host's.
    let b = emulated!("orin-nano-jp6", "cli");
    let o = Command::new(bin)
        .args(["clocks", "apply", "--profile", "max", "--root"])
        .arg(b.root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(b.root().join("var/lib/jetdetect/clocks.state").exists());
    let o = Command::new(bin).args(["clocks", "restore", "--root"]).arg(b.root()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!b.root().join("var/lib/jetdetect/clocks.state").exists());
}
