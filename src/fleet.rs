//! The fleet side of `[output.mqtt]`: what `jetdetect fleet` makes of every robot's messages on
//! a broker. [`Fleet`] holds, per device, the newest status, stats and hazards messages and
//! when they came ([`Fleet::take`]); [`Fleet::rows`] turns them into the table's rows; the
//! rendering is [`table`] and [`json`]. [`watch`] subscribes and feeds them (feature `mqtt`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

/// How long a camera's newest hazards message counts as "current".
pub const HAZARDS_CURRENT: Duration = Duration::from_secs(2);

/// One camera's danger zone, from its newest hazards message.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Danger {
    /// The camera.
    pub camera: String,
    /// The zone's edges, degrees of azimuth.
    pub from_deg: f64,
    /// The zone's right edge.
    pub to_deg: f64,
    /// The most urgent obstacle's time to contact, when known.
    pub ttc_s: Option<f64>,
}

/// One device's row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The device (the topic level).
    pub device: String,
    /// `online`, `offline` (its status says so: a clean stop or its last will), `silent` (online,
    /// but nothing heard for longer than `silent_after`), or `unknown` (no status yet).
    pub state: String,
    /// The status message's reason (why offline).
    pub reason: String,
    /// Frames processed per second, from the newest stats message.
    pub fps: Option<f64>,
    /// End-to-end latency p99 over the newest stats interval, ms.
    pub p99_ms: Option<f64>,
    /// The hottest temperature sensor, °C.
    pub temp_c: Option<f64>,
    /// The board reports thermal or power throttling.
    pub throttling: Option<bool>,
    /// Current danger zones (hazards messages younger than [`HAZARDS_CURRENT`]).
    pub danger: Vec<Danger>,
    /// Cameras whose newest hazards message says blind.
    pub blind: Vec<String>,
    /// Seconds since the newest message of any kind.
    pub last_seen_s: f64,
}

#[derive(Default)]
struct Device {
    status: Option<Value>,
    stats: Option<Value>,
    /// Per camera: the newest hazards message and when it came.
    hazards: BTreeMap<String, (Value, Instant)>,
    last_seen: Option<Instant>,
}

/// Every device heard of, by name.
pub struct Fleet {
    prefix: String,
    devices: BTreeMap<String, Device>,
    /// Online devices not heard from for this long are `silent`.
    pub silent_after: Duration,
}

impl Fleet {
    /// An empty fleet under topic prefix `prefix` (e.g. `jetdetect`).
    pub fn new(prefix: &str) -> Fleet {
        Fleet { prefix: prefix.to_string(), devices: BTreeMap::new(), silent_after: Duration::from_secs(30) }
    }

    /// The subscriptions that feed it.
    pub fn filters(&self) -> [String; 3] {
        ["status", "stats", "hazards"].map(|t| format!("{}/+/{t}", self.prefix))
    }

    /// Takes one message (topic, payload) received at `now`; false when it is not one of ours
    /// (another topic, or a payload that is not a JSON object).
    pub fn take(&mut self, topic: &str, payload: &[u8], now: Instant) -> bool {
        let Some(rest) = topic.strip_prefix(&self.prefix).and_then(|r| r.strip_prefix('/')) else {
            return false;
        };
        let Some((device, kind)) = rest.split_once('/') else { return false };
        if device.is_empty() || device.contains('/') {
            return false;
        }
        let Ok(v) = serde_json::from_slice::<Value>(payload) else { return false };
        if !v.is_object() {
            return false;
        }
        let d = self.devices.entry(device.to_string()).or_default();
        match kind {
            "status" => d.status = Some(v),
            "stats" => d.stats = Some(v),
            "hazards" => {
                let camera = v["camera"].as_str().unwrap_or("cam0").to_string();
                d.hazards.insert(camera, (v, now));
            }
            _ => return false,
        }
        d.last_seen = Some(now);
        true
    }

