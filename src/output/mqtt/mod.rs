//! `[output.mqtt]`: the robot's hazards, health and latency to a fleet's MQTT broker.
//!
//! Topics, under `<topic_prefix>/<device>/`:
//!
//! | topic | what | QoS | retained |
//! |---|---|---|---|
//! | `hazards` | every frame's `hazards` message and the blind notices (docs/protocol.md) | 1 | no |
//! | `stats` | the `stats` message, every `[output] stats_interval_s` | 1 | no |
//! | `status` | `online` on connect; `offline` on a clean stop, and as the last will | 1 | yes |
//! | `detections` | `detections` messages, at most `detections_hz` per camera | 0 | no |
//!
//! Nothing at QoS 1 is lost to a broker that goes away: those messages are appended to an
//! on-disk queue ([`queue`]) before they are sent and leave it when the broker acknowledges
//! them, so an outage, or a daemon restart during one, only delays them. The pipeline's
//! publisher thread never waits on the network or the disk: it hands each message to the
//! output's own thread through a bounded channel, and counts what that channel refuses.
//!
//! The client is rumqttc (MQTT 3.1.1 and 5) over rustls with the `ring` provider, behind the
//! cargo feature `mqtt` (on by default); without it, `[output.mqtt]` is a config error saying
//! so. `jetdetect fleet` (src/cli/fleet.rs) is the subscriber side.

#[cfg(feature = "mqtt")]
pub mod link;
#[cfg(feature = "mqtt")]
mod net;
#[cfg(feature = "mqtt")]
mod output;
pub mod queue;
#[cfg(feature = "mqtt")]
mod sender;
#[cfg(feature = "mqtt")]
mod shared;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `[output.mqtt] protocol`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Protocol {
    /// MQTT 3.1.1 (every broker).
    #[default]
    #[serde(rename = "3.1.1")]
    V311,
    /// MQTT 5: the broker says why it refuses a message (e.g. an ACL), which is logged.
    #[serde(rename = "5")]
    V5,
}

/// The topics under `<prefix>/<device>/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    /// `hazards`: hazard and blind messages (QoS 1, queued).
    Hazards,
    /// `stats`: stats messages (QoS 1, queued).
    Stats,
    /// `status`: online/offline (QoS 1, retained).
    Status,
    /// `detections`: rate-capped detections (QoS 0, never queued).
    Detections,
}

impl Topic {
    /// The last level of the topic.
    pub fn name(self) -> &'static str {
        match self {
            Topic::Hazards => "hazards",
            Topic::Stats => "stats",
            Topic::Status => "status",
            Topic::Detections => "detections",
        }
    }

    /// The kind byte of a queued record (queued topics only).
    pub fn kind(self) -> u8 {
        match self {
            Topic::Hazards => 1,
            Topic::Stats => 2,
            Topic::Status => 3,
            Topic::Detections => 4,
        }
    }

    /// The topic of a queued record's kind byte.
    pub fn from_kind(kind: u8) -> Option<Topic> {
        [Topic::Hazards, Topic::Stats, Topic::Status, Topic::Detections]
            .into_iter()
            .find(|t| t.kind() == kind)
    }
}

/// `[output.mqtt]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MqttConfig {
    /// The broker: `mqtt://host[:port]` (1883) or `mqtts://host[:port]` (8883, TLS).
    pub url: String,
    /// `"3.1.1"` (default) or `"5"`.
    pub protocol: Protocol,
    /// This robot's name in the topics; empty (the default): the hostname.
    pub device: String,
    /// The first topic level.
    pub topic_prefix: String,
    /// The MQTT client id; empty: `jetdetect-<device>`.
    pub client_id: String,
    /// User name for the broker; empty: none.
    pub username: String,
    /// A file holding the password (its first line); never logged. Needs `username`.
    pub password_file: Option<PathBuf>,
    /// PEM file of the CA that signed the broker's certificate (`mqtts://`); none: the
    /// system's CAs (`/etc/ssl/certs/ca-certificates.crt`).
    pub ca: Option<PathBuf>,
    /// PEM client certificate for brokers that require one (`mqtts://`, with `key`).
    pub cert: Option<PathBuf>,
    /// PEM private key of `cert`.
    pub key: Option<PathBuf>,
    /// Seconds between keep-alive pings (5..=3600); the broker declares the robot offline
    /// (its last will) after 1.5 times this without a word.
    pub keep_alive_s: u64,
    /// Detections messages per second and camera, at QoS 0 (0: none), 0..=30.
    pub detections_hz: f64,
    /// The folder of the on-disk queue; relative to the config file unless absolute.
    pub queue_dir: PathBuf,
    /// Size cap of the on-disk queue in MiB (1..=65536); when full, the oldest are dropped.
    pub queue_mib: u64,
}

