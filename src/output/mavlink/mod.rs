//! `[output.mavlink]`: obstacles to a flight controller (PX4's collision prevention, ArduPilot's
//! proximity and avoidance) over MAVLink 2, as a companion computer.
//!
//! Every published frame becomes one OBSTACLE_DISTANCE (36 sectors of 10 degrees round the
//! vehicle, `MAV_FRAME_BODY_FRD`, ranges from the hazard layer; `encode` says why that layout)
//! and, where asked, OBSTACLE_DISTANCE_3D per tracked obstacle with a range, closed so that
//! ArduPilot takes the batch at once. Each frame is sent once: both autopilots stamp what they
//! receive on arrival, so a repeated message would make old data look new.
//!
//! `autopilot` says whose reading the messages are shaped for ([`Profile`]): the two differ in
//! what "unknown" means, whether OBSTACLE_DISTANCE_3D is read at all, and what keeps a vehicle
//! from flying blind. While the camera is blind (`[latency] stale_ms`), PX4 gets silence (its
//! collision prevention stops the vehicle, then switches to Hold after 5 s) and ArduPilot a
//! wall across the camera's view (silence would switch its avoidance off, for every proximity
//! sensor). A HEARTBEAT (`MAV_TYPE_ONBOARD_CONTROLLER`) goes out every second throughout, its
//! state saying boot / standby / active / critical (blind) / poweroff, and a STATUSTEXT marks
//! each change between blind and seeing.
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
use crate::output::{Health, Interval, Output, OutputError, Started};
use crate::report::FrameReport;

pub use encode::Limits;

/// The most OBSTACLE_DISTANCE_3D messages sent per frame (the nearest first), besides the one
/// that closes the batch.
pub const MAX_OBSTACLES_3D: usize = 32;

/// The URL schemes `[output.mavlink] url` takes.
pub const SCHEMES: [&str; 4] = ["udpout", "udpin", "tcpout", "serial"];

/// How often the blind wall is sent, messages per second: well inside ArduPilot's 500 ms
/// timeout, with room for a lost datagram.
pub const WALL_HZ: f64 = 10.0;

named_enum! {
    /// `[output.mavlink] autopilot`: whose reading the messages are shaped for.
    pub enum Autopilot {
        /// PX4's collision prevention (`CollisionPrevention.cpp`).
        Px4 = "px4",
        /// ArduPilot's proximity library (`AP_Proximity_MAV.cpp`) and avoidance (`AC_Avoid`).
        ArduPilot = "ardupilot",
    }
}

impl std::str::FromStr for Autopilot {
    type Err = crate::named::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| {
            crate::named::UnknownName::new(
                "[output.mavlink] autopilot: ",
                s,
                " is not an autopilot",
                Self::names(", "),
            )
        })
    }
}

named_enum! {
    /// `[output.mavlink] blind`: what goes out while the camera is blind.
    pub enum BlindPolicy {
        /// Nothing about obstacles: the autopilot's timeout declares the sensor lost.
        Silent = "silent",
        /// OBSTACLE_DISTANCE with every sector the view reaches into at `blind_distance_m`,
        /// [`WALL_HZ`] times a second.
        Wall = "wall",
    }
}

impl std::str::FromStr for BlindPolicy {
    type Err = crate::named::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| {
            crate::named::UnknownName::new(
                "[output.mavlink] blind: ",
                s,
                " is not a blind policy",
                Self::names(", "),
            )
        })
    }
}

