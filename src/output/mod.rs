//! Where detections go. Each output implements [`Output`], the pipeline's only view of it: the UNIX socket
//! and its protocol, the optional HTTP server (Prometheus text, the live view), systemd
//! notifications, `--echo`,
//! MAVLink to a flight controller (`[output.mavlink]`), ROS 2 topics (`[output.ros2]`) and a
//! fleet's MQTT broker (`[output.mqtt]`).
//! Outputs read finished frame reports and interval figures; they never reach back into the
//! pipeline's stages. A new output is a file here, its config section, and one line in
//! `daemon::outputs`. [`tap`] is where the live view takes its pictures from.

pub mod echo;
pub mod http;
pub mod mavlink;
pub mod mqtt;
pub mod notify;
pub mod protocol;
pub mod ros2;
pub mod socket;
pub mod tap;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::power::telemetry::Telemetry;
use crate::report::{Blind, CameraStats, FrameCounters, FrameReport, SourceState};
use crate::stats::{DeadlineMisses, LatencyStats};
use crate::yolo::ClassNames;

/// Where the daemon's socket goes by default (systemd's `RuntimeDirectory=jetdetect`).
pub const DEFAULT_SOCKET: &str = "/run/jetdetect/detections.sock";

/// `[output]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// Path of the UNIX socket (created with mode 0660).
    pub socket: PathBuf,
    /// Group to give the socket to (name or id); empty: the daemon's own group.
    pub socket_group: String,
    /// Unsent bytes a client may fall behind by before it is dropped, in KiB (16..=65536).
    pub client_buffer_kib: usize,
    /// Seconds between `stats` messages and log lines (1..=3600).
    pub stats_interval_s: u64,
    /// `[output.mavlink]`: obstacles to a flight controller; absent: off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mavlink: Option<mavlink::MavlinkConfig>,
    /// `[output.ros2]`: detections and zones on ROS 2 topics; absent: off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ros2: Option<ros2::Ros2Config>,
    /// `[output.mqtt]`: hazards, stats and status to a fleet's MQTT broker; absent: off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mqtt: Option<mqtt::MqttConfig>,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            socket: PathBuf::from(DEFAULT_SOCKET),
            socket_group: String::new(),
            client_buffer_kib: 256,
            stats_interval_s: 5,
            mavlink: None,
            ros2: None,
            mqtt: None,
        }
    }
}

impl OutputConfig {
    /// Checks the section's own values; `Err((key, message))` names the key (a dotted key is in
    /// a sub-table).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let o = self;
        if o.socket.as_os_str().is_empty() {
            return Err(("socket", "must not be empty: give the path of the UNIX socket".into()));
        }
        if o.socket.as_os_str().len() > 107 {
            return Err((
                "socket",
                format!("'{}' is longer than a UNIX socket path may be (107 bytes)", o.socket.display()),
            ));
        }
        if !(16..=65_536).contains(&o.client_buffer_kib) {
            return Err((
                "client_buffer_kib",
                format!("{} is out of range: allowed 16 to 65536", o.client_buffer_kib),
            ));
        }
        if !(1..=3600).contains(&o.stats_interval_s) {
            return Err((
                "stats_interval_s",
                format!("{} is out of range: allowed 1 to 3600", o.stats_interval_s),
            ));
        }
        Ok(())
    }
}

/// What the pipeline runs, once it is ready (the socket's `hello` message says it).
#[derive(Clone, Debug)]
pub struct Started {
    /// The sources, as opened (several: each after its camera's name, `; `-separated).
    pub source: String,
    /// Each camera's name and source, in config order.
    pub cameras: Vec<(String, String)>,
    /// The engine and model.
    pub engine: String,
    /// Runtime library versions (`onnxruntime`, `tensorrt`, `cuda`), when the engine loads any.
    pub runtime: BTreeMap<String, String>,
    /// Model input `[width, height]`.
    pub input: [u32; 2],
    /// The class names.
    pub names: ClassNames,
}

/// The figures of one stats interval (or, at the end, of the whole run).
pub struct Interval<'a> {
    /// Seconds since the pipeline was ready.
    pub uptime_s: f64,
    /// Seconds the interval covers.
    pub interval_s: f64,
    /// Counters since start.
    pub totals: FrameCounters,
    /// Counters over the interval.
    pub delta: FrameCounters,
    /// Frames processed per second over the interval.
    pub fps: f64,
    /// Clients connected to all outputs.
    pub clients: usize,
    /// The sources' health, combined ([`SourceState::combined`]).
    pub source: &'a SourceState,
    /// Each camera's figures.
    pub cameras: &'a [CameraStats],
    /// Latency histograms over the interval (the whole run at the end).
    pub latency: &'a LatencyStats,
    /// The board's latest telemetry sample.
    pub telemetry: &'a Telemetry,
    /// `[latency] deadline_ms` (0: none).
    pub deadline_ms: f64,
    /// Deadline misses over the interval (the whole run at the end), per stage.
    pub misses: &'a DeadlineMisses,
    /// Whether a camera is blind now, and why (the first blind camera).
    pub blind: Option<&'a Blind>,
}