/// Where the queue goes by default (systemd's `StateDirectory=jetdetect`).
pub const DEFAULT_QUEUE_DIR: &str = "/var/lib/jetdetect/mqtt";

impl Default for MqttConfig {
    fn default() -> Self {
        MqttConfig {
            url: String::new(),
            protocol: Protocol::V311,
            device: String::new(),
            topic_prefix: "jetdetect".into(),
            client_id: String::new(),
            username: String::new(),
            password_file: None,
            ca: None,
            cert: None,
            key: None,
            keep_alive_s: 15,
            detections_hz: 2.0,
            queue_dir: PathBuf::from(DEFAULT_QUEUE_DIR),
            queue_mib: 64,
        }
    }
}

/// A broker address from `url`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerUrl {
    /// Host name or IP address (without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// `mqtts://`.
    pub tls: bool,
}

impl BrokerUrl {
    /// Parses `mqtt://host[:port]` or `mqtts://host[:port]` (`[v6]:port` for IPv6).
    pub fn parse(url: &str) -> Result<BrokerUrl, String> {
        let (tls, rest) = if let Some(r) = url.strip_prefix("mqtts://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("mqtt://") {
            (false, r)
        } else {
            return Err(format!("{url:?}: give mqtt://host[:port] or mqtts://host[:port] (TLS)"));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') || rest.contains('@') {
            return Err(format!(
                "{url:?}: only a host and a port (credentials go in username and password_file)"
            ));
        }
        let default_port = if tls { 8883 } else { 1883 };
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (h, after) =
                v6.split_once(']').ok_or_else(|| format!("{url:?}: an IPv6 address needs its ']'"))?;
            (h, after.strip_prefix(':'))
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (rest, None),
            }
        };
        if host.is_empty() {
            return Err(format!("{url:?}: no host"));
        }
        let port = match port {
            None => default_port,
            Some(p) => {
                p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| format!("{url:?}: bad port {p:?}"))?
            }
        };
        Ok(BrokerUrl { host: host.to_string(), port, tls })
    }
}

/// Whether `s` can be one topic level: letters, digits, `_`, `-` and `.`, 1 to 64 of them
/// (no `/`, and no `+` or `#`, which subscriptions read as wildcards).
pub fn level_ok(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// This machine's host name, as a topic level (characters that may not be in one become `_`).
pub fn hostname() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "jetdetect".into());
    let name: String = raw
        .chars()
        .take(64)
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' })
        .collect();
    name
}

impl MqttConfig {
    /// `device`, or the hostname when it is empty.
    pub fn device_name(&self) -> String {
        if self.device.is_empty() {
            hostname()
        } else {
            self.device.clone()
        }
    }

    /// The full topic for `topic` of `device`.
    pub fn topic(&self, device: &str, topic: Topic) -> String {
        format!("{}/{device}/{}", self.topic_prefix, topic.name())
    }

    /// Resolves the queue folder and the files against the config file's folder.
    pub fn resolve_paths(&mut self, base: &Path) {
        let join = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        join(&mut self.queue_dir);
        for p in [&mut self.password_file, &mut self.ca, &mut self.cert, &mut self.key].into_iter().flatten()
        {
            join(p);
        }
    }

