//! `[output.ros2]`: detections and the zone summary on ROS 2 topics, as a ROS 2 node of its own.
//!
//! Every published frame becomes a `vision_msgs/msg/Detection2DArray` on `detections_topic`
//! (header stamp: the capture time; frame id from the config; per detection its class name
//! and score, its box, and its track id when the hazard layer tracks it) and, with `[hazards]`
//! on, a `std_msgs/msg/String` on `zones_topic` carrying the socket protocol's `hazards` message
//! (docs/protocol.md: zones, levels, the most urgent obstacle per zone, the frame's age), and
//! its blind notices while blind. Quality of service: best effort, keep last 1 by default (a
//! robot wants the newest detections, never a queue of old ones).
//!
//! The transport is DDS through `ros2-client` on RustDDS: pure Rust, so no ROS installation is
//! needed to build and the static build keeps working; it interoperates with the DDS RMWs ROS 2
//! ships (Fast DDS, Cyclone DDS). docs/outputs.md records the choice against the Zenoh form.
//!
//! The publisher thread only copies the frame's boxes into a slot (no allocation, no I/O); a
//! thread of this output's own builds the messages and publishes them, so DDS (which allocates
//! per sample, and may wait on a reliable reader) never reaches the pipeline. Behind the cargo
//! feature `ros2` (on by default); without it, `[output.ros2]` is a config error saying so.

pub mod msgs;
#[cfg(feature = "ros2")]
mod node;

use serde::{Deserialize, Serialize};

/// `[output.ros2] reliability`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reliability {
    /// Samples are sent once; a lost one is not repeated (ROS's sensor-data profile).
    #[default]
    BestEffort,
    /// Samples are repeated until each reader has them (within `depth`).
    Reliable,
}

/// `[output.ros2]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Ros2Config {
    /// The DDS domain (`ROS_DOMAIN_ID`), 0..232.
    pub domain_id: u16,
    /// The node's name.
    pub node: String,
    /// The node's namespace ("/" or "/robot1").
    pub namespace: String,
    /// `vision_msgs/msg/Detection2DArray`, relative to the namespace unless it starts with "/".
    pub detections_topic: String,
    /// `std_msgs/msg/String` with the `hazards` message as JSON; "" turns it off. Published only
    /// when `[hazards]` is on.
    pub zones_topic: String,
    /// The header's `frame_id`: the camera's optical frame in the robot's TF tree; `{camera}`
    /// in it is replaced by the frame's camera name (required with several cameras).
    pub frame_id: String,
    /// Quality of service: `best_effort` (default) or `reliable`.
    pub reliability: Reliability,
    /// History depth (keep last N), 1..1000.
    pub depth: u32,
    /// Local addresses DDS may use (e.g. `["127.0.0.1"]` or the robot's wired interface);
    /// empty: all interfaces.
    pub interfaces: Vec<String>,
}

impl Default for Ros2Config {
    fn default() -> Self {
        Ros2Config {
            domain_id: 0,
            node: "jetdetect".into(),
            namespace: "/".into(),
            detections_topic: "detections".into(),
            zones_topic: "hazard_zones".into(),
            frame_id: "camera".into(),
            reliability: Reliability::BestEffort,
            depth: 1,
            interfaces: Vec::new(),
        }
    }
}

/// A ROS 2 name token: a letter or underscore, then letters, digits and underscores.
fn token_ok(t: &str) -> bool {
    let mut c = t.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
        && !t.contains("__")
}

/// A topic name or namespace: tokens separated by single "/", optionally absolute.
fn name_ok(n: &str, absolute_only: bool) -> bool {
    if n == "/" {
        return absolute_only;
    }
    let rel = n.strip_prefix('/');
    if absolute_only && rel.is_none() {
        return false;
    }
    rel.unwrap_or(n).split('/').all(token_ok)
}

