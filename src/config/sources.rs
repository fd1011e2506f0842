//! The cameras: one `[source]` table or `[[source]]` entries, each a [`SourceConfig`], and the
//! checks of each entry (name, URI, controls, freshness bound, its `[source.camera]`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::ConfigError;
use super::locate::locate_entry;
use crate::hazard::CameraConfig;
use crate::source::SourceUri;
use crate::stats::LatencyConfig;

/// The default source: a synthetic camera, so the daemon runs with no hardware.
pub const DEFAULT_SOURCE: &str = "synthetic://?width=640&height=480&fps=30&format=yuyv";
/// One `[source]` or `[[source]]` entry: a camera.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SourceConfig {
    /// The camera's name in every message, metric and log line (letters, digits, `_`, `-`;
    /// at most 32). Empty: `cam0`, `cam1`, ... by position.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Source URI: `synthetic://...`, `file://...`, `v4l2:///dev/videoN`, `csi://N`, `rtsp://...`, `gst://...`.
    pub uri: String,
    /// V4L2 camera controls by name (`jetdetect probe-camera` lists them), e.g. `exposure_absolute = 200`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub controls: BTreeMap<String, i64>,
    /// This camera's freshness bound, ms; absent: `[latency] stale_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_ms: Option<f64>,
    /// `[source.camera]`: this camera's field of view and mounting; absent: `[camera]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub camera: Option<CameraConfig>,
}

impl Default for SourceConfig {
    fn default() -> Self {
        SourceConfig {
            name: String::new(),
            uri: DEFAULT_SOURCE.to_string(),
            controls: BTreeMap::new(),
            stale_ms: None,
            camera: None,
        }
    }
}

/// The longest camera name.
pub const MAX_CAMERA_NAME: usize = 32;

/// The cameras: one `[source]` table, or `[[source]]` entries (an array of tables).
#[derive(Clone, Debug, PartialEq)]
pub struct Sources(pub Vec<SourceConfig>);

impl Default for Sources {
    fn default() -> Self {
        Sources(vec![SourceConfig { name: "cam0".into(), ..SourceConfig::default() }])
    }
}

impl Sources {
    /// The first camera (the only one of a `[source]` table).
    pub fn first(&self) -> &SourceConfig {
        &self.0[0]
    }

    /// The first camera, to change (`--source`).
    pub fn first_mut(&mut self) -> &mut SourceConfig {
        &mut self.0[0]
    }

    /// Replaces the cameras with one at `uri`, named as the first was (`--source`).
    pub fn replace_with(&mut self, uri: String) {
        let name = self.0.first().map(|s| s.name.clone()).unwrap_or_default();
        self.0 = vec![SourceConfig { name, uri, ..SourceConfig::default() }];
    }

    /// Gives unnamed entries their name by position (`cam0`, `cam1`, ...).
    pub(super) fn name_by_position(&mut self) {
        for (i, s) in self.0.iter_mut().enumerate() {
            if s.name.is_empty() {
                s.name = format!("cam{i}");
            }
        }
    }
}

