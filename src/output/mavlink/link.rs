//! The MAVLink output's sending thread. It keeps the connection (a serial port or TCP peer that
//! went away is reopened once a second, for as long as the daemon runs), sends the HEARTBEAT,
//! each frame's messages once (no faster than `max_rate_hz`), the blind wall while blind, and
//! drains what the flight controller sends (that is how `udpin` learns where to reply, and how
//! the log can say which autopilot is there, and warn when it is not the one the config names).
//! Failures are logged at once, then at most every 10 s with a count.
//!
//! Everything here may block (a full serial buffer, a TCP peer that stopped reading, a slow
//! `connect`): that is why it is a thread of its own. The publisher only ever takes the slot's
//! lock for a copy.

use std::fmt;
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mavlink::dialects::ardupilotmega::{
    MavAutopilot, MavMessage, MavSeverity, OBSTACLE_DISTANCE_3D_DATA, OBSTACLE_DISTANCE_DATA,
};
use mavlink::error::{MessageReadError, MessageWriteError};
use mavlink::{MavConnection, MavHeader, MavlinkVersion};

use super::{
    encode, Autopilot, BlindPolicy, Counters, MavlinkConfig, Phase, Profile, Shared, MAX_OBSTACLES_3D,
    WALL_HZ,
};
use crate::frame::Attitude;
use crate::hazard::course::AttitudeFeed;

/// How often a lost connection is tried again.
const RECONNECT: Duration = Duration::from_secs(1);
/// The least time between two log lines about the same kind of failure.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// How often the thread wakes to read what the flight controller sent, at least.
const POLL: Duration = Duration::from_millis(50);
/// The most incoming messages read per wake-up.
const READ_BURST: usize = 32;
/// How long after the last frame's messages the blind wall goes up even before the pipeline
/// calls the camera blind (`[latency] stale_ms` may be longer): both autopilots declare a
/// sensor lost 500 ms after its last message (PX4 `RANGE_STREAM_TIMEOUT_US`, ArduPilot
/// `PROXIMITY_MAV_TIMEOUT_MS`), and ArduPilot then turns avoidance off; 100 ms is left for the
/// link.
const WALL_AFTER: Duration = Duration::from_millis(400);

/// Logs a kind of failure at once, then at most every [`LOG_EVERY`], with how many went unlogged.
#[derive(Default)]
struct Throttle {
    last: Option<Instant>,
    quiet: u64,
}

impl Throttle {
    fn warn(&mut self, what: fmt::Arguments<'_>) {
        if self.last.is_some_and(|t| t.elapsed() < LOG_EVERY) {
            self.quiet += 1;
            return;
        }
        match self.quiet {
            0 => log::warn!("{what}"),
            n => log::warn!("{what} ({n} more since the last report)"),
        }
        self.last = Some(Instant::now());
        self.quiet = 0;
    }
}

/// How a failed send is handled.
enum Failure {
    /// The peer is not taking data (a full buffer): the message is dropped, the link kept.
    Busy(io::Error),
    /// The link is broken: it is closed and opened again.
    Broken(io::Error),
}

fn classify(e: MessageWriteError) -> Failure {
    let e = match e {
        MessageWriteError::Io(e) => e,
        other => io::Error::other(other.to_string()),
    };
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted => Failure::Busy(e),
        _ => Failure::Broken(e),
    }
}

/// The newest frame's messages, as the thread keeps them until they are sent.
struct Latest {
    distance: OBSTACLE_DISTANCE_DATA,
    obstacles: Vec<OBSTACLE_DISTANCE_3D_DATA>,
    /// A frame's messages are waiting to be sent (once).
    pending: bool,
    /// When a frame's messages last went out.
    sent: Option<Instant>,
    /// The camera's view, for the blind wall.
    view: Option<(f64, f64)>,
}

/// The connection and its bookkeeping.
struct Link<'a> {
    config: &'a MavlinkConfig,
    autopilot: Autopilot,
    counters: &'a Counters,
    header: MavHeader,
    conn: Option<mavlink::Connection<MavMessage>>,
    next_connect: Instant,
    connect_log: Throttle,
    send_log: Throttle,
    /// A peer has been heard from on this connection (udpin replies only then).
    heard: bool,
    /// The flight controller's HEARTBEAT has been logged on this connection.
    autopilot_seen: bool,
    /// Where its ATTITUDE goes (the hazard layers'), if anywhere.
    attitude: Option<&'a AttitudeFeed>,
}

