//! The messages on the detections socket (`docs/protocol.md`, schema 1).
//!
//! Every message is one JSON object on one line with `"type"` and
//! `"schema"`. Messages are serialised into a reused buffer: publishing a
//! frame allocates nothing once the buffer has grown to the largest message.

use std::time::Instant;

use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;

use crate::clock::{mono_ns, ms_between};
use crate::frame::GroundTruth;
use crate::output::Interval;
use crate::power::telemetry::Telemetry;
use crate::report::{Fps, FrameCounters, FrameReport, SourceState};
use crate::stats::{LatencyStats, Percentiles, Stage};
use crate::yolo::{ClassNames, Detection};

/// Version of the message layout; bumped when a field changes meaning or goes away.
pub const SCHEMA: u32 = 1;

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

struct Detections<'a> {
    list: &'a [Detection],
    names: &'a ClassNames,
    /// Per detection, its track's number (0 or missing: untracked).
    tracks: &'a [u64],
}

impl Serialize for Detections<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct One<'a> {
            class_id: usize,
            class: &'a str,
            score: f32,
            x1: f32,
            y1: f32,
            x2: f32,
            y2: f32,
            #[serde(skip_serializing_if = "Option::is_none")]
            track_id: Option<u64>,
        }
        let mut seq = s.serialize_seq(Some(self.list.len()))?;
        for (i, d) in self.list.iter().enumerate() {
            let name = self.names.name(d.class_id);
            seq.serialize_element(&One {
                class_id: d.class_id,
                class: &name,
                score: d.score,
                x1: d.x1,
                y1: d.y1,
                x2: d.x2,
                y2: d.y2,
                track_id: self.tracks.get(i).copied().filter(|&t| t != 0),
            })?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct Latency {
    queue: f64,
    preprocess: f64,
    inference: f64,
    decode: f64,
    publish: f64,
    end_to_end: f64,
}

#[derive(Serialize)]
struct DetectionsMessage<'a> {
    r#type: &'static str,
    schema: u32,
    camera: &'a str,
    seq: u64,
    width: u32,
    height: u32,
    capture_mono_ns: u64,
    capture_wall_ns: u64,
    publish_mono_ns: u64,
    frame_age_ms: f64,
    latency_ms: Latency,
    dropped: u64,
    detections: Detections<'a>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    truth: &'a [GroundTruth],
}

/// Appends the `detections` message for `r`, published at `published`, and a newline.
pub fn write_detections(
    out: &mut Vec<u8>,
    r: &FrameReport,
    names: &ClassNames,
    published: Instant,
    dropped: u64,
) {
    let ms = |a: Instant, b: Instant| round3(ms_between(a, b));
    let d = |v: std::time::Duration| round3(v.as_secs_f64() * 1e3);
    let msg = DetectionsMessage {
        r#type: "detections",
        schema: SCHEMA,
        camera: &r.camera.name,
        seq: r.seq,
        width: r.width,
        height: r.height,
        capture_mono_ns: mono_ns(r.captured),
        capture_wall_ns: r.captured_wall_ns as u64,
        publish_mono_ns: mono_ns(published),
        frame_age_ms: ms(r.captured, r.infer_start),
        latency_ms: Latency {
            queue: ms(r.captured, r.infer_start),
            preprocess: d(r.times.preprocess),
            inference: d(r.times.inference),
            decode: d(r.times.decode),
            publish: ms(r.infer_end, published),
            end_to_end: ms(r.captured, published),
        },
        dropped,
        detections: Detections { list: &r.detections, names, tracks: &r.hazards.track_of },
        truth: &r.truth,
    };
    // Serialising plain structs into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &msg);
    out.push(b'\n');
}

struct Obstacles<'a> {
    report: &'a FrameReport,
    names: &'a ClassNames,
}

impl Serialize for Obstacles<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct One<'a> {
            track_id: u64,
            class_id: usize,
            class: &'a str,
            score: f32,
            x1: f32,
            y1: f32,
            x2: f32,
            y2: f32,
            azimuth_deg: f64,
            elevation_deg: f64,
            azimuth_span_deg: [f64; 2],
            velocity_px_s: [f64; 2],
            trend: crate::hazard::Trend,
            ttc_s: Option<f64>,
            ttc_confidence: f64,
            range_estimate_m: Option<f64>,
            level: crate::hazard::Level,
            #[serde(skip_serializing_if = "Option::is_none")]
            course: Option<crate::hazard::course::Course>,
        }
        let r = self.report;
        let mut seq = s.serialize_seq(Some(r.hazards.obstacles.len()))?;
        for o in &r.hazards.obstacles {
            let Some(d) = r.detections.get(o.detection) else { continue };
            let name = self.names.name(d.class_id);
            let r3 = |v: f64| round3(v);
            seq.serialize_element(&One {
                track_id: o.id,
                class_id: d.class_id,
                class: &name,
                score: d.score,
                x1: d.x1,
                y1: d.y1,
                x2: d.x2,
                y2: d.y2,
                azimuth_deg: r3(o.bearing.azimuth_deg),
                elevation_deg: r3(o.bearing.elevation_deg),
                azimuth_span_deg: [r3(o.azimuth.0), r3(o.azimuth.1)],
                velocity_px_s: o.velocity_px_s.map(r3),
                trend: o.ttc.trend,
                ttc_s: o.ttc.seconds.map(r3),
                ttc_confidence: r3(o.ttc.confidence),
                range_estimate_m: o.range_m.map(r3),
                level: o.level,
                course: o.course.map(|c| crate::hazard::course::Course {
                    offset_widths: r3(c.offset_widths),
                    offset_m: c.offset_m.map(r3),
                    miss_m: c.miss_m.map(r3),
                    hit: c.hit,
                }),
            })?;
        }
        seq.end()
    }
}

