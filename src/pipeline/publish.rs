//! The publisher: hands every frame's report and every interval's figures to the outputs, and
//! keeps the per-interval state (latency histograms, counters, timers) that they share.
//!
//! An output (the socket, the Prometheus endpoint, systemd's notify socket, `--echo`, MAVLink,
//! ROS 2, MQTT) implements [`Output`] in `src/output/` and is built from its config section by
//! `daemon::outputs`. The pipeline knows outputs only through that trait; an output never
//! reaches back into the stages.

use std::time::{Duration, Instant};

use crate::error::Result;
use crate::output::{Health, Interval, Output, Started};
use crate::power::telemetry::Telemetry;
use crate::stats::{DeadlineMisses, LatencyConfig, LatencyStats, Percentiles, Stage};

use crate::report::{Blind, CameraStats, Fps, FrameCounters, FrameReport, SourceState};

/// Feeds the outputs and keeps the per-interval state.
pub struct Publisher {
    outputs: Vec<Box<dyn Output>>,
    every: Duration,
    started: Instant,
    last_interval: Instant,
    last_counts: FrameCounters,
    window: LatencyStats,
    total: LatencyStats,
    contract: LatencyConfig,
    misses: DeadlineMisses,
    misses_total: DeadlineMisses,
    /// Per camera: its newest published frame's capture time.
    newest: Vec<Option<Instant>>,
    /// Per camera: its freshness bound.
    stale: Vec<Duration>,
    /// Per camera: its counters at the last interval.
    last_camera_counts: Vec<FrameCounters>,
    /// Per camera: its frames' stage times over the interval, and over the run before it.
    camera_window: Vec<LatencyStats>,
    camera_total: Vec<LatencyStats>,
    blind: Vec<Blind>,
    blind_noticed: Option<Instant>,
}

impl Publisher {
    /// Publishes to `outputs`, with a stats interval of `every`, under the latency `contract`,
    /// for cameras with the freshness bounds `stale` (one per camera, in order).
    pub fn new(
        outputs: Vec<Box<dyn Output>>,
        every: Duration,
        contract: LatencyConfig,
        stale: Vec<Duration>,
    ) -> Publisher {
        let now = Instant::now();
        let cameras = stale.len();
        Publisher {
            outputs,
            every,
            started: now,
            last_interval: now,
            last_counts: FrameCounters::default(),
            window: LatencyStats::new(),
            total: LatencyStats::new(),
            contract,
            misses: DeadlineMisses::default(),
            misses_total: DeadlineMisses::default(),
            newest: vec![None; cameras],
            stale,
            last_camera_counts: vec![FrameCounters::default(); cameras],
            camera_window: (0..cameras).map(|_| LatencyStats::new()).collect(),
            camera_total: (0..cameras).map(|_| LatencyStats::new()).collect(),
            blind: Vec::with_capacity(cameras),
            blind_noticed: None,
        }
    }

    /// How long camera `camera` has had no fresh frame, when that is longer than its
    /// freshness bound: the age of its newest published frame, or the time since the pipeline
    /// was ready.
    pub fn stale_for(&self, camera: usize) -> Option<Duration> {
        let age = self.newest[camera].unwrap_or(self.started).elapsed();
        (age > self.stale[camera]).then_some(age)
    }

    /// Opens every output ([`Output::open`]).
    pub fn open(&mut self) -> Result<()> {
        for o in &mut self.outputs {
            o.open()?;
        }
        Ok(())
    }

    /// The pipeline is ready; uptime counts from here.
    pub fn ready(&mut self, started: &Started) {
        for o in &mut self.outputs {
            o.ready(started);
        }
        self.started = Instant::now();
        self.last_interval = self.started;
    }