impl Serialize for Sources {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => one.serialize(s),
            many => many.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Sources {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Sources;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a [source] table or [[source]] entries")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Sources, A::Error> {
                let one = SourceConfig::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(Sources(vec![one]))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Sources, A::Error> {
                let many =
                    Vec::<SourceConfig>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
                if many.is_empty() {
                    return Err(serde::de::Error::custom("source: give at least one camera"));
                }
                Ok(Sources(many))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Sources {
    /// Checks every camera: its name (unique, usable as a label), its URI's scheme, the device
    /// it takes (not taken by another entry) and its overrides. Errors name the entry. What
    /// needs the URI's files or pipeline is [`Sources::check_uris`].
    pub(super) fn validate(&self, text: &str, path: &Path) -> Result<(), ConfigError> {
        for i in 0..self.0.len() {
            self.validate_entry(i).map_err(|(sub, key, m)| self.entry_error(i, sub, key, m, text, path))?;
        }
        Ok(())
    }

    /// Checks what opening each camera would refuse without opening it (the owner,
    /// [`crate::source::check`], builds a GStreamer pipeline and reads its credentials file).
    /// `check` and `run` both call it, through [`super::Config::check_files`].
    pub(super) fn check_uris(&self, text: &str, path: &Path) -> Result<(), ConfigError> {
        for (i, s) in self.0.iter().enumerate() {
            crate::source::check(&s.uri, &s.controls)
                .map_err(|e| self.entry_error(i, None, "uri", e.to_string(), text, path))?;
        }
        Ok(())
    }

    /// The error for `key` of entry `i` (of its sub-table `sub`): `[source] key: ...` for one
    /// camera, `[[source]] #2 ('left') key: ...` for several, at the key's line.
    fn entry_error(
        &self,
        i: usize,
        sub: Option<&str>,
        key: &str,
        message: String,
        text: &str,
        path: &Path,
    ) -> ConfigError {
        let many = self.0.len() > 1;
        let which = match (many, sub) {
            (true, _) => format!("[[source]] #{} ('{}')", i + 1, self.0[i].name),
            (false, Some(sub)) => format!("[source.{sub}]"),
            (false, None) => "[source]".to_string(),
        };
        let line = locate_entry(text, "source", i, sub, key);
        let key = match (many, sub) {
            (true, Some(sub)) => format!("{sub}.{key}"),
            _ => key.to_string(),
        };
        ConfigError { file: path.to_path_buf(), line, message: format!("{which} {key}: {message}") }
    }

    /// Entry `i`'s own checks and those against the entries before it; `Err((sub-table, key,
    /// message))`.
    fn validate_entry(&self, i: usize) -> Result<(), (Option<&'static str>, &'static str, String)> {
        let s = &self.0[i];
        let name_ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if s.name.is_empty() || s.name.len() > MAX_CAMERA_NAME || !s.name.chars().all(name_ok) {
            return Err((
                None,
                "name",
                format!(
                    "'{}' is not a camera name: use 1 to {MAX_CAMERA_NAME} letters, digits, '_' or '-' \
                     (it labels messages, metrics and topics)",
                    s.name
                ),
            ));
        }
        if let Some(j) = self.0[..i].iter().position(|o| o.name == s.name) {
            return Err((
                None,
                "name",
                format!(
                    "'{}' is already the name of [[source]] #{}: give every camera its own name",
                    s.name,
                    j + 1
                ),
            ));
        }
        if let Some(d) = device(&s.uri) {
            if let Some(j) = self.0[..i].iter().position(|o| device(&o.uri).as_deref() == Some(&d)) {
                return Err((
                    None,
                    "uri",
                    format!(
                        "{d} is already the camera of [[source]] #{} ('{}'): a camera streams to one reader; \
                         give each entry its own device",
                        j + 1,
                        self.0[j].name
                    ),
                ));
            }
        }
        if let Some(ms) = s.stale_ms {
            let bound = LatencyConfig { stale_ms: ms, ..LatencyConfig::default() };
            bound.validate().map_err(|(key, m)| (None, key, m))?;
        }
        if let Some(c) = &s.camera {
            c.validate().map_err(|(key, m)| (Some("camera"), key, m))?;
        }
        // A GStreamer source's URI is not checked as a URI query here (a `gst://` pipeline is
        // not one): `check_uris` builds its pipeline.
        if crate::source::through_gstreamer(&s.uri) {
            if !s.controls.is_empty() {
                return Err((
                    None,
                    "uri",
                    "[source.controls] apply to v4l2:// cameras only (set a CSI camera's exposure and \
                     gain with csi:// keys)"
                        .into(),
                ));
            }
            return Ok(());
        }
        let uri = SourceUri::parse(&s.uri).map_err(|m| (None, "uri", m.to_string()))?;
        if !["synthetic", "file", "v4l2"].contains(&uri.scheme.as_str()) {
            return Err((
                None,
                "uri",
                format!(
                    "unknown scheme '{}://': use synthetic://, file://, v4l2://, csi://, rtsp:// or gst://",
                    uri.scheme
                ),
            ));
        }
        Ok(())
    }
}

/// The device a source URI takes for itself (a V4L2 node streams to one reader and Argus gives
/// a sensor to one session), to refuse a second entry taking it too.
fn device(uri: &str) -> Option<String> {
    let u = SourceUri::parse(uri).ok()?;
    match u.scheme.as_str() {
        "v4l2" if u.location != "auto" && !u.location.is_empty() => Some(format!("v4l2://{}", u.location)),
        "csi" => Some(format!("csi://{}", u.location)),
        _ => None,
    }
}
