//! Scoring detections against ground truth (precision and recall at an IoU); [`tracking`]
//! scores tracks (MOTA, identity switches, IDF1), [`hazards`] the hazard layer (tracking, time
//! to contact, danger alarms; [`score_hazards`]), and [`score_tracks`] the tracker on boxes and
//! truth from MOTChallenge files ([`mot`]): real footage, labelled elsewhere.
//!
//! Used by the tests on the synthetic source and by `jetdetect eval` ([`score`]). Matching
//! is greedy by score, one detection per object, same class, IoU at or above
//! the threshold. Objects mostly hidden behind others (visible fraction below
//! `min_visible`) are "don't care": detecting them is not a false positive and
//! missing them is not a false negative.

pub mod hazards;
pub mod mot;
pub mod recorded;
pub mod tracking;

use crate::config::Config;
use crate::frame::{Frame, GroundTruth};
use crate::geometry::iou;
use crate::hazard::{HazardFrame, Hazards};
use crate::yolo::Detection;
use crate::{source, Error};

/// What [`score`] measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Score {
    /// Frames scored.
    pub frames: u64,
    /// Matches, misses and false alarms over all of them.
    pub counts: Counts,
    /// Mean preprocess, inference and decode time per frame in ms (3 decimals).
    pub mean_ms: [f64; 3],
}

/// Runs the detector `config` describes on up to `frames` frames of `uri` (a source with
/// ground truth, such as `synthetic://`) and matches its detections at `match_iou`.
pub fn score(config: &Config, uri: &str, frames: u64, match_iou: f32) -> Result<Score, Error> {
    let mut detector = crate::daemon::detector(config)?;
    let mut src = source::open(uri)?;
    let mut frame = Frame::empty();
    let mut counts = Counts::default();
    let mut n = 0;
    let mut ms = [0f64; 3];
    detector.warm_up(2)?;
    while n < frames && src.next_frame(&mut frame)? {
        let dets = detector.detect(&frame)?;
        counts.add(match_frame(dets, &frame.truth, match_iou, 0.5));
        let t = detector.times();
        for (acc, d) in ms.iter_mut().zip([t.preprocess, t.inference, t.decode]) {
            *acc += d.as_secs_f64() * 1e3;
        }
        n += 1;
    }
    if counts.tp + counts.fn_ == 0 {
        return Err(Error::NoGroundTruth { uri: uri.to_string() });
    }
    let mean = |v: f64| (v / n.max(1) as f64 * 1000.0).round() / 1000.0;
    Ok(Score { frames: n, counts, mean_ms: ms.map(mean) })
}

/// Runs the detector and the hazard layer `config` describes on up to `frames` frames of
/// `uri` (a source whose truth has object identities and times to contact, such as
/// `synthetic://?approach=2&leave=1`), taking frame `n` to be captured at `n / fps` seconds
/// whatever the machine's speed, and scores them ([`hazards::HazardScorer`]) with boxes
/// matched at `match_iou`. `[hazards]` is used as configured, `enabled` or not. `boxes` says
/// whether the detections come from the model (and are also saved) or from a file saved before.
/// A moving camera's attitude (`Frame::attitude`) goes to the layer as its flight controller's
/// would, unless `attitude` is false.
pub fn score_hazards(
    config: &Config,
    uri: &str,
    frames: u64,
    fps: f64,
    match_iou: f32,
    boxes: &recorded::Boxes,
    attitude: bool,
) -> Result<hazards::HazardScore, Error> {
    let mut detector = crate::daemon::detector(config)?;
    let model = &config.model.path;
    let (mut save, mut replay) = match boxes {
        recorded::Boxes::Model => (None, None),
        recorded::Boxes::Save(path) => (Some(recorded::Writer::create(path, uri, model)?), None),
        recorded::Boxes::Replay(path) => (None, Some(recorded::Reader::open(path, uri, model)?)),
    };
    let mut layer =
        Hazards::new(&config.hazards, &config.camera, detector.names())?.with_vehicle(&config.vehicle);
    let mut src = source::open(uri)?;
    let mut frame = Frame::empty();
    let mut out = HazardFrame::with_capacity(64);
    let h = &config.hazards;
    let mut scorer = hazards::HazardScorer::new(fps, h.danger_ttc_s, h.min_confidence, match_iou, 0.5);
    if replay.is_none() {
        detector.warm_up(2)?;
    }
    let epoch = layer.epoch();
    let mut n = 0;
    let mut closing = false;
    while n < frames && src.next_frame(&mut frame)? {
        let dets = match replay.as_mut() {
            Some(r) => r.frame(frame.seq)?,
            None => detector.detect(&frame)?,
        };
        if let Some(w) = save.as_mut() {
            w.frame(frame.seq, dets)?;
        }
        let captured = epoch + std::time::Duration::from_secs_f64(frame.seq as f64 / fps);
        // A moving camera's attitude, as its flight controller would send it.
        if let Some(a) = frame.attitude.filter(|_| attitude) {
            layer.attitude(captured, a);
        }
        layer.update(dets, captured, frame.width, frame.height, &mut out);
        scorer.frame(frame.seq, &frame.truth, dets, &out);
        closing |= frame.truth.iter().any(|g| g.ttc_frames.is_some());
        n += 1;
    }
    if let Some(w) = save {
        w.finish()?;
    }
    let score = scorer.finish();
    if score.tracking.objects == 0 {
        return Err(Error::NoGroundTruth { uri: uri.to_string() });
    }
    if !closing {
        return Err(Error::NothingClosingIn { uri: uri.to_string() });
    }
    Ok(score)
}

