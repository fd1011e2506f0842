//! Tracking scores against ground truth with object identities: CLEAR MOT (MOTA, identity
//! switches) and IDF1, the two figures multi-object tracking benchmarks report.
//!
//! - **CLEAR MOT** (Bernardin and Stiefelhagen, 2008): per frame, a ground-truth object keeps
//!   the track it was matched to last while their boxes still overlap at the IoU threshold; the
//!   rest are matched as many as can be, and of those matchings at the least total `1 - IoU`.
//!   A match whose track differs from the object's previous one is an identity switch.
//!   MOTA = 1 - (misses + false positives + switches) / objects.
//! - **IDF1** (Ristani et al., 2016): each object is given at most one track for the whole
//!   sequence, the one-to-one pairing that maximises the frames in which the two overlap at the
//!   threshold (IDTP); IDF1 = 2 IDTP / (objects' frames + tracks' frames).
//!
//! Both are computed as py-motmetrics computes them (`MOTAccumulator.update`: kept matches,
//! then `linear_sum_assignment` with the pairs under the threshold priced out, so the most
//! pairs win before the least cost; `id_global_assignment` for IDF1; IoU in double precision,
//! a pair counting where `1 - IoU <= 1 - threshold`): `jetdetect eval --tracks` on the
//! sequences py-motmetrics ships gives its numbers, which the tests check (`tests/it/mot.rs`).
//!
//! Objects mostly hidden behind others (visible fraction below `min_visible`) are "don't care",
//! as in [`super::match_frame`]: a track on one is neither a hit nor a false positive, and
//! missing one is not a miss.

use std::collections::HashMap;

use crate::frame::GroundTruth;
use crate::hazard::assign::Assignment;

/// The IoU of `a` and `b` (`[x1, y1, x2, y2]`) in double precision, as py-motmetrics'
/// `boxiou` computes it: a box's extent below 0 counts as 0.
fn iou64(a: [f32; 4], b: [f32; 4]) -> f64 {
    let [a, b] = [a, b].map(|v| v.map(f64::from));
    let (iw, ih) = ((a[2].min(b[2]) - a[0].max(b[0])).max(0.0), (a[3].min(b[3]) - a[1].max(b[1])).max(0.0));
    let inter = iw * ih;
    if inter == 0.0 {
        return 0.0;
    }
    let area = |v: [f64; 4]| (v[2] - v[0]).max(0.0) * (v[3] - v[1]).max(0.0);
    inter / (area(a) + area(b) - inter)
}

/// A tracked box: its track id and corners `[x1, y1, x2, y2]`.
pub type TrackedBox = (u64, [f32; 4]);

/// The scores over a sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TrackingScore {
    /// Frames scored.
    pub frames: u64,
    /// Object-frames that count (visible enough).
    pub objects: u64,
    /// Object-frames with a track on them.
    pub matches: u64,
    /// Object-frames without.
    pub misses: u64,
    /// Tracked boxes on no object.
    pub false_positives: u64,
    /// Matches whose track is not the object's previous one.
    pub id_switches: u64,
    /// Frames of the best one-to-one object/track pairing (IDF1's IDTP).
    pub idtp: u64,
    /// Tracked boxes that count (not on a hidden object).
    pub tracked: u64,
}

impl TrackingScore {
    /// MOTA: 1 - (misses + false positives + identity switches) / objects.
    pub fn mota(&self) -> f64 {
        if self.objects == 0 {
            return 0.0;
        }
        1.0 - (self.misses + self.false_positives + self.id_switches) as f64 / self.objects as f64
    }

    /// IDF1: 2 IDTP / (object-frames + tracked boxes).
    pub fn idf1(&self) -> f64 {
        super::ratio(2.0 * self.idtp as f64, (self.objects + self.tracked) as f64, 0.0)
    }
}

/// Scores a sequence frame by frame; [`TrackingScorer::finish`] gives the totals.
#[derive(Debug)]
pub struct TrackingScorer {
    iou: f32,
    min_visible: f32,
    /// Each object's last track.
    last: HashMap<usize, u64>,
    /// Frames in which object and track overlap at the threshold, per (object, track).
    together: HashMap<(usize, u64), u64>,
    score: TrackingScore,
    assignment: Assignment,
}