    /// The table's rows, by device name, as of `now`.
    pub fn rows(&self, now: Instant) -> Vec<Row> {
        self.devices
            .iter()
            .map(|(name, d)| {
                let since =
                    d.last_seen.map_or(f64::INFINITY, |t| now.saturating_duration_since(t).as_secs_f64());
                let state = d.status.as_ref().and_then(|s| s["state"].as_str()).unwrap_or("unknown");
                let state = if state == "online" && since > self.silent_after.as_secs_f64() {
                    "silent"
                } else {
                    state
                };
                let stats = d.stats.as_ref();
                let num = |v: &Value| v.as_f64();
                let temp_c = stats
                    .and_then(|s| s["telemetry"]["temp_c"].as_object())
                    .and_then(|t| t.values().filter_map(num).reduce(f64::max));
                let mut danger = Vec::new();
                let mut blind = Vec::new();
                for (camera, (h, at)) in &d.hazards {
                    if now.saturating_duration_since(*at) > HAZARDS_CURRENT || state == "offline" {
                        continue;
                    }
                    if h["blind"] == true {
                        blind.push(camera.clone());
                        continue;
                    }
                    for z in h["zones"].as_array().into_iter().flatten() {
                        if z["level"] == "danger" {
                            danger.push(Danger {
                                camera: camera.clone(),
                                from_deg: z["from_deg"].as_f64().unwrap_or(0.0),
                                to_deg: z["to_deg"].as_f64().unwrap_or(0.0),
                                ttc_s: z["ttc_s"].as_f64(),
                            });
                        }
                    }
                }
                Row {
                    device: name.clone(),
                    state: state.to_string(),
                    reason: d.status.as_ref().and_then(|s| s["reason"].as_str()).unwrap_or("").to_string(),
                    fps: stats.and_then(|s| num(&s["fps"]["processed"])),
                    p99_ms: stats.and_then(|s| num(&s["latency_ms"]["end_to_end"]["p99"])),
                    temp_c,
                    throttling: stats.and_then(|s| s["telemetry"]["throttling"].as_bool()),
                    danger,
                    blind,
                    last_seen_s: since,
                }
            })
            .collect()
    }
}

/// The rows as a table, one line per device.
pub fn table(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<20} {:<8} {:>6} {:>8} {:>6} {:<8} {:<28} {:>9}\n",
        "DEVICE", "STATE", "FPS", "P99 ms", "TEMP", "THROTTLE", "DANGER", "LAST SEEN"
    );
    let f = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
    for r in rows {
        let danger = if !r.blind.is_empty() {
            format!("BLIND {}", r.blind.join(","))
        } else if r.danger.is_empty() {
            "-".into()
        } else {
            r.danger
                .iter()
                .map(|d| format!("{} {:.0}..{:.0}°", d.camera, d.from_deg, d.to_deg))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let seen = if r.last_seen_s.is_finite() { format!("{:.1} s", r.last_seen_s) } else { "-".into() };
        out.push_str(&format!(
            "{:<20} {:<8} {:>6} {:>8} {:>6} {:<8} {:<28} {:>9}\n",
            r.device,
            r.state,
            f(r.fps, 1),
            f(r.p99_ms, 1),
            f(r.temp_c, 1),
            r.throttling.map_or("-", |t| if t { "yes" } else { "no" }),
            danger,
            seen
        ));
    }
    out
}

/// The rows as one JSON line: `{"devices":[...]}`.
pub fn json(rows: &[Row]) -> String {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            if !r.last_seen_s.is_finite() {
                v["last_seen_s"] = Value::Null;
            }
            v
        })
        .collect();
    serde_json::json!({ "devices": rows }).to_string()
}

