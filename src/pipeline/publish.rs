//! The publisher: hands every frame's report and every interval's figures to the outputs, and
//! keeps the per-interval state (latency histograms, counters, timers) that they share.
//!
//! An output (the socket, the Prometheus endpoint, systemd's notify socket, `--echo`; next:
//! MAVLink, ROS 2, MQTT) implements [`Output`] in `src/output/` and is built from its config
//! section by `output::open`. The pipeline knows outputs only through this trait; an output
//! never reaches back into the stages.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::power::telemetry::Telemetry;
use crate::stats::{DeadlineMisses, LatencyConfig, LatencyStats, Percentiles, Stage};
use crate::yolo::ClassNames;

use super::report::{Blind, FrameCounters, FrameReport, SourceState};

/// What the pipeline runs, once it is ready (the socket's `hello` message says it).
#[derive(Clone, Debug)]
pub struct Started {
    /// The source, as opened.
    pub source: String,
    /// The engine and model.
    pub engine: String,
    /// Runtime library versions (`onnxruntime`, `tensorrt`, `cuda`), when the engine loads any.
    pub runtime: BTreeMap<String, String>,
    /// Model input `[width, height]`.
    pub input: [u32; 2],
    /// The class names.
    pub names: ClassNames,
}

/// The figures of one stats interval (or, at the end, of the whole run).
pub struct Interval<'a> {
    /// Seconds since the pipeline was ready.
    pub uptime_s: f64,
    /// Seconds the interval covers.
    pub interval_s: f64,
    /// Counters since start.
    pub totals: FrameCounters,
    /// Counters over the interval.
    pub delta: FrameCounters,
    /// Frames processed per second over the interval.
    pub fps: f64,
    /// Clients connected to all outputs.
    pub clients: usize,
    /// The source's health.
    pub source: &'a SourceState,
    /// Latency histograms over the interval (the whole run at the end).
    pub latency: &'a LatencyStats,
    /// The board's latest telemetry sample.
    pub telemetry: &'a Telemetry,
    /// `[latency] deadline_ms` (0: none).
    pub deadline_ms: f64,
    /// Deadline misses over the interval (the whole run at the end), per stage.
    pub misses: &'a DeadlineMisses,
    /// Whether the daemon is blind now, and why.
    pub blind: Option<&'a Blind>,
}

/// The pipeline's liveness, each turn of the publisher loop.
#[derive(Clone, Copy, Debug)]
pub struct Health<'a> {
    /// Time since a stage last showed progress (a frame, or a camera retry).
    pub since_progress: Duration,
    /// A stop was asked for (signal, frame count, end of source).
    pub stopping: bool,
    /// No fresh frame within `[latency] stale_ms`: why.
    pub blind: Option<&'a Blind>,
    /// `[latency] stale_ms`.
    pub stale: Duration,
    /// Set by the publisher: while blind, a notice is due (when blindness starts, then every
    /// `stale`). Outputs that publish blind notices send one exactly then.
    pub blind_notice: bool,
}

