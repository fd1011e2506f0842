//! Time-to-contact from a box's scale expansion.
//!
//! An object closing in at a steady speed grows in the picture as `s(t) = k / (D - v t)`, so
//! `d ln s / dt = v / (D - v t) = 1 / TTC`: the time to contact is the inverse of the rate at
//! which the logarithm of the box's size grows, whatever the object's real size and distance
//! (Lee's tau). The size is `sqrt(w * h)`, so width and height noise average out.
//!
//! Not every box shows its object's size:
//! - A box **cut by the picture's edge** does not (an object entering the picture "grows" as
//!   more of it comes in, and a detector's box on a part of an object is unreliable along both
//!   axes), so cut boxes are left out: a track cut by the edge keeps the estimate of its last
//!   whole boxes, moved on to the newest frame, while the ring still holds half a window of
//!   them (and for at most one window), and then has none until it is whole again. A box *on*
//!   the edge for [`LONG_CUT_S`] or more also parts the boxes before it from the ones after
//!   ([`Edge`]): an object entering the picture was cut before too, even where the detector's
//!   box on its first part stopped short of the edge and read whole.
//! - A box **partly hidden by another** object shows its size along one axis only: an occluder
//!   that covers the left of an object for its whole height leaves the box's height true and
//!   its width wrong, and as the occluder moves the width changes as an approach would (an
//!   object being uncovered "grows"). The tracker marks which axes of each box may be hidden
//!   ([`ScaleHistory::push_box`]); over a window with such boxes, the rates of `ln w` and
//!   `ln h` are fitted apart, each over the boxes that show that axis, and weighed by their
//!   precision. An approach is isotropic (both axes grow at the same rate), so either axis
//!   alone gives the time to contact.
//!
//! An estimate needs observations over half a window (of at most a second): over less, a
//! detector's box jitter passes for growth. The rate is the least-squares slope over the
//! track's recent observations (a time window, so a dropped frame does not bias it), which is
//! also the smoothing; its standard error gives the confidence. The slope is the rate at the
//! window's mean time, so the estimate is moved to the newest observation (closing at a steady
//! speed, the time to contact falls one second per second).

use serde::Serialize;

use super::line;
use super::ring::Ring;

/// How many observations a track keeps for the estimate.
pub const HISTORY: usize = 32;

/// Which way a track's size goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trend {
    /// Growing: coming closer.
    Approaching,
    /// Shrinking: moving away.
    Receding,
    /// No growth or shrinkage beyond the noise.
    Steady,
}

/// The estimate for one track.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ttc {
    /// Seconds to contact, when approaching.
    pub seconds: Option<f64>,
    /// 0 when the expansion rate is within one standard error of zero (or the track is too
    /// short to tell), rising to 1 at four standard errors.
    pub confidence: f64,
    /// Approaching, receding or steady.
    pub trend: Trend,
}

impl Default for Ttc {
    fn default() -> Self {
        Ttc { seconds: None, confidence: 0.0, trend: Trend::Steady }
    }
}

/// A box on the picture's edge for at least this long (seconds) separates the boxes before
/// it from the ones after, which are not fitted together.
const LONG_CUT_S: f64 = 0.2;

/// Where a box lies against the picture's edge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Edge {
    /// Clear of it: the box shows its object's size.
    #[default]
    Clear,
    /// Near it, where a detector's box on an object partly out of the picture stops: cut.
    Near,
    /// On it: the object goes on past the picture's edge.
    On,
}

/// One observation of a track's box.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Sample {
    /// Capture time, seconds.
    t: f64,
    /// `ln` of the box's width and height.
    ln_w: f64,
    ln_h: f64,
    /// Against the picture's edge: a box near or on it tells no size at all.
    edge: Edge,
    /// Whether the width (both vertical edges free) and the height (both horizontal edges
    /// free) show the object's size: an edge on another box may be where an occluder begins.
    w_ok: bool,
    h_ok: bool,
}

impl Sample {
    fn cut(&self) -> bool {
        self.edge != Edge::Clear
    }

