//! Latency statistics: HDR histograms per pipeline stage and end to end.
//!
//! Values are recorded in microseconds (1 us to 60 s, 3 significant digits):
//! recording never allocates, so it is safe on the per-frame path.

use std::time::Duration;

use hdrhistogram::Histogram;

/// How long each stage of the detector took for one frame (set by `Detector`, reported with
/// the frame).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    /// Colour conversion + letterbox + normalisation.
    pub preprocess: Duration,
    /// The engine run.
    pub inference: Duration,
    /// Candidate extraction + NMS + box mapping.
    pub decode: Duration,
}

/// A stage the daemon times per frame, in pipeline order. Messages, metrics and logs name
/// them by [`Stage::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Capture to the start of inference: how old the frame is when work on it begins.
    Queue,
    /// Frame to model input.
    Preprocess,
    /// The engine's run.
    Inference,
    /// Boxes and NMS.
    Decode,
    /// End of inference to the detections on the socket.
    Publish,
    /// Capture to publication.
    EndToEnd,
}

impl Stage {
    /// Every stage, in pipeline order (the order of [`PerStage`]).
    pub const ALL: [Stage; 6] =
        [Stage::Queue, Stage::Preprocess, Stage::Inference, Stage::Decode, Stage::Publish, Stage::EndToEnd];

