//! The MQTT output's two threads and the pipeline's side of it.
//!
//! * The pipeline's publisher thread serialises a message into a recycled buffer and hands it
//!   over ([`MqttOutput`]); it never blocks: past [`HANDOFF`] waiting messages it drops the new
//!   one and counts it.
//! * `mqtt` (the sender) appends QoS 1 messages to the on-disk queue and publishes from the
//!   queue, at most [`WINDOW`] unacknowledged at a time; acknowledgements move the queue's
//!   cursor. After a reconnect it starts again from the first unacknowledged record.
//! * `mqtt-net` runs rumqttc's event loop: connects, reconnects with backoff, and maps each
//!   acknowledgement back to its queue record through the order in which publishes left.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::link;
use super::net::net_loop;
use super::queue::DiskQueue;
use super::sender::{SenderThread, WINDOW};
use super::shared::{will, Book, Counters, ToSender, Wire};
use super::{MqttConfig, Topic};
use crate::output::protocol;
use crate::output::{Health, Interval, Output, OutputError, Started};
use crate::report::FrameReport;
use crate::yolo::ClassNames;

/// Messages the pipeline may have handed over and the sender not yet taken.
pub const HANDOFF: usize = 1024;
/// The MQTT output.
pub struct MqttOutput {
    config: MqttConfig,
    device: String,
    hazards: bool,
    cameras: Vec<String>,
    names: Option<ClassNames>,
    to_sender: Option<Sender<ToSender>>,
    /// Messages handed over and not yet taken by the sender.
    pending: Arc<AtomicUsize>,
    spare: Option<Receiver<Vec<u8>>>,
    /// Per camera, when its last detections message was handed over.
    last_detections: Vec<Option<Instant>>,
    detections_every: Option<Duration>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl MqttOutput {
    /// The output for `config` (validated); `hazards`: the hazard layer runs; `cameras`: the
    /// config's camera names (for the status message).
    pub fn new(config: &MqttConfig, hazards: bool, cameras: Vec<String>) -> MqttOutput {
        MqttOutput {
            device: config.device_name(),
            config: config.clone(),
            hazards,
            last_detections: vec![None; cameras.len()],
            cameras,
            names: None,
            to_sender: None,
            pending: Arc::new(AtomicUsize::new(0)),
            spare: None,
            detections_every: (config.detections_hz > 0.0)
                .then(|| Duration::from_secs_f64(1.0 / config.detections_hz)),
            counters: Arc::new(Counters::default()),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        }
    }

    /// The output's counters.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }

    /// Hands a message over: `fill` writes it into a recycled buffer. Never blocks.
    fn hand_over(&mut self, topic: Topic, fill: impl FnOnce(&mut Vec<u8>)) {
        let Some(tx) = &self.to_sender else { return };
        if self.pending.load(Ordering::Relaxed) >= HANDOFF {
            self.counters.handoff_dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut buf =
            self.spare.as_ref().and_then(|s| s.try_recv().ok()).unwrap_or_else(|| Vec::with_capacity(4096));
        buf.clear();
        fill(&mut buf);
        // The socket protocol's line ends in a newline; an MQTT payload is the JSON alone.
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        self.pending.fetch_add(1, Ordering::Relaxed);
        if tx.send(ToSender::Message(topic, buf)).is_err() {
            self.pending.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn stop_threads(&mut self, reason: &str, wait: Duration) {
        if let Some(tx) = self.to_sender.take() {
            let _ = tx.send(ToSender::Stop(reason.to_string()));
        }
        let until = Instant::now() + wait;
        for t in self.threads.drain(..) {
            let left = until.saturating_duration_since(Instant::now());
            if !crate::output::join_within(t, left) {
                log::warn!("MQTT: a thread is stuck in the network; leaving it behind");
            }
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Output for MqttOutput {
    fn open(&mut self) -> Result<(), OutputError> {
        let c = &self.config;
        let queue = DiskQueue::open(&c.queue_dir, c.queue_mib << 20).map_err(OutputError::MqttQueue)?;
        // Counted before the threads start: the network thread's first words may come first.
        self.counters.queued.store(queue.len(), Ordering::Relaxed);
        let client_id =
            if c.client_id.is_empty() { format!("jetdetect-{}", self.device) } else { c.client_id.clone() };
        let will = (c.topic(&self.device, Topic::Status), will(&self.device, &self.cameras));
        let settings =
            link::settings(c, client_id, Some(will)).map_err(|e| OutputError::Mqtt(Box::new(e)))?;
        let (client, connection) = link::connect(&settings, (WINDOW as usize) * 2 + 16);
        let wire = Arc::new(Wire { client, book: Mutex::new(Book::default()) });
        let (tx, rx) = mpsc::channel();
        let (spare_tx, spare_rx) = mpsc::channel();
        self.spare = Some(spare_rx);
        if !queue.is_empty() {
            log::info!(
                "MQTT: {} messages from an earlier run wait in {} and are sent once connected",
                queue.len(),
                c.queue_dir.display()
            );
        }
        let sender = SenderThread {
            wire: Arc::clone(&wire),
            queue,
            queue_dir: c.queue_dir.clone(),
            topics: [Topic::Hazards, Topic::Stats, Topic::Status, Topic::Detections]
                .map(|t| c.topic(&self.device, t)),
            device: self.device.clone(),
            cameras: self.cameras.clone(),
            counters: Arc::clone(&self.counters),
            pending: Arc::clone(&self.pending),
            spare: spare_tx,
            stop: Arc::clone(&self.stop),
        };
        let net_tx = tx.clone();
        let scope = format!("{}/{}", c.topic_prefix, self.device);
        let (stop, counters) = (Arc::clone(&self.stop), Arc::clone(&self.counters));
        let net = std::thread::Builder::new()
            .name("mqtt-net".into())
            .spawn(move || net_loop(connection, &wire, &settings, &net_tx, &stop, &counters, &scope))
            .map_err(|source| OutputError::Thread { context: "cannot start the MQTT thread", source })?;
        let send = std::thread::Builder::new()
            .name("mqtt".into())
            .spawn(move || sender.run(&rx))
            .map_err(|source| OutputError::Thread { context: "cannot start the MQTT thread", source })?;
        self.threads = vec![send, net];
        self.to_sender = Some(tx);
        log::info!(
            "MQTT: device {:?} to {} (MQTT {}): {}/{}/{{hazards,stats,status{}}}; queue {} (at most {} MiB)",
            self.device,
            c.url,
            match c.protocol {
                super::Protocol::V311 => "3.1.1",
                super::Protocol::V5 => "5",
            },
            c.topic_prefix,
            self.device,
            if self.detections_every.is_some() { ",detections" } else { "" },
            c.queue_dir.display(),
            c.queue_mib
        );
        Ok(())
    }

    fn ready(&mut self, started: &Started) {
        self.names = Some(started.names.clone());
    }

    fn frame(&mut self, report: &FrameReport, dropped: u64, now: Instant) {
        let Some(names) = self.names.take() else { return };
        // As on the socket: a frame's hazards message when the hazard layer has zones.
        if self.hazards && !report.hazards.zones.is_empty() {
            self.hand_over(Topic::Hazards, |b| protocol::write_hazards(b, report, &names, now));
        }
        if let Some(every) = self.detections_every {
            let i = report.camera.index;
            if i >= self.last_detections.len() {
                self.last_detections.resize(i + 1, None);
            }
            if self.last_detections[i].is_none_or(|t| now.duration_since(t) >= every) {
                self.last_detections[i] = Some(now);
                self.hand_over(Topic::Detections, |b| {
                    protocol::write_detections(b, report, &names, now, dropped)
                });
            }
        }
        self.names = Some(names);
    }

    fn tick(&mut self, health: &Health<'_>) {
        if !health.blind_notice || !self.hazards {
            return;
        }
        let now = Instant::now();
        for b in health.blind {
            self.hand_over(Topic::Hazards, |buf| protocol::write_blind(buf, b, now));
        }
    }

    fn interval(&mut self, interval: &Interval<'_>) {
        self.hand_over(Topic::Stats, |b| protocol::write_stats(b, interval));
    }

    fn finish(&mut self, run: &Interval<'_>, reason: &str) {
        self.hand_over(Topic::Stats, |b| protocol::write_stats(b, run));
        self.stop_threads(reason, Duration::from_secs(4));
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        log::info!(
            "MQTT: {} messages acknowledged, {} left queued on disk for the next run, {} sent again after reconnects, \
             {} dropped (queue full), {} not written to the queue (disk; {} of them lost, the rest sent directly), \
             {} dropped (sender behind), {} refused by the broker; {} detections messages (QoS 0), {} not sent while offline",
            load(&c.acked),
            load(&c.queued),
            load(&c.resent),
            load(&c.queue_dropped),
            load(&c.write_errors),
            load(&c.unqueued_lost),
            load(&c.handoff_dropped),
            load(&c.refused),
            load(&c.detections),
            load(&c.detections_dropped),
        );
    }
}

impl Drop for MqttOutput {
    fn drop(&mut self) {
        self.stop_threads("stopped", Duration::from_millis(500));
    }
}