    /// Publishes one frame and records its stage times (publishing included).
    pub fn frame(&mut self, report: &FrameReport, dropped: u64) {
        let now = Instant::now();
        for o in &mut self.outputs {
            o.frame(report, dropped, now);
        }
        let mut us = report.stage_us(now);
        us[Stage::Publish] = Instant::now().saturating_duration_since(report.infer_end).as_micros() as u64;
        self.window.record_stages(&us);
        if let Some(w) = self.camera_window.get_mut(report.camera.index) {
            w.record_stages(&us);
        }
        if let Some(deadline) = self.contract.deadline() {
            self.misses.record(&us, deadline.as_micros() as u64);
        }
        let newest = &mut self.newest[report.camera.index];
        *newest = Some(newest.map_or(report.captured, |n| n.max(report.captured)));
    }

    /// One turn of the loop: `health.blind` says which cameras are blind (the pipeline works
    /// out why when [`Publisher::stale_for`] says so); each change is logged once.
    pub fn tick(&mut self, health: &Health<'_>) {
        let many = self.newest.len() > 1;
        let mut newly_blind = false;
        for b in health.blind {
            if !self.blind.iter().any(|o| o.camera == b.camera) {
                newly_blind = true;
                log::warn!(
                    "blind{}: no fresh frame for {:.0} ms ({}: {}{})",
                    if many { format!(" ({})", b.camera) } else { String::new() },
                    b.for_ms,
                    b.reason,
                    b.detail,
                    if b.throttling { "; the board is throttling" } else { "" }
                );
            }
        }
        for o in &self.blind {
            if !health.blind.iter().any(|b| b.camera == o.camera) {
                match many {
                    true => log::info!("{}: seeing again: frames are fresh", o.camera),
                    false => log::info!("seeing again: frames are fresh"),
                }
            }
        }
        // Only while a camera is blind: its notice is copied (the ages move on each turn).
        self.blind.clear();
        self.blind.extend_from_slice(health.blind);
        let blind_notice = !health.blind.is_empty()
            && (newly_blind || self.blind_noticed.is_none_or(|t| t.elapsed() >= health.stale));
        match (health.blind.is_empty(), blind_notice) {
            (true, _) => self.blind_noticed = None,
            (false, true) => self.blind_noticed = Some(Instant::now()),
            (false, false) => {}
        }
        let health = Health { blind_notice, ..*health };
        for o in &mut self.outputs {
            o.tick(&health);
        }
    }

    /// Clients connected to all outputs.
    pub fn clients(&self) -> usize {
        self.outputs.iter().map(|o| o.clients()).sum()
    }

    /// Whether a stats interval is due.
    pub fn interval_due(&self) -> bool {
        self.last_interval.elapsed() >= self.every
    }

    /// Fills each camera's rates over the interval of `secs` and the age of its newest frame.
    fn camera_rates(&mut self, cameras: &mut [CameraStats], secs: f64) {
        for (i, c) in cameras.iter_mut().enumerate().take(self.newest.len()) {
            let last = self.last_camera_counts[i];
            let rate = |n: u64| if secs > 0.0 { (n as f64 / secs * 1000.0).round() / 1000.0 } else { 0.0 };
            c.fps = Fps {
                capture: rate(c.frames.captured - last.captured),
                processed: rate(c.frames.processed - last.processed),
            };
            c.frame_age_ms = self.newest[i].map(|t| (t.elapsed().as_secs_f64() * 1e4).round() / 10.0);
            c.blind = self.blind.iter().find(|b| b.camera == c.name).cloned();
            c.latency_ms = Stage::ALL.iter().map(|&s| (s.name(), self.camera_window[i].stage(s))).collect();
            self.last_camera_counts[i] = c.frames;
        }
    }

    /// Moves each camera's interval histograms into its run's.
    fn camera_window_done(&mut self) {
        for (t, w) in self.camera_total.iter_mut().zip(&mut self.camera_window) {
            t.merge(w);
            w.reset();
        }
    }

