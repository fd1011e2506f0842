//! Finding the clock, fan, thermal and power files of this board by scanning
//! sysfs under the root, the way jetson_clocks and jtop do: never a
//! hard-coded GPU path. Every path here is one jetdetect may read; the
//! writable ones are the only files `apply` and `restore` will ever write.

use std::path::{Path, PathBuf};

/// The GPU's devfreq node.
#[derive(Clone, Debug, PartialEq)]
pub struct Gpu {
    /// The devfreq directory (`min_freq`, `max_freq`, `cur_freq`, `governor`, `available_frequencies`).
    pub dir: PathBuf,
    /// Frequencies the GPU can run at, in Hz, ascending.
    pub available: Vec<u64>,
    /// `railgate_enable`, when the driver exposes it.
    pub railgate: Option<PathBuf>,
    /// `load`, per mille.
    pub load: Option<PathBuf>,
}

/// One CPU core's frequency and idle controls.
#[derive(Clone, Debug, PartialEq)]
pub struct Cpu {
    /// Core number.
    pub index: usize,
    /// Its `cpufreq` directory.
    pub cpufreq: PathBuf,
    /// `cpuidle/stateN/disable` files.
    pub idle_states: Vec<PathBuf>,
    /// Highest frequency (kHz), `cpuinfo_max_freq`.
    pub max_khz: u64,
    /// `scaling_available_frequencies` in kHz, ascending (may be empty).
    pub available: Vec<u64>,
}

/// The memory clock's controls, which differ per SoC.
#[derive(Clone, Debug, PartialEq)]
pub enum Emc {
    /// t186/t194/t234: bpmp debugfs `emc/{rate,min_rate,max_rate,mrq_rate_locked}` and the nvpmodel cap.
    Bpmp {
        /// The `emc` directory.
        dir: PathBuf,
        /// `emc_iso_cap`, when present.
        cap: Option<PathBuf>,
    },
    /// t210: `override.emc/{clk_rate,clk_update_rate,clk_state}` and `tegra_bwmgr/emc_max_rate`.
    T210 {
        /// The `override.emc` directory.
        dir: PathBuf,
        /// `emc_max_rate`.
        max_rate: PathBuf,
    },
    /// Thor: the `bwmgr` devfreq node.
    Devfreq {
        /// The devfreq directory.
        dir: PathBuf,
    },
}

/// A thermal zone.
#[derive(Clone, Debug, PartialEq)]
pub struct Zone {
    /// `type`, e.g. `gpu-thermal`.
    pub name: String,
    /// `temp` (milli-degrees C).
    pub temp: PathBuf,
    /// Lowest trip point (milli-degrees C), if any.
    pub trip_mc: Option<i64>,
}

/// How a power rail's reading is obtained.
#[derive(Clone, Debug, PartialEq)]
pub enum RailReading {
    /// hwmon: millivolts and milliamps files.
    VoltCurrent(PathBuf, PathBuf),
    /// iio: a milliwatt file.
    Power(PathBuf),
}

/// An INA3221 channel.
#[derive(Clone, Debug, PartialEq)]
pub struct Rail {
    /// Label, e.g. `VDD_IN`.
    pub name: String,
    /// Where the reading comes from.
    pub reading: RailReading,
}

/// The fan and what else drives it.
#[derive(Clone, Debug, PartialEq)]
pub struct Fan {
    /// The PWM file (0..255): hwmon `pwm1`, or `target_pwm` on JetPack 4.
    pub pwm: PathBuf,
    /// JetPack 4's `temp_control`: while 1 the kernel sets the PWM from the temperature, so it must
    /// be 0 before a fixed PWM holds.
    pub temp_control: Option<PathBuf>,
    /// The service that rewrites the PWM on JetPack 5/6 (`nvfancontrol`), when its unit is installed:
    /// it must be stopped for a fixed PWM to hold, and started again on restore.
    pub service: Option<String>,
}

/// Everything found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Discovered {
    /// The GPU devfreq node.
    pub gpu: Option<Gpu>,
    /// A rail-gated GPU's `railgate_enable` when its devfreq node is not registered yet: the GPU
    /// registers with devfreq only once powered (jetson_clocks R35/R36 write 0 here and scan again).
    pub gpu_unregistered: Option<PathBuf>,
    /// Online CPU cores.
    pub cpus: Vec<Cpu>,
    /// The EMC controls.
    pub emc: Option<Emc>,
    /// The fan.
    pub fan: Option<Fan>,
    /// Thermal zones.
    pub zones: Vec<Zone>,
    /// Power rails.
    pub rails: Vec<Rail>,
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim_matches(|c: char| c.is_whitespace() || c == '\0').to_string())
}

