//! Multi-object tracking, ByteTrack's way (Zhang et al., ECCV 2022): every detection box is
//! associated, the confident ones first and then the doubtful ones, so an object whose score
//! dips (partly hidden, blurred) keeps its track instead of being dropped and reborn.
//!
//! Per frame, with each track's Kalman state predicted to the frame's capture time:
//! 1. confident boxes (score >= `high_score`) are matched to tracked and lost tracks by IoU,
//!    a lost track by where its object should be by now ([`Track::looming`]: its last whole
//!    box, moved at the velocity it had then and grown as its time to contact said);
//! 2. the remaining boxes (the `[detect] confidence` .. `high_score` band) to the tracks still
//!    unmatched that were tracked last frame; those left unmatched become lost;
//! 3. confident boxes still unmatched to the tracks lost for at most `recover_s`, by IoU with the
//!    box each was last matched to instead of its prediction (OC-SORT's observation-centric
//!    recovery, Cao et al., CVPR 2023): a track's filter follows the box on the part of an object
//!    in view as another hides it, learns a shrinking or sliding box, and predicts it off the
//!    object when it comes out whole;
//! 4. confident boxes still unmatched to the tracks born last frame, which are confirmed by it;
//!    the others are dropped (one-frame ghosts);
//! 5. confident boxes still unmatched with score >= `new_track_score` start new tracks, unless
//!    they show part of an object a track of their class was matched to in this frame: mostly
//!    within where its object is, or its other side around a box in front of its middle
//!    (`Tracker::part_of_seen_track`);
//! 6. tracks lost for longer than `lost_s` are removed.
//!
//! Why step 1 does not use a lost track's filter: an object going behind another is seen
//! shrinking (the box on the part in view), the filter learns that rate and predicts a
//! sliver, and an object closing in grows while it is hidden. The looming prediction cut the
//! identity switches on `jetdetect eval --hazards`'s scenes; a box moved but not grown made
//! them worse (the figures per seed: docs/hazards.md, Tracking).
//!
//! Why step 5 looks for parts: a detector boxes the two sides of an object that another stands
//! in front of, and the box on part of an object coming out from behind another, as objects
//! of their own; a second track on them gives the object two numbers, and which one it is seen
//! under changes as the boxes change. Without such tracks, identity switches fell on every seed
//! (docs/hazards.md, Tracking, with the figures of each detector).
//!
//! Matching is optimal (the Hungarian algorithm, `assign`) on `1 - IoU`, within one class.
//! Differences from the reference: time is real (a lost track lives `lost_s` seconds, not a
//! number of frames; the filter predicts over the real capture interval), matching never pairs
//! two classes, and a track's number is given when it is confirmed, so numbers are not spent
//! on ghosts. Nothing is allocated per frame once the buffers have grown.
//!
//! Each matched box's size goes to its track's [`ScaleHistory`] for the time to contact, with
//! what the frame tells about it: whether it is cut by the picture's edge (with hysteresis, see
//! `EDGE_CLEAR_FRACTION`) and which of its axes another box may be hiding (`shown_axes`).

use serde::{Deserialize, Serialize};

use super::assign::Assignment;
use super::kalman::{measure, BoxKalman, FRAME_S};
use super::ttc::{Edge, ScaleHistory};
use super::{MIN_CONFIDENCE, TTC_WINDOW_S};
use crate::geometry::{intersection, iou};
use crate::yolo::Detection;

/// `[hazards.tracking]`: ByteTrack's thresholds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrackingConfig {
    /// Boxes at or above this score are matched first and may start tracks; those below (down
    /// to `[detect] confidence`) only continue tracks.
    pub high_score: f32,
    /// A confident box left unmatched starts a track from this score.
    pub new_track_score: f32,
    /// Least IoU for a confident box to continue a track.
    pub match_iou: f32,
    /// Least IoU for a doubtful box to continue a track.
    pub low_match_iou: f32,
    /// Seconds a track that is not seen is kept, to be found again.
    pub lost_s: f64,
    /// Seconds a lost track can also be found again by the box it was last matched to (0: never).
    pub recover_s: f64,
}

impl Default for TrackingConfig {
    fn default() -> Self {
        TrackingConfig {
            high_score: 0.5,
            new_track_score: 0.6,
            match_iou: 0.2,
            low_match_iou: 0.5,
            lost_s: 3.0,
            recover_s: 0.75,
        }
    }
}