    /// Ends the interval: the outputs get its figures (the cameras' rates and ages filled in),
    /// a log line says the main ones, and the interval's histograms join the run's.
    pub fn interval(&mut self, totals: FrameCounters, cameras: &mut [CameraStats], telemetry: &Telemetry) {
        let secs = self.last_interval.elapsed().as_secs_f64();
        self.camera_rates(cameras, secs);
        let source = &SourceState::combined(cameras);
        let delta = FrameCounters {
            captured: totals.captured - self.last_counts.captured,
            processed: totals.processed - self.last_counts.processed,
            ..FrameCounters::default()
        };
        let fps = delta.processed as f64 / secs;
        let clients = self.clients();
        let iv = Interval {
            uptime_s: self.started.elapsed().as_secs_f64(),
            interval_s: secs,
            totals,
            delta,
            fps,
            clients,
            source,
            cameras,
            latency: &self.window,
            telemetry,
            deadline_ms: self.contract.deadline_ms,
            misses: &self.misses,
            blind: self.blind.first(),
        };
        for o in &mut self.outputs {
            o.interval(&iv);
        }
        let e2e: Percentiles = self.window.stage(Stage::EndToEnd);
        let missed = match self.contract.deadline() {
            Some(_) if self.misses.total() > 0 => {
                let worst = Stage::ALL[..5].iter().max_by_key(|&&s| self.misses.by_stage[s]).copied();
                format!(
                    ", {} past the {} ms deadline (most in {})",
                    self.misses.total(),
                    self.contract.deadline_ms,
                    worst.unwrap_or(Stage::Inference)
                )
            }
            _ => String::new(),
        };
        if delta.processed == 0 {
            // Percentiles of nothing would read as a perfect 0 ms: say what is going on instead.
            let why = match self.blind.first() {
                Some(b) => format!("{}: {}", b.reason, b.detail),
                None => "frames are still fresh".into(),
            };
            log::warn!(
                "no frame processed in the last {secs:.1} s ({why}), dropped {}, clients {clients}",
                totals.dropped
            );
        } else {
            let per_camera = match cameras.len() {
                0 | 1 => String::new(),
                _ => {
                    let each: Vec<String> =
                        cameras.iter().map(|c| format!("{} {:.1}", c.name, c.fps.processed)).collect();
                    format!(" ({})", each.join(", "))
                }
            };
            log::info!(
                "{:.1} fps{per_camera}, end-to-end p50 {:.1} p90 {:.1} p99 {:.1} max {:.1} ms, dropped {}, clients {}{missed}",
                fps,
                e2e.p50,
                e2e.p90,
                e2e.p99,
                e2e.max,
                totals.dropped,
                clients
            );
        }
        self.total.merge(&self.window);
        self.window.reset();
        self.camera_window_done();
        self.misses_total.add(&self.misses);
        self.misses = DeadlineMisses::default();
        self.last_counts = totals;
        self.last_interval = Instant::now();
    }

    /// Ends the run: the outputs get the whole run's figures and `reason`; returns the run's
    /// latency histograms and its length in seconds.
    pub fn finish(
        mut self,
        totals: FrameCounters,
        cameras: &mut [CameraStats],
        telemetry: &Telemetry,
        reason: &str,
    ) -> (LatencyStats, f64) {
        self.total.merge(&self.window);
        self.misses_total.add(&self.misses);
        let seconds = self.started.elapsed().as_secs_f64();
        // The whole run's rates and latencies.
        self.last_camera_counts.iter_mut().for_each(|c| *c = FrameCounters::default());
        self.camera_window_done();
        std::mem::swap(&mut self.camera_window, &mut self.camera_total);
        self.camera_rates(cameras, seconds);
        let source = &SourceState::combined(cameras);
        let clients = self.clients();
        let run = Interval {
            uptime_s: seconds,
            interval_s: seconds,
            totals,
            delta: totals,
            fps: totals.processed as f64 / seconds.max(1e-9),
            clients,
            source,
            cameras,
            latency: &self.total,
            telemetry,
            deadline_ms: self.contract.deadline_ms,
            misses: &self.misses_total,
            blind: self.blind.first(),
        };
        for o in &mut self.outputs {
            o.finish(&run, reason);
        }
        (self.total, seconds)
    }
}
