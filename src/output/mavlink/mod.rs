//! `[output.mavlink]`: obstacles to a flight controller (PX4's collision prevention, ArduPilot's
//! proximity and avoidance) over MAVLink 2, as a companion computer.
//!
//! Every published frame becomes an OBSTACLE_DISTANCE (72 sectors across the camera's field of
//! view, `MAV_FRAME_BODY_FRD`, ranges from the hazard layer) and, per tracked obstacle with a
//! range, ArduPilot's OBSTACLE_DISTANCE_3D carrying its track id (`encode`). While the daemon
//! sees, the latest OBSTACLE_DISTANCE is repeated so it arrives at least `rate_hz` times a
//! second; while it is blind (`[latency] stale_ms`) nothing about obstacles is sent at all, so
//! the autopilot's own timeout (500 ms in both PX4 and ArduPilot) declares the sensor lost
//! instead of trusting old data. A HEARTBEAT (`MAV_TYPE_ONBOARD_CONTROLLER`) goes out every
//! second throughout, its state saying boot / standby / active / critical (blind) / poweroff,
//! and a STATUSTEXT marks each change between blind and seeing.
//!
//! The messages are built on the publisher thread into a slot (no allocation, no I/O); a
//! thread of this output's own (`link`) does the sending, so a serial port that vanishes, a
//! TCP peer that stops reading or a UDP peer that is not there never reaches the pipeline.
//! The encoding, CRCs and transports are the `mavlink` crate's (rust-mavlink, generated from
//! the MAVLink project's XML definitions).

pub mod encode;
mod link;

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mavlink::dialects::ardupilotmega::{MavState, OBSTACLE_DISTANCE_3D_DATA, OBSTACLE_DISTANCE_DATA};
use serde::{Deserialize, Serialize};

use crate::clock;
use crate::pipeline::publish::{Health, Interval, Output, Started};
use crate::pipeline::report::FrameReport;

pub use encode::Limits;

/// The most OBSTACLE_DISTANCE_3D messages sent per frame (the nearest first).
pub const MAX_OBSTACLES_3D: usize = 32;

/// The URL schemes `[output.mavlink] url` takes.
pub const SCHEMES: [&str; 4] = ["udpout", "udpin", "tcpout", "serial"];

/// `[output.mavlink]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MavlinkConfig {
    /// Where the flight controller is: `udpout:HOST:PORT` (send to it), `udpin:ADDR:PORT`
    /// (listen; reply to whoever sends), `tcpout:HOST:PORT`, or `serial:DEVICE:BAUD`
    /// (`serial:/dev/ttyTHS1:921600`, a Jetson UART wired to the autopilot's TELEM port).
    pub url: String,
    /// This system's id: the vehicle's (`MAV_SYS_ID` / `SYSID_THISMAV`), 1 on most vehicles.
    pub system_id: u8,
    /// This component's id: 191 (`MAV_COMP_ID_ONBOARD_COMPUTER`) by default.
    pub component_id: u8,
    /// OBSTACLE_DISTANCE is sent at least this often while the daemon sees (the latest frame's
    /// is repeated between frames), messages per second.
    pub rate_hz: f64,
    /// HEARTBEAT messages per second.
    pub heartbeat_hz: f64,
    /// The nearest range the messages report, metres (nearer obstacles are reported at it).
    pub min_distance_m: f64,
    /// The farthest, metres: obstacles beyond are not reported.
    pub max_distance_m: f64,
    /// Report obstacles without a range estimate (no `[hazards.classes]` size for their class)
    /// at this distance, metres; absent: their sectors are sent as "unknown" (`UINT16_MAX`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unranged_distance_m: Option<f64>,
    /// Send OBSTACLE_DISTANCE (the sectors; PX4 and ArduPilot).
    pub obstacle_distance: bool,
    /// Send OBSTACLE_DISTANCE_3D per ranged track (ArduPilot's dialect; PX4 ignores it).
    pub obstacle_distance_3d: bool,
    /// The camera whose obstacles are sent (a `[[source]] name`); empty: the first camera.
    /// Its `[source.camera]` mounting places the sectors; while it is blind, nothing is sent.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub camera: String,
}