impl Ros2Config {
    /// Checks the values; the error names the key (relative to `[output.ros2]`).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let rule = "letters, digits and underscores, not starting with a digit, no double underscore";
        if self.domain_id > 232 {
            return Err(("domain_id", format!("{} is out of range: allowed 0 to 232", self.domain_id)));
        }
        if !token_ok(&self.node) {
            return Err(("node", format!("{:?} is not a ROS 2 node name: {rule}", self.node)));
        }
        if !name_ok(&self.namespace, true) {
            return Err((
                "namespace",
                format!(
                    "{:?} is not a ROS 2 namespace: \"/\" or \"/name\", tokens of {rule}",
                    self.namespace
                ),
            ));
        }
        if !name_ok(&self.detections_topic, false) {
            return Err((
                "detections_topic",
                format!(
                    "{:?} is not a ROS 2 topic name: tokens of {rule}, separated by \"/\"",
                    self.detections_topic
                ),
            ));
        }
        if !self.zones_topic.is_empty() && !name_ok(&self.zones_topic, false) {
            return Err((
                "zones_topic",
                format!(
                    "{:?} is not a ROS 2 topic name: tokens of {rule}, separated by \"/\" (\"\" turns it off)",
                    self.zones_topic
                ),
            ));
        }
        if self.zones_topic == self.detections_topic {
            return Err(("zones_topic", "is the same topic as detections_topic: give each its own".into()));
        }
        if self.frame_id.is_empty() || self.frame_id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err((
                "frame_id",
                format!("{:?}: give the camera's TF frame, e.g. \"camera_optical\"", self.frame_id),
            ));
        }
        if !(1..=1000).contains(&self.depth) {
            return Err(("depth", format!("{} is out of range: allowed 1 to 1000", self.depth)));
        }
        if let Some(bad) = self.interfaces.iter().find(|a| a.parse::<std::net::IpAddr>().is_err()) {
            return Err((
                "interfaces",
                format!("{bad:?} is not an IP address (e.g. \"127.0.0.1\" or \"192.168.1.10\")"),
            ));
        }
        Ok(())
    }
}

/// The ROS 2 output (built only with the cargo feature `ros2`).
#[cfg(feature = "ros2")]
pub use node::Ros2Output;

/// Whether this build can publish to ROS 2.
pub const AVAILABLE: bool = cfg!(feature = "ros2");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_valid_and_bad_values_name_their_key() {
        assert_eq!(Ros2Config::default().validate(), Ok(()));
        let bad = |f: fn(&mut Ros2Config)| {
            let mut c = Ros2Config::default();
            f(&mut c);
            c.validate().unwrap_err().0
        };
        assert_eq!(bad(|c| c.domain_id = 233), "domain_id");
        assert_eq!(bad(|c| c.node = "jet-detect".into()), "node");
        assert_eq!(bad(|c| c.node = "1st".into()), "node");
        assert_eq!(bad(|c| c.namespace = "robot1".into()), "namespace");
        assert_eq!(bad(|c| c.namespace = "/robot1/".into()), "namespace");
        assert_eq!(bad(|c| c.detections_topic = "a//b".into()), "detections_topic");
        assert_eq!(bad(|c| c.detections_topic = "dets ".into()), "detections_topic");
        assert_eq!(bad(|c| c.zones_topic = "detections".into()), "zones_topic");
        assert_eq!(bad(|c| c.frame_id = "".into()), "frame_id");
        assert_eq!(bad(|c| c.depth = 0), "depth");
        assert_eq!(bad(|c| c.interfaces = vec!["eth0".into()]), "interfaces");
        let ok = |f: fn(&mut Ros2Config)| {
            let mut c = Ros2Config::default();
            f(&mut c);
            c.validate()
        };
        assert_eq!(ok(|c| c.namespace = "/robot_1/front".into()), Ok(()));
        assert_eq!(ok(|c| c.detections_topic = "/perception/detections".into()), Ok(()));
        assert_eq!(ok(|c| c.zones_topic = String::new()), Ok(()));
        assert_eq!(ok(|c| c.interfaces = vec!["127.0.0.1".into(), "::1".into()]), Ok(()));
    }
}