/// `[output.mavlink]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MavlinkConfig {
    /// Where the flight controller is: `udpout:HOST:PORT` (send to it), `udpin:ADDR:PORT`
    /// (listen; reply to whoever sends), `tcpout:HOST:PORT`, or `serial:DEVICE:BAUD`
    /// (`serial:/dev/ttyTHS1:921600`, a Jetson UART wired to the autopilot's TELEM port).
    pub url: String,
    /// Whose reading the messages are shaped for: `px4` or `ardupilot` (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autopilot: Option<Autopilot>,
    /// This system's id: the vehicle's (`MAV_SYS_ID` / `SYSID_THISMAV`), 1 on most vehicles.
    pub system_id: u8,
    /// This component's id: 191 (`MAV_COMP_ID_ONBOARD_COMPUTER`) by default.
    pub component_id: u8,
    /// The most frames sent a second (a slow serial link), 5 to 100: frames beyond are skipped,
    /// the newest kept.
    pub max_rate_hz: f64,
    /// Removed: kept only to say so. Frames used to be repeated to reach this rate.
    #[serde(skip_serializing)]
    pub rate_hz: Option<f64>,
    /// HEARTBEAT messages per second.
    pub heartbeat_hz: f64,
    /// The nearest range the messages report, metres (nearer obstacles are reported just
    /// beyond it).
    pub min_distance_m: f64,
    /// The farthest, metres: obstacles beyond are not reported.
    pub max_distance_m: f64,
    /// Report obstacles without a range estimate (no `[hazards.classes]` size for their class)
    /// at this distance, metres; absent: "unknown" for PX4 (it will not fly there), and
    /// `blind_distance_m` for ArduPilot (which reads "unknown" as clear).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unranged_distance_m: Option<f64>,
    /// Send OBSTACLE_DISTANCE (the sectors; PX4 and ArduPilot).
    pub obstacle_distance: bool,
    /// Send OBSTACLE_DISTANCE_3D per ranged track (ArduPilot's dialect; PX4 has no reader for
    /// it). Absent: off. With OBSTACLE_DISTANCE on, only obstacles ArduPilot files above or below
    /// its middle layer are sent, so the two never write the same face.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub obstacle_distance_3d: Option<bool>,
    /// What goes out while the camera is blind: `silent` or `wall`. Absent: `silent` for PX4,
    /// `wall` for ArduPilot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blind: Option<BlindPolicy>,
    /// The wall's distance, metres: set it to ArduPilot's `AVOID_MARGIN` (nearer, ArduPilot
    /// backs away at `AVOID_BACKUP_SPD`; farther, it lets the vehicle creep closer).
    pub blind_distance_m: f64,
    /// The camera whose obstacles are sent (a `[[source]] name`); empty: the first camera.
    /// Its `[source.camera]` mounting places the sectors; while it is blind, the blind policy
    /// applies.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub camera: String,
}

impl Default for MavlinkConfig {
    fn default() -> Self {
        MavlinkConfig {
            url: "udpout:127.0.0.1:14550".into(),
            autopilot: None,
            system_id: 1,
            component_id: 191,
            max_rate_hz: 30.0,
            rate_hz: None,
            heartbeat_hz: 1.0,
            min_distance_m: 0.3,
            max_distance_m: 30.0,
            unranged_distance_m: None,
            obstacle_distance: true,
            obstacle_distance_3d: None,
            blind: None,
            blind_distance_m: 2.0,
            camera: String::new(),
        }
    }
}