impl TrackingScorer {
    /// A scorer matching at `iou` (e.g. 0.5), with objects below `min_visible` don't care.
    pub fn new(iou: f32, min_visible: f32) -> TrackingScorer {
        TrackingScorer {
            iou,
            min_visible,
            last: HashMap::new(),
            together: HashMap::new(),
            score: TrackingScore::default(),
            assignment: Assignment::default(),
        }
    }

    /// Scores one frame: its ground truth (objects by `object`) and its tracked boxes.
    pub fn frame(&mut self, truth: &[GroundTruth], tracks: &[TrackedBox]) {
        // A pair counts where `1 - IoU <= 1 - threshold`, py-motmetrics' test (`iou_matrix`).
        let most = 1.0 - self.iou as f64;
        let overlaps = |g: &GroundTruth, b: &[f32; 4]| 1.0 - iou64(*b, g.corners()) <= most;
        self.score.frames += 1;
        let mut object_of = vec![None::<usize>; tracks.len()];
        let mut track_of = vec![None::<usize>; truth.len()];
        // Matches kept from the last frame.
        for (k, g) in truth.iter().enumerate() {
            let Some(&prev) = self.last.get(&g.object) else { continue };
            if let Some(i) = tracks.iter().position(|(id, b)| *id == prev && overlaps(g, b)) {
                if object_of[i].is_none() {
                    object_of[i] = Some(k);
                    track_of[k] = Some(i);
                }
            }
        }
        // The rest: as many pairs as can be, and of those the least total 1 - IoU. A pair under
        // the threshold costs more than any whole matching of pairs over it (py-motmetrics'
        // `add_expensive_edges`: 2 r c + 1 with costs within c), and is dropped.
        let free_g: Vec<usize> = (0..truth.len()).filter(|&k| track_of[k].is_none()).collect();
        let free_t: Vec<usize> = (0..tracks.len()).filter(|&i| object_of[i].is_none()).collect();
        let priced_out = 2.0 * free_g.len().min(free_t.len()) as f64 * 2.0 + 1.0;
        self.assignment.solve(free_g.len(), free_t.len(), priced_out, |r, c| {
            let (g, b) = (&truth[free_g[r]], &tracks[free_t[c]].1);
            if overlaps(g, b) {
                1.0 - iou64(*b, g.corners())
            } else {
                priced_out
            }
        });
        for &(r, c) in &self.assignment.pairs {
            object_of[free_t[c]] = Some(free_g[r]);
            track_of[free_g[r]] = Some(free_t[c]);
        }
        for (k, g) in truth.iter().enumerate() {
            let counts = g.visible >= self.min_visible;
            match track_of[k] {
                Some(i) => {
                    let id = tracks[i].0;
                    if counts {
                        self.score.objects += 1;
                        self.score.matches += 1;
                        if self.last.get(&g.object).is_some_and(|&p| p != id) {
                            self.score.id_switches += 1;
                        }
                    }
                    self.last.insert(g.object, id);
                }
                None if counts => {
                    self.score.objects += 1;
                    self.score.misses += 1;
                }
                None => {}
            }
        }
        for (i, (id, b)) in tracks.iter().enumerate() {
            match object_of[i] {
                None => {
                    self.score.false_positives += 1;
                    self.score.tracked += 1;
                }
                Some(k) if truth[k].visible >= self.min_visible => self.score.tracked += 1,
                Some(_) => {} // on a hidden object: don't care
            }
            // IDF1 counts every overlap at the threshold, not only the frame's matches.
            for g in truth.iter().filter(|g| g.visible >= self.min_visible && overlaps(g, b)) {
                *self.together.entry((g.object, *id)).or_default() += 1;
            }
        }
    }