    fn usable(&self) -> bool {
        !self.cut() && (self.w_ok || self.h_ok)
    }
}

/// A least-squares line through `(t, y)` points: its slope and the slope's standard error,
/// and the points' mean time.
#[derive(Clone, Copy, Debug)]
struct Fit {
    slope: f64,
    se: f64,
    mean_t: f64,
}

fn fit(points: impl Iterator<Item = (f64, f64)> + Clone) -> Option<Fit> {
    let l = line::fit(points.clone())?;
    let sse: f64 = points.map(|(t, y)| (y - l.mean_y - l.slope * (t - l.mean_t)).powi(2)).sum();
    Some(Fit { slope: l.slope, se: (sse / (l.n - 2) as f64 / l.stt).sqrt(), mean_t: l.mean_t })
}

/// A track's recent sizes, oldest first, in a fixed ring.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScaleHistory {
    samples: Ring<Sample, HISTORY>,
}

impl ScaleHistory {
    /// Records a whole box of `w` x `h` pixels seen at `t` seconds.
    pub fn push(&mut self, t: f64, w: f32, h: f32) {
        self.push_cut(t, w, h, false);
    }

    /// Records a box of `w` x `h` pixels seen at `t` seconds, `cut` by the picture's edge or not.
    pub fn push_cut(&mut self, t: f64, w: f32, h: f32, cut: bool) {
        self.push_box(t, w, h, if cut { Edge::On } else { Edge::Clear }, true, true);
    }

    /// Records a box of `w` x `h` pixels seen at `t` seconds, `cut` by the picture's edge or
    /// not, and with its width and height showing the object's size (`w_ok`, `h_ok`) or not.
    pub fn push_box(&mut self, t: f64, w: f32, h: f32, edge: Edge, w_ok: bool, h_ok: bool) {
        let ln = |v: f32| (v.max(1e-3) as f64).ln();
        self.samples.push(Sample { t, ln_w: ln(w), ln_h: ln(h), edge, w_ok, h_ok });
    }

    /// Whether the newest observation was cut (false before any).
    pub fn last_cut(&self) -> bool {
        self.iter().last().is_some_and(|s| s.cut())
    }

    /// Whether the newest observation shows the whole object (not cut, both axes shown).
    pub fn last_whole(&self) -> bool {
        self.iter().last().is_some_and(|s| !s.cut() && s.w_ok && s.h_ok)
    }

