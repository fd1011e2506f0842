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

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::link::{self, Client, Net, Settings};
use super::queue::DiskQueue;
use super::{MqttConfig, Topic};
use crate::output::protocol::{self, SCHEMA};
use crate::output::{Health, Interval, Output, OutputError, Started};
use crate::report::FrameReport;
use crate::yolo::ClassNames;

/// Messages the pipeline may have handed over and the sender not yet taken.
pub const HANDOFF: usize = 1024;
/// QoS 1 publishes in flight (sent, not yet acknowledged).
pub const WINDOW: u64 = 64;

/// The wait before the first reconnection attempt; it doubles with each failure, up to
/// [`LAST_RETRY`] (a broker back after an outage is found within 5 s).
const FIRST_RETRY: Duration = Duration::from_millis(250);
/// A connection that lasts this long resets the backoff.
const STABLE: Duration = Duration::from_secs(10);
/// The longest wait between reconnection attempts.
const LAST_RETRY: Duration = Duration::from_secs(5);

/// What a publish that left was (to map its acknowledgement back).
#[derive(Clone, Copy, Debug)]
enum Tag {
    /// Queue record `0`.
    Queued(u64),
    /// A status message (`true`: the final offline one).
    Status(bool),
    /// A QoS 0 message: no acknowledgement comes.
    Unacked,
    /// A QoS 1 message sent without its queue record (the queue could not be written).
    Direct,
}

/// Which session publishes belong to, and the order they left in.
#[derive(Default)]
struct Book {
    /// The current session (0: not connected).
    session: u64,
    /// Tags of the publishes in the client's queue, oldest first.
    fifo: VecDeque<Tag>,
    /// A publish held back by a packet id collision.
    collided: Option<Tag>,
    /// Sent QoS 1 publishes by packet id.
    inflight: HashMap<u16, Tag>,
}

/// The client and its book, shared by the sender and the event loop.
struct Wire {
    client: Client,
    book: Mutex<Book>,
}

impl Wire {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes if `session` is still the current one; false otherwise or when the client's
    /// queue is full.
    fn publish(&self, session: u64, tag: Tag, topic: &str, retain: bool, payload: Vec<u8>) -> bool {
        let mut book = self.book();
        if book.session != session || session == 0 {
            return false;
        }
        book.fifo.push_back(tag);
        let qos1 = !matches!(tag, Tag::Unacked);
        if self.client.try_publish(topic, qos1, retain, payload) {
            true
        } else {
            book.fifo.pop_back();
            false
        }
    }
}

/// What reaches the sender thread.
enum ToSender {
    /// A message for `topic` (its buffer goes back to the pipeline after use).
    Message(Topic, Vec<u8>),
    /// Connected: a new session.
    Connected(u64),
    /// The connection is gone.
    Disconnected,
    /// Queue record acknowledged; `Some`: the broker refused it (MQTT 5), and why.
    Acked(u64, Option<String>),
    /// The final offline status was acknowledged.
    OfflineAcked,
    /// The daemon stops: publish what is queued (for at most the grace period), say offline.
    Stop(String),
}

/// The output's figures (logged at the end, and read by tests).
#[derive(Default, Debug)]
pub struct Counters {
    /// Queue records the broker acknowledged.
    pub acked: AtomicU64,
    /// Queue records published again after a reconnect (the broker may see them twice).
    pub resent: AtomicU64,
    /// Messages the pipeline dropped because the sender was [`HANDOFF`] behind.
    pub handoff_dropped: AtomicU64,
    /// QoS 1 messages that could not be written to the queue (disk full, I/O error).
    pub write_errors: AtomicU64,
    /// Of those, the ones lost: the broker was not connected either (the others went straight
    /// to it).
    pub unqueued_lost: AtomicU64,
    /// Queue records dropped unsent because the queue was full.
    pub queue_dropped: AtomicU64,
    /// Messages the broker refused (MQTT 5 reason codes, e.g. an ACL).
    pub refused: AtomicU64,
    /// Detections messages published (QoS 0).
    pub detections: AtomicU64,
    /// Detections messages not published because the broker was not connected.
    pub detections_dropped: AtomicU64,
    /// Records waiting in the queue now.
    pub queued: AtomicU64,
}

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