/// Something published frames and statistics go to. Every method runs on the publisher
/// thread between frames and must not block: a slow consumer is the output's to drop.
pub trait Output: Send {
    /// Claims what the output needs (binds a socket, a port), after the clocks, the source and
    /// the model, before the pipeline's threads start: a client that can connect finds the
    /// daemon set up. An error stops the start.
    fn open(&mut self) -> Result<()> {
        Ok(())
    }
    /// The pipeline is ready: model loaded, warmed up, threads started.
    fn ready(&mut self, _started: &Started) {}
    /// One published frame, `dropped` frames displaced so far, at `now`.
    fn frame(&mut self, _report: &FrameReport, _dropped: u64, _now: Instant) {}
    /// Every turn of the publisher loop (about every 20 ms).
    fn tick(&mut self, _health: &Health<'_>) {}
    /// Every stats interval.
    fn interval(&mut self, _interval: &Interval<'_>) {}
    /// The run ended for `reason`; `run` holds the whole run's figures.
    fn finish(&mut self, _run: &Interval<'_>, _reason: &str) {}
    /// Clients connected to this output now (for the stats).
    fn clients(&self) -> usize {
        0
    }
}

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
    newest: Option<Instant>,
    blind: Option<Blind>,
    blind_noticed: Option<Instant>,
}

impl Publisher {
    /// Publishes to `outputs`, with a stats interval of `every`, under the latency `contract`.
    pub fn new(outputs: Vec<Box<dyn Output>>, every: Duration, contract: LatencyConfig) -> Publisher {
        let now = Instant::now();
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
            newest: None,
            blind: None,
            blind_noticed: None,
        }
    }

    /// How long no fresh frame has come, when that is longer than `[latency] stale_ms`: the
    /// age of the newest published frame, or the time since the pipeline was ready.
    pub fn stale_for(&self) -> Option<Duration> {
        let age = self.newest.unwrap_or(self.started).elapsed();
        (age > self.contract.stale()).then_some(age)
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
        if let Some(deadline) = self.contract.deadline() {
            self.misses.record(&us, deadline.as_micros() as u64);
        }
        self.newest = Some(self.newest.map_or(report.captured, |n| n.max(report.captured)));
    }

    /// One turn of the loop: `health.blind` says whether the daemon is blind (the pipeline
    /// works out why when [`Publisher::stale_for`] says so); the change is logged once.
    pub fn tick(&mut self, health: &Health<'_>) {
        match (&self.blind, health.blind) {
            (None, Some(b)) => log::warn!(
                "blind: no fresh frame for {:.0} ms ({}: {}{})",
                b.for_ms,
                b.reason,
                b.detail,
                if b.throttling { "; the board is throttling" } else { "" }
            ),
            (Some(_), None) => log::info!("seeing again: frames are fresh"),
            _ => {}
        }
        self.blind = health.blind.cloned();
        let blind_notice =
            health.blind.is_some() && self.blind_noticed.is_none_or(|t| t.elapsed() >= health.stale);
        match (health.blind, blind_notice) {
            (None, _) => self.blind_noticed = None,
            (Some(_), true) => self.blind_noticed = Some(Instant::now()),
            (Some(_), false) => {}
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

    /// Ends the interval: the outputs get its figures, a log line says the main ones, and the
    /// interval's histograms join the run's.
    pub fn interval(&mut self, totals: FrameCounters, source: &SourceState, telemetry: &Telemetry) {
        let secs = self.last_interval.elapsed().as_secs_f64();
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
            latency: &self.window,
            telemetry,
            deadline_ms: self.contract.deadline_ms,
            misses: &self.misses,
            blind: self.blind.as_ref(),
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
            let why = match &self.blind {
                Some(b) => format!("{}: {}", b.reason, b.detail),
                None => "frames are still fresh".into(),
            };
            log::warn!(
                "no frame processed in the last {secs:.1} s ({why}), dropped {}, clients {clients}",
                totals.dropped
            );
        } else {
            log::info!(
                "{:.1} fps, end-to-end p50 {:.1} p90 {:.1} p99 {:.1} max {:.1} ms, dropped {}, clients {}{missed}",
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
        source: &SourceState,
        telemetry: &Telemetry,
        reason: &str,
    ) -> (LatencyStats, f64) {
        self.total.merge(&self.window);
        self.misses_total.add(&self.misses);
        let seconds = self.started.elapsed().as_secs_f64();
        let clients = self.clients();
        let run = Interval {
            uptime_s: seconds,
            interval_s: seconds,
            totals,
            delta: totals,
            fps: totals.processed as f64 / seconds.max(1e-9),
            clients,
            source,
            latency: &self.total,
            telemetry,
            deadline_ms: self.contract.deadline_ms,
            misses: &self.misses_total,
            blind: self.blind.as_ref(),
        };
        for o in &mut self.outputs {
            o.finish(&run, reason);
        }
        (self.total, seconds)
    }
}