impl Default for MavlinkConfig {
    fn default() -> Self {
        MavlinkConfig {
            url: "udpout:127.0.0.1:14550".into(),
            system_id: 1,
            component_id: 191,
            rate_hz: 10.0,
            heartbeat_hz: 1.0,
            min_distance_m: 0.3,
            max_distance_m: 30.0,
            unranged_distance_m: None,
            obstacle_distance: true,
            obstacle_distance_3d: true,
            camera: String::new(),
        }
    }
}

impl MavlinkConfig {
    /// Checks the values; the error names the key (relative to `[output.mavlink]`).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let scheme = self.url.split_once(':').map(|(s, _)| s).unwrap_or("");
        if !SCHEMES.contains(&scheme) {
            return Err((
                "url",
                format!(
                    "{:?}: give udpout:HOST:PORT, udpin:ADDR:PORT, tcpout:HOST:PORT or serial:DEVICE:BAUD \
                     (e.g. serial:/dev/ttyTHS1:921600)",
                    self.url
                ),
            ));
        }
        if let Err(e) = mavlink::ConnectionAddress::parse_address(&self.url) {
            return Err(("url", format!("{:?}: {e}", self.url)));
        }
        if self.system_id == 0 || self.component_id == 0 {
            let key = if self.system_id == 0 { "system_id" } else { "component_id" };
            return Err((key, "0 is MAVLink's broadcast id: give 1 to 255".into()));
        }
        if !(self.rate_hz >= 1.0 && self.rate_hz <= 100.0) {
            return Err(("rate_hz", format!("{} is out of range: allowed 1 to 100", self.rate_hz)));
        }
        if !(self.heartbeat_hz >= 0.2 && self.heartbeat_hz <= 10.0) {
            return Err((
                "heartbeat_hz",
                format!("{} is out of range: allowed 0.2 to 10", self.heartbeat_hz),
            ));
        }
        if !(self.min_distance_m >= 0.01
            && self.min_distance_m < self.max_distance_m
            && self.max_distance_m <= 655.0)
        {
            return Err((
                "max_distance_m",
                format!(
                    "min_distance_m = {} and max_distance_m = {}: need 0.01 <= min < max <= 655 (centimetres in 16 bits)",
                    self.min_distance_m, self.max_distance_m
                ),
            ));
        }
        if let Some(u) =
            self.unranged_distance_m.filter(|u| !(*u >= self.min_distance_m && *u <= self.max_distance_m))
        {
            return Err((
                "unranged_distance_m",
                format!(
                    "{u} is outside min_distance_m..max_distance_m ({} to {})",
                    self.min_distance_m, self.max_distance_m
                ),
            ));
        }
        if !self.obstacle_distance && !self.obstacle_distance_3d {
            return Err((
                "obstacle_distance",
                "both obstacle_distance and obstacle_distance_3d are off: nothing to send".into(),
            ));
        }
        Ok(())
    }

    /// The distances the messages carry.
    pub fn limits(&self) -> Limits {
        let cm = |m: f64| (m * 100.0).round() as u16;
        Limits {
            min_cm: cm(self.min_distance_m),
            max_cm: cm(self.max_distance_m),
            unranged_cm: self.unranged_distance_m.map(cm),
        }
    }
}

/// Whether obstacle data may go out, as the HEARTBEAT's state says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Loading the model (a TensorRT build can take minutes): `MAV_STATE_BOOT`.
    Boot,
    /// Ready, no frame yet: `MAV_STATE_STANDBY`.
    Standby,
    /// Frames are fresh: `MAV_STATE_ACTIVE`; obstacles are sent.
    Seeing,
    /// No fresh frame within `[latency] stale_ms`: `MAV_STATE_CRITICAL`; no obstacles are sent.
    Blind,
    /// Stopping: `MAV_STATE_POWEROFF`, then the thread ends.
    Stopping,
}