fn numbers(p: &Path) -> Vec<u64> {
    let mut v: Vec<u64> =
        read(p).unwrap_or_default().split_whitespace().filter_map(|x| x.parse().ok()).collect();
    v.sort_unstable();
    v
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn existing(p: PathBuf) -> Option<PathBuf> {
    p.exists().then_some(p)
}

/// GPU names in device-tree `of_node/name` or `compatible`.
const GPU_NAMES: [&str; 6] = ["gv11b", "gp10b", "ga10b", "gb10b", "gm20b", "gpu"];

fn find_gpu(root: &Path) -> Option<Gpu> {
    for node in entries(&root.join("sys/class/devfreq")) {
        let dir = std::fs::canonicalize(&node).unwrap_or(node.clone());
        let dev = dir.join("device");
        let name = read(&dev.join("of_node/name")).unwrap_or_default();
        let compat = read(&dev.join("of_node/compatible")).unwrap_or_default();
        let node_name = node.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let is_gpu = GPU_NAMES.iter().any(|g| name == *g || compat.contains(g))
            || (node_name.contains("gpu") && !node_name.contains("nvd"));
        if !is_gpu || !dir.join("min_freq").exists() {
            continue;
        }
        let dev = std::fs::canonicalize(&dev).unwrap_or(dev);
        let platform_gpu = root.join("sys/devices/platform/gpu.0");
        let legacy_gpu = root.join("sys/devices/gpu.0");
        return Some(Gpu {
            available: numbers(&dir.join("available_frequencies")),
            railgate: existing(dev.join("railgate_enable"))
                .or_else(|| existing(platform_gpu.join("railgate_enable"))),
            load: existing(dev.join("load"))
                .or_else(|| existing(platform_gpu.join("load")))
                .or_else(|| existing(legacy_gpu.join("load"))),
            dir,
        });
    }
    None
}

fn find_cpus(root: &Path) -> Vec<Cpu> {
    let base = root.join("sys/devices/system/cpu");
    let mut cpus: Vec<Cpu> = entries(&base)
        .into_iter()
        .filter_map(|p| {
            let index: usize = p.file_name()?.to_str()?.strip_prefix("cpu")?.parse().ok()?;
            let online = read(&p.join("online")).map(|v| v == "1").unwrap_or(true);
            let cpufreq = p.join("cpufreq");
            if !online || !cpufreq.join("scaling_min_freq").exists() {
                return None;
            }
            let idle_states = entries(&p.join("cpuidle"))
                .into_iter()
                .map(|s| s.join("disable"))
                .filter(|d| d.exists())
                .collect();
            let max_khz = read(&cpufreq.join("cpuinfo_max_freq")).and_then(|v| v.parse().ok()).unwrap_or(0);
            Some(Cpu {
                index,
                available: numbers(&cpufreq.join("scaling_available_frequencies")),
                cpufreq,
                idle_states,
                max_khz,
            })
        })
        .collect();
    cpus.sort_by_key(|c| c.index);
    cpus
}

fn find_emc(root: &Path) -> Option<Emc> {
    let bpmp = root.join("sys/kernel/debug/bpmp/debug/clk/emc");
    if bpmp.join("rate").exists() {
        let cap = existing(root.join("sys/kernel/nvpmodel_emc_cap/emc_iso_cap"))
            .or_else(|| existing(root.join("sys/kernel/nvpmodel_clk_cap/emc")));
        return Some(Emc::Bpmp { dir: bpmp, cap });
    }
    let t210 = root.join("sys/kernel/debug/clk/override.emc");
    if t210.join("clk_update_rate").exists() {
        let max_rate = root.join("sys/kernel/debug/tegra_bwmgr/emc_max_rate");
        return Some(Emc::T210 { dir: t210, max_rate });
    }
    let thor = root.join("sys/class/devfreq/bwmgr");
    thor.join("max_freq").exists().then(|| Emc::Devfreq { dir: std::fs::canonicalize(&thor).unwrap_or(thor) })
}

/// Where systemd unit files are installed, under the root.
const UNIT_DIRS: [&str; 3] = ["etc/systemd/system", "lib/systemd/system", "usr/lib/systemd/system"];

fn find_fan(root: &Path) -> Option<Fan> {
    let legacy = root.join("sys/devices/pwm-fan/target_pwm");
    if legacy.exists() {
        return Some(Fan {
            pwm: legacy,
            temp_control: existing(root.join("sys/devices/pwm-fan/temp_control")),
            service: None,
        });
    }
    let pwm = entries(&root.join("sys/class/hwmon")).into_iter().find_map(|h| {
        let dir = std::fs::canonicalize(&h).unwrap_or(h);
        let name = read(&dir.join("name")).unwrap_or_default();
        (name.contains("fan") && dir.join("pwm1").exists()).then(|| dir.join("pwm1"))
    })?;
    let service = UNIT_DIRS
        .iter()
        .any(|d| root.join(d).join("nvfancontrol.service").exists())
        .then(|| "nvfancontrol".to_string());
    Some(Fan { pwm, temp_control: None, service })
}

/// The GPU device's `railgate_enable` where jetson_clocks looks for it (`gpu.0`), when no devfreq node
/// was found: the GPU is rail-gated and not yet registered.
fn find_unregistered_gpu(root: &Path, gpu: &Option<Gpu>) -> Option<PathBuf> {
    if gpu.is_some() {
        return None;
    }
    ["sys/devices/platform/gpu.0", "sys/devices/gpu.0"]
        .iter()
        .map(|d| root.join(d))
        .find(|d| d.join("of_node/compatible").exists())
        .and_then(|d| existing(d.join("railgate_enable")))
}

fn find_zones(root: &Path) -> Vec<Zone> {
    entries(&root.join("sys/class/thermal"))
        .into_iter()
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("thermal_zone")))
        .filter_map(|p| {
            let dir = std::fs::canonicalize(&p).unwrap_or(p);
            let name = read(&dir.join("type"))?;
            let trip_mc = entries(&dir)
                .iter()
                .filter(|f| {
                    f.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("trip_point_") && n.ends_with("_temp"))
                })
                .filter_map(|f| read(f)?.parse::<i64>().ok())
                .filter(|&t| t > 0)
                .min();
            Some(Zone { name, temp: dir.join("temp"), trip_mc })
        })
        .collect()
}