    /// Number of observations kept.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// True before the first observation.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    fn iter(&self) -> impl Iterator<Item = Sample> + Clone + '_ {
        self.samples.iter()
    }

    /// The estimate over the observations of the last `window_s` seconds (at least 3 needed).
    pub fn ttc(&self, window_s: f64) -> Ttc {
        let Some(last) = self.iter().last().map(|s| s.t) else { return Ttc::default() };
        // Only whole boxes tell the size; while the box is cut, the estimate of the last whole
        // ones is carried forward for at most one window.
        let Some(anchor) = self.iter().filter(Sample::usable).last().map(|s| s.t) else {
            return Ttc::default();
        };
        if last - anchor > window_s {
            return Ttc::default();
        }
        // Boxes on either side of a while on the edge are not views of the same object: one
        // entering the picture was as cut before it as on it (a detector's box on its first
        // part often stops short of the edge, and reads whole), and one that was on the edge
        // a while has moved. Boxes only near the edge do not break the fit: a large object
        // closing in often comes near it whole.
        let mut since = f64::NEG_INFINITY;
        let mut on_edge_from = None;
        for s in self.iter().filter(|s| anchor - s.t <= window_s && s.t <= anchor) {
            match (s.edge, on_edge_from) {
                (Edge::On, None) => on_edge_from = Some(s.t),
                (Edge::Clear, Some(from)) => {
                    if s.t - from >= LONG_CUT_S {
                        since = s.t;
                    }
                    on_edge_from = None;
                }
                _ => {}
            }
        }
        // The boxes a fit may read: not cut, in the window, and after the last while on the edge.
        let in_fit = move |s: &Sample| !s.cut() && anchor - s.t <= window_s && s.t >= since;
        // Too few observations, or over too short a time to tell growth from a detector's
        // box jitter: at least half a window (of at most a second).
        let least_span = 0.5 * window_s.min(1.0);
        let axis = |ok: fn(&Sample) -> bool, y: fn(&Sample) -> f64| {
            let points = self.iter().filter(move |s| in_fit(s) && ok(s)).map(move |s| (s.t, y(&s)));
            let span = points.clone().next().map_or(0.0, |(t, _)| anchor - t);
            if span < least_span {
                return None;
            }
            fit(points)
        };
        let whole = |s: &Sample| s.w_ok && s.h_ok;
        let occluded = self.iter().any(|s| in_fit(&s) && !whole(&s));
        // Unoccluded, the size is `sqrt(w h)`; with an axis hidden in some boxes, each axis is
        // fitted over the boxes that show it and the two rates are weighed by their precision.
        let f = if !occluded {
            axis(whole, |s| 0.5 * (s.ln_w + s.ln_h))
        } else {
            let w = axis(|s| s.w_ok, |s| s.ln_w);
            let h = axis(|s| s.h_ok, |s| s.ln_h);
            match (w, h) {
                (Some(a), Some(b)) => {
                    let (wa, wb) = (1.0 / a.se.max(1e-9).powi(2), 1.0 / b.se.max(1e-9).powi(2));
                    Some(Fit {
                        slope: (a.slope * wa + b.slope * wb) / (wa + wb),
                        se: (1.0 / (wa + wb)).sqrt(),
                        mean_t: (a.mean_t * wa + b.mean_t * wb) / (wa + wb),
                    })
                }
                (a, b) => a.or(b),
            }
        };
        let Some(Fit { slope, se, mean_t }) = f else { return Ttc::default() };
        let z = if se > 0.0 {
            slope.abs() / se
        } else if slope != 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        let confidence = ((z - 1.0) / 3.0).clamp(0.0, 1.0);
        let trend = match (z >= 1.0, slope > 0.0) {
            (false, _) => Trend::Steady,
            (true, true) => Trend::Approaching,
            (true, false) => Trend::Receding,
        };
        // The fit's slope is the rate at the window's mean time; closing at a steady speed, the
        // time to contact shrinks one for one with time, so at the newest observation it is
        // `last - mean` less.
        let seconds = (trend == Trend::Approaching).then(|| (1.0 / slope - (last - mean_t)).max(0.0));
        Ttc { seconds, confidence, trend }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An object of height `h0` at `d0` metres closing at `v` m/s, seen at `fps` for `secs`.
    fn approach(d0: f64, v: f64, fps: f64, secs: f64, jitter: f64) -> (ScaleHistory, f64) {
        let mut h = ScaleHistory::default();
        let frames = (fps * secs) as usize;
        let mut seed = 3u64;
        for i in 0..frames {
            let t = i as f64 / fps;
            let size = 100.0 * d0 / (d0 - v * t);
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let noise = 1.0 + jitter * (((seed >> 33) as f64 / (1u64 << 31) as f64) * 2.0 - 1.0);
            h.push(t, (size * noise) as f32, (size * 1.5) as f32);
        }
        (h, (d0 - v * (frames - 1) as f64 / fps) / v)
    }

    /// A box 80 px tall widening at 60 px/s from `w0` for 1 s at 30 fps: read whole, and
    /// recorded by `mark`.
    fn widening(w0: f32, mark: impl Fn(&mut ScaleHistory, f64, f32)) -> (ScaleHistory, ScaleHistory) {
        let (mut whole, mut marked) = (ScaleHistory::default(), ScaleHistory::default());
        for i in 0..30 {
            let t = i as f64 / 30.0;
            let w = w0 + 60.0 * t as f32;
            whole.push(t, w, 80.0);
            mark(&mut marked, t, w);
        }
        (whole, marked)
    }

    #[test]
    fn an_approaching_object_gives_its_time_to_contact() {
        let (h, truth) = approach(10.0, 2.0, 30.0, 1.0, 0.0);
        let t = h.ttc(0.5);
        assert_eq!(t.trend, Trend::Approaching);
        let got = t.seconds.unwrap();
        assert!((got - truth).abs() / truth < 0.01, "{got} vs {truth}");
        assert_eq!(t.confidence, 1.0);
        // 3% box jitter (a real detector's): still within 10%, with less confidence.
        let (h, truth) = approach(10.0, 2.0, 30.0, 1.0, 0.03);
        let t = h.ttc(1.0);
        let got = t.seconds.unwrap();
        assert!((got - truth).abs() / truth < 0.1, "{got} vs {truth}");
        assert!(t.confidence > 0.5, "{t:?}");
    }

    #[test]
    fn a_box_cut_by_the_edge_tells_no_size_and_the_last_whole_estimate_is_carried_forward() {
        // An object sliding into the picture from the left at 60 px/s: its box widens, its
        // height stays. Read whole, that is an approach; cut, there is nothing to tell.
        let (whole, cut) = widening(10.0, |h, t, w| h.push_cut(t, w, 80.0, true));
        assert_eq!(whole.ttc(1.0).trend, Trend::Approaching);
        assert_eq!(cut.ttc(1.0), Ttc::default());
        // Closing in from 10 m at 2 m/s, whole for 1 s, then cut at the top (its box no longer
        // grows in height): the estimate goes on falling a second per second for one window.
        let mut h = ScaleHistory::default();
        let (d0, v) = (10.0, 2.0);
        let size = |t: f64| (100.0 * d0 / (d0 - v * t)) as f32;
        for i in 0..30 {
            let t = i as f64 / 30.0;
            h.push(t, size(t), size(t));
        }
        for i in 30..40 {
            let t = i as f64 / 30.0;
            h.push_cut(t, size(t), 50.0, true);
        }
        let truth = (d0 - v * 39.0 / 30.0) / v;
        let got = h.ttc(1.0).seconds.unwrap();
        assert!((got - truth).abs() / truth < 0.01, "{got} vs {truth}");
        // Cut for long (past what the ring holds, or one window): no estimate.
        for i in 40..62 {
            let t = i as f64 / 30.0;
            h.push_cut(t, size(t), 50.0, true);
        }
        assert_eq!(h.ttc(1.0), Ttc::default());
    }

    #[test]
    fn boxes_either_side_of_a_while_on_the_edge_are_not_fitted_together() {
        // A cone rising from the bottom edge, 60 px tall still: the detector's first boxes on
        // its tip stop short of the edge (they read whole, 40 px wide), then it sits on the
        // edge while it comes in, then clears it whole at 90 px wide. Fitted together, the
        // steady cone reads as closing in fast.
        let mark = |h: &mut ScaleHistory, from: usize, to: usize, w: f32, edge: Edge| {
            for i in from..to {
                h.push_box(i as f64 / 30.0, w, 60.0, edge, true, true);
            }
        };
        let cone = |tip: usize, coming_in: usize, whole: usize, edge: Edge| {
            let mut h = ScaleHistory::default();
            mark(&mut h, 0, tip, 40.0, Edge::Clear);
            mark(&mut h, tip, tip + coming_in, 65.0, edge);
            mark(&mut h, tip + coming_in, tip + coming_in + whole, 90.0, Edge::Clear);
            h.ttc(1.0)
        };
        // 0.4 s near the edge (a large object closing in comes near it whole): the fit spans
        // it, and reads the jump as an approach.
        assert_eq!(cone(8, 12, 10, Edge::Near).trend, Trend::Approaching);
        // 0.4 s on it: the boxes since (0.3 s) are too few to tell anything yet.
        assert_eq!(cone(8, 12, 10, Edge::On), Ttc::default());
        // Once they span half a window, the steady cone is steady.
        let t = cone(4, 8, 20, Edge::On);
        assert!(t.trend == Trend::Steady && t.seconds.is_none(), "{t:?}");
        assert_eq!(cone(4, 8, 20, Edge::Near).trend, Trend::Approaching);
        // A blip on the edge (under 0.2 s) does not break the fit: a steady object whole
        // before and after it has its estimate.
        let mut h = ScaleHistory::default();
        mark(&mut h, 0, 15, 60.0, Edge::Clear);
        mark(&mut h, 15, 19, 60.0, Edge::On);
        let mut jittered = h;
        mark(&mut h, 19, 30, 60.0, Edge::Clear);
        mark(&mut jittered, 19, 30, 90.0, Edge::Clear);
        assert_eq!(h.ttc(1.0).trend, Trend::Steady);
        assert_eq!(jittered.ttc(1.0).trend, Trend::Approaching, "fitted across the blip");
    }

    #[test]
    fn an_axis_hidden_by_an_occluder_is_left_out_and_the_other_gives_the_time_to_contact() {
        // A still object being uncovered from the right: its box widens, its height stays.
        // Read as a size, that is an approach; with the width marked hidden, it is steady.
        let (read_whole, marked) = widening(40.0, |h, t, w| h.push_box(t, w, 80.0, Edge::Clear, false, true));
        assert_eq!(read_whole.ttc(1.0).trend, Trend::Approaching);
        assert_eq!(marked.ttc(1.0).trend, Trend::Steady);
        // Closing in from 10 m at 2 m/s, and for the second half of the window an occluder
        // covers its left side for its whole height, so the box's width shrinks; the height
        // alone still tells the time to contact, where the size would read it late.
        let (d0, v) = (10.0, 2.0);
        let size = |t: f64| (100.0 * d0 / (d0 - v * t)) as f32;
        let (mut hidden_read, mut hidden_marked) = (ScaleHistory::default(), ScaleHistory::default());
        for i in 0..30 {
            let t = i as f64 / 30.0;
            let covered = i >= 15;
            let w = if covered { size(t) * (1.0 - 0.01 * (i - 15) as f32) } else { size(t) };
            hidden_read.push(t, w, size(t));
            hidden_marked.push_box(t, w, size(t), Edge::Clear, !covered, true);
        }
        let truth = (d0 - v * 29.0 / 30.0) / v;
        let read = hidden_read.ttc(1.0).seconds.unwrap();
        let marked = hidden_marked.ttc(1.0).seconds.unwrap();
        assert!((marked - truth).abs() / truth < 0.02, "{marked} vs {truth}");
        assert!((read - truth) / truth > 0.3, "{read} vs {truth}: the hidden width should have misled it");
        // Both axes hidden (an occluder over a corner): nothing new to tell; the estimate of
        // the earlier boxes is carried forward as for a cut box.
        let mut corner = ScaleHistory::default();
        for i in 0..40 {
            let t = i as f64 / 30.0;
            let free = i < 30;
            corner.push_box(t, size(t), size(t), Edge::Clear, free, free);
        }
        let got = corner.ttc(1.0).seconds.unwrap();
        let truth = (d0 - v * 39.0 / 30.0) / v;
        assert!((got - truth).abs() / truth < 0.01, "{got} vs {truth}");
    }

    #[test]
    fn receding_steady_and_too_short_tracks() {
        let (h, _) = approach(10.0, -2.0, 30.0, 1.0, 0.0);
        assert_eq!(h.ttc(1.0), Ttc { seconds: None, confidence: 1.0, trend: Trend::Receding });
        let (h, _) = approach(10.0, 0.0, 30.0, 1.0, 0.05);
        let t = h.ttc(1.0);
        assert!(t.trend == Trend::Steady || t.confidence < 0.35, "{t:?}");
        let (h, _) = approach(10.0, 2.0, 30.0, 2.0 / 30.0, 0.0);
        assert_eq!(h.len(), 2);
        assert_eq!(h.ttc(1.0), Ttc::default());
        // The ring keeps the newest HISTORY observations.
        let (h, _) = approach(10.0, 1.0, 30.0, 3.0, 0.0);
        assert_eq!(h.len(), HISTORY);
        assert!(h.ttc(10.0).seconds.unwrap() < 8.0);
    }
}
