//! The TOML configuration: what every key means, its default, and validation.
//!
//! `configs/jetdetect.toml` documents every key with its default. Loading is
//! strict: unknown keys, wrong types and out-of-range values are errors that
//! name the file, the line and the key, and say what is allowed. Relative paths
//! in a config file are resolved against the directory of that file.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod error;
mod links;
mod locate;
mod sources;

pub use sources::{SourceConfig, Sources, DEFAULT_SOURCE, MAX_CAMERA_NAME};

use error::ConfigError;
use locate::locate;

use crate::detector::ModelConfig;
use crate::engine::{onnxruntime::Precision, EngineConfig, EngineKind, Provider};
use crate::hazard::{CameraConfig, HazardsConfig};
use crate::output::http::{MetricsConfig, ViewConfig};
use crate::output::OutputConfig;
use crate::power::PowerConfig;
use crate::preprocess::{self, PreprocessConfig};
use crate::stats::LatencyConfig;
use crate::yolo::DetectConfig;

/// A rule across sections that does not hold: `(section, key, message)`.
type Problem = (&'static str, &'static str, String);

/// The error for `key` of `[section]`, at its line in `text`: `[section] key: message`.
fn located(text: &str, path: &Path, section: &str, key: &str, message: String) -> ConfigError {
    let (section, key, line) = place(text, section, key);
    ConfigError { file: path.to_path_buf(), line, message: format!("[{section}] {key}: {message}") }
}

/// The table and key `key` of `[section]` is written as, and its line in `text`. A dotted key
/// is in a sub-table, its own TOML section: `tracking.high_score` of [hazards] is
/// `[hazards.tracking] high_score`.
fn place<'k>(text: &str, section: &str, key: &'k str) -> (String, &'k str, Option<usize>) {
    let (section, key) = match key.split_once('.') {
        Some((table, k)) => (format!("{section}.{table}"), k),
        None => (section.to_string(), key),
    };
    let line = locate(text, &section, key);
    (section, key, line)
}

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `[source]` (one camera) or `[[source]]` (several, each with a `name`): where frames come from.
    pub source: Sources,
    /// `[model]`: the detector model.
    pub model: ModelConfig,
    /// `[engine]`: what runs the model.
    pub engine: EngineConfig,
    /// `[preprocess]`: how frames become model input.
    pub preprocess: PreprocessConfig,
    /// `[detect]`: decoding thresholds.
    pub detect: DetectConfig,
    /// `[output]`: the UNIX socket clients read detections from.
    pub output: OutputConfig,
    /// `[metrics]`: the optional HTTP server (Prometheus text, the live view).
    pub metrics: MetricsConfig,
    /// `[view]`: the live view and snapshots on the `[metrics]` server.
    pub view: ViewConfig,
    /// `[power]`: clock profile, state file, telemetry.
    pub power: PowerConfig,
    /// `[camera]`: field of view or intrinsics, and mounting.
    pub camera: CameraConfig,
    /// `[hazards]`: tracks, time to contact, zones.
    pub hazards: HazardsConfig,
    /// `[vehicle]`: the vehicle's width, for hit or pass.
    pub vehicle: crate::hazard::course::VehicleConfig,
    /// `[latency]`: the per-frame deadline and the freshness bound.
    pub latency: LatencyConfig,
    /// Where it was read from, to name the file and line of what is found wrong later (a
    /// class name the model does not have). Not part of its value.
    #[serde(skip)]
    pub origin: Origin,
}

/// The file a [`Config`] came from and its text. Two configs with the same values are equal
/// wherever they came from.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    path: PathBuf,
    text: std::sync::Arc<str>,
}

impl PartialEq for Origin {
    fn eq(&self, _: &Origin) -> bool {
        true
    }
}