    /// The stage's name in messages, metrics and logs.
    pub const fn name(self) -> &'static str {
        match self {
            Stage::Queue => "queue",
            Stage::Preprocess => "preprocess",
            Stage::Inference => "inference",
            Stage::Decode => "decode",
            Stage::Publish => "publish",
            Stage::EndToEnd => "end_to_end",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The stages' names, in [`Stage::ALL`] order.
pub const STAGES: [&str; 6] = {
    let mut names = [""; 6];
    let mut i = 0;
    while i < 6 {
        names[i] = Stage::ALL[i].name();
        i += 1;
    }
    names
};

/// One value per [`Stage`], indexed by it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerStage<T>(pub [T; 6]);

impl<T> std::ops::Index<Stage> for PerStage<T> {
    type Output = T;
    fn index(&self, s: Stage) -> &T {
        &self.0[s as usize]
    }
}

impl<T> std::ops::IndexMut<Stage> for PerStage<T> {
    fn index_mut(&mut self, s: Stage) -> &mut T {
        &mut self.0[s as usize]
    }
}

/// Percentiles of one stage, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest value.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

/// One histogram per stage.
#[derive(Clone, Debug)]
pub struct LatencyStats {
    hists: Vec<Histogram<u64>>,
}

impl Default for LatencyStats {
    fn default() -> Self {
        LatencyStats::new()
    }
}

impl LatencyStats {
    /// Empty histograms for every stage in [`STAGES`].
    pub fn new() -> LatencyStats {
        LatencyStats::with_stages(STAGES.len())
    }

    /// Empty histograms for `n` stages of the caller's choosing (`jetdetect bench`'s
    /// detector and engine modes time other stages than the daemon).
    pub fn with_stages(n: usize) -> LatencyStats {
        let hists = (0..n)
            .map(|_| Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds"))
            .collect();
        LatencyStats { hists }
    }

    /// Records one frame: microseconds per stage, in stage order ([`STAGES`] for
    /// [`LatencyStats::new`]).
    pub fn record<const N: usize>(&mut self, us: [u64; N]) {
        debug_assert_eq!(N, self.hists.len(), "one value per stage");
        for (h, v) in self.hists.iter_mut().zip(us) {
            h.saturating_record(v.max(1));
        }
    }

    /// Records one frame of the daemon's stages ([`LatencyStats::new`]).
    pub fn record_stages(&mut self, us: &PerStage<u64>) {
        self.record(us.0);
    }

    /// Percentiles of one of the daemon's stages ([`LatencyStats::new`]) in milliseconds.
    pub fn stage(&self, stage: Stage) -> Percentiles {
        self.percentiles(stage as usize)
    }

    /// Frames recorded.
    pub fn count(&self) -> u64 {
        self.hists[0].len()
    }

    /// Percentiles of stage `index`, in the order the caller records them, in milliseconds.
    pub fn percentiles(&self, index: usize) -> Percentiles {
        let h = &self.hists[index];
        if h.is_empty() {
            return Percentiles::default();
        }
        let ms = |us: u64| (us as f64 / 1000.0 * 1000.0).round() / 1000.0;
        Percentiles {
            p50: ms(h.value_at_quantile(0.5)),
            p90: ms(h.value_at_quantile(0.9)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
            mean: (h.mean() / 1000.0 * 1000.0).round() / 1000.0,
        }
    }

    /// The value of stage `index` at quantile `q` (`0..=1`), in milliseconds.
    pub fn quantile_ms(&self, index: usize, q: f64) -> f64 {
        self.hists[index].value_at_quantile(q) as f64 / 1000.0
    }

    /// Stage `index`'s distribution in `bins` equal bins from 0 up to its largest value
    /// (rounded up to a round bin width): the bin width in ms and the count per bin.
    pub fn histogram(&self, index: usize, bins: usize) -> (f64, Vec<u64>) {
        let h = &self.hists[index];
        let mut counts = vec![0u64; bins.max(1)];
        if h.is_empty() {
            return (0.0, counts);
        }
        let max_ms = h.max() as f64 / 1e3;
        // A 1-2-5 series bin width so the axis reads well.
        let raw = max_ms / counts.len() as f64;
        let decade = 10f64.powf(raw.log10().floor());
        let width =
            [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * decade).find(|w| *w >= raw).unwrap_or(10.0 * decade);
        for v in h.iter_recorded() {
            let ms = v.value_iterated_to() as f64 / 1e3;
            let i = ((ms / width) as usize).min(counts.len() - 1);
            counts[i] += v.count_at_value();
        }
        ((width * 1e3).round() / 1e3, counts)
    }

    /// Adds another set of histograms into this one.
    pub fn merge(&mut self, other: &LatencyStats) {
        for (a, b) in self.hists.iter_mut().zip(&other.hists) {
            // Same bounds on both sides: adding cannot fail.
            let _ = a.add(b);
        }
    }

    /// Forgets everything recorded (keeps the memory).
    pub fn reset(&mut self) {
        for h in &mut self.hists {
            h.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut s = LatencyStats::new();
        for i in 1..=1000u64 {
            let mut us = PerStage::default();
            us[Stage::Queue] = i * 10;
            us[Stage::EndToEnd] = i * 1000;
            s.record_stages(&us);
        }
        assert_eq!(s.count(), 1000);
        assert_eq!(STAGES, ["queue", "preprocess", "inference", "decode", "publish", "end_to_end"]);
        let e2e = s.stage(Stage::EndToEnd);
        assert!((s.stage(Stage::Queue).p50 - 5.0).abs() < 0.01, "{:?}", s.stage(Stage::Queue));
        assert!((e2e.p50 - 500.0).abs() < 1.0, "{e2e:?}");
        assert!((e2e.p90 - 900.0).abs() < 1.0, "{e2e:?}");
        assert!((e2e.p99 - 990.0).abs() < 1.0, "{e2e:?}");
        assert!((e2e.max - 1000.0).abs() < 1.0, "{e2e:?}");
        let mut t = LatencyStats::new();
        t.merge(&s);
        assert_eq!(t.count(), 1000);
        s.reset();
        assert_eq!(s.count(), 0);
        assert_eq!(s.stage(Stage::Queue), Percentiles::default());
    }
}

/// `[latency]`: the latency contract.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LatencyConfig {
    /// A frame published later than this after its capture (milliseconds) missed its deadline;
    /// misses are counted against the stage that took longest. 0: no deadline.
    pub deadline_ms: f64,
    /// No fresh frame for this long (milliseconds): the daemon is blind, and says so and why.
    pub stale_ms: f64,
}

impl Default for LatencyConfig {
    fn default() -> Self {
        LatencyConfig { deadline_ms: 0.0, stale_ms: 1000.0 }
    }
}

impl LatencyConfig {
    /// Checks the ranges; the error names the key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(self.deadline_ms >= 0.0 && self.deadline_ms <= 60_000.0) {
            return Err((
                "deadline_ms",
                format!("{} is out of range: allowed 0 (none) to 60000", self.deadline_ms),
            ));
        }
        if !(self.stale_ms >= 10.0 && self.stale_ms <= 600_000.0) {
            return Err(("stale_ms", format!("{} is out of range: allowed 10 to 600000", self.stale_ms)));
        }
        Ok(())
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<std::time::Duration> {
        (self.deadline_ms > 0.0).then(|| std::time::Duration::from_secs_f64(self.deadline_ms / 1e3))
    }

    /// The freshness bound.
    pub fn stale(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.stale_ms / 1e3)
    }
}

/// Deadline misses, per stage: a frame that missed counts against the stage (of queue,
/// preprocess, inference, decode and publish) that took longest for it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeadlineMisses {
    /// Misses per stage; the `EndToEnd` entry is the total.
    pub by_stage: PerStage<u64>,
}

impl DeadlineMisses {
    /// Counts the frame with stage times `us` (microseconds) against `deadline_us`; returns
    /// whether it missed.
    pub fn record(&mut self, us: &PerStage<u64>, deadline_us: u64) -> bool {
        if us[Stage::EndToEnd] <= deadline_us {
            return false;
        }
        let worst = Stage::ALL[..5].iter().copied().max_by_key(|&s| us[s]).unwrap_or(Stage::Inference);
        self.by_stage[worst] += 1;
        self.by_stage[Stage::EndToEnd] += 1;
        true
    }

