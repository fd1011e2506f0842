//! The client side of the detections socket: [`watch`] reads a daemon's messages and prints
//! them, for humans ([`format_human`], also `jetdetect run --echo`) or as they came.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use serde_json::Value;

use crate::Error;

/// How [`watch`] prints messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One line per message, for a person ([`format_human`]).
    Human,
    /// The JSON lines as the daemon sent them.
    Json,
}

/// Connects to the daemon's socket at `path` and prints its messages to `out` until `count`
/// detections messages have come (all of them without `count`) or the daemon says `bye`.
/// `Ok(false)` when the daemon closed the connection before `count`; a closed `out` (a pipe
/// into `head`) ends it quietly.
pub fn watch(path: &Path, format: Format, count: Option<u64>, out: &mut impl Write) -> Result<bool, Error> {
    let stream =
        UnixStream::connect(path).map_err(|source| Error::Connect { path: path.to_path_buf(), source })?;
    let mut seen = 0u64;
    // Several cameras (the `hello` lists them): each frame's line starts with its camera.
    let mut cameras = false;
    for line in BufReader::new(stream).lines() {
        let line = line.map_err(|e| Error::io(path.display().to_string(), e))?;
        let msg: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("jetdetect: {}: unreadable message ({e}): {line}", path.display());
                continue;
            }
        };
        let text = match format {
            Format::Json => Some(line.clone()),
            Format::Human => {
                if msg["type"] == "hello" {
                    cameras = msg["cameras"].as_array().is_some_and(|c| c.len() > 1);
                }
                format_human(&msg, cameras)
            }
        };
        if let Some(t) = text {
            if writeln!(out, "{t}").is_err() {
                return Ok(true); // stdout closed (e.g. piped into head)
            }
        }
        if msg["type"] == "detections" {
            seen += 1;
            if count.is_some_and(|n| seen >= n) {
                return Ok(true);
            }
        }
        if msg["type"] == "bye" {
            return Ok(true);
        }
    }
    eprintln!("jetdetect: {}: the daemon closed the connection", path.display());
    Ok(count.is_none())
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// One line for a human, or `None` for messages of unknown type; with `cameras` (several
/// cameras share the stream) a frame's line starts with its camera's name.
pub fn format_human(msg: &Value, cameras: bool) -> Option<String> {
    let line = format_message(msg)?;
    match (cameras, msg["camera"].as_str()) {
        (true, Some(camera)) => Some(format!("{camera}: {line}")),
        _ => Some(line),
    }
}

