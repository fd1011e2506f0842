//! Scoring the hazard layer against ground truth with object identities and true times to
//! contact (`jetdetect eval --hazards`): tracking ([`super::tracking`]), time to contact, and
//! danger alarms.
//!
//! - **Time to contact**: for each tracked obstacle on an object closing in whose true time to
//!   contact is under [`TTC_HORIZON_S`], the estimate the hazard layer acts on (confidence at
//!   `[hazards] min_confidence` or more) against the truth: relative error `|est - true| / true`.
//!   Frames where the estimate is not confident enough count against coverage, not error.
//! - **Danger alarms**: a *danger episode* is an object's time in the picture from when its true
//!   time to contact reaches `danger_ttc_s` (a hidden frame does not end it). It is *recalled*
//!   when an obstacle on that object is at level `danger` in at least one of its frames. An
//!   episode with less than [`MIN_EPISODE_S`] of frames in which the object is visible is
//!   *short*: no estimator that must tell growth from a box's jitter can be asked to flag it,
//!   so recall is over the others (`recall`), and over all of them apart (`recall_all`). So
//!   that a miss can be put down to the detector or to the hazard layer, the episodes in which
//!   the detector found the object (a same-class box at the matching threshold) for at least
//!   [`MIN_EPISODE_S`] are counted apart too (`recall_detected`). An *alarm* is a track turning
//!   `danger` (a rising edge); it is *false* when there is no object under it (best IoU at the
//!   matching threshold, same class) or that object is not closing in: the robot would brake
//!   for nothing. An alarm on an object closing in whose true time to contact is more than
//!   [`EARLY_MARGIN`] above `danger_ttc_s` is *early*, counted apart.
//! - **Moving camera** (truth with a course, `synthetic://?speed=M/S`): every obstacle closes
//!   in, so only one the vehicle will *hit* has a danger episode, opened from when its true time
//!   to contact reaches `danger_ttc_s` plus [`EARLY_MARGIN`] (an alarm that early on an
//!   obstacle in the way is not early: the vehicle must stop for it). An episode is recalled
//!   *with lead* when its first alarm came at least [`LEAD_S`] before contact. An alarm on an
//!   obstacle the vehicle will *pass* is a *pass alarm*: false danger, the robot braking for a
//!   parked car beside its lane.
//!
//! Time is the source's frame time (`frame.seq / fps`), so the figures do not depend on how
//! fast the machine scoring them is.

use std::collections::HashMap;

use super::ratio;
use super::tracking::{TrackedBox, TrackingScore, TrackingScorer};
use crate::frame::GroundTruth;
use crate::hazard::{HazardFrame, Level};
use crate::yolo::Detection;

/// An episode is recalled with lead when its first alarm came at least this many seconds
/// before contact (issue 48).
pub const LEAD_S: f64 = 1.0;

/// Times to contact are scored below this many seconds (the target range).
pub const TTC_HORIZON_S: f64 = 5.0;

/// Danger episodes with less of the object visible than this, in seconds, are short (half
/// the default `ttc_window_s`: the least time over which an estimate is made).
pub const MIN_EPISODE_S: f64 = 0.5;

/// An alarm on an object closing in whose true time to contact is above `danger_ttc_s` times
/// `1 + EARLY_MARGIN` is early: 15 %, the time-to-contact error target.
pub const EARLY_MARGIN: f64 = 0.15;

/// Time-to-contact accuracy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TtcScore {
    /// Obstacle-frames on an object with a true time to contact under the horizon.
    pub closing: u64,
    /// Of those, the ones with a confident estimate (compared).
    pub compared: u64,
    /// Median relative error of the compared ones.
    pub median: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Fraction within 15 %.
    pub within_15: f64,
}

impl TtcScore {
    /// `compared / closing`: how often a confident estimate was there to act on.
    pub fn coverage(&self) -> f64 {
        ratio(self.compared as f64, self.closing as f64, 0.0)
    }
}