/// What the output sends, resolved from a valid [`MavlinkConfig`] and its autopilot's reading.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Profile {
    /// The autopilot.
    pub autopilot: Autopilot,
    /// Send OBSTACLE_DISTANCE.
    pub obstacle_distance: bool,
    /// Send OBSTACLE_DISTANCE_3D (and its closing message).
    pub obstacle_distance_3d: bool,
    /// Only the obstacles ArduPilot files off its middle layer go as 3D (on ArduPilot, beside
    /// OBSTACLE_DISTANCE, which owns that layer).
    pub off_middle_layer: bool,
    /// While blind.
    pub blind: BlindPolicy,
    /// The distances.
    pub limits: Limits,
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
        // The network forms take HOST:PORT, which rust-mavlink reads only when it connects (an
        // error then is retried every second, forever): checked here, so `check` says it.
        if let Some(address) = self.url.strip_prefix(scheme).and_then(|a| a.strip_prefix(':')) {
            if scheme != "serial" {
                let port = address.rsplit_once(':').filter(|(host, _)| !host.is_empty());
                let port =
                    port.and_then(|(_, p)| p.parse::<u16>().ok()).filter(|p| *p > 0 || scheme == "udpin");
                if port.is_none() {
                    return Err((
                        "url",
                        format!(
                            "{:?}: give {scheme}:HOST:PORT with a port from 1 to 65535 (e.g. {scheme}:127.0.0.1:14550)",
                            self.url
                        ),
                    ));
                }
            }
        }
        if self.autopilot.is_none() {
            return Err((
                "autopilot",
                format!(
                    "missing: say whose reading to shape the messages for, {} (they read \
                     OBSTACLE_DISTANCE differently: docs/outputs.md)",
                    Autopilot::names(" or ")
                ),
            ));
        }
        if self.rate_hz.is_some() {
            return Err((
                "rate_hz",
                "was removed: each frame's obstacles are now sent once, not repeated between frames \
                 (PX4 and ArduPilot stamp a message when it arrives, so a repeat made old data look \
                 fresh); delete the key, or use max_rate_hz to cap the rate on a slow link"
                    .into(),
            ));
        }
        if self.system_id == 0 || self.component_id == 0 {
            let key = if self.system_id == 0 { "system_id" } else { "component_id" };
            return Err((key, "0 is MAVLink's broadcast id: give 1 to 255".into()));
        }
        if !(self.max_rate_hz >= 5.0 && self.max_rate_hz <= 100.0) {
            return Err((
                "max_rate_hz",
                format!(
                    "{} is out of range: allowed 5 to 100 (both autopilots drop a sensor 500 ms after its \
                     last message)",
                    self.max_rate_hz
                ),
            ));
        }
        if !(self.heartbeat_hz >= 0.2 && self.heartbeat_hz <= 10.0) {
            return Err((
                "heartbeat_hz",
                format!("{} is out of range: allowed 0.2 to 10", self.heartbeat_hz),
            ));
        }
        if !(self.min_distance_m >= 0.01
            && self.min_distance_m + 0.1 <= self.max_distance_m
            && self.max_distance_m <= 655.0)
        {
            return Err((
                "max_distance_m",
                format!(
                    "min_distance_m = {} and max_distance_m = {}: need 0.01 <= min, min + 0.1 <= max <= 655 \
                     (centimetres in 16 bits)",
                    self.min_distance_m, self.max_distance_m
                ),
            ));
        }
        let within = |v: f64| v > self.min_distance_m && v <= self.max_distance_m;
        if let Some(u) = self.unranged_distance_m.filter(|u| !within(*u)) {
            return Err((
                "unranged_distance_m",
                format!(
                    "{u} is outside min_distance_m..max_distance_m ({} to {})",
                    self.min_distance_m, self.max_distance_m
                ),
            ));
        }
        if !within(self.blind_distance_m) {
            return Err((
                "blind_distance_m",
                format!(
                    "{} is outside min_distance_m..max_distance_m ({} to {}): give ArduPilot's AVOID_MARGIN",
                    self.blind_distance_m, self.min_distance_m, self.max_distance_m
                ),
            ));
        }
        if !self.obstacle_distance && self.obstacle_distance_3d != Some(true) {
            return Err((
                "obstacle_distance",
                "both obstacle_distance and obstacle_distance_3d are off: nothing to send".into(),
            ));
        }
        if self.autopilot == Some(Autopilot::Px4) && !self.obstacle_distance {
            return Err((
                "obstacle_distance",
                "PX4 reads only OBSTACLE_DISTANCE (it has no handler for OBSTACLE_DISTANCE_3D): \
                 turn obstacle_distance on"
                    .into(),
            ));
        }
        Ok(())
    }

    /// What to send, from a config [`validate`](Self::validate) accepted.
    pub fn profile(&self) -> Profile {
        let autopilot = self.autopilot.unwrap_or(Autopilot::Px4);
        let cm = |m: f64| (m * 100.0).round() as u16;
        let wall_cm = cm(self.blind_distance_m);
        let unranged_cm = match (self.unranged_distance_m, autopilot) {
            (Some(u), _) => Some(cm(u)),
            // PX4 reads UINT16_MAX as "no data" and will not fly there.
            (None, Autopilot::Px4) => None,
            // ArduPilot reads it as clear: something is there, report it at the margin.
            (None, Autopilot::ArduPilot) => Some(wall_cm),
        };
        let three_d = self.obstacle_distance_3d == Some(true);
        Profile {
            autopilot,
            obstacle_distance: self.obstacle_distance,
            obstacle_distance_3d: three_d,
            off_middle_layer: three_d && self.obstacle_distance && autopilot == Autopilot::ArduPilot,
            blind: self.blind.unwrap_or(match autopilot {
                Autopilot::Px4 => BlindPolicy::Silent,
                Autopilot::ArduPilot => BlindPolicy::Wall,
            }),
            limits: Limits {
                min_cm: cm(self.min_distance_m),
                max_cm: cm(self.max_distance_m),
                unranged_cm,
                wall_cm,
            },
        }
    }

    /// What goes out, in words, for `check` and the log: `shaped for ardupilot: OBSTACLE_DISTANCE
    /// per frame; while blind: a wall at 2 m across the view`.
    pub fn describe(&self) -> String {
        let p = self.profile();
        let messages = match (p.obstacle_distance, p.obstacle_distance_3d, p.off_middle_layer) {
            (true, false, _) => "OBSTACLE_DISTANCE",
            (true, true, true) => "OBSTACLE_DISTANCE and OBSTACLE_DISTANCE_3D off ArduPilot's middle layer",
            (true, true, false) => "OBSTACLE_DISTANCE and OBSTACLE_DISTANCE_3D",
            (false, _, _) => "OBSTACLE_DISTANCE_3D",
        };
        let blind = match p.blind {
            BlindPolicy::Silent => "nothing (the autopilot's timeout takes over)".to_string(),
            BlindPolicy::Wall => format!("a wall at {} m across the view", self.blind_distance_m),
        };
        format!("shaped for {}: {messages} per frame; while blind: {blind}", p.autopilot)
    }

    /// What the config leaves to the autopilot that it should know, for `check` and the log:
    /// a setting that works but probably not as meant.
    pub fn notes(&self) -> Vec<String> {
        let p = self.profile();
        let mut notes = Vec::new();
        if p.autopilot == Autopilot::Px4 && p.obstacle_distance_3d {
            notes.push(
                "obstacle_distance_3d: PX4 has no handler for OBSTACLE_DISTANCE_3D; only other readers use it".into(),
            );
        }
        if p.autopilot == Autopilot::ArduPilot && p.obstacle_distance_3d && !p.obstacle_distance {
            notes.push(
                "obstacle_distance_3d without obstacle_distance: ArduPilot clears a face it filled only \
                 after 1 s without news (PROXIMITY_FACE_RESET_MS), so an obstacle that left stays that \
                 long; with obstacle_distance on, every frame clears them"
                    .into(),
            );
        }
        if p.autopilot == Autopilot::ArduPilot && p.blind == BlindPolicy::Silent {
            notes.push(
                "blind = \"silent\": ArduPilot marks the sensor NoData after 500 ms and then turns proximity \
                 avoidance off (for every proximity sensor) while the camera is blind"
                    .into(),
            );
        }
        notes
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
    /// The frame's OBSTACLE_DISTANCE_3D batch, its closing message last.
    obstacles: Vec<OBSTACLE_DISTANCE_3D_DATA>,
    /// The camera's view (azimuths of its left and right edges), once a frame has shown it:
    /// where the blind wall goes.
    view: Option<(f64, f64)>,
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
    /// Frames not sent because the next one came before `max_rate_hz` allowed a send.
    skipped: std::sync::atomic::AtomicU64,
}

