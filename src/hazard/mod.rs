//! Hazards: what a robot acts on, from each frame's boxes. Boxes become tracks (`track`,
//! ByteTrack), tracks get a bearing in the vehicle's frame (`camera`), an image-plane velocity
//! (their Kalman filter), a time to contact from their scale expansion (`ttc`) and, where
//! `[hazards.classes]` gives a class's real size, a range estimate; with `[vehicle] width_m`,
//! whether the vehicle will hit or pass them (`course`, the camera's rotation taken out with the
//! attitude the flight controller sends); the field of view is cut into sectors, each with its
//! most urgent obstacle and a level (`zones`).
//!
//! It runs on the inference thread right after decoding, in well under a millisecond, and
//! allocates nothing per frame. Its input is the decoder's detections and the frame's capture
//! time and size; it knows nothing of cameras' drivers, models or outputs. Whether the picture
//! is fresh at all (the blind flag and the latency contract) is the publisher's business
//! (`pipeline::publish`), which knows when frames stop coming.

pub mod assign;
pub mod camera;
pub mod course;
pub mod kalman;
pub mod line;
pub mod ring;
pub mod track;
pub mod ttc;
pub mod zones;

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

pub use camera::{Bearing, Camera, CameraConfig};
pub use track::{Tracker, TrackingConfig};
pub use ttc::{Trend, Ttc};
pub use zones::{Level, Zone};

use crate::yolo::{ClassNames, Detection};

/// `[hazards] danger_frames` by default: 3 frames (67 ms at 30 fps; see docs/hazards.md).
pub const DANGER_FRAMES: u32 = 3;

/// While danger is being confirmed, a frame counts only if its time to contact is within this
/// factor of the one the track had in its previous frame: an object coming at the camera at a
/// steady speed has a time to contact falling by the frame interval, while the estimate jumps
/// (10.4 s to 0.4 s in one frame) when the box does, as when an object crossing in front of
/// another is boxed with it. On seed 4 of `jetdetect eval --hazards`, 1.3 and 1.5 left the same
/// 9 false alarms, 2 times left 11 (docs/hazards.md).
pub const STEADY_FACTOR: f64 = 1.5;

/// Whether a frame counts towards confirming danger: its box is confident (at least
/// `[hazards.tracking] high_score`: the doubtful band continues tracks but raises no alarm) and
/// its time to contact `now` is within [`STEADY_FACTOR`] of the track's previous one, `before`
/// (none before: not yet steady).
fn confirms_danger(score: f32, high_score: f32, before: Option<f64>, now: Option<f64>) -> bool {
    let steady = match (before, now) {
        (Some(b), Some(n)) if b > 0.0 && n > 0.0 => (n / b).max(b / n) <= STEADY_FACTOR,
        _ => false,
    };
    score >= high_score && steady
}

/// `[hazards] ttc_window_s` by default, seconds.
pub const TTC_WINDOW_S: f64 = 1.0;

/// `[hazards] min_confidence` by default.
pub const MIN_CONFIDENCE: f64 = 0.5;

/// A class's real size, for range estimates: `[hazards.classes] person = { height_m = 1.7 }`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSize {
    /// Real height, metres (used first: boxes of upright objects keep their height).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub height_m: Option<f64>,
    /// Real width, metres.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub width_m: Option<f64>,
}

/// `[hazards]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HazardsConfig {
    /// Track objects and publish a `hazards` message per frame.
    pub enabled: bool,
    /// Sectors across the horizontal field of view, 1 to 72.
    pub zones: usize,
    /// Contact sooner than this (seconds) makes an obstacle `caution`.
    pub caution_ttc_s: f64,
    /// Contact sooner than this (seconds) makes it `danger`.
    pub danger_ttc_s: f64,
    /// The time-to-contact confidence below which an obstacle stays `clear`.
    pub min_confidence: f64,
    /// Seconds of a track's history the time to contact is fitted over.
    pub ttc_window_s: f64,
    /// Frames in a row a track's time to contact must say `danger`, on a confident box and
    /// steady from frame to frame ([`STEADY_FACTOR`]), before the obstacle is `danger` (it is
    /// `caution` until then); 1: at once, on any box.
    pub danger_frames: u32,
    /// `[hazards.tracking]`: the tracker's thresholds.
    pub tracking: TrackingConfig,
    /// `[hazards.classes]`: real sizes by class name, for range estimates.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub classes: BTreeMap<String, ClassSize>,
}