/// Danger alarms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DangerScore {
    /// Danger episodes in the truth, short ones apart.
    pub episodes: u64,
    /// Of those, the ones in which the object was flagged `danger`.
    pub recalled: u64,
    /// Episodes, short ones apart, in which the detector found the object for at least
    /// [`MIN_EPISODE_S`].
    pub detected_episodes: u64,
    /// Of those, the ones flagged.
    pub detected_recalled: u64,
    /// Short episodes (less than [`MIN_EPISODE_S`] visible).
    pub short_episodes: u64,
    /// Of those, the ones flagged.
    pub short_recalled: u64,
    /// Alarms (tracks turning `danger`).
    pub alarms: u64,
    /// Alarms on nothing, or on an object not closing in.
    pub false_alarms: u64,
    /// Alarms on an object closing in, but with more time to contact than `danger_ttc_s`
    /// plus [`EARLY_MARGIN`].
    pub early_alarms: u64,
    /// Mean seconds from an episode's start to its first alarm, over recalled episodes.
    pub mean_delay_s: f64,
    /// Episodes, short ones apart, whose first alarm came [`LEAD_S`] or more before contact.
    pub lead_recalled: u64,
    /// Alarms on an obstacle the vehicle will pass (moving camera).
    pub pass_alarms: u64,
    /// Mean seconds to contact at the first alarm, over recalled episodes.
    pub mean_lead_s: f64,
}

impl DangerScore {
    /// `recalled / episodes`, short ones apart (1 when there were none).
    pub fn recall(&self) -> f64 {
        ratio(self.recalled as f64, self.episodes as f64, 1.0)
    }

    /// Recall over the episodes in which the detector found the object for at least
    /// [`MIN_EPISODE_S`]: the hazard layer's share of the misses.
    pub fn recall_detected(&self) -> f64 {
        ratio(self.detected_recalled as f64, self.detected_episodes as f64, 1.0)
    }

    /// `lead_recalled / episodes`: recalled at least [`LEAD_S`] before contact.
    pub fn recall_lead(&self) -> f64 {
        ratio(self.lead_recalled as f64, self.episodes as f64, 1.0)
    }

    /// Recall over every episode, short ones included.
    pub fn recall_all(&self) -> f64 {
        ratio((self.recalled + self.short_recalled) as f64, (self.episodes + self.short_episodes) as f64, 1.0)
    }
}

/// What [`HazardScorer::finish`] gives.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HazardScore {
    /// Frames scored.
    pub frames: u64,
    /// Seconds of source time they cover.
    pub seconds: f64,
    /// Tracking: MOTA, IDF1, identity switches.
    pub tracking: TrackingScore,
    /// Seconds of visible objects (object-frames / fps): the base of "switches per 100
    /// track-seconds".
    pub track_seconds: f64,
    /// Time to contact.
    pub ttc: TtcScore,
    /// Danger alarms.
    pub danger: DangerScore,
}

impl HazardScore {
    /// Identity switches per 100 seconds of visible objects.
    pub fn switches_per_100_track_s(&self) -> f64 {
        ratio(self.tracking.id_switches as f64 * 100.0, self.track_seconds, 0.0)
    }

    /// False alarms per minute of source time.
    pub fn false_alarms_per_min(&self) -> f64 {
        ratio(self.danger.false_alarms as f64 * 60.0, self.seconds, 0.0)
    }

    /// False danger per minute of source time, alarms on passed obstacles included: what a
    /// moving robot brakes for needlessly.
    pub fn false_danger_per_min(&self) -> f64 {
        ratio((self.danger.false_alarms + self.danger.pass_alarms) as f64 * 60.0, self.seconds, 0.0)
    }
}

/// An object's danger episode in progress.
#[derive(Clone, Copy, Debug)]
struct Episode {
    /// Its first frame's time.
    start_s: f64,
    /// When it was first flagged, and its true time to contact then.
    alarmed_s: Option<f64>,
    alarm_ttc_s: f64,
    /// The last frame it was in the picture.
    seen: u64,
    /// Frames in which it was visible.
    visible: u64,
    /// Frames in which the detector found it.
    detected: u64,
}

/// Scores a sequence frame by frame.
#[derive(Debug)]
pub struct HazardScorer {
    fps: f64,
    danger_s: f64,
    min_confidence: f64,
    iou: f32,
    min_visible: f32,
    tracking: TrackingScorer,
    tracked: Vec<TrackedBox>,
    errors: Vec<f64>,
    ttc: TtcScore,
    danger: DangerScore,
    delays: f64,
    leads: f64,
    open: HashMap<usize, Episode>,
    /// Tracks at `danger` in the last frame.
    alarmed: Vec<u64>,
    alarmed_now: Vec<u64>,
    frames: u64,
    object_frames: u64,
}