fn format_message(msg: &Value) -> Option<String> {
    match msg["type"].as_str()? {
        "hello" => {
            let classes: Vec<&str> = msg["classes"].as_array()?.iter().filter_map(|c| c.as_str()).collect();
            Some(format!(
                "connected to jetdetect {} (schema {}): {} | {} | classes: {}",
                msg["version"].as_str().unwrap_or("?"),
                msg["schema"],
                msg["source"].as_str().unwrap_or("?"),
                msg["engine"].as_str().unwrap_or("?"),
                classes.join(", ")
            ))
        }
        "detections" => {
            let dets = msg["detections"].as_array()?;
            let list: Vec<String> = dets
                .iter()
                .map(|d| {
                    format!(
                        "{} {:.2} ({:.0},{:.0})-({:.0},{:.0})",
                        d["class"].as_str().unwrap_or("?"),
                        f(&d["score"]),
                        f(&d["x1"]),
                        f(&d["y1"]),
                        f(&d["x2"]),
                        f(&d["y2"])
                    )
                })
                .collect();
            Some(format!(
                "#{:<6} e2e {:>6.1} ms (age {:>5.1}, infer {:>5.1})  {} object{}{}{}",
                msg["seq"],
                f(&msg["latency_ms"]["end_to_end"]),
                f(&msg["frame_age_ms"]),
                f(&msg["latency_ms"]["inference"]),
                dets.len(),
                if dets.len() == 1 { "" } else { "s" },
                if list.is_empty() { "" } else { ": " },
                list.join(", ")
            ))
        }
        "stats" => {
            let e = &msg["latency_ms"]["end_to_end"];
            let deadline = match &msg["deadline"] {
                Value::Object(d) => format!(", {} past the {} ms deadline", d["missed"], d["ms"]),
                _ => String::new(),
            };
            let blind = match &msg["blind"] {
                Value::Object(b) => format!(", BLIND ({})", b["reason"].as_str().unwrap_or("?")),
                _ => String::new(),
            };
            Some(format!(
                "stats: {:.1} fps processed ({:.1} captured), end-to-end p50 {:.1} p90 {:.1} p99 {:.1} max {:.1} ms, \
                 dropped {}, clients {}{deadline}{blind}",
                f(&msg["fps"]["processed"]),
                f(&msg["fps"]["capture"]),
                f(&e["p50"]),
                f(&e["p90"]),
                f(&e["p99"]),
                f(&e["max"]),
                msg["frames"]["dropped"],
                msg["clients"]
            ))
        }
        "hazards" if msg["blind"] == true => Some(format!(
            "BLIND ({}): {}; newest frame {:.0} ms old{}",
            msg["reason"].as_str().unwrap_or("?"),
            msg["detail"].as_str().unwrap_or("?"),
            f(&msg["frame_age_ms"]),
            if msg["throttling"] == true { "; the board is throttling" } else { "" }
        )),
        "hazards" => {
            let zones: Vec<String> = msg["zones"]
                .as_array()?
                .iter()
                .map(|z| {
                    let level = z["level"].as_str().unwrap_or("?");
                    match (level, z["track_id"].as_u64()) {
                        ("clear", _) | (_, None) => format!("[{level}]"),
                        (_, Some(id)) => format!(
                            "[{} #{id} {:.1}s]",
                            level.to_ascii_uppercase(),
                            z["ttc_s"].as_f64().unwrap_or(f64::NAN)
                        ),
                    }
                })
                .collect();
            let approaching: Vec<String> = msg["obstacles"]
                .as_array()?
                .iter()
                .filter(|o| o["trend"] == "approaching" && o["ttc_s"].is_number())
                .map(|o| {
                    let range =
                        o["range_estimate_m"].as_f64().map(|r| format!(" ~{r:.1}m")).unwrap_or_default();
                    format!(
                        "{}#{} {:+.0}deg ttc {:.1}s{range}",
                        o["class"].as_str().unwrap_or("?"),
                        o["track_id"],
                        f(&o["azimuth_deg"]),
                        f(&o["ttc_s"])
                    )
                })
                .collect();
            Some(format!(
                "#{:<6} zones {}  age {:.1} ms{}{}",
                msg["seq"].as_u64().unwrap_or(0),
                zones.join(" "),
                f(&msg["frame_age_ms"]),
                if approaching.is_empty() { "" } else { "  approaching: " },
                approaching.join(", ")
            ))
        }
        "bye" => Some(format!("jetdetect stopped ({})", msg["reason"].as_str().unwrap_or("?"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_each_message_type() {
        let d: Value = serde_json::from_str(
            r#"{"type":"detections","seq":5,"frame_age_ms":1.5,"latency_ms":{"end_to_end":30.25,"inference":20.0},
                "detections":[{"class":"cone","score":0.913,"x1":1,"y1":2,"x2":30,"y2":40}]}"#,
        )
        .unwrap();
        let line = format_human(&d, false).unwrap();
        assert!(
            line.contains("#5") && line.contains("30.2 ms") && line.contains("cone 0.91 (1,2)-(30,40)"),
            "{line}"
        );
        let b: Value = serde_json::from_str(r#"{"type":"bye","reason":"signal"}"#).unwrap();
        assert_eq!(format_human(&b, true).unwrap(), "jetdetect stopped (signal)");
        assert!(format_human(&serde_json::json!({"type": "future"}), false).is_none());
        let mut d = d;
        d["camera"] = "rear".into();
        assert!(
            format_human(&d, true).unwrap().starts_with("rear: #5 "),
            "several cameras: the camera first"
        );
        assert!(format_human(&d, false).unwrap().starts_with("#5 "), "one camera: no name");
    }

    #[test]
    fn hazards_show_the_zones_the_approaching_obstacles_and_blindness() {
        let h = serde_json::json!({"type": "hazards", "seq": 9, "blind": false, "frame_age_ms": 41.2,
            "zones": [{"level": "clear", "track_id": null}, {"level": "danger", "track_id": 3, "ttc_s": 1.44},
                      {"level": "caution", "track_id": 4, "ttc_s": 3.0}],
            "obstacles": [{"class": "ball", "track_id": 3, "azimuth_deg": -2.4, "trend": "approaching",
                           "ttc_s": 1.44, "range_estimate_m": 2.04},
                          {"class": "box", "track_id": 5, "azimuth_deg": 20.0, "trend": "receding", "ttc_s": null}]});
        let line = format_human(&h, false).unwrap();
        assert_eq!(
            line,
            "#9      zones [clear] [DANGER #3 1.4s] [CAUTION #4 3.0s]  age 41.2 ms  approaching: ball#3 -2deg ttc 1.4s ~2.0m"
        );
        let b = serde_json::json!({"type": "hazards", "blind": true, "reason": "camera",
            "detail": "/dev/video0: cannot open", "frame_age_ms": 1532.0, "throttling": true});
        assert_eq!(
            format_human(&b, false).unwrap(),
            "BLIND (camera): /dev/video0: cannot open; newest frame 1532 ms old; the board is throttling"
        );
    }
}