impl Link<'_> {
    /// Opens the connection when it is closed and a try is due; true when it was opened now.
    fn connect(&mut self, now: Instant) -> bool {
        if self.conn.is_some() || now < self.next_connect {
            return false;
        }
        self.next_connect = now + RECONNECT;
        match mavlink::connect::<MavMessage>(&self.config.url) {
            Ok(mut c) => {
                c.set_protocol_version(MavlinkVersion::V2);
                let n = self.counters.connects.fetch_add(1, Ordering::Relaxed) + 1;
                if n > 1 || self.connect_log.last.is_some() {
                    log::info!("MAVLink {}: connected (connection {n})", self.config.url);
                }
                self.connect_log = Throttle::default();
                self.conn = Some(c);
                self.heard = false;
                self.autopilot_seen = false;
                true
            }
            Err(e) => {
                self.connect_log.warn(format_args!(
                    "MAVLink {}: cannot connect: {e}; trying again every {} s{}",
                    self.config.url,
                    RECONNECT.as_secs(),
                    hint(&self.config.url, &e)
                ));
                false
            }
        }
    }

    /// Sends one message; a broken link is closed (and opened again later).
    fn send(&mut self, msg: &MavMessage) {
        let Some(conn) = &self.conn else { return };
        match conn.send(&self.header, msg) {
            Ok(0) => {} // udpin: nobody has spoken to us yet, so there is nowhere to reply
            Ok(_) => {
                self.counters.sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                match classify(e) {
                    Failure::Busy(e) => self.send_log.warn(format_args!(
                        "MAVLink {}: the link is not taking data ({e}): messages are dropped, the pipeline runs on",
                        self.config.url
                    )),
                    Failure::Broken(e) => {
                        self.send_log.warn(format_args!(
                            "MAVLink {}: send failed: {e}; reconnecting every {} s, the pipeline runs on",
                            self.config.url,
                            RECONNECT.as_secs()
                        ));
                        self.conn = None;
                    }
                }
            }
        }
    }

    /// Reads what has arrived, without waiting.
    fn drain(&mut self) {
        for _ in 0..READ_BURST {
            let Some(conn) = &self.conn else { return };
            match conn.try_recv() {
                Ok((h, msg)) => {
                    self.heard = true;
                    if let (MavMessage::ATTITUDE(a), Some(feed)) = (&msg, self.attitude) {
                        let attitude =
                            Attitude { roll: a.roll as f64, pitch: a.pitch as f64, yaw: a.yaw as f64 };
                        feed.push(Instant::now(), attitude);
                    }
                    if let MavMessage::HEARTBEAT(hb) = msg {
                        if !self.autopilot_seen && hb.autopilot != MavAutopilot::MAV_AUTOPILOT_INVALID {
                            self.autopilot_seen = true;
                            log::info!(
                                "MAVLink {}: flight controller seen: system {} component {} ({:?}, {:?})",
                                self.config.url,
                                h.system_id,
                                h.component_id,
                                hb.autopilot,
                                hb.mavtype
                            );
                            let is = match hb.autopilot {
                                MavAutopilot::MAV_AUTOPILOT_PX4 => Some(Autopilot::Px4),
                                MavAutopilot::MAV_AUTOPILOT_ARDUPILOTMEGA => Some(Autopilot::ArduPilot),
                                _ => None,
                            };
                            if let Some(is) = is.filter(|is| *is != self.autopilot) {
                                log::warn!(
                                    "MAVLink {}: the flight controller is {is}, but [output.mavlink] autopilot = \"{}\": \
                                     the messages are shaped for the wrong reader (unknown sectors, blind policy); \
                                     set autopilot = \"{is}\"",
                                    self.config.url,
                                    self.autopilot
                                );
                            }
                        }
                    }
                }
                Err(MessageReadError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    // A TCP peer that closed; a serial port reads no EOF (it times out).
                    if self.config.url.starts_with("tcp") {
                        self.send_log.warn(format_args!(
                            "MAVLink {}: the peer closed the connection; reconnecting every {} s",
                            self.config.url,
                            RECONNECT.as_secs()
                        ));
                        self.conn = None;
                    }
                    return;
                }
                // Nothing more to read (would block, timed out) or a garbled frame: next time.
                Err(_) => return,
            }
        }
    }
}

/// What a connection error most likely means, for the log.
fn hint(url: &str, e: &io::Error) -> &'static str {
    match (url.split(':').next(), e.kind()) {
        (Some("serial"), io::ErrorKind::NotFound) => {
            " (no such device: is the UART enabled and the cable in? On a Jetson the 40-pin UART is /dev/ttyTHS1 or ttyTHS0)"
        }
        (Some("serial"), io::ErrorKind::PermissionDenied) => {
            " (permission denied: the service needs the device's group, usually dialout, and DeviceAllow=)"
        }
        (Some("tcpout"), io::ErrorKind::ConnectionRefused) => " (nothing listens there yet)",
        (Some("udpin"), io::ErrorKind::AddrInUse) => " (another program has this port: MAVProxy, mavlink-router?)",
        _ => "",
    }
}