impl Origin {
    /// The error for `key` of `[section]` (a dotted key is in a sub-table) at its line, with
    /// `message` as it is: the file, the line, and the message.
    pub fn error(&self, section: &str, key: &str, message: String) -> ConfigError {
        let (_, _, line) = place(&self.text, section, key);
        ConfigError { file: self.path.clone(), line, message }
    }
}

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::load_with(path, |_| Ok::<(), std::convert::Infallible>(()))
    }

    /// Reads a config file, lets `adjust` change it (command-line flags over the file's
    /// values; its error is reported against the file), then validates the result once.
    pub fn load_with<E: fmt::Display>(
        path: &Path,
        adjust: impl FnOnce(&mut Config) -> Result<(), E>,
    ) -> Result<Config, ConfigError> {
        Config::load_adjusted(path, adjust).map(|(config, _)| config)
    }

    /// [`Config::load_with`], then [`Config::check_files`]: the config as `run` starts from it
    /// and `check` checks it.
    pub fn load_for_run<E: fmt::Display>(
        path: &Path,
        adjust: impl FnOnce(&mut Config) -> Result<(), E>,
    ) -> Result<Config, ConfigError> {
        let (config, text) = Config::load_adjusted(path, adjust)?;
        config.check_files(path, &text)?;
        Ok(config)
    }

    /// [`Config::load_with`], with the file's text.
    fn load_adjusted<E: fmt::Display>(
        path: &Path,
        adjust: impl FnOnce(&mut Config) -> Result<(), E>,
    ) -> Result<(Config, String), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            line: None,
            message: format!("cannot read the config file: {e}"),
        })?;
        let mut config = Config::read(&text, path)?;
        adjust(&mut config).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            line: None,
            message: e.to_string(),
        })?;
        config.validate(&text, path)?;
        config.check_links(path, &text)?;
        Ok((config, text))
    }

    /// The defaults changed by `adjust` (command-line flags without a config file), validated;
    /// errors name `<command line>`.
    pub fn defaults_with<E: fmt::Display>(
        adjust: impl FnOnce(&mut Config) -> Result<(), E>,
    ) -> Result<Config, ConfigError> {
        let path = Path::new("<command line>");
        let mut config =
            Config { origin: Origin { path: path.to_path_buf(), text: "".into() }, ..Config::default() };
        adjust(&mut config).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            line: None,
            message: e.to_string(),
        })?;
        config.validate("", path)?;
        Ok(config)
    }

    /// Refuses files reached through a symbolic link inside the clock state directory
    /// (the parent of `[power] state_file`). That directory is the one the service may
    /// write, so a link planted there must not decide which config, model, class names or
    /// ONNX Runtime library (code, run as root) the daemon loads. Files that really are
    /// there are fine.
    pub fn check_links(&self, path: &Path, text: &str) -> Result<(), ConfigError> {
        let Some(dir) = self.power.state_file.parent().filter(|d| !d.as_os_str().is_empty()) else {
            return Ok(());
        };
        let mut files = vec![("", "", path), ("model", "path", self.model.path.as_path())];
        if let Some(n) = &self.model.names {
            files.push(("model", "names", n));
        }
        if !self.engine.library.as_os_str().is_empty() {
            files.push(("engine", "library", &self.engine.library));
        }
        if let Precision::Int8 { table } = &self.engine.tensorrt.precision {
            files.push(("engine.tensorrt", "int8_calibration_table", table));
        }
        links::refuse_links(dir, &files, path, text)
    }

    /// Parses and validates TOML `text` that came from `path` (used for
    /// messages and to resolve relative paths).
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config = Config::read(text, path)?;
        config.validate(text, path)?;
        Ok(config)
    }

    /// Deserialises `text` (the named values are typed and checked here) and resolves its
    /// relative paths against `path`'s folder; [`Config::validate`] checks the rest.
    fn read(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| {
            let at = e.span().map(|s| s.start.min(text.len()));
            let line = at.map(|a| text[..a].matches('\n').count() + 1);
            // The TOML layer's messages name the type, not the key: the key is found at the
            // error's place, so that they read like every other config error.
            let message = e.message().trim();
            let place = at.filter(|_| !message.starts_with('[')).map(|a| locate::key_at(text, a));
            let message = match place {
                Some((table, Some(key))) if table.is_empty() => format!("{key}: {message}"),
                Some((table, Some(key))) if table.starts_with("[[") => format!("{table} {key}: {message}"),
                Some((table, Some(key))) => format!("[{table}] {key}: {message}"),
                Some((table, None)) if table.starts_with("[[") => format!("{table}: {message}"),
                Some((table, None)) if !table.is_empty() => format!("[{table}]: {message}"),
                _ => message.to_string(),
            };
            ConfigError { file: path.to_path_buf(), line, message }
        })?;
        config.origin = Origin { path: path.to_path_buf(), text: text.into() };
        let base = path.parent().unwrap_or(Path::new("."));
        config.resolve_paths(base);
        config.source.name_by_position();
        Ok(config)
    }

    fn resolve_paths(&mut self, base: &Path) {
        fn join(base: &Path, p: &Path) -> PathBuf {
            if p.is_relative() {
                base.join(p)
            } else {
                p.to_path_buf()
            }
        }
        self.model.path = join(base, &self.model.path);
        self.model.names = self.model.names.as_deref().map(|p| join(base, p));
        self.output.socket = join(base, &self.output.socket);
        if !self.metrics.token_file.as_os_str().is_empty() {
            self.metrics.token_file = join(base, &self.metrics.token_file);
        }
        self.power.root = join(base, &self.power.root);
        if !self.engine.library.as_os_str().is_empty() {
            self.engine.library = join(base, &self.engine.library);
        }
        self.power.state_file = join(base, &self.power.state_file);
        if let Some(m) = &mut self.output.mqtt {
            m.resolve_paths(base);
        }
        if let Precision::Int8 { table } = &mut self.engine.tensorrt.precision {
            *table = join(base, table);
        }
        // A relative file:// location is relative to the config file too.
        for source in &mut self.source.0 {
            if let Some(rest) = source.uri.strip_prefix("file://") {
                if !rest.starts_with('/') {
                    source.uri = format!("file://{}", base.join(rest).display());
                }
            }
        }
    }

    /// Checks every range and name; `text` and `path` locate the offending line. Each section
    /// checks its own values (its owner's `validate`); the rules across sections are here.
    pub fn validate(&self, text: &str, path: &Path) -> Result<(), ConfigError> {
        let err = |section: &str, key: &str, message: String| located(text, path, section, key, message);
        let across = |(section, key, message): Problem| located(text, path, section, key, message);
        self.detect.validate().map_err(|(key, m)| err("detect", key, m))?;
        self.model.validate().map_err(|(key, m)| err("model", key, m))?;
        self.engine.validate().map_err(|(key, m)| err("engine", key, m))?;
        self.preprocess_rules().map_err(across)?;
        self.output.validate().map_err(|(key, m)| err("output", key, m))?;
        self.metrics.validate().map_err(|(key, m)| err("metrics", key, m))?;
        self.http_rules().map_err(across)?;
        self.view.validate().map_err(|(key, m)| err("view", key, m))?;
        crate::power::profile::validate(&self.power).map_err(|(key, m)| err("power", key, m))?;
        self.camera.validate().map_err(|(key, m)| err("camera", key, m))?;
        self.hazards.validate().map_err(|(key, m)| err("hazards", &key, m))?;
        self.vehicle.validate().map_err(|(key, m)| err("vehicle", key, m))?;
        self.latency.validate().map_err(|(key, m)| err("latency", key, m))?;
        self.robot_output_rules().map_err(across)?;
        self.source.validate(text, path)
    }

    /// Where the preprocessing runs against what runs the model.
    fn preprocess_rules(&self) -> Result<(), Problem> {
        let device = self.preprocess.device;
        if device != preprocess::Device::Cpu && self.engine.kind != EngineKind::OnnxRuntime {
            return Err((
                "preprocess",
                "device",
                format!(
                    "\"{device}\" runs the preprocessing graph in ONNX Runtime: set [engine] kind = \"onnxruntime\", \
                     or use \"cpu\""
                ),
            ));
        }
        if device == preprocess::Device::Dla && !self.engine.providers.contains(&Provider::TensorRt) {
            return Err((
                "preprocess",
                "device",
                "\"dla\" runs through TensorRT: add \"tensorrt\" to [engine] providers, or use \"gpu\""
                    .into(),
            ));
        }
        Ok(())
    }

    /// `[metrics]` against `[view]`: the live view needs the server, and a token off this host.
    fn http_rules(&self) -> Result<(), Problem> {
        if let Ok(addr) = self.metrics.listen.parse::<std::net::SocketAddr>() {
            if self.view.enabled && !addr.ip().is_loopback() && self.metrics.token_file.as_os_str().is_empty()
            {
                return Err((
                    "metrics",
                    "allow_remote",
                    "the live view on the network needs an access token: set [metrics] token_file to a \
                     file holding one (e.g. `openssl rand -hex 16 > /etc/jetdetect/view.token`)"
                        .into(),
                ));
            }
        }
        if self.view.enabled && self.metrics.listen.is_empty() {
            return Err((
                "view",
                "enabled",
                "the view is served by the HTTP server: set [metrics] listen = \"127.0.0.1:9464\" too".into(),
            ));
        }
        Ok(())
    }

    /// The MAVLink, ROS 2 and MQTT outputs: each section's values, what it needs of the rest
    /// (cameras, the hazard layer) and of this build (its cargo feature).
    fn robot_output_rules(&self) -> Result<(), Problem> {
        if let Some(m) = &self.output.mavlink {
            m.validate().map_err(|(key, msg)| ("output.mavlink", key, msg))?;
            if !m.camera.is_empty() && !self.source.0.iter().any(|s| s.name == m.camera) {
                let names: Vec<&str> = self.source.0.iter().map(|s| s.name.as_str()).collect();
                return Err((
                    "output.mavlink",
                    "camera",
                    format!("'{}' is not a camera of this config: use one of {}", m.camera, names.join(", ")),
                ));
            }
            if !self.hazards.enabled {
                return Err((
                    "output.mavlink",
                    "url",
                    "the MAVLink output sends the hazard layer's obstacles: set [hazards] enabled = true \
                     (and give [hazards.classes] sizes, which the ranges come from)"
                        .into(),
                ));
            }
        }
        if let Some(r) = &self.output.ros2 {
            r.validate().map_err(|(key, msg)| ("output.ros2", key, msg))?;
            if self.source.0.len() > 1 && !r.frame_id.contains("{camera}") {
                return Err((
                    "output.ros2",
                    "frame_id",
                    format!(
                        "'{}' would stamp every camera's detections with one frame: put {{camera}} in it \
                         (e.g. \"{{camera}}_optical\"), which becomes each frame's camera name",
                        r.frame_id
                    ),
                ));
            }
            if !crate::output::ros2::AVAILABLE {
                return Err((
                    "output.ros2",
                    "node",
                    "this jetdetect was built without ROS 2 support (the cargo feature `ros2`): \
                     use a build with it, or remove [output.ros2]"
                        .into(),
                ));
            }
        }
        if let Some(m) = &self.output.mqtt {
            m.validate().map_err(|(key, msg)| ("output.mqtt", key, msg))?;
            if !crate::output::mqtt::AVAILABLE {
                return Err((
                    "output.mqtt",
                    "url",
                    "this jetdetect was built without MQTT support (the cargo feature `mqtt`): \
                     use a build with it, or remove [output.mqtt]"
                        .into(),
                ));
            }
        }
        Ok(())
    }

    /// Checks what the config names outside itself, through the modules that own it: the model
    /// and class-name files ([`ModelConfig::check_files`]), the INT8 calibration table
    /// ([`EngineConfig::check_files`]), the MQTT password and TLS files
    /// ([`crate::output::mqtt::MqttConfig::check_files`]) and each camera's URI as opening it would read it
    /// ([`crate::source::check`]: GStreamer pipelines, credentials files). `check` and `run`
    /// both call it, so `check` refuses what `run` would; `text` and `path` locate the line.
    pub fn check_files(&self, path: &Path, text: &str) -> Result<(), ConfigError> {
        let err = |section: &str, key: &str, message: String| located(text, path, section, key, message);
        self.model.check_files().map_err(|(key, m)| err("model", key, m))?;
        self.engine.check_files().map_err(|(key, m)| err("engine", key, m))?;
        if let Some(m) = &self.output.mqtt {
            m.check_files().map_err(|(key, m)| err("output.mqtt", key, m))?;
        }
        self.source.check_uris(text, path)
    }

    /// The resolved configuration as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot print the config: {e}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("/etc/jetdetect/test.toml"))
    }

    #[test]
    fn empty_file_gives_the_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn unknown_keys_name_the_line_and_the_allowed_keys() {
        let e = parse("[detect]\nconfidence = 0.5\nconfidance = 0.3\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.message.contains("unknown field `confidance`"), "{e}");
        assert!(e.message.contains("confidence"), "{e}");
        let e = parse("[kamera]\nuri = 'x'\n").unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
        assert!(e.to_string().starts_with("/etc/jetdetect/test.toml:1: "), "{e}");
    }

    #[test]
    fn wrong_types_are_reported() {
        let e = parse("[detect]\n\nmax_detections = \"many\"\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.message.contains("invalid type"), "{e}");
    }

    #[test]
    fn out_of_range_values_say_what_is_allowed() {
        let e = parse("[detect]\niou = 0.5\nconfidence = 1.5\n").unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(
            e.message.contains("[detect] confidence: 1.5 is out of range: allowed 0 < confidence < 1"),
            "{e}"
        );
        let e = parse("[model]\ninput_width = 300\n").unwrap_err();
        assert!(e.message.contains("multiple of 32"), "{e}");
        let e = parse("[engine]\nkind = \"tensorflow\"\n").unwrap_err();
        assert!(e.message.contains("use auto, tract, onnxruntime"), "{e}");
        let e = parse("[source]\nuri = \"http://cam\"\n").unwrap_err();
        assert!(e.message.contains("unknown scheme") && e.message.contains("rtsp://"), "{e}");
        assert_eq!(e.line, Some(2));
        // GStreamer sources: their pipeline is built by `check_files`, which `check` and `run` call.
        let checked = |text: &str| {
            let c = parse(text).expect("the config itself is valid");
            c.source.check_uris(text, Path::new("t.toml"))
        };
        let e = checked("[source]\nuri = \"rtsp://cam/live?transport=quic\"\n").unwrap_err();
        assert!(e.message.contains("transport 'quic' is not tcp or udp"), "{e}");
        assert_eq!(e.line, Some(2));
        let e = checked("[source]\nuri = \"csi://0?exposure_us=9\"\n").unwrap_err();
        assert!(e.message.contains("not a range"), "{e}");
        assert!(
            checked("[source]\nuri = \"gst://videotestsrc is-live=true ! video/x-raw,width=320\"\n").is_ok()
        );
    }

    #[test]
    fn one_source_table_or_several_named_entries() {
        let one = parse("[source]\nuri = \"synthetic://?seed=3\"\n").unwrap();
        assert_eq!(one.source.0.len(), 1);
        assert_eq!(
            (one.source.first().name.as_str(), one.source.first().uri.as_str()),
            ("cam0", "synthetic://?seed=3")
        );
        assert_eq!(Config::default().source.first().name, "cam0");
        let text = "[[source]]\nname = \"front\"\nuri = \"synthetic://\"\n[source.camera]\nyaw_deg = 0.0\n\
                    [[source]]\nuri = \"file://clips/a.yuv?width=2&height=2&format=grey\"\nstale_ms = 250\n\
                    [source.camera]\nyaw_deg = 180.0\n";
        let many = parse(text).unwrap();
        let names: Vec<&str> = many.source.0.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["front", "cam1"], "unnamed entries are named by position");
        assert_eq!(many.source.0[1].uri, "file:///etc/jetdetect/clips/a.yuv?width=2&height=2&format=grey");
        assert_eq!(many.source.0[1].stale_ms, Some(250.0));
        assert_eq!(many.source.0[1].camera.as_ref().map(|c| c.yaw_deg), Some(180.0));
        // The resolved config prints back as the same entries.
        let again: Config = toml::from_str(&many.to_toml()).unwrap();
        assert_eq!(again.source, many.source);
        let printed_one: Config = toml::from_str(&one.to_toml()).unwrap();
        assert_eq!(printed_one.source, one.source);
    }

    #[test]
    fn bad_cameras_are_named_by_entry_and_line() {
        let e = parse("[[source]]\nname = \"a\"\nuri = \"synthetic://\"\n[[source]]\nname = \"a\"\nuri = \"synthetic://\"\n")
            .unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        assert!(
            e.message.contains("[[source]] #2 ('a') name: 'a' is already the name of [[source]] #1"),
            "{e}"
        );
        let e = parse("[[source]]\nname = \"front cam\"\n").unwrap_err();
        assert!(e.message.contains("'front cam' is not a camera name"), "{e}");
        let e =
            parse("[[source]]\nname = \"a\"\n[[source]]\nname = \"b\"\nuri = \"http://cam\"\n").unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.message.starts_with("[[source]] #2 ('b') uri: unknown scheme"), "{e}");
        let e =
            parse("[[source]]\nname = \"a\"\n[[source]]\nname = \"b\"\n[source.camera]\nhfov_deg = 500.0\n")
                .unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.starts_with("[[source]] #2 ('b') camera.hfov_deg:"), "{e}");
        let e = parse("[source]\nstale_ms = 1\n").unwrap_err();
        assert_eq!((e.line, e.message.starts_with("[source] stale_ms:")), (Some(2), true), "{e}");
        let e = parse("[[source]]\nnme = \"a\"\n").unwrap_err();
        assert!(e.message.contains("unknown field `nme`"), "{e}");
        let e = parse("source = []\n").unwrap_err();
        assert!(e.message.contains("at least one camera"), "{e}");
        let e =
            parse("[[source]]\nname = \"a\"\n[hazards]\nenabled = true\n[output.mavlink]\nautopilot = \"px4\"\ncamera = \"b\"\n")
                .unwrap_err();
        assert!(e.message.contains("'b' is not a camera of this config: use one of a"), "{e}");
        let e = parse(
            "[[source]]\nname = \"a\"\nuri = \"v4l2:///dev/video0?format=yuyv\"\n\
             [[source]]\nname = \"b\"\nuri = \"v4l2:///dev/video0?format=nv12\"\n",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.contains("v4l2:///dev/video0 is already the camera of [[source]] #1 ('a')"), "{e}");
        let e = parse("[[source]]\nuri = \"csi://0\"\n[[source]]\nuri = \"csi://0?width=640&height=480\"\n")
            .unwrap_err();
        assert!(e.message.contains("csi://0 is already the camera of [[source]] #1 ('cam0')"), "{e}");
        parse("[[source]]\nuri = \"csi://0\"\n[[source]]\nuri = \"csi://1\"\n").unwrap();
    }

    #[test]
    fn accelerated_preprocessing_needs_onnxruntime_and_dla_needs_tensorrt() {
        let e = parse("[preprocess]\ndevice = \"gpu\"\n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("[engine] kind = \"onnxruntime\""), "{e}");
        let ort = "[engine]\nkind = \"onnxruntime\"\n";
        assert!(parse(&format!("{ort}[preprocess]\ndevice = \"gpu\"\n")).is_ok());
        assert!(parse(&format!("{ort}[preprocess]\ndevice = \"dla\"\n")).is_ok());
        let e = parse(&format!("{ort}providers = [\"cuda\"]\n[preprocess]\ndevice = \"dla\"\n")).unwrap_err();
        assert!(e.message.contains("add \"tensorrt\""), "{e}");
        let e = parse("[preprocess]\ndevice = \"npu\"\n").unwrap_err();
        assert!(e.message.contains("use \"cpu\", \"gpu\" or \"dla\""), "{e}");
    }

    #[test]
    fn the_view_needs_the_server_and_a_token_off_loopback() {
        let e = parse("[view]\nenabled = true\n").unwrap_err();
        assert!(e.message.contains("[view] enabled") && e.message.contains("[metrics] listen"), "{e}");
        assert!(parse("[metrics]\nlisten = '127.0.0.1:9464'\n[view]\nenabled = true\n").is_ok());
        let e = parse("[metrics]\nlisten = '0.0.0.0:9464'\nallow_remote = true\n[view]\nenabled = true\n")
            .unwrap_err();
        assert!(e.message.contains("token_file"), "{e}");
        assert_eq!(e.line, Some(3), "{e}");
        let c = parse(
            "[metrics]\nlisten = '0.0.0.0:9464'\nallow_remote = true\ntoken_file = 'view.token'\n[view]\nenabled = true\n",
        )
        .unwrap();
        assert_eq!(
            c.metrics.token_file,
            Path::new("/etc/jetdetect/view.token"),
            "relative to the config file"
        );
        let e = parse("[metrics]\nlisten = '127.0.0.1:1'\n[view]\nenabled = true\ninterval_ms = 10\n")
            .unwrap_err();
        assert!(e.message.contains("interval_ms") && e.message.contains("50 to 10000"), "{e}");
        let e = parse("[view]\nquality = 0\n").unwrap_err();
        assert!(e.message.contains("[view] quality"), "{e}");
    }

    #[test]
    fn metrics_stay_on_loopback_unless_allowed() {
        assert!(parse("[metrics]\nlisten = '127.0.0.1:9464'\n").is_ok());
        let e = parse("[metrics]\nlisten = '0.0.0.0:9464'\n").unwrap_err();
        assert!(e.message.contains("allow_remote = true"), "{e}");
        assert!(parse("[metrics]\nlisten = '0.0.0.0:9464'\nallow_remote = true\n").is_ok());
        let e = parse("[metrics]\nlisten = 'localhost'\n").unwrap_err();
        assert!(e.message.contains("address:port"), "{e}");
        let e = parse("[output]\nclient_buffer_kib = 1\n").unwrap_err();
        assert_eq!(e.line, Some(2));
    }

    #[test]
    fn relative_paths_follow_the_config_file() {
        let c = Config::parse(
            "[model]\npath = '../models/m.onnx'\nnames = 'n.names'\n[source]\nuri = 'file://clips/a.yuv?width=2&height=2&format=grey'\n[output]\nsocket = 'd.sock'\n",
            Path::new("/opt/jd/configs/x.toml"),
        )
        .unwrap();
        assert_eq!(c.model.path, PathBuf::from("/opt/jd/configs/../models/m.onnx"));
        assert_eq!(c.model.names, Some(PathBuf::from("/opt/jd/configs/n.names")));
        assert_eq!(c.source.first().uri, "file:///opt/jd/configs/clips/a.yuv?width=2&height=2&format=grey");
        assert_eq!(c.output.socket, PathBuf::from("/opt/jd/configs/d.sock"));
    }

    #[test]
    fn tensorrt_options_the_hardware_cannot_run_are_refused_naming_the_key() {
        let e = parse("[engine.tensorrt]\nprecision = \"fp32\"\ndla_core = 0\n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("FP16 and INT8 only") && e.message.contains("remove dla_core"), "{e}");
        parse("[engine.tensorrt]\nprecision = \"fp16\"\ndla_core = 0\n").unwrap();
        parse("[engine.tensorrt]\nprecision = \"fp32\"\n").unwrap();
        let e = parse("[engine.tensorrt]\ncuda_graph = true\n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("device buffers") && e.message.contains("remove cuda_graph"), "{e}");
    }

    #[test]
    fn an_int8_table_that_is_not_tensorrts_is_refused_by_check_with_what_it_is() {
        let d = std::env::temp_dir().join(format!("jd-config-int8-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("models/obstacles-v8.onnx"),
            d.join("m.onnx"),
        )
        .unwrap();
        std::fs::write(d.join("calibration.json"), b"{\"images\": [0.0, 2.5]}").unwrap();
        std::fs::write(d.join("calib.cache"), b"TRT-8601-EntropyCalibration2\nimages: 3c010a14\n").unwrap();
        let text = |table: &str| {
            format!("[model]\npath = \"m.onnx\"\n[engine.tensorrt]\nprecision = \"int8\"\nint8_calibration_table = \"{table}\"\n")
        };
        let path = d.join("c.toml");
        let c = Config::parse(&text("calibration.json"), &path).unwrap();
        let e = c.check_files(&path, &text("calibration.json")).unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        assert!(
            e.message.contains("calibration.json") && e.message.contains("not TensorRT's calibration cache"),
            "{e}"
        );
        let c = Config::parse(&text("calib.cache"), &path).unwrap();
        c.check_files(&path, &text("calib.cache")).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn named_values_are_typed_where_they_are_read_and_round_trip() {
        use crate::power::{OnFailure, Profile};
        let c = parse(
            "[engine]\nkind = \"onnxruntime\"\nproviders = [\"tensorrt\", \"cpu\"]\n[engine.tensorrt]\n\
             precision = \"int8\"\nint8_calibration_table = \"calib.cache\"\ndla_core = 1\n[preprocess]\n\
             device = \"dla\"\n[power]\nprofile = \"locked\"\non_failure = \"exit\"\n",
        )
        .unwrap();
        assert_eq!(c.engine.kind, EngineKind::OnnxRuntime);
        assert_eq!(c.engine.providers, [Provider::TensorRt, Provider::Cpu]);
        assert_eq!(
            c.engine.tensorrt.precision,
            Precision::Int8 { table: "/etc/jetdetect/calib.cache".into() }
        );
        assert_eq!(c.preprocess.device, preprocess::Device::Dla);
        assert_eq!((c.power.profile, c.power.on_failure), (Profile::Locked, OnFailure::Exit));
        let again: Config = toml::from_str(&c.to_toml()).unwrap();
        assert_eq!(c, again);
        // INT8 without its table: at the table's line, naming the key.
        let e = parse("[detect]\niou = 0.5\n[engine.tensorrt]\nprecision = \"int8\"\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(
            e.message.contains("int8_calibration_table: precision = \"int8\" needs a calibration table"),
            "{e}"
        );
        // A wrong word: its line, the key and the words allowed.
        for (text, line, want) in [
            (
                "[power]\n\non_failure = \"retry\"\n",
                3,
                "[power] on_failure: 'retry' is not allowed: use continue or exit",
            ),
            ("[power]\nprofile = \"turbo\"\n", 2, "use dynamic, max, locked"),
            (
                "[engine]\nproviders = [\"cpu\",\n  \"npu\"]\n",
                2,
                "[engine] providers: 'npu' is not a provider",
            ),
            ("[engine.tensorrt]\nprecision = \"bf16\"\n", 2, "use fp16, fp32 or int8"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, Some(line), "{e}");
            assert!(e.message.contains(want), "{e}");
        }
        for p in Provider::ALL {
            assert_eq!(p.name().parse::<Provider>(), Ok(*p));
        }
    }

    #[test]
    fn resolved_config_round_trips() {
        let c = parse("[detect]\nconfidence = 0.4\n").unwrap();
        let again: Config = toml::from_str(&c.to_toml()).unwrap();
        assert_eq!(c, again);
    }

    #[test]
    fn links_inside_the_state_directory_are_not_followed() {
        use std::os::unix::fs::symlink;
        let d = std::env::temp_dir().join(format!("jd-config-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let state = d.join("state");
        std::fs::create_dir_all(&state).unwrap();
        let real = d.join("models/m.onnx");
        std::fs::create_dir_all(real.parent().unwrap()).unwrap();
        std::fs::write(&real, b"model").unwrap();
        let write = |name: &str, model: &Path, extra: &str| {
            let p = d.join(name);
            std::fs::write(
                &p,
                format!(
                    "[model]\npath = \"{}\"\n{extra}[power]\nstate_file = \"{}\"\n",
                    model.display(),
                    state.join("clocks.state").display()
                ),
            )
            .unwrap();
            p
        };
        // A real file outside, a link outside (a "current" model link): fine.
        Config::load(&write("a.toml", &real, "")).unwrap();
        symlink(&real, d.join("current.onnx")).unwrap();
        Config::load(&write("b.toml", &d.join("current.onnx"), "")).unwrap();
        // A real file inside the state directory: fine.
        std::fs::copy(&real, state.join("real.onnx")).unwrap();
        Config::load(&write("c.toml", &state.join("real.onnx"), "")).unwrap();
        // A link planted in the state directory: refused, naming the key, the link and its line.
        symlink(&real, state.join("m.onnx")).unwrap();
        let e = Config::load(&write("d.toml", &state.join("m.onnx"), "")).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        let m = e.to_string();
        assert!(
            m.contains("[model] path") && m.contains("m.onnx is a symbolic link inside the state directory"),
            "{m}"
        );
        // A linked folder on the way counts too, and so do the names file and the library.
        symlink(real.parent().unwrap(), state.join("models")).unwrap();
        let e = Config::load(&write("e.toml", &state.join("models/m.onnx"), "")).unwrap_err().to_string();
        assert!(e.contains(&format!("{} is a symbolic link", state.join("models").display())), "{e}");
        let lib = format!("[engine]\nlibrary = \"{}\"\n", state.join("m.onnx").display());
        let e = Config::load(&write("f.toml", &real, &lib)).unwrap_err().to_string();
        assert!(e.contains("[engine] library"), "{e}");
        // The same link, named by a relative path that climbs out of the working directory
        // with `..`, and reached through a link elsewhere that leads into the state directory.
        let cwd = std::env::current_dir().unwrap();
        let up = "../".repeat(cwd.components().count() - 1);
        let rel = PathBuf::from(up).join(state.join("m.onnx").strip_prefix("/").unwrap());
        assert_eq!(links::link_inside(&state, &rel), Some(std::path::absolute(&rel).unwrap()));
        symlink(&state, d.join("state-link")).unwrap();
        assert_eq!(
            links::link_inside(&state, &d.join("state-link/m.onnx")),
            Some(d.join("state-link/m.onnx"))
        );
        assert_eq!(links::link_inside(&state, &d.join("state-link/real.onnx")), None);
        // The config file itself, reached through a link in the state directory.
        let cfg = write("g.toml", &real, "");
        symlink(&cfg, state.join("jd.toml")).unwrap();
        let e = Config::load(&state.join("jd.toml")).unwrap_err().to_string();
        assert!(e.contains("the config file") && e.contains("jd.toml is a symbolic link"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