/// The MAVLink output: encodes on the publisher thread, sends on its own.
pub struct MavlinkOutput {
    config: MavlinkConfig,
    profile: Profile,
    shared: Arc<Shared>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
    /// The publisher's side of the phase (the slot's copy is what the thread acts on).
    phase: Phase,
    /// Scratch for ordering obstacles by range.
    order: Vec<(f64, usize)>,
    /// Where the flight controller's ATTITUDE goes.
    attitude: Option<Arc<crate::hazard::course::AttitudeFeed>>,
}

impl MavlinkOutput {
    /// The output for `config` (validated).
    pub fn new(config: &MavlinkConfig) -> MavlinkOutput {
        MavlinkOutput {
            config: config.clone(),
            profile: config.profile(),
            shared: Arc::new(Shared {
                slot: Mutex::new(Slot {
                    generation: 0,
                    phase: Phase::Boot,
                    blind_reason: "",
                    distance: OBSTACLE_DISTANCE_DATA::default(),
                    obstacles: Vec::with_capacity(MAX_OBSTACLES_3D + 1),
                    view: None,
                }),
                bell: Condvar::new(),
            }),
            counters: Arc::new(Counters::default()),
            thread: None,
            phase: Phase::Boot,
            order: Vec::with_capacity(128),
            attitude: None,
        }
    }