impl Default for HazardsConfig {
    fn default() -> Self {
        HazardsConfig {
            enabled: false,
            zones: 3,
            caution_ttc_s: 4.0,
            danger_ttc_s: 2.0,
            min_confidence: MIN_CONFIDENCE,
            ttc_window_s: TTC_WINDOW_S,
            danger_frames: DANGER_FRAMES,
            tracking: TrackingConfig::default(),
            classes: BTreeMap::new(),
        }
    }
}

impl HazardsConfig {
    /// Checks the ranges; the error names the key (relative to `[hazards]`).
    pub fn validate(&self) -> Result<(), (String, String)> {
        let key = |k: &str| k.to_string();
        if !(1..=72).contains(&self.zones) {
            return Err((
                key("zones"),
                format!("{} is out of range: allowed 1 to 72 (MAVLink's sector count)", self.zones),
            ));
        }
        if !(self.danger_ttc_s > 0.0
            && self.danger_ttc_s <= self.caution_ttc_s
            && self.caution_ttc_s <= 600.0)
        {
            return Err((
                key("danger_ttc_s"),
                format!(
                    "danger_ttc_s = {} and caution_ttc_s = {}: need 0 < danger_ttc_s <= caution_ttc_s <= 600",
                    self.danger_ttc_s, self.caution_ttc_s
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.min_confidence) {
            return Err((
                key("min_confidence"),
                format!("{} is out of range: allowed 0 to 1", self.min_confidence),
            ));
        }
        if !(self.ttc_window_s >= 0.1 && self.ttc_window_s <= 10.0) {
            return Err((
                key("ttc_window_s"),
                format!("{} is out of range: allowed 0.1 to 10 seconds", self.ttc_window_s),
            ));
        }
        if !(1..=30).contains(&self.danger_frames) {
            return Err((
                key("danger_frames"),
                format!("{} is out of range: allowed 1 (at once) to 30 frames", self.danger_frames),
            ));
        }
        self.tracking.validate().map_err(|(k, m)| (format!("tracking.{k}"), m))?;
        for (name, size) in &self.classes {
            let ok = |v: Option<f64>| v.is_none_or(|v| v.is_finite() && v > 0.0 && v < 1000.0);
            if size.height_m.is_none() && size.width_m.is_none() || !ok(size.height_m) || !ok(size.width_m) {
                return Err((
                    format!("classes.{name}"),
                    "give height_m or width_m in metres, e.g. { height_m = 1.7 }".into(),
                ));
            }
        }
        Ok(())
    }
}

/// A `[hazards.classes]` entry that names no class of the model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("[hazards.classes] {name}: not a class of this model ({origin}): its classes are {classes}")]
pub struct UnknownClass {
    /// The name given.
    pub name: String,
    /// Where the model's names came from.
    pub origin: String,
    /// The model's class names, comma-separated (the first 20).
    pub classes: String,
}

/// One tracked obstacle in a frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Obstacle {
    /// Track number.
    pub id: u64,
    /// The detection (index into the frame's detections) it was seen as.
    pub detection: usize,
    /// The box's centre direction.
    pub bearing: Bearing,
    /// Azimuths of the box's left and right edges.
    pub azimuth: (f64, f64),
    /// Image-plane velocity of the box's centre, pixels per second (filtered).
    pub velocity_px_s: [f64; 2],
    /// Time to contact.
    pub ttc: Ttc,
    /// Range from the class's real size (an estimate: it assumes the object is upright and
    /// whole in the box).
    pub range_m: Option<f64>,
    /// How urgent it is.
    pub level: Level,
    /// Where it will be when the vehicle reaches it, hit or pass (with `[vehicle] width_m`,
    /// once the track has half a `ttc_window_s` of whole boxes).
    pub course: Option<course::Course>,
}

/// The hazards of one frame. Reused between frames.
#[derive(Clone, Debug, Default)]
pub struct HazardFrame {
    /// Per detection, its track's number (0: not tracked, e.g. a new or doubtful box).
    pub track_of: Vec<u64>,
    /// The tracked obstacles seen in this frame.
    pub obstacles: Vec<Obstacle>,
    /// The sectors, left to right.
    pub zones: Vec<Zone>,
    /// The horizontal field of view, azimuths of the left and right edges.
    pub span_deg: (f64, f64),
}

impl HazardFrame {
    /// An empty frame with room for `n` obstacles.
    pub fn with_capacity(n: usize) -> HazardFrame {
        HazardFrame {
            track_of: Vec::with_capacity(n),
            obstacles: Vec::with_capacity(n),
            zones: Vec::with_capacity(72),
            span_deg: (0.0, 0.0),
        }
    }

    /// Makes this frame a copy of `other`, reusing its buffers.
    pub fn copy_from(&mut self, other: &HazardFrame) {
        self.track_of.clone_from(&other.track_of);
        self.obstacles.clone_from(&other.obstacles);
        self.zones.clone_from(&other.zones);
        self.span_deg = other.span_deg;
    }

    /// The most urgent level over all zones.
    pub fn level(&self) -> Level {
        self.zones.iter().map(|z| z.level).max().unwrap_or(Level::Clear)
    }
}

/// Turns each frame's detections into hazards.
pub struct Hazards {
    config: HazardsConfig,
    vehicle: course::VehicleConfig,
    attitudes: course::AttitudeTrack,
    /// The flight controller's attitude, where a link receives it, and the newest copied.
    feed: Option<std::sync::Arc<course::AttitudeFeed>>,
    fed_until: Option<Instant>,
    camera_config: CameraConfig,
    camera: Option<Camera>,
    tracker: Tracker,
    sizes: Vec<ClassSize>,
    epoch: Instant,
    candidates: Vec<zones::Candidate>,
}

impl Hazards {
    /// Hazards per `config` for a camera per `camera`, with the model's class `names` (which
    /// `[hazards.classes]` must name).
    pub fn new(
        config: &HazardsConfig,
        camera: &CameraConfig,
        names: &ClassNames,
    ) -> Result<Hazards, UnknownClass> {
        let mut sizes = vec![ClassSize::default(); names.len()];
        for (name, size) in &config.classes {
            let Some(id) = (0..names.len()).find(|&i| names.name(i).as_ref() == name.as_str()) else {
                let list: Vec<String> = (0..names.len().min(20)).map(|i| names.name(i).to_string()).collect();
                return Err(UnknownClass {
                    name: name.clone(),
                    origin: names.origin.clone(),
                    classes: list.join(", ") + if names.len() > 20 { ", ..." } else { "" },
                });
            };
            sizes[id] = *size;
        }
        Ok(Hazards {
            config: config.clone(),
            vehicle: course::VehicleConfig::default(),
            attitudes: course::AttitudeTrack::default(),
            feed: None,
            fed_until: None,
            camera_config: camera.clone(),
            camera: None,
            tracker: Tracker::new(config.tracking.clone())
                .with_ttc(config.ttc_window_s, config.min_confidence),
            sizes,
            epoch: Instant::now(),
            candidates: Vec::with_capacity(128),
        })
    }

    /// The layer for a vehicle per `vehicle`: with its `width_m`, obstacles are told apart as
    /// hit or passed, and only a hit is `danger`.
    pub fn with_vehicle(mut self, vehicle: &course::VehicleConfig) -> Hazards {
        self.vehicle = vehicle.clone();
        self
    }

    /// The layer with the attitudes `feed` receives (the MAVLink link's ATTITUDE), taken in
    /// before each frame.
    pub fn with_attitude_feed(mut self, feed: std::sync::Arc<course::AttitudeFeed>) -> Hazards {
        self.feed = Some(feed);
        self
    }

    /// Records the camera's attitude at `at` (the flight controller's ATTITUDE, or a scene's
    /// truth): frames captured within [`course::ATTITUDE_STALE_S`] of one are seen in the
    /// level frame.
    pub fn attitude(&mut self, at: Instant, attitude: crate::frame::Attitude) {
        self.attitudes.push(at.saturating_duration_since(self.epoch).as_secs_f64(), attitude);
    }

    /// The instant the layer counts its time from (a frame's capture time is taken relative
    /// to it): `jetdetect eval` places frame `n` at `epoch + n / fps`, so that the times, and
    /// the results, are the same on every run.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// The camera model for the latest frame size.
    pub fn camera(&self) -> Option<&Camera> {
        self.camera.as_ref()
    }

    /// Tracks `detections` of a `width` x `height` frame captured at `captured`, and fills `out`.
    pub fn update(
        &mut self,
        detections: &[Detection],
        captured: Instant,
        width: u32,
        height: u32,
        out: &mut HazardFrame,
    ) {
        let camera = match self.camera {
            Some(c) if (c.width, c.height) == (width, height) => c,
            _ => *self.camera.insert(Camera::new(&self.camera_config, width, height)),
        };
        let t = captured.saturating_duration_since(self.epoch).as_secs_f64();
        if let Some(feed) = &self.feed {
            let (epoch, track) = (self.epoch, &mut self.attitudes);
            self.fed_until = feed.each_since(self.fed_until, |at, a| {
                track.push(at.saturating_duration_since(epoch).as_secs_f64(), a)
            });
        }
        let level = self.attitudes.level(t);
        self.tracker.set_frame(width, height);
        self.tracker.update(detections, t);
        out.track_of.clear();
        out.track_of.extend_from_slice(&self.tracker.track_of);
        out.obstacles.clear();
        self.candidates.clear();
        let cfg = &self.config;
        for tr in self.tracker.tracks_mut() {
            let (Some(i), true) = (tr.detection, tr.id != 0) else {
                tr.danger_run = 0;
                continue;
            };
            let d = &detections[i];
            let (w, h) = (d.x2 - d.x1, d.y2 - d.y1);
            let ttc = tr.scales.ttc(cfg.ttc_window_s);
            let size = self.sizes.get(d.class_id).copied().unwrap_or_default();
            let course = match self.vehicle.width_m {
                Some(vehicle_m) => {
                    // Only a box that shows the whole object tells its offset, depth and width (a
                    // box cut by the picture's edge narrows as the object leaves the picture:
                    // read as its width, a pass would turn into a hit).
                    let mid = ((d.y1 + d.y2) / 2.0) as f64;
                    let tangent = |u: f32| course::level_tangent(&camera, u as f64, mid, level.as_ref());
                    if let (true, Some(tl), Some(tr_)) =
                        (tr.scales.last_whole(), tangent(d.x1), tangent(d.x2))
                    {
                        let width_m = match (size.width_m, size.height_m) {
                            (Some(m), _) => Some(m),
                            (None, Some(m)) if h > 0.0 => Some(m * (w / h) as f64 * camera.fy / camera.fx),
                            _ => None,
                        };
                        tr.course.push(t, tl, tr_, width_m);
                    }
                    ttc.seconds.and_then(|s| {
                        let yaw_rate = level.map_or(0.0, |l| l.yaw_rate);
                        tr.course.course(cfg.ttc_window_s, s, yaw_rate, vehicle_m, self.vehicle.corridor_deg)
                    })
                }
                None => None,
            };
            let sure = ttc.confidence >= cfg.min_confidence;
            let seconds = ttc.seconds.filter(|_| sure);
            let before = std::mem::replace(&mut tr.ttc_before, seconds);
            // An obstacle the vehicle will pass is `caution` at most.
            let passes = course.is_some_and(|c| !c.hit);
            let level = match seconds {
                Some(s) if s <= cfg.danger_ttc_s && !passes => Level::Danger,
                Some(s) if s <= cfg.caution_ttc_s => Level::Caution,
                _ => Level::Clear,
            };
            // Danger is confirmed over `danger_frames` frames in a row, each on a confident box
            // with a steady time to contact; caution until then. Once confirmed, it holds for as
            // long as the time to contact says danger.
            let counts = cfg.danger_frames == 1
                || tr.danger_run >= cfg.danger_frames
                || confirms_danger(d.score, cfg.tracking.high_score, before, seconds);
            tr.danger_run = match level {
                Level::Danger if counts => tr.danger_run.saturating_add(1),
                _ => 0,
            };
            let level = if level == Level::Danger && tr.danger_run < cfg.danger_frames {
                Level::Caution
            } else {
                level
            };
            let range_m = match (size.height_m, size.width_m) {
                (Some(m), _) if h > 0.0 => Some(camera.fy * m / h as f64),
                (_, Some(m)) if w > 0.0 => Some(camera.fx * m / w as f64),
                _ => None,
            };
            let centre = ((d.x1 + d.x2) / 2.0) as f64;
            let obstacle = Obstacle {
                id: tr.id,
                detection: i,
                bearing: camera.bearing(centre, ((d.y1 + d.y2) / 2.0) as f64),
                azimuth: (camera.azimuth(d.x1 as f64), camera.azimuth(d.x2 as f64)),
                velocity_px_s: [tr.kalman.x[4] / kalman::FRAME_S, tr.kalman.x[5] / kalman::FRAME_S],
                ttc,
                range_m,
                level,
                course,
            };
            self.candidates.push(zones::Candidate {
                track: tr.id,
                azimuth: obstacle.azimuth,
                level,
                ttc_s: ttc.seconds.filter(|_| sure),
                range_m,
                height_px: h,
            });
            out.obstacles.push(obstacle);
        }
        out.obstacles.sort_unstable_by_key(|o| o.id);
        out.span_deg = camera.horizontal_span();
        zones::fill(&mut out.zones, cfg.zones, out.span_deg, &self.candidates);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_closing_in_on_the_left_makes_the_left_zone_dangerous() {
        let names = ClassNames::numbered(2);
        let mut cfg = HazardsConfig { enabled: true, ..Default::default() };
        cfg.classes.insert("class1".into(), ClassSize { height_m: Some(1.0), width_m: None });
        let camera = CameraConfig { hfov_deg: 90.0, ..Default::default() };
        let mut hz = Hazards::new(&cfg, &camera, &names).unwrap();
        let mut out = HazardFrame::with_capacity(8);
        let t0 = Instant::now();
        // Class 1, 1 m tall, 10 m away closing at 4 m/s, centred at x = 80 of 640 (left third);
        // class 0 still, on the right.
        let fy = 320.0; // 90-degree field of view over 640 pixels
        for f in 0..30 {
            let t = f as f64 / 30.0;
            let d = 10.0 - 4.0 * t;
            let h = (fy * 1.0 / d) as f32;
            let dets = [
                Detection {
                    class_id: 1,
                    score: 0.9,
                    x1: 80.0 - h / 4.0,
                    y1: 240.0 - h / 2.0,
                    x2: 80.0 + h / 4.0,
                    y2: 240.0 + h / 2.0,
                },
                Detection { class_id: 0, score: 0.9, x1: 500.0, y1: 200.0, x2: 560.0, y2: 260.0 },
            ];
            hz.update(&dets, t0 + std::time::Duration::from_secs_f64(t), 640, 480, &mut out);
        }
        let d_end = 10.0 - 4.0 * 29.0 / 30.0;
        let closing = out.obstacles.iter().find(|o| o.detection == 0).unwrap();
        let ttc = closing.ttc.seconds.unwrap();
        assert!((ttc - d_end / 4.0).abs() < 0.1, "ttc {ttc} vs {}", d_end / 4.0);
        assert!((closing.range_m.unwrap() - d_end).abs() < 0.05 * d_end, "{:?}", closing.range_m);
        assert!(closing.bearing.azimuth_deg < -30.0, "{:?}", closing.bearing);
        assert_eq!(closing.level, Level::Danger);
        let still = out.obstacles.iter().find(|o| o.detection == 1).unwrap();
        assert_eq!((still.level, still.ttc.trend, still.range_m), (Level::Clear, Trend::Steady, None));
        assert_eq!(
            out.zones.iter().map(|z| z.level).collect::<Vec<_>>(),
            [Level::Danger, Level::Clear, Level::Clear]
        );
        assert_eq!(out.zones[0].track, Some(closing.id));
        assert_eq!(out.level(), Level::Danger);
        assert_eq!(out.track_of.len(), 2);
        assert!(out.track_of.iter().all(|&id| id != 0));
    }

    /// Frame `f` at 30 fps of an object coming straight at the camera, contact 3 s after frame
    /// 0, boxed at `score`; and the frame's time from a layer's origin.
    fn approach(f: usize, score: f32) -> (Detection, std::time::Duration) {
        let t = f as f64 / 30.0;
        let h = (100.0 / (3.0 - t)) as f32;
        let d = Detection { class_id: 0, score, x1: 300.0, y1: 200.0, x2: 300.0 + h, y2: 200.0 + h };
        (d, std::time::Duration::from_secs_f64(t))
    }

    #[test]
    fn danger_is_confirmed_over_danger_frames_in_a_row() {
        // The same approach seen by a layer that raises danger at once and by one that waits
        // for 3 frames in a row; the object is missed in frame 40, which breaks the run.
        let names = ClassNames::numbered(1);
        let layer = |danger_frames| {
            let cfg = HazardsConfig { enabled: true, danger_frames, ..Default::default() };
            Hazards::new(&cfg, &CameraConfig::default(), &names).unwrap()
        };
        let (mut at_once, mut confirmed) = (layer(1), layer(3));
        let (mut out1, mut out3) = (HazardFrame::with_capacity(4), HazardFrame::with_capacity(4));
        let mut levels = Vec::new();
        for f in 0..60 {
            let (d, dt) = approach(f, 0.9);
            let dets: &[Detection] = if f == 40 { &[] } else { &[d] };
            // The same times for both, from each layer's own origin.
            at_once.update(dets, at_once.epoch() + dt, 640, 480, &mut out1);
            confirmed.update(dets, confirmed.epoch() + dt, 640, 480, &mut out3);
            let level = |out: &HazardFrame| out.obstacles.first().map(|o| o.level);
            levels.push((level(&out1), level(&out3)));
        }
        let danger = |f: usize| levels[f].0 == Some(Level::Danger);
        for (f, &(one, three)) in levels.iter().enumerate() {
            let want = match one {
                Some(Level::Danger) if f >= 2 && danger(f - 1) && danger(f - 2) => Some(Level::Danger),
                Some(Level::Danger) => Some(Level::Caution),
                other => other,
            };
            assert_eq!(three, want, "frame {f}: at once {one:?}");
        }
        let first = (0..60).find(|&f| danger(f)).expect("the approach reaches danger");
        assert!(first < 36, "danger from frame {first}");
        assert_eq!(levels[first + 2].1, Some(Level::Danger));
        assert_eq!(levels[41].1, Some(Level::Caution), "the run starts again after the missed frame");
        assert_eq!(levels[43].1, Some(Level::Danger));
    }

    #[test]
    fn a_frame_confirms_danger_on_a_confident_box_with_a_steady_time_to_contact() {
        let high = TrackingConfig::default().high_score;
        assert!(confirms_danger(0.9, high, Some(1.9), Some(1.86)), "an approach at a steady speed");
        assert!(confirms_danger(high, high, Some(1.0), Some(1.5)), "1.5 times is steady");
        assert!(confirms_danger(0.9, high, Some(1.5), Some(1.0)), "and either way");
        assert!(!confirms_danger(0.9, high, Some(1.0), Some(1.6)), "1.6 times is not");
        assert!(!confirms_danger(0.9, high, Some(10.4), Some(0.43)), "a box that jumped");
        assert!(!confirms_danger(0.9, high, None, Some(0.5)), "nothing to be steady with");
        assert!(!confirms_danger(0.9, high, Some(0.0), Some(0.0)), "no time left is no ratio");
        assert!(!confirms_danger(0.4, high, Some(1.9), Some(1.86)), "a doubtful box");
    }

    #[test]
    fn doubtful_boxes_keep_a_track_but_confirm_no_danger() {
        // The approach of the test above, its boxes doubtful (0.4: over `[detect] confidence`,
        // under `high_score`) once the track is made: its time to contact says danger, but it
        // is never confirmed over 3 frames; the same boxes confident are.
        let names = ClassNames::numbered(1);
        let run = |late_score: f32| {
            let cfg = HazardsConfig { enabled: true, ..Default::default() };
            let mut layer = Hazards::new(&cfg, &CameraConfig::default(), &names).unwrap();
            let mut out = HazardFrame::with_capacity(4);
            let (mut levels, mut says_danger) = (Vec::new(), false);
            for f in 0..60 {
                let (d, dt) = approach(f, if f < 10 { 0.9 } else { late_score });
                layer.update(&[d], layer.epoch() + dt, 640, 480, &mut out);
                assert_eq!(out.obstacles.len(), 1, "frame {f}: the track goes on");
                let o = &out.obstacles[0];
                says_danger |= o.ttc.seconds.is_some_and(|s| s <= cfg.danger_ttc_s);
                levels.push(o.level);
            }
            assert!(says_danger, "the time to contact reaches danger_ttc_s");
            levels
        };
        let (doubtful, confident) = (run(0.4), run(0.9));
        assert!(confident.contains(&Level::Danger));
        assert!(!doubtful.contains(&Level::Danger));
        assert!(doubtful.contains(&Level::Caution), "the time to contact is still told");
    }

    #[test]
    fn with_a_vehicle_width_an_obstacle_beside_the_path_is_passed_not_danger() {
        // Driving at 2 m/s past two 0.5 m cubes 12 m ahead: one on the path, one 1.5 m to the
        // right. Their boxes grow alike (the same time to contact); only the first is hit. The
        // second leaves the picture at the end, its box cut by the edge and narrowing: still a
        // pass (its width is its last whole box's).
        let names = ClassNames::numbered(1);
        let mut cfg = HazardsConfig { enabled: true, ..Default::default() };
        cfg.classes.insert("class0".into(), ClassSize { height_m: Some(0.5), width_m: None });
        let camera = CameraConfig { hfov_deg: 90.0, ..Default::default() };
        let run = |vehicle: Option<f64>| {
            let vehicle = course::VehicleConfig { width_m: vehicle, ..Default::default() };
            let mut hz = Hazards::new(&cfg, &camera, &names).unwrap().with_vehicle(&vehicle);
            let mut out = HazardFrame::with_capacity(4);
            let mut levels = [Level::Clear; 2];
            let mut courses = [None; 2];
            for f in 0..170 {
                let t = f as f64 / 30.0;
                let z = 12.0 - 2.0 * t;
                // As a detector boxes it: the part in the picture.
                let boxed = |x: f64| {
                    let (cx, half) = (320.0 + 320.0 * x / z, 320.0 * 0.25 / z);
                    Detection {
                        class_id: 0,
                        score: 0.9,
                        x1: (cx - half).max(0.0) as f32,
                        y1: (240.0 - half) as f32,
                        x2: (cx + half).min(640.0) as f32,
                        y2: (240.0 + half) as f32,
                    }
                };
                let dets: Vec<Detection> =
                    [boxed(0.0), boxed(1.5)].into_iter().filter(|d| d.x2 - d.x1 > 4.0).collect();
                hz.update(&dets, hz.epoch() + std::time::Duration::from_secs_f64(t), 640, 480, &mut out);
                for o in &out.obstacles {
                    levels[o.detection] = levels[o.detection].max(o.level);
                    courses[o.detection] = o.course.or(courses[o.detection]);
                }
            }
            (levels, courses)
        };
        let (levels, courses) = run(Some(0.6));
        assert_eq!(levels, [Level::Danger, Level::Caution]);
        let (ahead, beside) = (courses[0].unwrap(), courses[1].unwrap());
        assert!(ahead.hit && !beside.hit, "{ahead:?} {beside:?}");
        assert!(
            (beside.offset_m.unwrap() - 1.5).abs() < 0.05 && (beside.miss_m.unwrap() - 1.25).abs() < 0.05
        );
        // Without [vehicle] width_m, both are danger, and no course is told.
        let (levels, courses) = run(None);
        assert_eq!(levels, [Level::Danger, Level::Danger]);
        assert_eq!(courses, [None, None]);
    }

    #[test]
    fn unknown_classes_and_bad_thresholds_are_named() {
        let names = ClassNames::numbered(3);
        let mut cfg = HazardsConfig::default();
        cfg.classes.insert("persn".into(), ClassSize { height_m: Some(1.7), width_m: None });
        let e = Hazards::new(&cfg, &CameraConfig::default(), &names).err().unwrap().to_string();
        assert!(
            e.contains("[hazards.classes] persn: not a class of this model")
                && e.contains("class0, class1, class2"),
            "{e}"
        );
        assert_eq!(HazardsConfig { zones: 73, ..Default::default() }.validate().unwrap_err().0, "zones");
        let (key, message) = HazardsConfig { danger_frames: 0, ..Default::default() }.validate().unwrap_err();
        assert_eq!(
            (key.as_str(), message.as_str()),
            ("danger_frames", "0 is out of range: allowed 1 (at once) to 30 frames")
        );
        let inverted = HazardsConfig { danger_ttc_s: 5.0, caution_ttc_s: 2.0, ..Default::default() };
        assert_eq!(inverted.validate().unwrap_err().0, "danger_ttc_s");
        let mut sizeless = HazardsConfig::default();
        sizeless.classes.insert("a".into(), ClassSize::default());
        assert_eq!(sizeless.validate().unwrap_err().0, "classes.a");
        let mut late = HazardsConfig::default();
        late.tracking.recover_s = late.tracking.lost_s + 1.0;
        let (key, message) = late.validate().unwrap_err();
        assert_eq!(key, "tracking.recover_s");
        assert!(message.contains("allowed 0 to lost_s (3 seconds)"), "{message}");
        HazardsConfig::default().validate().unwrap();
    }
}
