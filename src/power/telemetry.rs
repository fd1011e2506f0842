//! Board telemetry: clock frequencies, GPU load, temperatures, rail power,
//! and whether the pinned clocks hold (throttling).

use std::collections::BTreeMap;

use serde::Serialize;

use super::discover::{Discovered, Emc, RailReading};
use super::read_value;

/// One sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Telemetry {
    /// GPU current / min / max frequency in MHz.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_mhz: Option<[f64; 3]>,
    /// GPU governor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_governor: Option<String>,
    /// GPU load in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_load_pct: Option<f64>,
    /// Per-core current CPU frequency in MHz.
    pub cpu_mhz: Vec<f64>,
    /// CPU governor of core 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_governor: Option<String>,
    /// Memory clock in MHz.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emc_mhz: Option<f64>,
    /// Temperature per thermal zone in degrees C (offline sensors, -256 C, are left out).
    pub temp_c: BTreeMap<String, f64>,
    /// Power per rail in mW.
    pub power_mw: BTreeMap<String, f64>,
    /// Total power in mW, as jtop counts it: the board's input rail where it has one (`VIN` on Thor,
    /// `POM_5V_IN` on JetPack 4, `VDD_IN`), otherwise the sum of every rail (AGX Xavier and AGX Orin
    /// measure no input rail: their `VIN_SYS_5V0` is one rail among others, not the total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_mw: Option<f64>,
    /// Where `total_mw` comes from: the input rail's name, or `sum of rails`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_from: Option<String>,
    /// GPU and CPU floors equal their ceilings.
    pub pinned: bool,
    /// A clock below its pinned floor, or a zone at or over its trip point.
    pub throttling: bool,
    /// What the throttling flag saw.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub throttle_reasons: Vec<String>,
}

/// Rails that measure the whole board's input, in jtop's order of preference.
const TOTAL_RAILS: [&str; 3] = ["VIN", "POM_5V_IN", "VDD_IN"];

fn num(p: &std::path::Path) -> Option<f64> {
    read_value(p).ok()?.parse().ok()
}

impl Telemetry {
    /// Reads everything discovered; missing files just leave fields empty.
    pub fn sample(disc: &Discovered) -> Telemetry {
        let mut t = Telemetry::default();
        let mut floors_pinned = Vec::new();
        if let Some(g) = &disc.gpu {
            let (cur, min, max) =
                (num(&g.dir.join("cur_freq")), num(&g.dir.join("min_freq")), num(&g.dir.join("max_freq")));
            if let (Some(c), Some(lo), Some(hi)) = (cur, min, max) {
                t.gpu_mhz = Some([c / 1e6, lo / 1e6, hi / 1e6]);
                floors_pinned.push(lo >= hi);
                if lo >= hi && c + 1e6 < lo {
                    t.throttle_reasons.push(format!(
                        "GPU at {:.0} MHz, below its pinned {:.0} MHz",
                        c / 1e6,
                        lo / 1e6
                    ));
                }
            }
            t.gpu_governor = read_value(&g.dir.join("governor")).ok();
            t.gpu_load_pct = g.load.as_deref().and_then(num).map(|v| v / 10.0);
        }
        for c in &disc.cpus {
            let cur = num(&c.cpufreq.join("scaling_cur_freq"));
            let (lo, hi) =
                (num(&c.cpufreq.join("scaling_min_freq")), num(&c.cpufreq.join("scaling_max_freq")));
            if let Some(f) = cur {
                t.cpu_mhz.push(f / 1000.0);
            }
            if let (Some(cur), Some(lo), Some(hi)) = (cur, lo, hi) {
                floors_pinned.push(lo >= hi);
                if lo >= hi && cur + 1000.0 < lo {
                    t.throttle_reasons.push(format!(
                        "cpu{} at {:.0} MHz, below its pinned {:.0} MHz",
                        c.index,
                        cur / 1000.0,
                        lo / 1000.0
                    ));
                }
            }
        }
        t.cpu_governor = disc.cpus.first().and_then(|c| read_value(&c.cpufreq.join("scaling_governor")).ok());
        t.emc_mhz = match &disc.emc {
            Some(Emc::Bpmp { dir, .. }) => num(&dir.join("rate")).map(|v| v / 1e6),
            Some(Emc::T210 { dir, .. }) => num(&dir.join("clk_rate")).map(|v| v / 1e6),
            Some(Emc::Devfreq { dir }) => num(&dir.join("cur_freq")).map(|v| v / 1e6),
            None => None,
        };
        for z in &disc.zones {
            if let Some(mc) = num(&z.temp) {
                if mc <= -255_000.0 {
                    continue;
                }
                t.temp_c.insert(z.name.clone(), (mc / 10.0).round() / 100.0);
                if let Some(trip) = z.trip_mc {
                    if mc >= trip as f64 {
                        t.throttle_reasons.push(format!(
                            "{} at {:.1} C, at or over its trip point {:.1} C",
                            z.name,
                            mc / 1000.0,
                            trip as f64 / 1000.0
                        ));
                    }
                }
            }
        }
        for r in &disc.rails {
            let mw = match &r.reading {
                RailReading::VoltCurrent(v, i) => num(v).zip(num(i)).map(|(mv, ma)| mv * ma / 1000.0),
                RailReading::Power(p) => num(p),
            };
            if let Some(mw) = mw {
                t.power_mw.insert(r.name.clone(), mw.round());
            }
        }
        match TOTAL_RAILS.iter().find(|n| t.power_mw.contains_key(**n)) {
            Some(n) => {
                t.total_mw = t.power_mw.get(*n).copied();
                t.total_from = Some(n.to_string());
            }
            None if !t.power_mw.is_empty() => {
                t.total_mw = Some(t.power_mw.values().sum());
                t.total_from = Some("sum of rails".into());
            }
            None => {}
        }
        t.pinned = !floors_pinned.is_empty() && floors_pinned.iter().all(|&p| p);
        t.throttling = !t.throttle_reasons.is_empty();
        t
    }
}

/// The telemetry thread: samples the board every period, so that the newest sample is at hand
/// without a read of sysfs on the caller's thread. Stopped and joined when dropped.
pub struct Sampler {
    latest: std::sync::Arc<std::sync::Mutex<Telemetry>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling `disc` every `period`.
    pub fn spawn(disc: Discovered, period: std::time::Duration) -> std::io::Result<Sampler> {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        use std::time::{Duration, Instant};
        let latest = Arc::new(Mutex::new(Telemetry::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (slot, stopped) = (Arc::clone(&latest), Arc::clone(&stop));
        let thread = std::thread::Builder::new().name("telemetry".into()).spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                let sample = Telemetry::sample(&disc);
                if let Ok(mut s) = slot.lock() {
                    *s = sample;
                }
                let until = Instant::now() + period;
                while Instant::now() < until && !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        })?;
        Ok(Sampler { latest, stop, thread: Some(thread) })
    }

    /// The newest sample (the default before the first).
    pub fn latest(&self) -> Telemetry {
        self.latest.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