    /// Checks the values; the error names the key (relative to `[output.mqtt]`).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let url = BrokerUrl::parse(&self.url).map_err(|e| ("url", e))?;
        if !self.device.is_empty() && !level_ok(&self.device) {
            return Err((
                "device",
                format!(
                    "{:?} cannot be a topic level: 1 to 64 letters, digits, '_', '-' or '.' (\"\" means the hostname)",
                    self.device
                ),
            ));
        }
        let prefix_ok = !self.topic_prefix.is_empty()
            && !self.topic_prefix.starts_with('/')
            && !self.topic_prefix.ends_with('/')
            && self.topic_prefix.split('/').all(level_ok);
        if !prefix_ok {
            return Err((
                "topic_prefix",
                format!(
                    "{:?}: levels of letters, digits, '_', '-' or '.', separated by single '/', e.g. \"jetdetect\" or \"site1/robots\"",
                    self.topic_prefix
                ),
            ));
        }
        if self.client_id.len() > 64 || self.client_id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(("client_id", format!("{:?}: at most 64 characters, no spaces", self.client_id)));
        }
        if self.password_file.is_some() && self.username.is_empty() {
            return Err(("password_file", "needs a username: set username too".into()));
        }
        if !url.tls {
            for (key, set) in
                [("ca", self.ca.is_some()), ("cert", self.cert.is_some()), ("key", self.key.is_some())]
            {
                if set {
                    return Err((
                        key,
                        format!("is for TLS: use an mqtts:// url (now {:?}), or remove {key}", self.url),
                    ));
                }
            }
        }
        if self.cert.is_some() != self.key.is_some() {
            let missing = if self.cert.is_some() { "key" } else { "cert" };
            return Err((missing, "a client certificate needs both cert and key".into()));
        }
        if !(5..=3600).contains(&self.keep_alive_s) {
            return Err((
                "keep_alive_s",
                format!("{} is out of range: allowed 5 to 3600", self.keep_alive_s),
            ));
        }
        if !(0.0..=30.0).contains(&self.detections_hz) {
            return Err((
                "detections_hz",
                format!("{} is out of range: allowed 0 (none) to 30", self.detections_hz),
            ));
        }
        if !(1..=65536).contains(&self.queue_mib) {
            return Err(("queue_mib", format!("{} is out of range: allowed 1 to 65536", self.queue_mib)));
        }
        if self.queue_dir.as_os_str().is_empty() {
            return Err((
                "queue_dir",
                format!("give a folder the service may write, e.g. {DEFAULT_QUEUE_DIR:?}"),
            ));
        }
        Ok(())
    }

    /// Reads the files the section names (the password, the CA, the client certificate and
    /// key) as the output will at start, through [`link::settings`], so that `check` refuses
    /// what `run` would. `Err((key, message))` names the key.
    pub fn check_files(&self) -> Result<(), (&'static str, String)> {
        #[cfg(feature = "mqtt")]
        link::settings(self, String::new(), None).map_err(|e| e.key_and_message())?;
        Ok(())
    }
}

/// The MQTT output (built only with the cargo feature `mqtt`).
#[cfg(feature = "mqtt")]
pub use output::MqttOutput;