    /// The output with the flight controller's ATTITUDE messages going to `feed`, for the
    /// hazard layers to take the camera's rotation out (docs/hazards.md, Collision course).
    pub fn with_attitude_feed(mut self, feed: Arc<crate::hazard::course::AttitudeFeed>) -> MavlinkOutput {
        self.attitude = Some(feed);
        self
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
    fn open(&mut self) -> Result<(), OutputError> {
        let shared = Arc::clone(&self.shared);
        let counters = Arc::clone(&self.counters);
        let config = self.config.clone();
        let profile = self.profile;
        let attitude = self.attitude.clone();
        let thread = std::thread::Builder::new()
            .name("mavlink".into())
            .spawn(move || link::run(&config, &profile, &shared, &counters, attitude.as_deref()))
            .map_err(|source| OutputError::Thread { context: "starting the MAVLink thread", source })?;
        self.thread = Some(thread);
        log::info!(
            "MAVLink: {} as system {} component {}, at most {} frames a second, {}",
            self.config.url,
            self.config.system_id,
            self.config.component_id,
            self.config.max_rate_hz,
            self.config.describe()
        );
        for note in self.config.notes() {
            log::warn!("MAVLink: {note}");
        }
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
        let p = &self.profile;
        // Nearest first, so the 3D messages keep the nearest when there are too many.
        self.order.clear();
        if p.obstacle_distance_3d {
            self.order.extend(h.obstacles.iter().enumerate().filter_map(|(i, o)| o.range_m.map(|r| (r, i))));
            self.order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        }
        let time_usec = (report.captured_wall_ns / 1000) as u64;
        let time_boot_ms = (clock::mono_ns(report.captured) / 1_000_000) as u32;
        {
            let mut slot = self.shared.slot.lock().unwrap_or_else(|p| p.into_inner());
            encode::obstacle_distance(h, time_usec, &p.limits, &mut slot.distance);
            slot.obstacles.clear();
            if p.obstacle_distance_3d {
                for &(_, i) in self.order.iter() {
                    if slot.obstacles.len() == MAX_OBSTACLES_3D {
                        break;
                    }
                    if let Some(m) =
                        encode::obstacle_3d(&h.obstacles[i], time_boot_ms, &p.limits, p.off_middle_layer)
                    {
                        slot.obstacles.push(m);
                    }
                }
                slot.obstacles.push(encode::close_3d(time_boot_ms, &p.limits));
            }
            slot.view = Some(h.span_deg);
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
            "MAVLink {}: {} messages sent, {} send errors, {} connections, {} frames over max_rate_hz skipped",
            self.config.url,
            load(&c.sent),
            load(&c.errors),
            load(&c.connects),
            load(&c.skipped)
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

    fn px4() -> MavlinkConfig {
        MavlinkConfig { autopilot: Some(Autopilot::Px4), ..MavlinkConfig::default() }
    }

    #[test]
    fn a_px4_config_is_valid_and_bad_values_name_their_key() {
        assert_eq!(px4().validate(), Ok(()));
        let bad = |f: fn(&mut MavlinkConfig)| {
            let mut c = px4();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(bad(|c| c.url = "udp:1.2.3.4:14550".into()).0, "url");
        assert!(bad(|c| c.url = "serial:/dev/ttyTHS1".into()).1.contains("Incomplete port settings"));
        assert!(bad(|c| c.url = "serial:/dev/ttyTHS1:fast".into()).1.contains("baud"));
        for url in ["udpout:127.0.0.1", "udpout:127.0.0.1:", "tcpout::5760", "udpout:h:99999", "tcpout:h:0"] {
            let e = MavlinkConfig { url: url.into(), ..px4() }.validate().unwrap_err();
            assert_eq!(e.0, "url", "{url}");
            assert!(e.1.contains("with a port from 1 to 65535"), "{url}: {}", e.1);
        }
        assert_eq!(bad(|c| c.system_id = 0).0, "system_id");
        assert_eq!(bad(|c| c.max_rate_hz = 0.5).0, "max_rate_hz");
        assert_eq!(bad(|c| c.max_distance_m = 700.0).0, "max_distance_m");
        assert_eq!(bad(|c| c.unranged_distance_m = Some(0.1)).0, "unranged_distance_m");
        assert_eq!(bad(|c| c.blind_distance_m = 0.3).0, "blind_distance_m");
        let (key, msg) = bad(|c| c.autopilot = None);
        assert_eq!(key, "autopilot");
        assert!(msg.contains("px4 or ardupilot"), "{msg}");
        let (key, msg) = bad(|c| c.rate_hz = Some(10.0));
        assert_eq!(key, "rate_hz");
        assert!(msg.contains("was removed") && msg.contains("max_rate_hz"), "{msg}");
        let (key, msg) = bad(|c| {
            c.obstacle_distance = false;
            c.obstacle_distance_3d = Some(true)
        });
        assert_eq!(key, "obstacle_distance");
        assert!(msg.contains("PX4 reads only OBSTACLE_DISTANCE"), "{msg}");
        for url in [
            "udpout:127.0.0.1:14550",
            "udpin:0.0.0.0:14540",
            "tcpout:10.0.0.2:5760",
            "serial:/dev/ttyTHS1:921600",
        ] {
            let c = MavlinkConfig { url: url.into(), ..px4() };
            assert_eq!(c.validate(), Ok(()), "{url}");
        }
    }

    #[test]
    fn each_autopilot_gets_its_own_reading_of_unknown_blind_and_3d() {
        let p = px4().profile();
        assert_eq!(
            (p.blind, p.obstacle_distance_3d, p.limits),
            (
                BlindPolicy::Silent,
                false,
                Limits { min_cm: 30, max_cm: 3000, unranged_cm: None, wall_cm: 200 }
            )
        );
        let ap = MavlinkConfig { autopilot: Some(Autopilot::ArduPilot), ..MavlinkConfig::default() };
        let p = ap.profile();
        assert_eq!(
            (p.blind, p.obstacle_distance_3d, p.limits.unranged_cm),
            (BlindPolicy::Wall, false, Some(200))
        );
        assert!(ap.notes().is_empty());
        // 3D with OBSTACLE_DISTANCE: only off the middle layer; 3D alone: all, with a note.
        let both = MavlinkConfig { obstacle_distance_3d: Some(true), ..ap.clone() };
        assert!(both.profile().off_middle_layer);
        let px4_both = MavlinkConfig { obstacle_distance_3d: Some(true), ..px4() };
        assert!(!px4_both.profile().off_middle_layer, "ArduPilot's layers are not PX4's business");
        let alone = MavlinkConfig { obstacle_distance: false, ..both.clone() };
        assert_eq!(alone.validate(), Ok(()));
        assert!(!alone.profile().off_middle_layer);
        assert!(alone.notes()[0].contains("PROXIMITY_FACE_RESET_MS"), "{:?}", alone.notes());
        let silent = MavlinkConfig { blind: Some(BlindPolicy::Silent), ..ap };
        assert!(silent.notes()[0].contains("NoData"), "{:?}", silent.notes());
        // In words: PX4 with 3D is not filtered by ArduPilot's layers.
        assert_eq!(
            MavlinkConfig { obstacle_distance_3d: Some(true), ..px4() }.describe(),
            "shaped for px4: OBSTACLE_DISTANCE and OBSTACLE_DISTANCE_3D per frame; \
             while blind: nothing (the autopilot's timeout takes over)"
        );
        assert!(both.describe().contains(
            "OBSTACLE_DISTANCE_3D off ArduPilot's middle layer per frame; while blind: a wall at 2 m"
        ));
        let unranged = MavlinkConfig { unranged_distance_m: Some(1.5), ..px4() };
        assert_eq!(unranged.profile().limits.unranged_cm, Some(150));
    }
}