impl Phase {
    fn state(self) -> MavState {
        match self {
            Phase::Boot => MavState::MAV_STATE_BOOT,
            Phase::Standby => MavState::MAV_STATE_STANDBY,
            Phase::Seeing => MavState::MAV_STATE_ACTIVE,
            Phase::Blind => MavState::MAV_STATE_CRITICAL,
            Phase::Stopping => MavState::MAV_STATE_POWEROFF,
        }
    }
}

/// What the publisher hands the sending thread: the newest frame's messages and the phase.
struct Slot {
    /// Bumped for each frame.
    generation: u64,
    phase: Phase,
    /// Why the daemon is blind (for the STATUSTEXT), when it is.
    blind_reason: &'static str,
    distance: OBSTACLE_DISTANCE_DATA,
    obstacles: Vec<OBSTACLE_DISTANCE_3D_DATA>,
}

/// The slot and the bell the sending thread waits on.
struct Shared {
    slot: Mutex<Slot>,
    bell: Condvar,
}

/// Counters the sending thread keeps, read for the log.
#[derive(Debug, Default)]
struct Counters {
    sent: std::sync::atomic::AtomicU64,
    errors: std::sync::atomic::AtomicU64,
    connects: std::sync::atomic::AtomicU64,
}

/// The MAVLink output: encodes on the publisher thread, sends on its own.
pub struct MavlinkOutput {
    config: MavlinkConfig,
    limits: Limits,
    shared: Arc<Shared>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
    /// The publisher's side of the phase (the slot's copy is what the thread acts on).
    phase: Phase,
    /// Scratch for ordering obstacles by range.
    order: Vec<(f64, usize)>,
}

impl MavlinkOutput {
    /// The output for `config` (validated).
    pub fn new(config: &MavlinkConfig) -> MavlinkOutput {
        MavlinkOutput {
            config: config.clone(),
            limits: config.limits(),
            shared: Arc::new(Shared {
                slot: Mutex::new(Slot {
                    generation: 0,
                    phase: Phase::Boot,
                    blind_reason: "",
                    distance: OBSTACLE_DISTANCE_DATA::default(),
                    obstacles: Vec::with_capacity(MAX_OBSTACLES_3D),
                }),
                bell: Condvar::new(),
            }),
            counters: Arc::new(Counters::default()),
            thread: None,
            phase: Phase::Boot,
            order: Vec::with_capacity(128),
        }
    }

    fn set_phase(&mut self, phase: Phase, reason: &'static str) {
        if self.phase == phase {
            return;
        }
        self.phase = phase;
        let mut slot = self.shared.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.phase = phase;
        slot.blind_reason = reason;
        drop(slot);
        self.shared.bell.notify_one();
    }

    fn stop(&mut self, wait: Duration) {
        self.set_phase(Phase::Stopping, "");
        let Some(thread) = self.thread.take() else { return };
        if !super::join_within(thread, wait) {
            log::warn!("MAVLink {}: the sending thread is stuck in I/O; leaving it behind", self.config.url);
        }
    }
}

impl Output for MavlinkOutput {
    fn open(&mut self) -> crate::error::Result<()> {
        let shared = Arc::clone(&self.shared);
        let counters = Arc::clone(&self.counters);
        let config = self.config.clone();
        let thread = std::thread::Builder::new()
            .name("mavlink".into())
            .spawn(move || link::run(&config, &shared, &counters))
            .map_err(|e| crate::error::Error::Io {
                context: "starting the MAVLink thread".into(),
                source: e,
            })?;
        self.thread = Some(thread);
        log::info!(
            "MAVLink: {} as system {} component {}: OBSTACLE_DISTANCE{} at >= {} Hz while seeing, nothing while blind",
            self.config.url,
            self.config.system_id,
            self.config.component_id,
            if self.config.obstacle_distance_3d { " and OBSTACLE_DISTANCE_3D" } else { "" },
            self.config.rate_hz
        );
        Ok(())
    }

    fn ready(&mut self, started: &Started) {
        if self.config.camera.is_empty() {
            self.config.camera = started.cameras.first().map(|c| c.0.clone()).unwrap_or_default();
        }
        self.set_phase(Phase::Standby, "");
    }