    /// The totals, with IDF1's one-to-one pairing of objects and tracks over the sequence.
    pub fn finish(&mut self) -> TrackingScore {
        let mut objects: Vec<usize> = self.together.keys().map(|k| k.0).collect();
        let mut tracks: Vec<u64> = self.together.keys().map(|k| k.1).collect();
        objects.sort_unstable();
        objects.dedup();
        tracks.sort_unstable();
        tracks.dedup();
        let most = self.together.values().copied().max().unwrap_or(0) as f64;
        let together = &self.together;
        // Least total (most - frames together) is the most frames together; pairs never
        // together cost `most` and are dropped.
        self.assignment.solve(objects.len(), tracks.len(), most, |r, c| {
            most - together.get(&(objects[r], tracks[c])).copied().unwrap_or(0) as f64
        });
        let mut score = self.score;
        score.idtp = self.assignment.pairs.iter().map(|&(r, c)| together[&(objects[r], tracks[c])]).sum();
        score
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Object `object`, 10 px square at `x`, all visible, not closing in.
    pub(in crate::eval) fn obj(object: usize, x: f32) -> GroundTruth {
        GroundTruth {
            class_id: 0,
            x1: x,
            y1: 0.0,
            x2: x + 10.0,
            y2: 10.0,
            visible: 1.0,
            object,
            ttc_frames: None,
            shown: None,
            course: None,
        }
    }

    fn trk(id: u64, x: f32) -> TrackedBox {
        (id, [x, 0.0, x + 10.0, 10.0])
    }

    #[test]
    fn perfect_tracking_scores_one() {
        let mut s = TrackingScorer::new(0.5, 0.5);
        for f in 0..10 {
            let x = f as f32;
            s.frame(&[obj(1, x), obj(2, 100.0 + x)], &[trk(7, x), trk(8, 100.0 + x)]);
        }
        let r = s.finish();
        assert_eq!((r.objects, r.matches, r.misses, r.false_positives, r.id_switches), (20, 20, 0, 0, 0));
        assert_eq!((r.mota(), r.idf1()), (1.0, 1.0));
    }

    #[test]
    fn a_switch_halfway_costs_one_in_mota_and_half_its_frames_in_idf1() {
        let mut s = TrackingScorer::new(0.5, 0.5);
        for f in 0..10 {
            // Object 1 is track 7 for 6 frames, then track 9.
            s.frame(&[obj(1, 0.0)], &[trk(if f < 6 { 7 } else { 9 }, 0.0)]);
        }
        let r = s.finish();
        assert_eq!(r.id_switches, 1);
        assert!((r.mota() - 0.9).abs() < 1e-12);
        // The best pairing keeps track 7's 6 frames: IDF1 = 2 * 6 / (10 + 10).
        assert_eq!(r.idtp, 6);
        assert!((r.idf1() - 0.6).abs() < 1e-12);
    }

    #[test]
    fn misses_false_positives_and_hidden_objects() {
        let mut s = TrackingScorer::new(0.5, 0.5);
        let mut hidden = obj(3, 200.0);
        hidden.visible = 0.2;
        // Object 1 missed; a track on nothing; a track on the hidden object 3 (don't care).
        s.frame(&[obj(1, 0.0), hidden], &[trk(5, 50.0), trk(6, 200.0)]);
        let r = s.finish();
        assert_eq!((r.objects, r.misses, r.false_positives, r.tracked), (1, 1, 1, 1));
        assert!((r.mota() - (1.0 - 2.0)).abs() < 1e-12);
        assert_eq!(r.idf1(), 0.0);
    }

    #[test]
    fn a_kept_match_wins_over_a_better_overlap() {
        // Track 7 follows object 1; in frame 2 track 8 overlaps object 1 better, but 7 still
        // overlaps at the threshold: CLEAR MOT keeps 7 (no switch), 8 is a false positive.
        let mut s = TrackingScorer::new(0.5, 0.5);
        s.frame(&[obj(1, 0.0)], &[trk(7, 0.0)]);
        s.frame(&[obj(1, 0.0)], &[trk(7, 2.0), trk(8, 0.0)]);
        let r = s.finish();
        assert_eq!((r.id_switches, r.false_positives, r.matches), (0, 1, 2));
    }
}