/// What [`score_tracks`] measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TrackRun {
    /// Frames run through the tracker (1 to the last frame of either file).
    pub frames: u64,
    /// Detections fed to it.
    pub detections: u64,
    /// The scores against the truth.
    pub score: tracking::TrackingScore,
}

/// Runs the tracker of `[hazards]` (`tracking`, and the time-to-contact window its lost tracks
/// grow by) over the boxes of `detections`, frame `n` captured at `(n - 1) / fps` seconds in
/// `size` pictures, and scores the tracks against `truth` at `match_iou` as py-motmetrics does
/// ([`tracking::TrackingScorer`]). Each frame's tracked boxes (the detections given a track,
/// with its number) go to `save` when given.
pub fn score_tracks<W: std::io::Write>(
    config: &crate::hazard::HazardsConfig,
    detections: &mot::MotFile,
    truth: &mot::MotFile,
    size: (u32, u32),
    fps: f64,
    match_iou: f32,
    mut save: Option<&mut mot::Writer<W>>,
) -> std::io::Result<TrackRun> {
    let mut tracker = crate::hazard::Tracker::new(config.tracking.clone())
        .with_ttc(config.ttc_window_s, config.min_confidence);
    tracker.set_frame(size.0, size.1);
    let mut scorer = tracking::TrackingScorer::new(match_iou, 0.5);
    let (mut dets, mut objects, mut tracked) = (Vec::new(), Vec::new(), Vec::new());
    let mut run = TrackRun::default();
    for frame in 1..=detections.last_frame().max(truth.last_frame()) {
        detections.detections(frame, &mut dets);
        truth.truth(frame, &mut objects);
        tracker.update(&dets, (frame - 1) as f64 / fps);
        tracked.clear();
        for (d, &id) in dets.iter().zip(&tracker.track_of) {
            if id != 0 {
                tracked.push((id, d.corners()));
                if let Some(w) = save.as_mut() {
                    w.row(frame, id, d.corners())?;
                }
            }
        }
        scorer.frame(&objects, &tracked);
        run.frames += 1;
        run.detections += dets.len() as u64;
    }
    run.score = scorer.finish();
    Ok(run)
}

/// `part / whole`, or `if_none` when `whole` is 0 (nothing to count): the one rule behind every
/// rate the scorers report.
pub fn ratio(part: f64, whole: f64, if_none: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        if_none
    }
}

/// True/false positive and false negative counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Detections matched to an object.
    pub tp: usize,
    /// Detections matching no object.
    pub fp: usize,
    /// Objects no detection matched.
    pub fn_: usize,
}

impl Counts {
    /// `tp / (tp + fp)`, 1 when nothing was detected.
    pub fn precision(&self) -> f64 {
        ratio(self.tp as f64, (self.tp + self.fp) as f64, 1.0)
    }

    /// `tp / (tp + fn)`, 1 when there was nothing to find.
    pub fn recall(&self) -> f64 {
        ratio(self.tp as f64, (self.tp + self.fn_) as f64, 1.0)
    }

    /// Adds another frame's counts.
    pub fn add(&mut self, other: Counts) {
        self.tp += other.tp;
        self.fp += other.fp;
        self.fn_ += other.fn_;
    }
}

/// Scores one frame's detections against its ground truth.
pub fn match_frame(
    detections: &[Detection],
    truth: &[GroundTruth],
    iou_threshold: f32,
    min_visible: f32,
) -> Counts {
    let mut order: Vec<usize> = (0..detections.len()).collect();
    order.sort_by(|&a, &b| detections[b].score.total_cmp(&detections[a].score));
    let mut taken = vec![false; truth.len()];
    let mut counts = Counts::default();
    for i in order {
        let d = &detections[i];
        let b = d.corners();
        let best = truth
            .iter()
            .enumerate()
            .filter(|(k, g)| !taken[*k] && g.class_id == d.class_id)
            .map(|(k, g)| (k, iou(b, g.corners())))
            .filter(|(_, v)| *v >= iou_threshold)
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match best {
            Some((k, _)) => {
                taken[k] = true;
                if truth[k].visible >= min_visible {
                    counts.tp += 1;
                }
            }
            None => counts.fp += 1,
        }
    }
    counts.fn_ = truth.iter().zip(&taken).filter(|(g, t)| !**t && g.visible >= min_visible).count();
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gt(class_id: usize, x: f32, visible: f32) -> GroundTruth {
        GroundTruth { class_id, visible, ..tracking::tests::obj(0, x) }
    }

    fn det(class_id: usize, x: f32, score: f32) -> Detection {
        Detection { class_id, score, x1: x, y1: 0.0, x2: x + 10.0, y2: 10.0 }
    }

    #[test]
    fn counts_matches_misses_and_false_alarms() {
        let truth = [gt(0, 0.0, 1.0), gt(1, 50.0, 1.0), gt(0, 100.0, 1.0)];
        let dets = [
            det(0, 1.0, 0.9),  // tp
            det(0, 0.0, 0.8),  // duplicate of the same object: fp
            det(0, 50.0, 0.7), // wrong class: fp
            det(1, 53.0, 0.6), // iou 7/13 = 0.54: tp
        ];
        let c = match_frame(&dets, &truth, 0.5, 0.5);
        assert_eq!(c, Counts { tp: 2, fp: 2, fn_: 1 });
        assert_eq!(c.precision(), 0.5);
        assert!((c.recall() - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn hidden_objects_are_dont_care() {
        let truth = [gt(0, 0.0, 0.2), gt(0, 50.0, 0.3)];
        let c = match_frame(&[det(0, 0.0, 0.9)], &truth, 0.5, 0.5);
        assert_eq!(c, Counts { tp: 0, fp: 0, fn_: 0 });
    }
}