struct Zones<'a>(&'a [crate::hazard::Zone]);

impl Serialize for Zones<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct One {
            from_deg: f64,
            to_deg: f64,
            level: crate::hazard::Level,
            track_id: Option<u64>,
            ttc_s: Option<f64>,
            range_estimate_m: Option<f64>,
        }
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for z in self.0 {
            seq.serialize_element(&One {
                from_deg: round3(z.from_deg),
                to_deg: round3(z.to_deg),
                level: z.level,
                track_id: z.track,
                ttc_s: z.ttc_s.map(round3),
                range_estimate_m: z.range_m.map(round3),
            })?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct HazardsMessage<'a> {
    r#type: &'static str,
    schema: u32,
    camera: &'a str,
    seq: u64,
    capture_mono_ns: u64,
    publish_mono_ns: u64,
    frame_age_ms: f64,
    blind: bool,
    level: crate::hazard::Level,
    fov_deg: [f64; 2],
    zones: Zones<'a>,
    obstacles: Obstacles<'a>,
}

/// Appends the `hazards` message for `r` (tracks, times to contact, zones), published at
/// `published`, and a newline. `frame_age_ms` is the frame's age at publication.
pub fn write_hazards(out: &mut Vec<u8>, r: &FrameReport, names: &ClassNames, published: Instant) {
    let h = &r.hazards;
    let msg = HazardsMessage {
        r#type: "hazards",
        schema: SCHEMA,
        camera: &r.camera.name,
        seq: r.seq,
        capture_mono_ns: mono_ns(r.captured),
        publish_mono_ns: mono_ns(published),
        frame_age_ms: round3(ms_between(r.captured, published)),
        blind: false,
        level: h.level(),
        fov_deg: [round3(h.span_deg.0), round3(h.span_deg.1)],
        zones: Zones(&h.zones),
        obstacles: Obstacles { report: r, names },
    };
    let _ = serde_json::to_writer(&mut *out, &msg);
    out.push(b'\n');
}

#[derive(Serialize)]
struct BlindMessage<'a> {
    r#type: &'static str,
    schema: u32,
    camera: &'a str,
    publish_mono_ns: u64,
    blind: bool,
    reason: crate::report::BlindReason,
    detail: &'a str,
    frame_age_ms: f64,
    throttling: bool,
    zones: [(); 0],
    obstacles: [(); 0],
}

/// Appends a `hazards` message saying the daemon is blind (no zones, no obstacles: nothing seen
/// is fresh), and a newline.
pub fn write_blind(out: &mut Vec<u8>, b: &crate::report::Blind, now: Instant) {
    let msg = BlindMessage {
        r#type: "hazards",
        schema: SCHEMA,
        camera: &b.camera,
        publish_mono_ns: mono_ns(now),
        blind: true,
        reason: b.reason,
        detail: &b.detail,
        frame_age_ms: b.for_ms,
        throttling: b.throttling,
        zones: [],
        obstacles: [],
    };
    let _ = serde_json::to_writer(&mut *out, &msg);
    out.push(b'\n');
}

/// Appends the `hello` message for `s`, and a newline.
pub fn write_hello(out: &mut Vec<u8>, s: &crate::output::Started) {
    let hello = Hello {
        r#type: "hello",
        schema: SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        source: s.source.clone(),
        cameras: s
            .cameras
            .iter()
            .map(|(name, source)| HelloCamera { name: name.clone(), source: source.clone() })
            .collect(),
        engine: s.engine.clone(),
        runtime: s.runtime.clone(),
        input: s.input,
        classes: (0..s.names.len()).map(|i| s.names.name(i).into_owned()).collect(),
    };
    let _ = serde_json::to_writer(&mut *out, &hello);
    out.push(b'\n');
}

/// Sent to each client when it connects.
#[derive(Clone, Debug, Serialize)]
pub struct Hello {
    /// Always `hello`.
    pub r#type: &'static str,
    /// [`SCHEMA`].
    pub schema: u32,
    /// jetdetect's version.
    pub version: &'static str,
    /// The source, as opened (several cameras: each after its name, `; `-separated).
    pub source: String,
    /// Every camera, in config order; `camera` in frame messages is one of these names.
    pub cameras: Vec<HelloCamera>,
    /// The engine and model.
    pub engine: String,
    /// Runtime library versions (`onnxruntime`, `tensorrt`, `cuda`), when the engine loads any.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub runtime: std::collections::BTreeMap<String, String>,
    /// Model input `[width, height]`.
    pub input: [u32; 2],
    /// Class names by id.
    pub classes: Vec<String>,
}