/// Subscribes with `settings` under `prefix` and prints the table (or JSON lines) every
/// `every`, for `duration` (forever when `None`). Connection problems are printed to stderr,
/// one line per change, and retried.
#[cfg(feature = "mqtt")]
pub fn watch(
    settings: &crate::output::mqtt::link::Settings,
    prefix: &str,
    every: Duration,
    duration: Option<Duration>,
    as_json: bool,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    use crate::output::mqtt::link::{self, Net};
    use std::io::IsTerminal;

    let mut fleet = Fleet::new(prefix);
    let filters = fleet.filters();
    let (client, mut connection) = link::connect(settings, 64);
    let (tx, rx) = std::sync::mpsc::channel::<(String, Vec<u8>, Instant)>();
    let s = settings.clone();
    let sub = client.clone();
    std::thread::Builder::new().name("fleet-net".into()).spawn(move || {
        let mut last_error = String::new();
        loop {
            match connection.next(&s) {
                Net::Connected => {
                    last_error.clear();
                    eprintln!("jetdetect fleet: connected to {}", s.url_text);
                    for f in &filters {
                        if let Err(e) = sub.subscribe(f) {
                            eprintln!("jetdetect fleet: cannot subscribe to {f}: {e}");
                        }
                    }
                }
                Net::Message { topic, payload, .. } => {
                    let sent = tx.send((topic, payload, Instant::now()));
                    if sent.is_err() {
                        return;
                    }
                }
                Net::Failed(why) => {
                    if why != last_error {
                        eprintln!("jetdetect fleet: {why}; retrying");
                        last_error = why;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
                Net::Closed => return,
                _ => {}
            }
        }
    })?;
    let start = Instant::now();
    let tty = std::io::stdout().is_terminal() && !as_json;
    let mut next_print = start + every;
    loop {
        let end = duration.map(|d| start + d);
        let until = end.map_or(next_print, |e| e.min(next_print));
        let wait = until.saturating_duration_since(Instant::now());
        if let Ok((topic, payload, at)) = rx.recv_timeout(wait) {
            fleet.take(&topic, &payload, at);
            for (t, p, a) in rx.try_iter() {
                fleet.take(&t, &p, a);
            }
        }
        let now = Instant::now();
        let done = end.is_some_and(|e| now >= e);
        if now >= next_print || done {
            let rows = fleet.rows(now);
            if as_json {
                writeln!(out, "{}", json(&rows))?;
            } else if tty {
                write!(out, "\x1b[H\x1b[2J{}", table(&rows))?;
            } else if done || duration.is_none() {
                writeln!(out, "{}", table(&rows))?;
            }
            out.flush()?;
            next_print = now + every;
        }
        if done {
            client.disconnect();
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_from_the_newest_messages_of_each_device() {
        let t0 = Instant::now();
        let mut f = Fleet::new("site/jetdetect");
        assert!(f.take(
            "site/jetdetect/rover-1/status",
            br#"{"type":"status","state":"online","reason":""}"#,
            t0
        ));
        let stats = br#"{"type":"stats","fps":{"processed":29.5},"latency_ms":{"end_to_end":{"p99":41.2}},
            "telemetry":{"temp_c":{"cpu":51.0,"gpu":57.5},"throttling":false}}"#;
        assert!(f.take("site/jetdetect/rover-1/stats", stats, t0));
        let hazards = br#"{"type":"hazards","camera":"front","blind":false,"zones":[
            {"from_deg":-30,"to_deg":-10,"level":"clear"},{"from_deg":-10,"to_deg":10,"level":"danger","ttc_s":0.8}]}"#;
        assert!(f.take("site/jetdetect/rover-1/hazards", hazards, t0));
        assert!(f.take(
            "site/jetdetect/rover-1/hazards",
            br#"{"type":"hazards","camera":"rear","blind":true,"zones":[]}"#,
            t0
        ));
        assert!(f.take(
            "site/jetdetect/rover-2/status",
            br#"{"state":"offline","reason":"connection lost"}"#,
            t0
        ));
        assert!(!f.take("site/jetdetect/rover-2/other", b"{}", t0), "not a topic of ours");
        assert!(!f.take("elsewhere/rover-3/status", b"{}", t0));
        assert!(!f.take("site/jetdetect/rover-3/stats", b"not json", t0));
        let rows = f.rows(t0 + Duration::from_secs(1));
        assert_eq!(rows.len(), 2);
        let r = &rows[0];
        assert_eq!((r.device.as_str(), r.state.as_str()), ("rover-1", "online"));
        assert_eq!(
            (r.fps, r.p99_ms, r.temp_c, r.throttling),
            (Some(29.5), Some(41.2), Some(57.5), Some(false))
        );
        assert_eq!(
            r.danger,
            vec![Danger { camera: "front".into(), from_deg: -10.0, to_deg: 10.0, ttc_s: Some(0.8) }]
        );
        assert_eq!(r.blind, ["rear"]);
        assert_eq!(r.last_seen_s, 1.0);
        assert_eq!((rows[1].state.as_str(), rows[1].reason.as_str()), ("offline", "connection lost"));
        let text = table(&rows);
        assert!(text.contains("rover-1") && text.contains("BLIND rear") && text.contains("29.5"), "{text}");
        let v: Value = serde_json::from_str(&json(&rows)).unwrap();
        assert_eq!(v["devices"][0]["danger"][0]["ttc_s"], 0.8);
        // Hazards older than HAZARDS_CURRENT are not current; a device heard from long ago is silent.
        let later = f.rows(t0 + Duration::from_secs(40));
        assert!(later[0].danger.is_empty() && later[0].blind.is_empty());
        assert_eq!(later[0].state, "silent");
    }
}