impl HazardScorer {
    /// A scorer for a source at `fps`, with the hazard layer's `danger_ttc_s` and
    /// `min_confidence`, matching boxes at `iou` and treating objects less visible than
    /// `min_visible` as don't care.
    pub fn new(fps: f64, danger_ttc_s: f64, min_confidence: f64, iou: f32, min_visible: f32) -> Self {
        HazardScorer {
            fps,
            danger_s: danger_ttc_s,
            min_confidence,
            iou,
            min_visible,
            tracking: TrackingScorer::new(iou, min_visible),
            tracked: Vec::new(),
            errors: Vec::new(),
            ttc: TtcScore::default(),
            danger: DangerScore::default(),
            delays: 0.0,
            leads: 0.0,
            open: HashMap::new(),
            alarmed: Vec::new(),
            alarmed_now: Vec::new(),
            frames: 0,
            object_frames: 0,
        }
    }

    /// The truth object under detection `d`: same class, best overlap at the threshold, with
    /// the whole object or with the part of it in view ([`GroundTruth::overlap`]).
    fn object_under<'t>(&self, d: &Detection, truth: &'t [GroundTruth]) -> Option<&'t GroundTruth> {
        let b = d.corners();
        truth
            .iter()
            .filter(|g| g.class_id == d.class_id)
            .map(|g| (g, g.overlap(b)))
            .filter(|(_, v)| *v >= self.iou)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(g, _)| g)
    }

    /// Scores frame number `seq` (the source's), with its truth, its detections and what the
    /// hazard layer made of them.
    pub fn frame(
        &mut self,
        seq: u64,
        truth: &[GroundTruth],
        detections: &[Detection],
        hazards: &HazardFrame,
    ) {
        let now = seq as f64 / self.fps;
        self.frames += 1;
        self.object_frames += truth.iter().filter(|g| g.visible >= self.min_visible).count() as u64;
        self.tracked.clear();
        for (d, &id) in detections.iter().zip(&hazards.track_of) {
            if id != 0 {
                self.tracked.push((id, d.corners()));
            }
        }
        self.tracking.frame(truth, &self.tracked);

        // Episodes: open from when an object is in danger by the truth while it is there (for a
        // moving camera, one the vehicle will hit, from a little earlier).
        for g in truth {
            let limit = match g.course {
                Some(c) if !c.hit => continue,
                Some(_) => self.danger_s * (1.0 + EARLY_MARGIN),
                None => self.danger_s,
            };
            let in_danger = g.ttc_frames.is_some_and(|f| f as f64 / self.fps <= limit);
            let (visible, known) = (g.visible >= self.min_visible, self.open.contains_key(&g.object));
            if !(known || in_danger && visible) {
                continue;
            }
            let e = self.open.entry(g.object).or_insert(Episode {
                start_s: now,
                alarmed_s: None,
                alarm_ttc_s: 0.0,
                seen: seq,
                visible: 0,
                detected: 0,
            });
            e.seen = seq;
            e.visible += u64::from(visible);
            e.detected += u64::from(
                detections.iter().any(|d| d.class_id == g.class_id && g.overlap(d.corners()) >= self.iou),
            );
        }

        self.alarmed_now.clear();
        for o in &hazards.obstacles {
            let Some(d) = detections.get(o.detection) else { continue };
            let g = self.object_under(d, truth);
            let true_s = g.and_then(|g| g.ttc_frames).map(|f| f as f64 / self.fps);
            if let (Some(g), Some(true_s)) = (g, true_s) {
                if true_s < TTC_HORIZON_S && g.visible >= self.min_visible {
                    self.ttc.closing += 1;
                    if let Some(est) = o.ttc.seconds.filter(|_| o.ttc.confidence >= self.min_confidence) {
                        self.ttc.compared += 1;
                        self.errors.push((est - true_s).abs() / true_s);
                    }
                }
            }
            if o.level != Level::Danger {
                continue;
            }
            self.alarmed_now.push(o.id);
            if let Some(e) = g.and_then(|g| self.open.get_mut(&g.object)) {
                if e.alarmed_s.is_none() {
                    e.alarmed_s = Some(now);
                    e.alarm_ttc_s = true_s.unwrap_or(0.0);
                }
            }
            if !self.alarmed.contains(&o.id) {
                self.danger.alarms += 1;
                match (true_s, g.and_then(|g| g.course)) {
                    (None, _) => self.danger.false_alarms += 1,
                    (Some(_), Some(c)) if !c.hit => self.danger.pass_alarms += 1,
                    // An obstacle the vehicle will hit is never flagged too early.
                    (Some(_), Some(_)) => {}
                    (Some(s), None) if s > self.danger_s * (1.0 + EARLY_MARGIN) => {
                        self.danger.early_alarms += 1
                    }
                    (Some(_), None) => {}
                }
            }
        }
        std::mem::swap(&mut self.alarmed, &mut self.alarmed_now);

        // Episodes not seen in this frame are over.
        let ended: Vec<usize> = self.open.iter().filter(|(_, e)| e.seen != seq).map(|(k, _)| *k).collect();
        for k in ended {
            let e = self.open.remove(&k).expect("listed above");
            self.close(e);
        }
    }

    fn close(&mut self, e: Episode) {
        if (e.visible as f64) < MIN_EPISODE_S * self.fps {
            self.danger.short_episodes += 1;
            self.danger.short_recalled += u64::from(e.alarmed_s.is_some());
            return;
        }
        self.danger.episodes += 1;
        if e.detected as f64 >= MIN_EPISODE_S * self.fps {
            self.danger.detected_episodes += 1;
            self.danger.detected_recalled += u64::from(e.alarmed_s.is_some());
        }
        if let Some(at) = e.alarmed_s {
            self.danger.recalled += 1;
            self.delays += at - e.start_s;
            self.leads += e.alarm_ttc_s;
            self.danger.lead_recalled += u64::from(e.alarm_ttc_s >= LEAD_S);
        }
    }

    /// The totals.
    pub fn finish(mut self) -> HazardScore {
        let open: Vec<Episode> = self.open.drain().map(|(_, e)| e).collect();
        for e in open {
            self.close(e);
        }
        let mut errors = std::mem::take(&mut self.errors);
        errors.sort_by(f64::total_cmp);
        let at = |q: f64| match errors.len() {
            0 => 0.0,
            n => errors[((n - 1) as f64 * q).round() as usize],
        };
        self.ttc.median = at(0.5);
        self.ttc.p90 = at(0.9);
        self.ttc.within_15 =
            ratio(errors.iter().filter(|&&e| e <= 0.15).count() as f64, errors.len() as f64, 0.0);
        if self.danger.recalled > 0 {
            self.danger.mean_delay_s = self.delays / self.danger.recalled as f64;
            self.danger.mean_lead_s = self.leads / self.danger.recalled as f64;
        }
        HazardScore {
            frames: self.frames,
            seconds: self.frames as f64 / self.fps,
            tracking: self.tracking.finish(),
            track_seconds: self.object_frames as f64 / self.fps,
            ttc: self.ttc,
            danger: self.danger,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hazard::{Bearing, Obstacle, Ttc};

    fn obj(object: usize, x: f32, ttc_frames: Option<f32>) -> GroundTruth {
        GroundTruth { ttc_frames, ..crate::eval::tracking::tests::obj(object, x) }
    }

    fn det(x: f32) -> Detection {
        Detection { class_id: 0, score: 0.9, x1: x, y1: 0.0, x2: x + 10.0, y2: 10.0 }
    }

    fn obstacle(id: u64, detection: usize, ttc_s: Option<f64>, level: Level) -> Obstacle {
        Obstacle {
            id,
            detection,
            bearing: Bearing::default(),
            azimuth: (0.0, 0.0),
            velocity_px_s: [0.0; 2],
            ttc: Ttc { seconds: ttc_s, confidence: 1.0, ..Ttc::default() },
            range_m: None,
            level,
            course: None,
        }
    }

    fn hazards(track_of: Vec<u64>, obstacles: Vec<Obstacle>) -> HazardFrame {
        HazardFrame { track_of, obstacles, ..HazardFrame::default() }
    }

    #[test]
    fn ttc_errors_are_relative_and_only_under_the_horizon() {
        // 10 fps; true TTC 30 frames = 3 s, estimated 3.3 s: 10 % off. Another at 6 s is
        // beyond the horizon; a third is not confident (coverage, not error).
        let mut s = HazardScorer::new(10.0, 2.0, 0.5, 0.5, 0.5);
        let truth = [obj(0, 0.0, Some(30.0)), obj(1, 50.0, Some(60.0)), obj(2, 100.0, Some(20.0))];
        let dets = [det(0.0), det(50.0), det(100.0)];
        let mut unsure = obstacle(3, 2, Some(2.0), Level::Clear);
        unsure.ttc.confidence = 0.2;
        let h = hazards(
            vec![1, 2, 3],
            vec![obstacle(1, 0, Some(3.3), Level::Caution), obstacle(2, 1, Some(1.0), Level::Danger), unsure],
        );
        s.frame(0, &truth, &dets, &h);
        let r = s.finish();
        assert_eq!((r.ttc.closing, r.ttc.compared), (2, 1));
        assert!((r.ttc.median - 0.1).abs() < 1e-9, "{}", r.ttc.median);
        assert_eq!(r.ttc.within_15, 1.0);
        assert_eq!(r.ttc.coverage(), 0.5);
        // The 6 s object flagged danger: an early alarm (6 > 2 * 1.15), not a false one.
        assert_eq!((r.danger.alarms, r.danger.false_alarms, r.danger.early_alarms), (1, 0, 1));
    }

    #[test]
    fn a_danger_episode_is_recalled_once_flagged_and_alarms_count_rising_edges() {
        // 10 fps. Object 0 closes from 3 s: danger (<= 2 s) from frame 10 to 25, then it
        // leaves. The track turns danger at frame 13 and stays: one alarm, recalled after 0.3 s.
        let mut s = HazardScorer::new(10.0, 2.0, 0.5, 0.5, 0.5);
        for f in 0..26u64 {
            let ttc = 30.0 - f as f32;
            let level = if f >= 13 { Level::Danger } else { Level::Caution };
            let truth = [obj(0, 0.0, Some(ttc)), obj(1, 50.0, None)];
            let h = hazards(vec![7, 8], vec![obstacle(7, 0, Some(ttc as f64 / 10.0), level)]);
            s.frame(f, &truth, &[det(0.0), det(50.0)], &h);
        }
        // Object 0 gone; a new one closing at 1.5 s is never flagged: a missed episode, half
        // of it hidden (which does not end it); and one seen for 0.3 s only: a short one.
        for f in 26..36u64 {
            let mut g = obj(256, 0.0, Some(15.0));
            g.visible = if f % 2 == 0 { 1.0 } else { 0.1 };
            let mut truth = vec![g];
            if f < 29 {
                truth.push(obj(512, 100.0, Some(5.0)));
            }
            s.frame(f, &truth, &[], &hazards(vec![], vec![]));
        }
        let r = s.finish();
        assert_eq!((r.danger.episodes, r.danger.recalled), (2, 1));
        assert_eq!((r.danger.short_episodes, r.danger.short_recalled), (1, 0));
        assert_eq!(r.danger.recall(), 0.5);
        assert!((r.danger.recall_all() - 1.0 / 3.0).abs() < 1e-9);
        // Object 0 was detected throughout its episode, the missed one never: the miss is the
        // detector's.
        assert_eq!((r.danger.detected_episodes, r.danger.detected_recalled), (1, 1));
        assert_eq!(r.danger.recall_detected(), 1.0);
        assert_eq!((r.danger.alarms, r.danger.false_alarms, r.danger.early_alarms), (1, 0, 0));
        assert!((r.danger.mean_delay_s - 0.3).abs() < 1e-9, "{}", r.danger.mean_delay_s);
        assert_eq!(r.frames, 36);
        assert!((r.seconds - 3.6).abs() < 1e-9);
        // Two objects in 26 frames, then one visible in 5 of 10 and another in 3: 60
        // object-frames, 6 s.
        assert!((r.track_seconds - 6.0).abs() < 1e-9);
        // Object 1 (still, tracked as 8) and object 0 (tracked as 7): no switch, nothing missed
        // but the last objects, untracked.
        assert_eq!(r.tracking.id_switches, 0);
        assert_eq!(r.tracking.misses, 8);
    }

    #[test]
    fn an_alarm_on_the_part_in_view_of_a_hidden_object_closing_in_is_not_false() {
        // Object 0, 10 x 10, closing in (true TTC 1 s at 10 fps), has its right 6 px hidden:
        // the detector's box on the 4 px in view has IoU 0.4 with the whole box, under the 0.5
        // rule, but 1 with the part in view. Object 1 is not closing in.
        let mut s = HazardScorer::new(10.0, 2.0, 0.5, 0.5, 0.5);
        let mut hidden = obj(0, 0.0, Some(10.0));
        hidden.visible = 0.4;
        hidden.shown = Some([0.0, 0.0, 4.0, 10.0]);
        let part = Detection { x2: 4.0, ..det(0.0) };
        let h = hazards(
            vec![1, 2],
            vec![obstacle(1, 0, Some(1.0), Level::Danger), obstacle(2, 1, Some(1.0), Level::Danger)],
        );
        s.frame(0, &[hidden, obj(1, 50.0, None)], &[part, det(50.0)], &h);
        let r = s.finish();
        assert_eq!((r.danger.alarms, r.danger.false_alarms), (2, 1), "only the alarm on object 1 is false");
        assert_eq!(r.ttc.closing, 0, "object 0 is less visible than min_visible: its TTC is not scored");
    }

    #[test]
    fn a_moving_camera_scores_hits_by_lead_and_alarms_on_passes_as_false() {
        // 10 fps, danger_ttc_s 2: object 0 will be hit and is flagged at 1.5 s (lead), object 1
        // will be hit and is flagged only at 0.5 s (recalled, no lead), object 2 will be passed
        // and is flagged (a pass alarm); all three close in from 3 s.
        use crate::frame::Course;
        let mut s = HazardScorer::new(10.0, 2.0, 0.5, 0.5, 0.5);
        let course = |hit| Some(Course { offset_m: if hit { 0.1 } else { 1.5 }, hit });
        for f in 0..30u64 {
            let ttc = 30.0 - f as f32; // frames
            let truth: Vec<GroundTruth> = [(0, true), (1, true), (2, false)]
                .into_iter()
                .map(|(k, hit)| GroundTruth { course: course(hit), ..obj(k, k as f32 * 50.0, Some(ttc)) })
                .collect();
            let secs = ttc as f64 / 10.0;
            let level = |from: f64| if secs <= from { Level::Danger } else { Level::Clear };
            let h = hazards(
                vec![1, 2, 3],
                vec![
                    obstacle(1, 0, Some(secs), level(1.5)),
                    obstacle(2, 1, Some(secs), level(0.5)),
                    obstacle(3, 2, Some(secs), level(2.0)),
                ],
            );
            s.frame(f, &truth, &[det(0.0), det(50.0), det(100.0)], &h);
        }
        let r = s.finish();
        assert_eq!(
            (r.danger.episodes, r.danger.recalled, r.danger.lead_recalled),
            (2, 2, 1),
            "{:?}",
            r.danger
        );
        assert_eq!(r.danger.recall_lead(), 0.5);
        assert_eq!(
            (r.danger.alarms, r.danger.pass_alarms, r.danger.false_alarms, r.danger.early_alarms),
            (3, 1, 0, 0)
        );
        assert!((r.danger.mean_lead_s - 1.0).abs() < 1e-9, "{}", r.danger.mean_lead_s);
        // 1 false danger in 3 s: 20 a minute.
        assert!((r.false_danger_per_min() - 20.0).abs() < 1e-9);
    }

    #[test]
    fn an_alarm_on_nothing_is_false_and_switches_are_per_100_track_seconds() {
        let mut s = HazardScorer::new(30.0, 2.0, 0.5, 0.5, 0.5);
        for f in 0..300u64 {
            // A box on no object turns danger every 100 frames (3 alarms in 10 s), and the
            // real object's track changes number halfway.
            let level = if f % 100 == 50 { Level::Danger } else { Level::Clear };
            let id = if f < 150 { 1 } else { 2 };
            let h = hazards(vec![id, 9], vec![obstacle(9, 1, None, level)]);
            s.frame(f, &[obj(0, 0.0, None)], &[det(0.0), det(200.0)], &h);
        }
        let r = s.finish();
        assert_eq!((r.danger.alarms, r.danger.false_alarms, r.danger.episodes), (3, 3, 0));
        assert!((r.false_alarms_per_min() - 18.0).abs() < 1e-9);
        assert_eq!(r.tracking.id_switches, 1);
        // 1 switch in 10 s of one object: 10 per 100 track-seconds.
        assert!((r.switches_per_100_track_s() - 10.0).abs() < 1e-9);
        assert_eq!(r.danger.recall(), 1.0, "no episode: nothing to miss");
    }
}