impl TrackingConfig {
    /// Checks the ranges; the error names the key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (key, v) in [
            ("high_score", self.high_score),
            ("new_track_score", self.new_track_score),
            ("match_iou", self.match_iou),
            ("low_match_iou", self.low_match_iou),
        ] {
            if !(v > 0.0 && v < 1.0) {
                return Err((key, format!("{v} is out of range: allowed 0 < {key} < 1")));
            }
        }
        if !(self.lost_s >= 0.0 && self.lost_s <= 60.0) {
            return Err(("lost_s", format!("{} is out of range: allowed 0 to 60 seconds", self.lost_s)));
        }
        if !(self.recover_s >= 0.0 && self.recover_s <= self.lost_s) {
            return Err((
                "recover_s",
                format!("{} is out of range: allowed 0 to lost_s ({} seconds)", self.recover_s, self.lost_s),
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Born last frame, waiting for a second sighting.
    New,
    /// Seen in the latest frame or recently.
    Tracked,
    /// Not seen lately; kept for `lost_s`.
    Lost,
}

/// One tracked object.
#[derive(Clone, Debug)]
pub struct Track {
    /// Its number, from 1; 0 until confirmed.
    pub id: u64,
    /// Its class.
    pub class_id: usize,
    /// The motion filter.
    pub kalman: BoxKalman,
    /// Recent sizes, for the time to contact.
    pub scales: ScaleHistory,
    /// Recent offsets and depths, for the collision course (kept by the hazard layer).
    pub course: super::course::CourseHistory,
    /// The detection it was matched to in the latest frame.
    pub detection: Option<usize>,
    /// Frames it was seen in.
    pub hits: u32,
    /// Frames in a row, up to the latest, whose time to contact said `danger` (kept by the
    /// hazard layer for `[hazards] danger_frames`).
    pub danger_run: u32,
    /// Its time to contact in the latest frame it was seen in, if sure (kept by the hazard
    /// layer: danger is confirmed on a steady one).
    pub ttc_before: Option<f64>,
    state: State,
    filter_t: f64,
    seen_t: f64,
    /// The box it was last matched to.
    last_box: [f32; 4],
    /// Its last view of the whole object.
    whole: Option<WholeView>,
    /// While lost: the seconds to contact it had at its last whole view, if it was closing in
    /// (the estimate when it was lost, plus the time from that view to then).
    lost_ttc: Option<f64>,
}

/// A track's last box that showed the whole object (not cut by the picture's edge, no axis
/// another box may hide), with the filter's velocity then: what a lost track's prediction
/// starts from.
#[derive(Clone, Copy, Debug)]
struct WholeView {
    t: f64,
    corners: [f32; 4],
    /// The centre's velocity, pixels per [`FRAME_S`].
    velocity: [f64; 2],
}

/// The most a lost track's box is grown by its time to contact (the prediction stops growing
/// two thirds of the way to contact).
const MAX_GROWTH: f64 = 3.0;

/// The least share of an unmatched box inside where a track's object is for the box to be
/// taken as part of that object (chosen on `jetdetect eval --hazards`'s seeds from 0.5 to 0.9;
/// the sweep is in docs/hazards.md).
const PART_INSIDE: f32 = 0.6;

/// Two boxes are the sides of one object when they share at least this much of the larger
/// one's extent across the split (0.5 to 0.8 gave the same identity switches).
const SIDES_SHARE: f32 = 0.7;

/// How far, as a share of that shared extent, a box in front may fall short of bridging the
/// two sides or stick out past them (0.1 and 0.2 gave the same).
const SIDES_SLACK: f32 = 0.1;

impl WholeView {
    /// The box moved on to `t` at the velocity it had.
    fn moved(&self, t: f64) -> [f32; 4] {
        let dt = (t - self.t).max(0.0) / FRAME_S;
        let (dx, dy) = ((self.velocity[0] * dt) as f32, (self.velocity[1] * dt) as f32);
        let c = self.corners;
        [c[0] + dx, c[1] + dy, c[2] + dx, c[3] + dy]
    }
}

impl Track {
    /// Where the object of a track is at `t`, from its last whole view: moved at the velocity
    /// it had then, and grown as an object closing in at a steady speed grows, by `T / (T -
    /// dt)` for a time to contact `T` at that view (at most 3 times, `MAX_GROWTH`). `None` for a
    /// track that never showed its whole object.
    pub fn looming(&self, t: f64) -> Option<[f32; 4]> {
        let v = self.whole?;
        let dt = (t - v.t).max(0.0);
        let k = match self.lost_ttc {
            Some(ttc) if ttc > 0.0 => ttc / (ttc - dt).max(ttc / MAX_GROWTH),
            _ => 1.0,
        };
        let b = v.moved(t);
        let (cx, cy) = ((b[0] + b[2]) as f64 / 2.0, (b[1] + b[3]) as f64 / 2.0);
        let (hw, hh) = ((b[2] - b[0]) as f64 / 2.0 * k, (b[3] - b[1]) as f64 / 2.0 * k);
        Some([(cx - hw) as f32, (cy - hh) as f32, (cx + hw) as f32, (cy + hh) as f32])
    }
}

/// The tracker: feed it each frame's detections.
#[derive(Clone, Debug)]
pub struct Tracker {
    config: TrackingConfig,
    /// The time to contact a lost track grows by: the window it is fitted over, and the least
    /// confidence it is taken at.
    ttc_window_s: f64,
    ttc_min_confidence: f64,
    tracks: Vec<Track>,
    next_id: u64,
    frames: u64,
    assignment: Assignment,
    high: Vec<usize>,
    low: Vec<usize>,
    pool: Vec<usize>,
    matched_det: Vec<bool>,
    /// The picture's size, for boxes cut by its edges (unknown: nothing is cut).
    frame: (f32, f32),
    /// Per detection of the latest frame, its track's number (0: none).
    pub track_of: Vec<u64>,
}

/// A box edge within this fraction of the picture's size from the picture's edge (and at
/// least [`EDGE_MIN_PX`]) is taken as cut by it: a detector's box on an object half out of
/// the picture stops a few pixels short of the edge, not at it (2 %: 13 px of 640 catches the
/// shipped model's boxes on the synthetic scenes' entering objects, `jetdetect eval --hazards`).
const EDGE_FRACTION: f32 = 0.02;

/// A track's box that was cut is whole again only this far from the edge: an object entering
/// the picture is still coming in when its box first clears [`EDGE_FRACTION`] (the detector's
/// box on the part in view stops short of the edge), and read as whole then, its growth
/// passes for an approach (with 3 %, false danger alarms in `jetdetect eval --hazards` fell
/// from 31 to 24 in 10 minutes, at the same recall).
const EDGE_CLEAR_FRACTION: f32 = 0.03;

/// A box edge within this many pixels of the picture's edge is on it (and at least this near).
const EDGE_MIN_PX: f32 = 2.0;

/// A box edge within this fraction of the box's size of another box counts as on it.
const OCCLUDER_MARGIN: f32 = 0.05;

/// Where `d` lies against the edges of a `frame` picture: on them (within [`EDGE_MIN_PX`]),
/// near them (within `fraction` of the picture's size) or clear.
fn edge(d: &Detection, frame: (f32, f32), fraction: f32) -> Edge {
    let within = |mx: f32, my: f32| d.x1 <= mx || d.x2 >= frame.0 - mx || d.y1 <= my || d.y2 >= frame.1 - my;
    if within(EDGE_MIN_PX, EDGE_MIN_PX) {
        Edge::On
    } else if within((frame.0 * fraction).max(EDGE_MIN_PX), (frame.1 * fraction).max(EDGE_MIN_PX)) {
        Edge::Near
    } else {
        Edge::Clear
    }
}

/// Whether the width and the height of detection `i` show its object's size, or another box
/// may be hiding part of it along that axis: another box that spans this one's whole height
/// and holds its left or right edge may be an occluder cut into its width (and likewise for
/// the height). Which box is in front is not known, so each box is marked where the other
/// could cut into it. An occluder over a corner leaves the box's extent as it was, and does
/// not count.
fn shown_axes(detections: &[Detection], i: usize) -> (bool, bool) {
    let a = &detections[i];
    let (mx, my) = (OCCLUDER_MARGIN * (a.x2 - a.x1), OCCLUDER_MARGIN * (a.y2 - a.y1));
    let within = |v: f32, lo: f32, hi: f32, m: f32| v >= lo - m && v <= hi + m;
    let (mut w_ok, mut h_ok) = (true, true);
    for (j, b) in detections.iter().enumerate() {
        if j == i {
            continue;
        }
        let spans_height = b.y1 <= a.y1 + my && b.y2 >= a.y2 - my;
        let spans_width = b.x1 <= a.x1 + mx && b.x2 >= a.x2 - mx;
        if spans_height && (within(a.x1, b.x1, b.x2, mx) || within(a.x2, b.x1, b.x2, mx)) {
            w_ok = false;
        }
        if spans_width && (within(a.y1, b.y1, b.y2, my) || within(a.y2, b.y1, b.y2, my)) {
            h_ok = false;
        }
    }
    (w_ok, h_ok)
}

/// Records detection `i`, seen at `t` in a `frame` picture, in its track's `scales`: whether
/// the edge cuts it (once cut, a box is whole again only [`EDGE_CLEAR_FRACTION`] clear of the
/// edge) and which of its axes another box may be hiding. Only matched boxes pay for the
/// occlusion test.
fn observe(scales: &mut ScaleHistory, detections: &[Detection], i: usize, frame: (f32, f32), t: f64) {
    let d = &detections[i];
    let margin = if scales.last_cut() { EDGE_CLEAR_FRACTION } else { EDGE_FRACTION };
    let (w_ok, h_ok) = shown_axes(detections, i);
    scales.push_box(t, d.x2 - d.x1, d.y2 - d.y1, edge(d, frame, margin), w_ok, h_ok);
}

impl Tracker {
    /// A tracker with `config`'s thresholds.
    pub fn new(config: TrackingConfig) -> Tracker {
        Tracker {
            config,
            ttc_window_s: TTC_WINDOW_S,
            ttc_min_confidence: MIN_CONFIDENCE,
            tracks: Vec::with_capacity(64),
            next_id: 1,
            frames: 0,
            // 64 tracks against 128 boxes before any buffer grows.
            assignment: Assignment::with_capacity(64, 128),
            high: Vec::with_capacity(128),
            low: Vec::with_capacity(128),
            pool: Vec::with_capacity(128),
            matched_det: Vec::with_capacity(128),
            frame: (f32::INFINITY, f32::INFINITY),
            track_of: Vec::with_capacity(128),
        }
    }

    /// The time to contact a lost track is grown by: fitted over `window_s` seconds and taken
    /// from `min_confidence` (`[hazards] ttc_window_s` and `min_confidence`, whose defaults
    /// [`Tracker::new`] takes).
    pub fn with_ttc(mut self, window_s: f64, min_confidence: f64) -> Tracker {
        self.ttc_window_s = window_s;
        self.ttc_min_confidence = min_confidence;
        self
    }

    /// The size of the pictures the next boxes come from: boxes at its edges are cut, and
    /// their size along that axis is left out of the time to contact.
    pub fn set_frame(&mut self, width: u32, height: u32) {
        self.frame = (width as f32, height as f32);
    }

    /// The tracks, confirmed or not; those seen in the latest frame have `detection` set.
    pub fn tracks(&self) -> &[Track] {
        &self.tracks
    }

    /// The tracks, to keep per-track state beside the tracker's.
    pub fn tracks_mut(&mut self) -> &mut [Track] {
        &mut self.tracks
    }

    /// Updates the tracks with the detections of a frame captured at `t` seconds (any origin,
    /// increasing). Afterwards [`Tracker::track_of`] numbers the detections.
    pub fn update(&mut self, detections: &[Detection], t: f64) {
        let cfg = self.config.clone();
        self.frames += 1;
        // Lost tracks past their time are not matched again.
        self.tracks.retain(|tr| tr.state != State::Lost || t - tr.seen_t <= cfg.lost_s);
        for tr in &mut self.tracks {
            tr.kalman.predict((t - tr.filter_t) / FRAME_S);
            tr.filter_t = t;
            tr.detection = None;
        }
        self.matched_det.clear();
        self.matched_det.resize(detections.len(), false);
        self.high.clear();
        self.low.clear();
        for (i, d) in detections.iter().enumerate() {
            if d.score >= cfg.high_score {
                self.high.push(i)
            } else {
                self.low.push(i)
            }
        }

        // 1. Confident boxes against tracked and lost tracks.
        self.pool.clear();
        self.pool.extend((0..self.tracks.len()).filter(|&k| self.tracks[k].state != State::New));
        self.associate(detections, 1.0 - cfg.match_iou as f64, t, Pass::High);
        // 2. Doubtful boxes against the tracked ones still unmatched.
        self.pool.retain(|&k| self.tracks[k].detection.is_none() && self.tracks[k].state == State::Tracked);
        self.associate(detections, 1.0 - cfg.low_match_iou as f64, t, Pass::Low);
        for &k in &self.pool {
            let tr = &mut self.tracks[k];
            if tr.detection.is_none() {
                tr.state = State::Lost;
                let ttc = tr.scales.ttc(self.ttc_window_s);
                // The estimate is of the last box seen; the growth runs from the last whole view.
                let since_whole = tr.whole.map_or(0.0, |v| tr.seen_t - v.t);
                tr.lost_ttc = ttc
                    .seconds
                    .filter(|_| ttc.confidence >= self.ttc_min_confidence)
                    .map(|s| s + since_whole);
            }
        }
        // 3. Confident boxes left against the tracks lost lately, by their last boxes.
        self.pool.clear();
        self.pool.extend((0..self.tracks.len()).filter(|&k| {
            let tr = &self.tracks[k];
            tr.state == State::Lost && t - tr.seen_t <= cfg.recover_s
        }));
        self.associate(detections, 1.0 - cfg.match_iou as f64, t, Pass::Recover);
        // 4. Tracks born last frame against the confident boxes left.
        self.pool.clear();
        self.pool.extend((0..self.tracks.len()).filter(|&k| self.tracks[k].state == State::New));
        self.associate(detections, 0.7, t, Pass::High);

        // 5. Births: on the first frame every confident box is confirmed at once.
        for &i in &self.high {
            let d = &detections[i];
            if self.matched_det[i]
                || d.score < cfg.new_track_score
                || self.part_of_seen_track(detections, i, t)
            {
                continue;
            }
            let mut scales = ScaleHistory::default();
            observe(&mut scales, detections, i, self.frame, t);
            let first = self.frames == 1;
            self.tracks.push(Track {
                id: if first { self.next_id } else { 0 },
                class_id: d.class_id,
                kalman: BoxKalman::new(measure(d.x1, d.y1, d.x2, d.y2)),
                scales,
                course: Default::default(),
                detection: Some(i),
                hits: 1,
                danger_run: 0,
                ttc_before: None,
                state: if first { State::Tracked } else { State::New },
                filter_t: t,
                seen_t: t,
                last_box: d.corners(),
                whole: None,
                lost_ttc: None,
            });
            if first {
                self.next_id += 1;
            }
        }
        // 6. Deaths: unconfirmed tracks not seen again (lost ones go at the next frame past `lost_s`).
        self.tracks.retain(|tr| tr.state != State::New || tr.detection.is_some());

        self.track_of.clear();
        self.track_of.resize(detections.len(), 0);
        for tr in &self.tracks {
            if let Some(i) = tr.detection {
                self.track_of[i] = tr.id;
            }
        }
    }

    /// Whether the unmatched box `i` shows part of an object that a track of its class was
    /// matched to in this frame: at least [`PART_INSIDE`] of it lies within where that
    /// track's object is (its filter's box, or its last whole box moved on at the velocity it
    /// had then), or it and that track's box are the two sides of one object with another box
    /// in front of its middle ([`two_sides`]). Such a box starts no track.
    fn part_of_seen_track(&self, detections: &[Detection], i: usize, t: f64) -> bool {
        let d = &detections[i];
        let b = d.corners();
        self.tracks.iter().any(|tr| {
            let Some(j) = tr.detection else { return false };
            if tr.class_id != d.class_id || j == i {
                return false;
            }
            let within = |area: [f32; 4]| inside(b, area) >= PART_INSIDE;
            let in_object = tr.id != 0
                && (within(tr.kalman.corners())
                    || tr.whole.is_some_and(|v| t - v.t <= self.config.lost_s && within(v.moved(t))));
            in_object
                || detections
                    .iter()
                    .enumerate()
                    .any(|(k, o)| k != i && k != j && two_sides(b, detections[j].corners(), o.corners()))
        })
    }

    /// Matches the tracks in `pool` to the unmatched detections of `pass` below `limit` cost.
    fn associate(&mut self, detections: &[Detection], limit: f64, t: f64, pass: Pass) {
        let dets = match pass {
            Pass::High | Pass::Recover => &self.high,
            Pass::Low => &self.low,
        };
        let (tracks, pool, matched) = (&self.tracks, &self.pool, &self.matched_det);
        self.assignment.solve(pool.len(), dets.len(), limit, |r, c| {
            let (tr, i) = (&tracks[pool[r]], dets[c]);
            let d = &detections[i];
            if matched[i] || tr.class_id != d.class_id {
                return f64::INFINITY;
            }
            let from = match pass {
                Pass::Recover => tr.last_box,
                Pass::High if tr.state == State::Lost => tr.looming(t).unwrap_or_else(|| tr.kalman.corners()),
                Pass::High | Pass::Low => tr.kalman.corners(),
            };
            1.0 - iou(from, d.corners()) as f64
        });
        for &(r, c) in &self.assignment.pairs {
            let (k, i) = (self.pool[r], dets[c]);
            let d = &detections[i];
            self.matched_det[i] = true;
            let tr = &mut self.tracks[k];
            let z = measure(d.x1, d.y1, d.x2, d.y2);
            match (pass, tr.state, tr.whole) {
                // Found again by its looming box: the filter, which went on from the sliver
                // it last saw, starts again here at the velocity of its last whole view.
                (Pass::High, State::Lost, Some(v)) => {
                    tr.kalman = BoxKalman::new(z);
                    tr.kalman.x[4] = v.velocity[0];
                    tr.kalman.x[5] = v.velocity[1];
                }
                _ => tr.kalman.update(z),
            }
            observe(&mut tr.scales, detections, i, self.frame, t);
            if tr.scales.last_whole() {
                let velocity = [tr.kalman.x[4], tr.kalman.x[5]];
                tr.whole = Some(WholeView { t, corners: d.corners(), velocity });
            }
            tr.detection = Some(i);
            tr.hits += 1;
            tr.seen_t = t;
            tr.last_box = d.corners();
            if tr.state == State::New {
                tr.id = self.next_id;
                self.next_id += 1;
            }
            tr.state = State::Tracked;
        }
    }
}

/// Whether `a` and `b` are the two sides of one object that `o` stands in front of: side by
/// side over the same rows (or one above the other over the same columns), with `o` bridging
/// the gap (or overlap) between them, lying within their span, and covering the rows (columns)
/// they share. A detector sees an object with another in front of its middle as two boxes.
fn two_sides(a: [f32; 4], b: [f32; 4], o: [f32; 4]) -> bool {
    // Split along axis `x` (0: side by side; 1: one above the other), `y` the other axis.
    let split_along = |x: usize| {
        let y = 1 - x;
        let (l, r) = if a[x] <= b[x] { (a, b) } else { (b, a) };
        let (from, to) = (l[y].max(r[y]), l[y + 2].min(r[y + 2]));
        let shared = to - from;
        let larger = (l[y + 2] - l[y]).max(r[y + 2] - r[y]);
        if shared <= SIDES_SHARE * larger || r[x + 2] <= l[x + 2] {
            return false;
        }
        let slack = SIDES_SLACK * shared;
        o[x] <= l[x + 2].min(r[x]) + slack
            && o[x + 2] >= r[x].max(l[x + 2]) - slack
            && o[x] >= l[x] - slack
            && o[x + 2] <= r[x + 2] + slack
            && o[y] <= from + slack
            && o[y + 2] >= to - slack
    };
    split_along(0) || split_along(1)
}

/// The share of `a`'s area inside `b`.
fn inside(a: [f32; 4], b: [f32; 4]) -> f32 {
    let area = (a[2] - a[0]) * (a[3] - a[1]);
    if area > 0.0 {
        intersection(a, b) / area
    } else {
        0.0
    }
}

/// Which boxes a matching pass takes, and what it compares them with.
#[derive(Clone, Copy)]
enum Pass {
    /// Confident boxes, against the tracks' predicted boxes.
    High,
    /// Doubtful boxes, against the tracks' predicted boxes.
    Low,
    /// Confident boxes, against the boxes the tracks were last matched to.
    Recover,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(class_id: usize, score: f32, cx: f32, cy: f32, w: f32, h: f32) -> Detection {
        Detection { class_id, score, x1: cx - w / 2.0, y1: cy - h / 2.0, x2: cx + w / 2.0, y2: cy + h / 2.0 }
    }

    #[test]
    fn two_objects_crossing_keep_their_numbers() {
        let mut tr = Tracker::new(TrackingConfig::default());
        // A moves right, B moves left, same row band but offset vertically by half a box; they
        // cross around frame 25. Then B's score dips for three frames (partly hidden).
        let mut ids_a = Vec::new();
        let mut ids_b = Vec::new();
        for f in 0..50 {
            let t = f as f64 / 30.0;
            let b_score = if (30..33).contains(&f) { 0.35 } else { 0.8 };
            let dets = [
                det(0, 0.9, 100.0 + 8.0 * f as f32, 200.0, 60.0, 120.0),
                det(0, b_score, 500.0 - 8.0 * f as f32, 260.0, 60.0, 120.0),
            ];
            tr.update(&dets, t);
            ids_a.push(tr.track_of[0]);
            ids_b.push(tr.track_of[1]);
        }
        assert!(ids_a.iter().all(|&i| i == ids_a[0]) && ids_a[0] != 0, "{ids_a:?}");
        assert!(ids_b.iter().all(|&i| i == ids_b[0]) && ids_b[0] != 0, "{ids_b:?}");
        assert_ne!(ids_a[0], ids_b[0]);
    }

    #[test]
    fn births_need_two_sightings_and_lost_tracks_come_back_within_lost_s() {
        let mut tr = Tracker::new(TrackingConfig { lost_s: 0.5, ..Default::default() });
        tr.update(&[det(0, 0.9, 100.0, 100.0, 50.0, 50.0)], 0.0);
        assert_eq!(tr.track_of, vec![1]);
        // A newcomer is numbered on its second sighting; a one-frame ghost spends no number.
        tr.update(&[det(0, 0.9, 102.0, 100.0, 50.0, 50.0), det(1, 0.9, 400.0, 300.0, 40.0, 40.0)], 0.033);
        assert_eq!(tr.track_of, vec![1, 0]);
        tr.update(&[det(0, 0.9, 104.0, 100.0, 50.0, 50.0)], 0.066);
        assert_eq!(tr.track_of, vec![1]);
        tr.update(&[det(0, 0.9, 106.0, 100.0, 50.0, 50.0), det(0, 0.9, 300.0, 300.0, 40.0, 40.0)], 0.1);
        tr.update(&[det(0, 0.9, 108.0, 100.0, 50.0, 50.0), det(0, 0.9, 301.0, 300.0, 40.0, 40.0)], 0.133);
        assert_eq!(tr.track_of, vec![1, 2]);
        // Track 1 unseen for 0.3 s, then back where its motion said: same number.
        tr.update(&[det(0, 0.9, 302.0, 300.0, 40.0, 40.0)], 0.3);
        tr.update(&[det(0, 0.9, 126.0, 100.0, 50.0, 50.0), det(0, 0.9, 303.0, 300.0, 40.0, 40.0)], 0.433);
        assert_eq!(tr.track_of, vec![1, 2]);
        // Unseen past lost_s: a new number.
        tr.update(&[], 0.6);
        assert_eq!(tr.tracks().len(), 2, "lost, not yet gone");
        tr.update(&[det(0, 0.9, 126.0, 100.0, 50.0, 50.0)], 1.2);
        tr.update(&[det(0, 0.9, 126.0, 100.0, 50.0, 50.0)], 1.233);
        assert_eq!(tr.track_of, vec![3]);
        assert_eq!(tr.tracks().len(), 1);
    }

    /// A cone 110 px tall is hidden from the top down by another object for a quarter of a
    /// second (its box: the part in view, shrinking 8 px a frame), is not seen for 5 frames,
    /// and comes out whole when the other is gone (`jetdetect eval --hazards`, seed 1, frame
    /// 15 739). The filter, which followed the shrinking box, predicts a sliver at the bottom.
    fn hidden_from_the_top_then_whole(recover_s: f64) -> Vec<u64> {
        let mut tr = Tracker::new(TrackingConfig { recover_s, ..Default::default() });
        let mut ids = Vec::new();
        let top = |f: u32| if f < 10 { 282.0 } else { 282.0 + 8.0 * (f - 9) as f32 };
        for f in 0..24u32 {
            let dets: Vec<Detection> = match f {
                0..=16 => {
                    vec![Detection { class_id: 2, score: 0.9, x1: 180.0, y1: top(f), x2: 250.0, y2: 392.0 }]
                }
                17..=21 => vec![],
                _ => vec![Detection { class_id: 2, score: 0.93, x1: 177.0, y1: 280.0, x2: 252.0, y2: 396.0 }],
            };
            tr.update(&dets, f as f64 / 30.0);
            ids.extend(tr.track_of.iter().copied());
        }
        ids
    }

    #[test]
    fn an_object_coming_out_whole_from_behind_another_is_found_again_by_its_last_box() {
        let ids = hidden_from_the_top_then_whole(0.75);
        assert!(ids.iter().all(|&i| i == 1), "{ids:?}");
        // Without the recovery pass it comes out under a new number: what the pass is for.
        let ids = hidden_from_the_top_then_whole(0.0);
        assert_eq!(ids.first(), Some(&1));
        assert_ne!(ids.last(), Some(&1), "{ids:?}");
    }

    /// A ball 60 px wide closing in (contact 4 s away at the start, moving 0.5 px a frame
    /// right) is covered from the bottom by a person for 8 frames (its box: the part in view),
    /// hidden for 1.5 s, and comes out whole and 3 times as large as it was last seen whole.
    /// Returns the ball's number in each frame it is seen.
    fn closing_in_behind_another() -> Vec<u64> {
        let mut tr = Tracker::new(TrackingConfig::default());
        tr.set_frame(640, 480);
        let ball = |f: u32| {
            let tau = f as f32 / 30.0;
            let half = 30.0 * 4.0 / (4.0 - tau);
            let cx = 300.0 + 0.5 * f as f32;
            Detection {
                class_id: 1,
                score: 0.9,
                x1: cx - half,
                y1: 200.0 - half,
                x2: cx + half,
                y2: 200.0 + half,
            }
        };
        let mut ids = Vec::new();
        for f in 0..100u32 {
            let mut dets = Vec::new();
            match f {
                0..=39 => dets.push(ball(f)),
                40..=47 => {
                    // The part in view shrinks from the bottom; the person spans its width.
                    let mut b = ball(f);
                    b.y2 -= 8.0 * (f - 39) as f32;
                    dets.push(b);
                    dets.push(Detection {
                        class_id: 0,
                        score: 0.9,
                        x1: b.x1 - 20.0,
                        y1: b.y2 - 2.0,
                        x2: b.x2 + 20.0,
                        y2: 470.0,
                    });
                }
                48..=92 => dets.push(Detection {
                    class_id: 0,
                    score: 0.9,
                    x1: 200.0,
                    y1: 100.0,
                    x2: 420.0,
                    y2: 470.0,
                }),
                _ => dets.push(ball(f)),
            }
            tr.update(&dets, f as f64 / 30.0);
            if matches!(f, 0..=47 | 93..) {
                ids.push(tr.track_of[0]);
            }
        }
        ids
    }

    #[test]
    fn an_object_closing_in_while_hidden_is_found_again_where_it_has_grown_to() {
        // Its filter had followed the shrinking part in view, and its last whole box, not
        // grown, overlaps the ball it comes out as by IoU 0.11: both give a new number.
        let ids = closing_in_behind_another();
        assert!(ids.iter().all(|&i| i == 1), "{ids:?}");
        let mut tr = Tracker::new(TrackingConfig::default());
        tr.update(&[Detection { class_id: 1, score: 0.9, x1: 300.0, y1: 170.0, x2: 360.0, y2: 230.0 }], 0.0);
        assert!(tr.tracks()[0].looming(1.0).is_none(), "no whole view before its first match");
    }

    fn boxed(class_id: usize, b: [f32; 4]) -> Detection {
        Detection { class_id, score: 0.9, x1: b[0], y1: b[1], x2: b[2], y2: b[3] }
    }

    /// Runs `frames` through a tracker at 30 fps; returns each frame's `track_of`.
    fn track_frames(frames: &[Vec<Detection>]) -> Vec<Vec<u64>> {
        let mut tr = Tracker::new(TrackingConfig::default());
        tr.set_frame(640, 480);
        frames
            .iter()
            .enumerate()
            .map(|(f, dets)| {
                tr.update(dets, f as f64 / 30.0);
                tr.track_of.clone()
            })
            .collect()
    }

    /// From frame `from` on, box `whole` keeps the number it had the frame before and box
    /// `part` has none.
    fn assert_one_number(ids: &[Vec<u64>], from: usize, whole: usize, part: usize) {
        let number = ids[from - 1][whole];
        assert_ne!(number, 0, "{:?}", ids[from - 1]);
        for (f, of) in ids.iter().enumerate().skip(from) {
            assert_eq!(of[whole], number, "frame {f}: {of:?}");
            assert_eq!(of[part], 0, "frame {f}: the part started a track: {of:?}");
        }
    }

    #[test]
    fn a_tracked_object_seen_in_two_parts_around_one_in_front_keeps_one_number() {
        // A person (class 0), tracked whole while it walks right; then a cone (class 2) stands
        // in front of its middle and the detector boxes its two sides (boxes from a traced
        // frame of `eval --hazards`, seed 1).
        let at = |f: usize, b: [f32; 4]| {
            let dx = f as f32;
            [b[0] + dx, b[1], b[2] + dx, b[3]]
        };
        let frames: Vec<Vec<Detection>> = (0..40)
            .map(|f| match f {
                0..=9 => vec![boxed(0, at(f, [235.0, 221.0, 394.0, 330.0]))],
                _ => vec![
                    boxed(0, at(f, [235.0, 220.0, 331.0, 329.0])),
                    boxed(0, at(f, [294.0, 216.0, 396.0, 327.0])),
                    boxed(2, at(f, [282.0, 202.0, 376.0, 343.0])),
                ],
            })
            .collect();
        assert_one_number(&track_frames(&frames), 10, 0, 1);
    }

    #[test]
    fn an_object_first_seen_in_two_parts_around_one_in_front_gets_one_number() {
        // A person coming down from the top edge behind a cone: its right side is seen first,
        // its left side from frame 10 on the cone's other side (traced boxes, seed 1). It never
        // showed its whole, so only the two sides' placement tells they are one object.
        let frames: Vec<Vec<Detection>> = (0..30)
            .map(|f| {
                let grow = 2.0 * f as f32;
                let cone = boxed(2, [398.0, 0.0, 493.0, 100.0 + grow]);
                let right = boxed(0, [463.0, 0.0, 545.0, 50.0 + grow]);
                let left = boxed(0, [361.0, 0.0, 436.0, 49.0 + grow]);
                if f < 10 {
                    vec![cone, right]
                } else {
                    vec![cone, right, left]
                }
            })
            .collect();
        assert_one_number(&track_frames(&frames), 10, 1, 2);
    }

    #[test]
    fn objects_side_by_side_each_get_a_number() {
        // Two people side by side over the same rows: with nothing between them, with a cone
        // in front of the gap that is shorter than they are, and with the second one coming
        // out from behind the first, three quarters of it past the first's edge. Each is
        // tracked. (Less than 40 % out, the second's box is taken as part of the first: its
        // track starts once it is further out.)
        let cases: [Vec<Detection>; 3] = [
            vec![boxed(0, [100.0, 200.0, 180.0, 400.0]), boxed(0, [200.0, 200.0, 280.0, 400.0])],
            vec![
                boxed(0, [100.0, 200.0, 180.0, 400.0]),
                boxed(0, [200.0, 200.0, 280.0, 400.0]),
                boxed(2, [160.0, 330.0, 220.0, 400.0]),
            ],
            vec![boxed(0, [100.0, 200.0, 180.0, 400.0]), boxed(0, [160.0, 210.0, 240.0, 390.0])],
        ];
        for dets in cases {
            // The first is tracked alone for a while, then the second comes into view.
            let mut frames = vec![vec![dets[0]]; 10];
            frames.extend(std::iter::repeat_n(dets.clone(), 5));
            let ids = track_frames(&frames);
            let last = ids.last().unwrap();
            assert!(last[0] != 0 && last[1] != 0 && last[0] != last[1], "{dets:?}: {last:?}");
        }
        // Three quarters of it still within the first's box: taken as part of the first.
        let dets = vec![boxed(0, [100.0, 200.0, 180.0, 400.0]), boxed(0, [120.0, 210.0, 200.0, 390.0])];
        let mut frames = vec![vec![dets[0]]; 10];
        frames.extend(std::iter::repeat_n(dets, 5));
        assert_eq!(track_frames(&frames).last().unwrap(), &vec![1, 0]);
    }

    #[test]
    fn two_sides_need_the_box_in_front_to_bridge_and_cover_them() {
        let (l, r) = ([361.0, 0.0, 436.0, 71.0], [463.0, 0.0, 545.0, 72.0]);
        assert!(two_sides(l, r, [398.0, 0.0, 493.0, 124.0]));
        assert!(two_sides(r, l, [398.0, 0.0, 493.0, 124.0]), "either order");
        // One above the other, a box across the middle.
        assert!(two_sides(
            [100.0, 100.0, 200.0, 180.0],
            [100.0, 220.0, 200.0, 300.0],
            [90.0, 170.0, 210.0, 230.0]
        ));
        // The box in front leaves part of the gap open, sticks out past a side, or is short.
        assert!(!two_sides(l, r, [450.0, 0.0, 493.0, 124.0]));
        assert!(!two_sides(l, r, [398.0, 0.0, 600.0, 124.0]));
        assert!(!two_sides(l, r, [398.0, 30.0, 493.0, 124.0]));
        // Sides over different rows.
        assert!(!two_sides(l, [463.0, 40.0, 545.0, 140.0], [398.0, 0.0, 493.0, 150.0]));
    }

    #[test]
    fn only_tracks_lost_within_recover_s_are_found_by_their_last_box() {
        // A ball rolling right at 12 px a frame disappears; a ball then shows up where the
        // first was last seen, far behind where its motion said.
        let ball = |x: f32| Detection { class_id: 1, score: 0.9, x1: x, y1: 200.0, x2: x + 60.0, y2: 260.0 };
        for (gone_s, same) in [(0.5, true), (1.0, false)] {
            let mut tr = Tracker::new(TrackingConfig::default());
            for f in 0..10 {
                tr.update(&[ball(100.0 + 12.0 * f as f32)], f as f64 / 30.0);
            }
            let last_t = 9.0 / 30.0;
            tr.update(&[ball(208.0)], last_t + gone_s);
            tr.update(&[ball(208.0)], last_t + gone_s + 1.0 / 30.0);
            assert_eq!(tr.track_of[0] == 1, same, "gone {gone_s} s: {:?}", tr.track_of);
        }
    }

    #[test]
    fn a_doubtful_box_continues_a_track_but_never_starts_one_and_classes_do_not_mix() {
        let mut tr = Tracker::new(TrackingConfig::default());
        tr.update(&[det(0, 0.3, 100.0, 100.0, 50.0, 50.0)], 0.0);
        assert_eq!(tr.track_of, vec![0]);
        assert!(tr.tracks().is_empty());
        tr.update(&[det(0, 0.9, 100.0, 100.0, 50.0, 50.0)], 0.033);
        tr.update(&[det(0, 0.9, 100.0, 100.0, 50.0, 50.0)], 0.066);
        tr.update(&[det(0, 0.3, 101.0, 100.0, 50.0, 50.0)], 0.1);
        assert_eq!(tr.track_of, vec![1]);
        // Same place, other class: not the same object.
        tr.update(&[det(2, 0.9, 102.0, 100.0, 50.0, 50.0)], 0.133);
        assert_eq!(tr.track_of, vec![0]);
    }

    #[test]
    fn boxes_on_an_occluder_show_one_axis_and_a_corner_overlap_hides_none() {
        // A (100 x 100 at 200, 200) and B, taller than A and over its right edge: if B is in
        // front, A's width is cut, so it is in doubt; A is too short to cut into B's extent.
        let a = det(0, 0.9, 200.0, 200.0, 100.0, 100.0);
        let b = det(1, 0.9, 260.0, 200.0, 60.0, 140.0);
        assert_eq!(shown_axes(&[a, b], 0), (false, true));
        assert_eq!(shown_axes(&[a, b], 1), (true, true));
        // C over A's bottom-right corner only: A's extent is whole whichever is in front.
        let c = det(0, 0.9, 260.0, 260.0, 60.0, 60.0);
        assert_eq!(shown_axes(&[a, c], 0), (true, true));
        // D spans A's width and holds its top edge: A's height is in doubt.
        let d = det(0, 0.9, 200.0, 140.0, 120.0, 40.0);
        assert_eq!(shown_axes(&[a, d], 0), (true, false));
        // Apart, or just touching within the margin: E 3 px right of A is on its edge.
        let e = det(0, 0.9, 283.0, 200.0, 60.0, 120.0);
        assert_eq!(shown_axes(&[a, e], 0), (false, true));
        let far = det(0, 0.9, 400.0, 200.0, 60.0, 120.0);
        assert_eq!(shown_axes(&[a, far], 0), (true, true));
    }

    #[test]
    fn a_box_is_on_the_edge_within_two_pixels_near_it_within_the_margin() {
        let frame = (640.0, 480.0);
        // 2 % of 480 is 9.6 px down; 2 px is on it.
        let at = |y2: f32| edge(&det(2, 0.9, 300.0, y2 - 50.0, 60.0, 100.0), frame, EDGE_FRACTION);
        assert_eq!(
            [at(480.0), at(478.5), at(475.0), at(471.0)],
            [Edge::On, Edge::On, Edge::Near, Edge::Near]
        );
        assert_eq!(at(470.0), Edge::Clear);
        // Left edge: 2 % of 640 is 12.8 px.
        let left = |x1: f32| edge(&det(0, 0.9, x1 + 30.0, 200.0, 60.0, 60.0), frame, EDGE_FRACTION);
        assert_eq!([left(0.0), left(12.0), left(13.5)], [Edge::On, Edge::Near, Edge::Clear]);
    }

    #[test]
    fn a_box_cut_by_the_edge_is_whole_again_only_clear_of_it() {
        // 640 x 480: cut within 2 % (12.8 px across, 9.6 px down), whole again from 3 % (19.2 /
        // 14.4 px). An object rising from the bottom edge: its box's bottom at 478, 470 (past 2 %
        // but not 3 %: still cut), then 460 (whole).
        let mut tr = Tracker::new(TrackingConfig::default());
        tr.set_frame(640, 480);
        let mut cut = Vec::new();
        for (f, bottom) in [478.0f32, 478.0, 470.0, 460.0].into_iter().enumerate() {
            tr.update(&[det(0, 0.9, 320.0, bottom - 50.0, 60.0, 100.0)], f as f64 / 30.0);
            cut.push(tr.tracks()[0].scales.last_cut());
        }
        assert_eq!(cut, vec![true, true, true, false]);
        // A box first seen at 470 was never cut: it is whole.
        let mut tr = Tracker::new(TrackingConfig::default());
        tr.set_frame(640, 480);
        tr.update(&[det(0, 0.9, 320.0, 420.0, 60.0, 100.0)], 0.0);
        assert!(!tr.tracks()[0].scales.last_cut());
    }
}