/// Wall-clock now, microseconds since the Unix epoch (the blind wall's `time_usec`).
fn wall_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// The thread's body: runs until the phase is [`Phase::Stopping`].
pub(super) fn run(
    config: &MavlinkConfig,
    profile: &Profile,
    shared: &Shared,
    counters: &Counters,
    attitude: Option<&AttitudeFeed>,
) {
    let min_gap = Duration::from_secs_f64(1.0 / config.max_rate_hz);
    let beat = Duration::from_secs_f64(1.0 / config.heartbeat_hz);
    let wall_every = Duration::from_secs_f64(1.0 / WALL_HZ);
    let walls = profile.blind == BlindPolicy::Wall;
    let mut link = Link {
        config,
        autopilot: profile.autopilot,
        counters,
        header: MavHeader {
            system_id: config.system_id.into(),
            component_id: config.component_id,
            sequence: 0,
        },
        conn: None,
        next_connect: Instant::now(),
        connect_log: Throttle::default(),
        send_log: Throttle::default(),
        heard: false,
        autopilot_seen: false,
        attitude,
    };
    let mut latest = Latest {
        distance: OBSTACLE_DISTANCE_DATA::default(),
        obstacles: Vec::with_capacity(MAX_OBSTACLES_3D + 1),
        pending: false,
        sent: None,
        view: None,
    };
    let mut wall = OBSTACLE_DISTANCE_DATA::default();
    let mut generation = 0;
    let mut phase = Phase::Boot;
    let mut next_beat = Instant::now();
    let mut next_wall = Instant::now();
    loop {
        let mut changed = None;
        {
            let mut slot = shared.slot.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if slot.generation != generation || slot.phase != phase {
                    break;
                }
                let now = Instant::now();
                let mut due = next_beat.min(now + POLL);
                if link.conn.is_none() {
                    due = due.min(link.next_connect);
                }
                if let (Phase::Seeing, true, Some(sent)) = (phase, latest.pending, latest.sent) {
                    due = due.min(sent + min_gap);
                }
                if walls && latest.view.is_some() {
                    match (phase, latest.sent) {
                        (Phase::Blind, _) => due = due.min(next_wall),
                        (Phase::Seeing, Some(sent)) => due = due.min(next_wall.max(sent + WALL_AFTER)),
                        _ => {}
                    }
                }
                if due <= now {
                    break;
                }
                slot = shared.bell.wait_timeout(slot, due - now).unwrap_or_else(|p| p.into_inner()).0;
            }
            if slot.generation != generation {
                generation = slot.generation;
                if latest.pending {
                    counters.skipped.fetch_add(1, Ordering::Relaxed);
                }
                latest.distance = slot.distance.clone();
                latest.obstacles.clear();
                latest.obstacles.extend_from_slice(&slot.obstacles);
                latest.view = slot.view;
                latest.pending = true;
            }
            if slot.phase != phase {
                changed = Some(slot.blind_reason);
                phase = slot.phase;
            }
        }
        let now = Instant::now();
        if link.connect(now) {
            // A new link (a UART plugged back in) hears who we are first.
            next_beat = now;
        }
        link.drain();
        if let Some(reason) = changed {
            // A new state goes out at once, with a line for the ground station's log.
            next_beat = now;
            let text = match phase {
                Phase::Blind => Some((MavSeverity::MAV_SEVERITY_WARNING, reason)),
                Phase::Seeing => Some((MavSeverity::MAV_SEVERITY_INFO, "seeing")),
                Phase::Stopping => Some((MavSeverity::MAV_SEVERITY_NOTICE, "stopping")),
                Phase::Boot | Phase::Standby => None,
            };
            if let Some((severity, what)) = text {
                let mut buf = [0u8; 50];
                let n = {
                    use std::io::Write;
                    let mut w = &mut buf[..];
                    let prefix = if phase == Phase::Blind { "jetdetect: blind, " } else { "jetdetect: " };
                    let _ = write!(w, "{prefix}{what}");
                    50 - w.len()
                };
                let text = std::str::from_utf8(&buf[..n]).unwrap_or("jetdetect");
                link.send(&MavMessage::STATUSTEXT(encode::statustext(severity, text)));
            }
            if phase == Phase::Blind {
                // What came before the blindness is not sent after it; the wall goes out now.
                latest.pending = false;
                next_wall = now;
            }
        }
        if now >= next_beat {
            link.send(&MavMessage::HEARTBEAT(encode::heartbeat(phase.state())));
            next_beat = now + beat;
        }
        if phase == Phase::Stopping {
            return;
        }
        let allowed = latest.sent.is_none_or(|t| now >= t + min_gap);
        if phase == Phase::Seeing && latest.pending && allowed {
            if profile.obstacle_distance {
                link.send(&MavMessage::OBSTACLE_DISTANCE(latest.distance.clone()));
            }
            // The batch, then its closing message (last in the list).
            for m in &latest.obstacles {
                link.send(&MavMessage::OBSTACLE_DISTANCE_3D(m.clone()));
            }
            latest.sent = Some(now);
            latest.pending = false;
        }
        // Blind, or frames late enough for the autopilot to give up on the sensor.
        let late = phase == Phase::Seeing && latest.sent.is_some_and(|t| now >= t + WALL_AFTER);
        if (phase == Phase::Blind || late) && walls && now >= next_wall {
            // Until a frame has shown the view there is nowhere to put a wall: silence (the
            // autopilot's pre-arm check then says the sensor has no data).
            if let Some(view) = latest.view {
                encode::wall(view, wall_us(), &profile.limits, &mut wall);
                link.send(&MavMessage::OBSTACLE_DISTANCE(wall.clone()));
            }
            next_wall = now + wall_every;
        }
    }
}