    /// The total.
    pub fn total(&self) -> u64 {
        self.by_stage[Stage::EndToEnd]
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &DeadlineMisses) {
        for s in Stage::ALL {
            self.by_stage[s] += other.by_stage[s];
        }
    }
}

#[cfg(test)]
mod contract_tests {
    use super::*;

    #[test]
    fn a_miss_counts_against_the_slowest_stage() {
        let mut m = DeadlineMisses::default();
        let frame = |q, p, i, d, pb| {
            let mut us = PerStage([q, p, i, d, pb, 0]);
            us[Stage::EndToEnd] = q + p + i + d + pb;
            us
        };
        assert!(!m.record(&frame(1_000, 2_000, 30_000, 1_000, 500), 50_000));
        assert!(m.record(&frame(1_000, 2_000, 60_000, 1_000, 500), 50_000));
        assert!(m.record(&frame(40_000, 2_000, 20_000, 1_000, 500), 50_000));
        assert_eq!((m.by_stage[Stage::Inference], m.by_stage[Stage::Queue], m.total()), (1, 1, 2));
        assert_eq!(
            LatencyConfig { deadline_ms: -1.0, ..Default::default() }.validate().unwrap_err().0,
            "deadline_ms"
        );
        assert!(LatencyConfig::default().deadline().is_none());
    }

    #[test]
    fn histogram_bins_cover_every_frame() {
        let mut s = LatencyStats::with_stages(1);
        for us in [1_000u64, 2_000, 2_500, 9_000, 47_000] {
            s.record([us]);
        }
        let (width, counts) = s.histogram(0, 24);
        assert_eq!(width, 2.0, "47 ms over 24 bins: 1.96 ms, rounded up to 2");
        assert_eq!(counts.iter().sum::<u64>(), 5);
        assert_eq!((counts[0], counts[1], counts[4], counts[23]), (1, 2, 1, 1));
        assert_eq!(LatencyStats::with_stages(1).histogram(0, 4), (0.0, vec![0; 4]));
    }
}