/// Whether this build can publish over MQTT.
pub const AVAILABLE: bool = cfg!(feature = "mqtt");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_urls_parse_with_their_default_ports() {
        let p = |u: &str| BrokerUrl::parse(u);
        assert_eq!(
            p("mqtt://broker.local").unwrap(),
            BrokerUrl { host: "broker.local".into(), port: 1883, tls: false }
        );
        assert_eq!(
            p("mqtts://10.0.0.2").unwrap(),
            BrokerUrl { host: "10.0.0.2".into(), port: 8883, tls: true }
        );
        assert_eq!(p("mqtt://127.0.0.1:11883/").unwrap().port, 11883);
        assert_eq!(p("mqtts://[::1]:9000").unwrap(), BrokerUrl { host: "::1".into(), port: 9000, tls: true });
        for bad in [
            "tcp://x",
            "mqtt://",
            "mqtt://h:0",
            "mqtt://h:99999",
            "mqtt://u:p@h",
            "mqtt://h/topic",
            "mqtt://[::1",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_values_name_their_key() {
        let base = MqttConfig { url: "mqtt://127.0.0.1".into(), ..MqttConfig::default() };
        assert_eq!(base.validate(), Ok(()));
        let bad = |f: fn(&mut MqttConfig)| {
            let mut c = base.clone();
            f(&mut c);
            c.validate().unwrap_err().0
        };
        assert_eq!(bad(|c| c.url = "http://x".into()), "url");
        assert_eq!(bad(|c| c.device = "robot/1".into()), "device");
        assert_eq!(bad(|c| c.device = "robot+".into()), "device");
        assert_eq!(bad(|c| c.topic_prefix = "a//b".into()), "topic_prefix");
        assert_eq!(bad(|c| c.topic_prefix = "fleet/#".into()), "topic_prefix");
        assert_eq!(bad(|c| c.password_file = Some("/etc/hostname".into())), "password_file");
        assert_eq!(bad(|c| c.ca = Some("/etc/hostname".into())), "ca", "a CA with mqtt://");
        assert_eq!(
            bad(|c| {
                c.url = "mqtts://h".into();
                c.cert = Some("/etc/hostname".into());
            }),
            "key"
        );
        assert_eq!(bad(|c| c.keep_alive_s = 1), "keep_alive_s");
        assert_eq!(bad(|c| c.detections_hz = -1.0), "detections_hz");
        assert_eq!(bad(|c| c.queue_mib = 0), "queue_mib");
        let mut c = base.clone();
        c.topic_prefix = "site1/robots".into();
        c.device = "rover-7".into();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.topic("rover-7", Topic::Hazards), "site1/robots/rover-7/hazards");
    }

    /// The files are read as the output reads them at start (`link::settings`), so `check`
    /// refuses what `run` would; the system's error stays the source.
    #[cfg(feature = "mqtt")]
    #[test]
    fn the_files_are_read_as_the_output_reads_them_and_name_their_key() {
        let dir = std::env::temp_dir().join(format!("jetdetect-mqtt-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pw");
        std::fs::write(&empty, "\nsecond line\n").unwrap();
        let tls = MqttConfig { url: "mqtts://h".into(), username: "r".into(), ..MqttConfig::default() };
        let checked = |f: &dyn Fn(&mut MqttConfig)| {
            let mut c = tls.clone();
            f(&mut c);
            assert_eq!(c.validate(), Ok(()), "the values themselves are fine");
            c.check_files().unwrap_err()
        };
        let (key, m) = checked(&|c| c.ca = Some("/nonexistent/ca.pem".into()));
        assert_eq!((key, m.as_str()), ("ca", "/nonexistent/ca.pem: No such file or directory (os error 2)"));
        let (key, m) = checked(&|c| c.password_file = Some(empty.clone()));
        assert_eq!(key, "password_file");
        assert!(m.ends_with("empty.pw: its first line is empty"), "{m}");
        let (key, m) = checked(&|c| c.ca = Some("/etc/hostname".into()));
        assert_eq!((key, m.as_str()), ("ca", "/etc/hostname: no certificate in it"));
        // At start, the same error is the output's, with the system's error as its source.
        let mut c = tls.clone();
        c.password_file = Some("/nonexistent/pw".into());
        let e = link::settings(&c, String::new(), None).err().unwrap();
        assert_eq!(e.to_string(), "password_file /nonexistent/pw: No such file or directory (os error 2)");
        let io = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(io.map(|e| e.kind()), Some(std::io::ErrorKind::NotFound));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_hostname_is_a_topic_level() {
        assert!(level_ok(&hostname()));
        for t in [Topic::Hazards, Topic::Stats, Topic::Status, Topic::Detections] {
            assert_eq!(Topic::from_kind(t.kind()), Some(t));
        }
    }
}
