//! Time-to-contact from a box's scale expansion.
//!
//! An object closing in at a steady speed grows in the picture as `s(t) = k / (D - v t)`, so
//! `d ln s / dt = v / (D - v t) = 1 / TTC`: the time to contact is the inverse of the rate at
//! which the logarithm of the box's size grows, whatever the object's real size and distance
//! (Lee's tau). The size is `sqrt(w * h)`, so width and height noise average out. A box cut by
//! the picture's edge does not show its object's size (an object entering the picture "grows"
//! as more of it comes in, and a detector's box on a part of an object is unreliable along
//! both axes), so cut boxes are left out: a track cut by the edge keeps the estimate of its
//! last whole boxes, moved on to the newest frame, while the ring still holds half a window of
//! them (and for at most one window), and then has none until it is whole again. An estimate
//! needs observations over half a window (of at most a second): over less, a detector's box
//! jitter passes for growth. The rate is
//! the least-squares slope of `ln s` over the track's recent observations (a time window, so a
//! dropped frame does not bias it), which is also the smoothing; its standard error gives the
//! confidence. The slope is the rate at the window's mean time, so the estimate is moved to the
//! newest observation (closing at a steady speed, the time to contact falls one second per second).

use serde::Serialize;

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

/// A track's recent sizes: `(time s, ln size)`, oldest first, in a fixed ring.
#[derive(Clone, Copy, Debug)]
pub struct ScaleHistory {
    /// `(time s, ln size, cut by the picture's edge)`.
    samples: [(f64, f64, bool); HISTORY],
    start: usize,
    len: usize,
}

impl Default for ScaleHistory {
    fn default() -> Self {
        ScaleHistory { samples: [(0.0, 0.0, false); HISTORY], start: 0, len: 0 }
    }
}

impl ScaleHistory {
    /// Records a whole box of `w` x `h` pixels seen at `t` seconds.
    pub fn push(&mut self, t: f64, w: f32, h: f32) {
        self.push_cut(t, w, h, false);
    }

    /// Records a box of `w` x `h` pixels seen at `t` seconds, `cut` by the picture's edge or not.
    pub fn push_cut(&mut self, t: f64, w: f32, h: f32, cut: bool) {
        let sample = (t, ((w.max(1e-3) * h.max(1e-3)) as f64).sqrt().ln(), cut);
        if self.len == HISTORY {
            self.samples[self.start] = sample;
            self.start = (self.start + 1) % HISTORY;
        } else {
            self.samples[(self.start + self.len) % HISTORY] = sample;
            self.len += 1;
        }
    }

    /// Number of observations kept.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True before the first observation.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn iter(&self) -> impl Iterator<Item = (f64, f64, bool)> + '_ {
        (0..self.len).map(move |i| self.samples[(self.start + i) % HISTORY])
    }

    /// The estimate over the observations of the last `window_s` seconds (at least 3 needed).
    pub fn ttc(&self, window_s: f64) -> Ttc {
        let Some(&(last, ..)) = self.iter().last().as_ref() else { return Ttc::default() };
        // Only whole boxes tell the size; while the box is cut, the estimate of the last whole
        // ones is carried forward for at most one window.
        let Some((anchor, ..)) = self.iter().filter(|s| !s.2).last() else { return Ttc::default() };
        if last - anchor > window_s {
            return Ttc::default();
        }
        let recent = move || {
            self.iter()
                .filter(move |&(t, _, cut)| !cut && anchor - t <= window_s)
                .map(|(t, size, _)| (t, size))
        };
        let n = recent().count();
        // Too few observations, or over too short a time to tell growth from a detector's
        // box jitter: at least half a window (of at most a second).
        let span = recent().next().map_or(0.0, |(t, _)| anchor - t);
        if n < 3 || span < 0.5 * window_s.min(1.0) {
            return Ttc::default();
        }
        let (mt, ms) = recent().fold((0.0, 0.0), |(a, b), (t, s)| (a + t, b + s));
        let (mt, ms) = (mt / n as f64, ms / n as f64);
        let (mut stt, mut sts) = (0.0, 0.0);
        for (t, s) in recent() {
            stt += (t - mt) * (t - mt);
            sts += (t - mt) * (s - ms);
        }
        if stt <= 0.0 {
            return Ttc::default();
        }
        let slope = sts / stt;
        let sse: f64 = recent().map(|(t, s)| (s - ms - slope * (t - mt)).powi(2)).sum();
        let se = (sse / (n - 2) as f64 / stt).sqrt();
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
        let seconds = (trend == Trend::Approaching).then(|| (1.0 / slope - (last - mt)).max(0.0));
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
        let (mut whole, mut cut) = (ScaleHistory::default(), ScaleHistory::default());
        for i in 0..30 {
            let t = i as f64 / 30.0;
            let w = 10.0 + 60.0 * t as f32;
            whole.push(t, w, 80.0);
            cut.push_cut(t, w, 80.0, true);
        }
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
