//! Where detections go. Each output implements [`Output`] (`pipeline::publish`): the UNIX socket
//! and its protocol, the optional HTTP server (Prometheus text, the live view), systemd
//! notifications, `--echo`,
//! MAVLink to a flight controller (`[output.mavlink]`), ROS 2 topics (`[output.ros2]`) and a
//! fleet's MQTT broker (`[output.mqtt]`).
//! Outputs read finished frame reports and interval figures; they never reach back into the
//! pipeline's stages. A new output is a file here, its config section, and one line in [`open`].

pub mod echo;
pub mod http;
pub mod mavlink;
pub mod mqtt;
pub mod notify;
pub mod protocol;
pub mod ros2;
pub mod socket;

pub use crate::pipeline::publish::Output;

use crate::config::Config;

/// The outputs `config` asks for: systemd's notify socket (when systemd set one; it keeps the
/// watchdog fed from now until the pipeline is ready), the socket (`[output]`) and the
/// HTTP server (`[metrics] listen`, with the live view under `[view]`), which bind when the
/// pipeline opens them.
pub fn open(config: &Config) -> Vec<Box<dyn Output>> {
    let o = &config.output;
    let group = (!o.socket_group.is_empty()).then_some(o.socket_group.as_str());
    let mut outputs: Vec<Box<dyn Output>> = vec![
        Box::new(notify::NotifyOutput::from_env()),
        Box::new(
            socket::SocketOutput::new(&o.socket, group, o.client_buffer_kib * 1024)
                .with_hazards(config.hazards.enabled),
        ),
    ];
    if let Some(m) = &config.output.mavlink {
        outputs.push(Box::new(mavlink::MavlinkOutput::new(m)));
    }
    #[cfg(feature = "ros2")]
    if let Some(r) = &config.output.ros2 {
        outputs.push(Box::new(ros2::Ros2Output::new(r, config.hazards.enabled)));
    }
    #[cfg(feature = "mqtt")]
    if let Some(m) = &config.output.mqtt {
        let cameras = config.source.0.iter().map(|s| s.name.clone()).collect();
        outputs.push(Box::new(mqtt::MqttOutput::new(m, config.hazards.enabled, cameras)));
    }
    if !config.metrics.listen.is_empty() {
        outputs.push(Box::new(http::HttpOutput::new(config)));
    }
    outputs
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