/// The `status` message.
fn status(device: &str, state: &str, reason: &str, cameras: &[String]) -> Vec<u8> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    serde_json::to_vec(&serde_json::json!({
        "type": "status",
        "schema": SCHEMA,
        "device": device,
        "state": state,
        "reason": reason,
        "version": env!("CARGO_PKG_VERSION"),
        "cameras": cameras,
        "wall_ns": now.as_nanos() as u64,
    }))
    .unwrap_or_default()
}

impl Output for MqttOutput {
    fn open(&mut self) -> Result<(), OutputError> {
        let c = &self.config;
        let mqtt_err = OutputError::Mqtt;
        let queue = DiskQueue::open(&c.queue_dir, c.queue_mib << 20).map_err(|e| {
            mqtt_err(format!(
                "{e}: give [output.mqtt] queue_dir a folder the service may write (default {})",
                super::DEFAULT_QUEUE_DIR
            ))
        })?;
        let client_id =
            if c.client_id.is_empty() { format!("jetdetect-{}", self.device) } else { c.client_id.clone() };
        let will = (
            c.topic(&self.device, Topic::Status),
            status(&self.device, "offline", "connection lost", &self.cameras),
        );
        let settings = link::settings(c, client_id, Some(will)).map_err(mqtt_err)?;
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

/// The sender thread's state.
struct SenderThread {
    wire: Arc<Wire>,
    queue: DiskQueue,
    queue_dir: std::path::PathBuf,
    /// Full topic per [`Topic`], in the order Hazards, Stats, Status, Detections.
    topics: [String; 4],
    device: String,
    cameras: Vec<String>,
    counters: Arc<Counters>,
    pending: Arc<AtomicUsize>,
    spare: Sender<Vec<u8>>,
    stop: Arc<AtomicBool>,
}

impl SenderThread {
    fn topic(&self, t: Topic) -> &str {
        &self.topics[t.kind() as usize - 1]
    }

    fn run(mut self, rx: &Receiver<ToSender>) {
        let mut session = 0u64;
        let mut next = self.queue.first();
        let mut acked = BTreeSet::new();
        let mut detections: Option<Vec<u8>> = None;
        let mut stopping: Option<(String, Instant)> = None;
        let mut offline_sent = false;
        let mut last_sync = Instant::now();
        let mut last_write_error: Option<Instant> = None;
        let mut last_refusal: Option<Instant> = None;
        let mut buf = Vec::new();
        self.counters.queued.store(self.queue.len(), Ordering::Relaxed);
        loop {
            let wait =
                if stopping.is_some() { Duration::from_millis(20) } else { Duration::from_millis(500) };
            let first = match rx.recv_timeout(wait) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => Some(ToSender::Stop("stopped".into())),
            };
            for msg in first.into_iter().chain(std::iter::from_fn(|| rx.try_recv().ok())) {
                match msg {
                    ToSender::Message(topic, data) => {
                        self.pending.fetch_sub(1, Ordering::Relaxed);
                        match topic {
                            Topic::Detections if session != 0 => {
                                if let Some(old) = detections.replace(data) {
                                    self.counters.detections_dropped.fetch_add(1, Ordering::Relaxed);
                                    let _ = self.spare.send(old);
                                }
                                continue;
                            }
                            Topic::Detections => {
                                self.counters.detections_dropped.fetch_add(1, Ordering::Relaxed);
                            }
                            _ => {
                                if let Err(e) = self.queue.push(topic.kind(), &data) {
                                    // Without its record the message cannot wait for the broker:
                                    // it goes straight out while connected, and is lost while not.
                                    self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
                                    let name = self.topic(topic).to_string();
                                    if !self.wire.publish(session, Tag::Direct, &name, false, data.clone()) {
                                        self.counters.unqueued_lost.fetch_add(1, Ordering::Relaxed);
                                    }
                                    if last_write_error.is_none_or(|t| t.elapsed() >= Duration::from_secs(60))
                                    {
                                        log::error!(
                                            "MQTT: cannot write to the queue in {}: {e}; until it can, messages go straight to the \
                                             broker while connected and are lost while not ({} lost so far; logged at most every \
                                             minute; free space, or give [output.mqtt] queue_dir another disk)",
                                            self.queue_dir.display(),
                                            self.counters.unqueued_lost.load(Ordering::Relaxed)
                                        );
                                        last_write_error = Some(Instant::now());
                                    }
                                }
                            }
                        }
                        let _ = self.spare.send(data);
                    }
                    ToSender::Connected(s) => {
                        session = s;
                        let unacked_sent = next.saturating_sub(self.queue.first());
                        if unacked_sent > 0 {
                            self.counters.resent.fetch_add(unacked_sent, Ordering::Relaxed);
                        }
                        next = self.queue.first();
                        acked.clear();
                        let online = status(&self.device, "online", "", &self.cameras);
                        let topic = self.topic(Topic::Status).to_string();
                        self.wire.publish(session, Tag::Status(false), &topic, true, online);
                    }
                    ToSender::Disconnected => session = 0,
                    ToSender::Acked(seq, refused) => {
                        if let Some(why) = refused {
                            self.counters.refused.fetch_add(1, Ordering::Relaxed);
                            if last_refusal.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                                log::error!(
                                    "MQTT: the broker refused a message: {why} ({} so far; logged at most every minute): \
                                     check the broker's ACL for {}",
                                    self.counters.refused.load(Ordering::Relaxed),
                                    self.topic(Topic::Hazards).rsplit_once('/').map_or("", |p| p.0)
                                );
                                last_refusal = Some(Instant::now());
                            }
                        } else {
                            self.counters.acked.fetch_add(1, Ordering::Relaxed);
                        }
                        if seq >= self.queue.first() {
                            acked.insert(seq);
                        }
                        let mut first = self.queue.first();
                        while acked.remove(&first) {
                            first += 1;
                        }
                        self.queue.ack_until(first);
                        acked.retain(|&s| s >= first);
                    }
                    ToSender::OfflineAcked => {
                        let _ = self.queue.sync();
                        self.stop.store(true, Ordering::Relaxed);
                        self.wire.client.disconnect();
                        self.counters.queued.store(self.queue.len(), Ordering::Relaxed);
                        return;
                    }
                    ToSender::Stop(reason) => {
                        if stopping.is_none() {
                            stopping = Some((reason, Instant::now()));
                        }
                    }
                }
            }
            let before = self.queue.dropped();
            if before > self.counters.queue_dropped.load(Ordering::Relaxed) {
                let newly = before - self.counters.queue_dropped.swap(before, Ordering::Relaxed);
                log::warn!(
                    "MQTT: the queue is full ({} MiB): {newly} oldest messages dropped unsent ({} in all)",
                    self.queue.bytes() >> 20,
                    before
                );
            }
            if next < self.queue.first() {
                next = self.queue.first();
            }
            if session != 0 {
                if let Some(d) = detections.take() {
                    let topic = self.topic(Topic::Detections).to_string();
                    if self.wire.publish(session, Tag::Unacked, &topic, false, d.clone()) {
                        self.counters.detections.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = self.spare.send(d);
                }
                while next < self.queue.end() && next - self.queue.first() < WINDOW {
                    let kind = match self.queue.read(next, &mut buf) {
                        Ok(Some(k)) => k,
                        Ok(None) => break,
                        Err(e) => {
                            log::error!("MQTT: cannot read the queue: {e}; skipping record {next}");
                            self.queue.ack_until(next + 1);
                            next += 1;
                            continue;
                        }
                    };
                    let topic = Topic::from_kind(kind).unwrap_or(Topic::Hazards);
                    let topic = self.topic(topic).to_string();
                    if !self.wire.publish(session, Tag::Queued(next), &topic, false, buf.clone()) {
                        break;
                    }
                    next += 1;
                }
            }
            self.counters.queued.store(self.queue.len(), Ordering::Relaxed);
            if last_sync.elapsed() >= Duration::from_secs(1) {
                if let Err(e) = self.queue.sync() {
                    log::warn!("MQTT: cannot flush the queue to disk: {e}");
                }
                last_sync = Instant::now();
            }
            if let Some((reason, since)) = &stopping {
                // Give the broker a moment to take what is queued; what it does not stays on
                // disk for the next run.
                let drained = self.queue.is_empty() || session == 0;
                if !offline_sent && (drained || since.elapsed() >= Duration::from_secs(2)) {
                    let topic = self.topic(Topic::Status).to_string();
                    let offline = status(&self.device, "offline", reason, &self.cameras);
                    offline_sent = self.wire.publish(session, Tag::Status(true), &topic, true, offline);
                    if !offline_sent {
                        break;
                    }
                }
                if since.elapsed() >= Duration::from_secs(3) {
                    break;
                }
            }
        }
        let _ = self.queue.sync();
        self.stop.store(true, Ordering::Relaxed);
        self.wire.client.disconnect();
        self.counters.queued.store(self.queue.len(), Ordering::Relaxed);
    }
}

/// The event loop's thread: connects, reconnects with backoff, and reports to the sender.
fn net_loop(
    mut connection: link::Connection,
    wire: &Wire,
    settings: &Settings,
    tx: &Sender<ToSender>,
    stop: &AtomicBool,
    counters: &Counters,
    scope: &str,
) {
    let mut sessions = 0u64;
    let mut backoff = FIRST_RETRY;
    let mut last_failure: Option<(String, Instant)> = None;
    let mut down_since: Option<Instant> = None;
    let mut connected_at: Option<Instant> = None;
    // Connections the broker dropped within seconds of accepting them, in a row.
    let mut quick_drops = 0u32;
    let mut last_quick_warning: Option<Instant> = None;
    loop {
        match connection.next(settings) {
            Net::Connected => {
                sessions += 1;
                {
                    let mut book = wire.book();
                    *book = Book { session: sessions, ..Book::default() };
                }
                connected_at = Some(Instant::now());
                match down_since.take() {
                    Some(t) => log::info!(
                        "MQTT: connected to {} again after {:.1} s; {} messages queued meanwhile are being sent",
                        settings.url_text,
                        t.elapsed().as_secs_f64(),
                        counters.queued.load(Ordering::Relaxed)
                    ),
                    None => log::info!("MQTT: connected to {}", settings.url_text),
                }
                if quick_drops == 0 {
                    last_failure = None;
                }
                let _ = tx.send(ToSender::Connected(sessions));
            }
            Net::Sent(pkid) => {
                let mut book = wire.book();
                let tag = book.collided.take().or_else(|| book.fifo.pop_front());
                if let (Some(tag), true) = (tag, pkid != 0) {
                    book.inflight.insert(pkid, tag);
                }
            }
            Net::AwaitAck(_) => {
                let mut book = wire.book();
                book.collided = book.fifo.pop_front();
            }
            Net::Acked { pkid, refused } => {
                let tag = wire.book().inflight.remove(&pkid);
                let _ = match tag {
                    Some(Tag::Queued(seq)) => tx.send(ToSender::Acked(seq, refused)),
                    Some(Tag::Status(true)) => tx.send(ToSender::OfflineAcked),
                    _ => Ok(()),
                };
            }
            Net::Failed(why) => {
                {
                    let mut book = wire.book();
                    // Requests still in the client's queue belong to the lost session.
                    connection.clean();
                    *book = Book::default();
                }
                let _ = tx.send(ToSender::Disconnected);
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                down_since.get_or_insert_with(Instant::now);
                // A connection that lasted resets the backoff; one the broker drops at once does
                // not, so a broker refusing what this device sends is not hammered.
                match connected_at.take().map(|t| t.elapsed()) {
                    Some(up) if up >= STABLE => {
                        backoff = FIRST_RETRY;
                        quick_drops = 0;
                    }
                    Some(_) => quick_drops += 1,
                    None => {}
                }
                let repeat = last_failure
                    .as_ref()
                    .is_some_and(|(w, t)| *w == why && t.elapsed() < Duration::from_secs(60));
                if quick_drops >= 3 {
                    if last_quick_warning.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                        log::error!(
                            "MQTT: the broker at {} closed the connection {quick_drops} times in a row within seconds of \
                             accepting it: it refuses what this device sends; check that the broker's ACL lets {} publish \
                             under {scope}/ (and the broker's log); retrying every {} s at most",
                            settings.url_text,
                            match &settings.login {
                                Some((u, _)) => format!("user {u:?}"),
                                None => "anonymous clients".into(),
                            },
                            LAST_RETRY.as_secs()
                        );
                        last_quick_warning = Some(Instant::now());
                    }
                } else if !repeat && quick_drops == 0 {
                    log::warn!(
                        "MQTT: {why}; retrying with backoff (up to {} s); {} messages queued on disk",
                        LAST_RETRY.as_secs(),
                        counters.queued.load(Ordering::Relaxed)
                    );
                    last_failure = Some((why, Instant::now()));
                }
                // ±25 % jitter, so that a fleet does not come back to a restarted broker in step.
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .subsec_nanos();
                let jitter = 0.75 + 0.5 * (nanos % 1000) as f64 / 1000.0;
                let until = Instant::now() + backoff.mul_f64(jitter);
                while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                backoff = (backoff * 2).min(LAST_RETRY);
            }
            Net::Closed => return,
            Net::Message { .. } | Net::Other => {}
        }
    }
}