/// The pipeline's liveness, each turn of the publisher loop.
#[derive(Clone, Copy, Debug)]
pub struct Health<'a> {
    /// Time since a stage last showed progress (a frame, or a camera retry).
    pub since_progress: Duration,
    /// A stop was asked for (signal, frame count, end of source).
    pub stopping: bool,
    /// The cameras with no fresh frame within their freshness bound, and why (empty: all see).
    pub blind: &'a [Blind],
    /// `[latency] stale_ms`.
    pub stale: Duration,
    /// Set by the publisher: while a camera is blind, a notice is due (when a camera goes
    /// blind, then every `stale`). Outputs that publish blind notices send one per blind
    /// camera exactly then.
    pub blind_notice: bool,
}

/// Something published frames and statistics go to. Every method runs on the publisher
/// thread between frames and must not block: a slow consumer is the output's to drop.
pub trait Output: Send {
    /// Claims what the output needs (binds a socket, a port), after the clocks, the source and
    /// the model, before the pipeline's threads start: a client that can connect finds the
    /// daemon set up. An error stops the start.
    fn open(&mut self) -> Result<(), OutputError> {
        Ok(())
    }
    /// The pipeline is ready: model loaded, warmed up, threads started.
    fn ready(&mut self, _started: &Started) {}
    /// One published frame, `dropped` frames displaced so far, at `now`.
    fn frame(&mut self, _report: &FrameReport, _dropped: u64, _now: Instant) {}
    /// Every turn of the publisher loop (about every 20 ms).
    fn tick(&mut self, _health: &Health<'_>) {}
    /// Every stats interval.
    fn interval(&mut self, _interval: &Interval<'_>) {}
    /// The run ended for `reason`; `run` holds the whole run's figures.
    fn finish(&mut self, _run: &Interval<'_>, _reason: &str) {}
    /// Where this output takes pictures from, when it shows frames (the live view): inference
    /// hands frames to the tap while someone watches ([`tap`]).
    fn picture_tap(&self) -> Option<std::sync::Arc<tap::PictureTap>> {
        None
    }
    /// Clients connected to this output now (for the stats).
    fn clients(&self) -> usize {
        0
    }
}

/// Why an output could not be set up; each message names the output's section.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The detections socket (`[output] socket`).
    #[error("[output] socket: {0}")]
    Socket(#[from] socket::SocketError),
    /// The HTTP server (`[metrics]`, `[view]`).
    #[error("{0}")]
    Http(#[from] http::HttpError),
    /// The ROS 2 node (`[output.ros2]`).
    #[error("[output.ros2]: {0}")]
    Ros2(String),
    /// The MQTT output (`[output.mqtt]`): its settings (a password, certificate or key file)
    /// cannot be made; the error underneath (`mqtt::link::SetupError`) is the source.
    #[error("[output.mqtt]: {0}")]
    Mqtt(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The MQTT output's on-disk queue (`[output.mqtt] queue_dir`) cannot be used; the system's
    /// error is kept as the source.
    #[error(
        "[output.mqtt]: {0}: give [output.mqtt] queue_dir a folder the service may write (default {default})",
        default = mqtt::DEFAULT_QUEUE_DIR
    )]
    MqttQueue(#[source] mqtt::queue::QueueError),
    /// An output's own thread could not be started: `context` says which.
    #[error("{context}: {source}")]
    Thread {
        /// E.g. `starting the MAVLink thread`.
        context: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl From<OutputError> for crate::error::Error {
    fn from(e: OutputError) -> Self {
        crate::error::Error::Output(Box::new(e))
    }
}

/// Joins an output's own thread (MAVLink's sender, the ROS 2 node's) if it finishes within
/// `wait`; false when it is still stuck in I/O, and is left behind so that stopping never hangs.
pub(crate) fn join_within(thread: std::thread::JoinHandle<()>, wait: std::time::Duration) -> bool {
    let until = std::time::Instant::now() + wait;
    while !thread.is_finished() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let finished = thread.is_finished();
    if finished {
        let _ = thread.join();
    }
    finished
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unusable_mqtt_queue_says_what_to_do_and_keeps_the_system_error() {
        let dir = std::path::Path::new("/proc/jetdetect-queue");
        let e = OutputError::MqttQueue(mqtt::queue::DiskQueue::open(dir, 1 << 20).err().unwrap());
        let text = e.to_string();
        assert!(text.starts_with("[output.mqtt]: the MQTT queue /proc/jetdetect-queue: "), "{text}");
        assert!(text.ends_with("give [output.mqtt] queue_dir a folder the service may write (default /var/lib/jetdetect/mqtt)"), "{text}");
        let queue = std::error::Error::source(&e).unwrap();
        assert!(std::error::Error::source(queue).unwrap().is::<std::io::Error>(), "{e:?}");
    }
}