    fn frame(&mut self, report: &FrameReport, _dropped: u64, _now: Instant) {
        let h = &report.hazards;
        if h.zones.is_empty() || *report.camera.name != *self.config.camera {
            return;
        }
        // Nearest first, so the 3D messages keep the nearest when there are too many.
        self.order.clear();
        self.order.extend(h.obstacles.iter().enumerate().filter_map(|(i, o)| o.range_m.map(|r| (r, i))));
        self.order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let time_usec = (report.captured_wall_ns / 1000) as u64;
        let time_boot_ms = (clock::mono_ns(report.captured) / 1_000_000) as u32;
        {
            let mut slot = self.shared.slot.lock().unwrap_or_else(|p| p.into_inner());
            encode::obstacle_distance(h, time_usec, &self.limits, &mut slot.distance);
            slot.obstacles.clear();
            for &(_, i) in self.order.iter().take(MAX_OBSTACLES_3D) {
                if let Some(m) = encode::obstacle_3d(&h.obstacles[i], time_boot_ms, &self.limits) {
                    slot.obstacles.push(m);
                }
            }
            slot.generation += 1;
            if slot.phase == Phase::Standby {
                slot.phase = Phase::Seeing;
            }
        }
        if self.phase == Phase::Standby {
            self.phase = Phase::Seeing;
        }
        self.shared.bell.notify_one();
    }

    fn tick(&mut self, health: &Health<'_>) {
        let blind = health.blind.iter().find(|b| b.camera == self.config.camera);
        match (blind, self.phase) {
            (Some(b), Phase::Standby | Phase::Seeing) => self.set_phase(Phase::Blind, b.reason.name()),
            (None, Phase::Blind) => self.set_phase(Phase::Seeing, ""),
            _ => {}
        }
    }

    fn interval(&mut self, _interval: &Interval<'_>) {}

    fn finish(&mut self, _run: &Interval<'_>, _reason: &str) {
        self.stop(Duration::from_millis(500));
        let c = &self.counters;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        log::info!(
            "MAVLink {}: {} messages sent, {} send errors, {} connections",
            self.config.url,
            load(&c.sent),
            load(&c.errors),
            load(&c.connects)
        );
    }
}

impl Drop for MavlinkOutput {
    fn drop(&mut self) {
        self.stop(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_valid_and_bad_values_name_their_key() {
        assert_eq!(MavlinkConfig::default().validate(), Ok(()));
        let bad = |f: fn(&mut MavlinkConfig)| {
            let mut c = MavlinkConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(bad(|c| c.url = "udp:1.2.3.4:14550".into()).0, "url");
        assert!(bad(|c| c.url = "serial:/dev/ttyTHS1".into()).1.contains("Incomplete port settings"));
        assert!(bad(|c| c.url = "serial:/dev/ttyTHS1:fast".into()).1.contains("baud"));
        assert_eq!(bad(|c| c.system_id = 0).0, "system_id");
        assert_eq!(bad(|c| c.rate_hz = 0.5).0, "rate_hz");
        assert_eq!(bad(|c| c.max_distance_m = 700.0).0, "max_distance_m");
        assert_eq!(bad(|c| c.unranged_distance_m = Some(0.1)).0, "unranged_distance_m");
        for url in [
            "udpout:127.0.0.1:14550",
            "udpin:0.0.0.0:14540",
            "tcpout:10.0.0.2:5760",
            "serial:/dev/ttyTHS1:921600",
        ] {
            let c = MavlinkConfig { url: url.into(), ..MavlinkConfig::default() };
            assert_eq!(c.validate(), Ok(()), "{url}");
        }
    }

    #[test]
    fn limits_are_centimetres() {
        let c = MavlinkConfig { unranged_distance_m: Some(1.5), ..MavlinkConfig::default() };
        assert_eq!(c.limits(), Limits { min_cm: 30, max_cm: 3000, unranged_cm: Some(150) });
    }
}