fn find_rails(root: &Path) -> Vec<Rail> {
    let mut rails = Vec::new();
    for dev in entries(&root.join("sys/bus/i2c/devices")) {
        if !read(&dev.join("name")).is_some_and(|n| n.starts_with("ina3221")) {
            continue;
        }
        // JetPack 5+: hwmon with in{N}_label / in{N}_input (mV) / curr{N}_input (mA).
        for hw in entries(&dev.join("hwmon")) {
            for ch in 1..=8 {
                let Some(label) = read(&hw.join(format!("in{ch}_label"))) else { continue };
                if label == "NC" || label.starts_with("Sum of") {
                    continue;
                }
                let (v, i) = (hw.join(format!("in{ch}_input")), hw.join(format!("curr{ch}_input")));
                if v.exists() && i.exists() {
                    rails.push(Rail { name: label, reading: RailReading::VoltCurrent(v, i) });
                }
            }
        }
        // JetPack 4: iio with rail_name_N / in_powerN_input (mW).
        for iio in entries(&dev)
            .into_iter()
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("iio:device")))
        {
            for ch in 0..8 {
                let Some(label) = read(&iio.join(format!("rail_name_{ch}"))) else { continue };
                let p = iio.join(format!("in_power{ch}_input"));
                if p.exists() {
                    rails.push(Rail { name: label, reading: RailReading::Power(p) });
                }
            }
        }
    }
    rails
}

impl Discovered {
    /// Scans the tree under `root`.
    pub fn scan(root: &Path) -> Discovered {
        let gpu = find_gpu(root);
        Discovered {
            gpu_unregistered: find_unregistered_gpu(root, &gpu),
            gpu,
            cpus: find_cpus(root),
            emc: find_emc(root),
            fan: find_fan(root),
            zones: find_zones(root),
            rails: find_rails(root),
        }
    }

    /// Every file `apply`/`restore` may write.
    pub fn writable(&self) -> Vec<PathBuf> {
        let mut v = Vec::new();
        if let Some(g) = &self.gpu {
            v.extend(["min_freq", "max_freq", "governor"].map(|f| g.dir.join(f)));
            v.extend(g.railgate.clone());
        }
        v.extend(self.gpu_unregistered.clone());
        for c in &self.cpus {
            v.extend(["scaling_min_freq", "scaling_max_freq", "scaling_governor"].map(|f| c.cpufreq.join(f)));
            v.extend(c.idle_states.iter().cloned());
        }
        match &self.emc {
            Some(Emc::Bpmp { dir, .. }) => {
                v.extend(["rate", "mrq_rate_locked", "min_rate"].map(|f| dir.join(f)))
            }
            Some(Emc::T210 { dir, .. }) => v.extend(["clk_update_rate", "clk_state"].map(|f| dir.join(f))),
            Some(Emc::Devfreq { dir }) => v.extend(["min_freq", "max_freq", "governor"].map(|f| dir.join(f))),
            None => {}
        }
        if let Some(f) = &self.fan {
            v.push(f.pwm.clone());
            v.extend(f.temp_control.clone());
        }
        v
    }
}

/// DLA engines on this board: host1x client nodes named `*.nvdla<N>` under
/// `<root>/sys/devices/platform` (Xavier, AGX Orin and Orin NX 16GB have two,
/// Orin NX 8GB one; Nano, TX2 and Orin Nano none).
pub fn dla_cores(root: &Path) -> usize {
    fn walk(dir: &Path, depth: usize, found: &mut std::collections::BTreeSet<u32>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if let Some(n) = name.rsplit_once(".nvdla").and_then(|(_, n)| n.parse::<u32>().ok()) {
                found.insert(n);
            } else if depth > 0 && e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&e.path(), depth - 1, found);
            }
        }
    }
    let mut found = std::collections::BTreeSet::new();
    walk(&root.join("sys/devices/platform"), 3, &mut found);
    found.len()
}