/// A camera in the `hello` message.
#[derive(Clone, Debug, Serialize)]
pub struct HelloCamera {
    /// Its name (`[[source]] name`).
    pub name: String,
    /// Its source, as opened.
    pub source: String,
}

#[derive(Serialize)]
struct StatsMessage<'a> {
    r#type: &'static str,
    schema: u32,
    uptime_s: f64,
    interval_s: f64,
    frames: FrameCounters,
    fps: Fps,
    clients: usize,
    source: &'a SourceState,
    cameras: &'a [crate::report::CameraStats],
    telemetry: &'a Telemetry,
    latency_ms: LatencyTable<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deadline: Option<Deadline>,
    blind: Option<&'a crate::report::Blind>,
}

#[derive(Serialize)]
struct Deadline {
    ms: f64,
    missed: u64,
    by_stage: std::collections::BTreeMap<&'static str, u64>,
}

struct LatencyTable<'a>(&'a LatencyStats);

impl Serialize for LatencyTable<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(Stage::ALL.len()))?;
        for stage in Stage::ALL {
            let p: Percentiles = self.0.stage(stage);
            m.serialize_entry(stage.name(), &p)?;
        }
        m.end()
    }
}

/// One image's detections as `jetdetect detect` prints them, and a newline:
/// `{"image", "width", "height", "detections"}`, each detection as in a `detections` message.
pub fn write_image(
    out: &mut Vec<u8>,
    image: &str,
    width: u32,
    height: u32,
    list: &[Detection],
    names: &ClassNames,
) {
    #[derive(Serialize)]
    struct Image<'a> {
        image: &'a str,
        width: u32,
        height: u32,
        detections: Detections<'a>,
    }
    let _ = serde_json::to_writer(
        &mut *out,
        &Image { image, width, height, detections: Detections { list, names, tracks: &[] } },
    );
    out.push(b'\n');
}

/// Appends a `stats` message for interval `s` (the publisher's figures): counters since
/// start, rates and percentiles over the interval, the source's health, and a newline.
pub fn write_stats(out: &mut Vec<u8>, s: &Interval<'_>) {
    let rate = |n: u64| if s.interval_s > 0.0 { round3(n as f64 / s.interval_s) } else { 0.0 };
    let msg = StatsMessage {
        r#type: "stats",
        schema: SCHEMA,
        uptime_s: round3(s.uptime_s),
        interval_s: round3(s.interval_s),
        frames: s.totals,
        fps: Fps { capture: rate(s.delta.captured), processed: rate(s.delta.processed) },
        clients: s.clients,
        source: s.source,
        cameras: s.cameras,
        telemetry: s.telemetry,
        latency_ms: LatencyTable(s.latency),
        deadline: (s.deadline_ms > 0.0).then(|| Deadline {
            ms: s.deadline_ms,
            missed: s.misses.total(),
            by_stage: Stage::ALL[..5].iter().map(|&st| (st.name(), s.misses.by_stage[st])).collect(),
        }),
        blind: s.blind,
    };
    let _ = serde_json::to_writer(&mut *out, &msg);
    out.push(b'\n');
}

/// Appends a `bye` message (the daemon is stopping) and a newline.
pub fn write_bye(out: &mut Vec<u8>, reason: &str) {
    let _ = serde_json::to_writer(
        &mut *out,
        &serde_json::json!({"type": "bye", "schema": SCHEMA, "reason": reason}),
    );
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::StageTimes;
    use std::time::Duration;

    #[test]
    fn a_detections_message_has_every_documented_field() {
        let mut r = FrameReport::new();
        r.seq = 42;
        r.width = 640;
        r.height = 480;
        r.infer_start = r.captured + Duration::from_millis(3);
        r.infer_end = r.infer_start + Duration::from_millis(20);
        r.times = StageTimes {
            preprocess: Duration::from_millis(2),
            inference: Duration::from_millis(17),
            decode: Duration::from_millis(1),
        };
        r.detections.push(Detection { class_id: 2, score: 0.5, x1: 1.0, y1: 2.0, x2: 3.0, y2: 4.0 });
        let names = ClassNames::from_metadata("{0: 'box', 1: 'ball', 2: 'cone'}").unwrap();
        let mut out = Vec::new();
        write_detections(&mut out, &r, &names, r.infer_end + Duration::from_millis(1), 7);
        assert_eq!(out.last(), Some(&b'\n'));
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["type"], "detections");
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(v["seq"], 42);
        assert_eq!(v["frame_age_ms"], 3.0);
        assert_eq!(v["latency_ms"]["end_to_end"], 24.0);
        assert_eq!(v["latency_ms"]["publish"], 1.0);
        assert_eq!(v["dropped"], 7);
        assert_eq!(v["detections"][0]["class"], "cone");
        assert!(v.get("truth").is_none(), "no ground truth, no field");
        assert_eq!(
            v["publish_mono_ns"].as_u64().unwrap() - v["capture_mono_ns"].as_u64().unwrap(),
            24_000_000
        );
    }
}
