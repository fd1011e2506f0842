//! The `mqtt` thread (the sender): QoS 1 messages go to the on-disk queue, then out of it at
//! most [`WINDOW`] unacknowledged at a time; the newest detections message goes out at QoS 0
//! while connected. Each turn it handles what arrived (one handler per [`ToSender`] event),
//! publishes what is due, flushes the queue now and then, and, when stopping, says offline.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::queue::DiskQueue;
use super::shared::{status, Counters, Tag, ToSender, Wire};
use super::Topic;

/// QoS 1 publishes in flight (sent, not yet acknowledged).
pub const WINDOW: u64 = 64;

/// What the sender owns for the whole run.
pub(super) struct SenderThread {
    pub(super) wire: Arc<Wire>,
    pub(super) queue: DiskQueue,
    pub(super) queue_dir: std::path::PathBuf,
    /// Full topic per [`Topic`], in the order Hazards, Stats, Status, Detections.
    pub(super) topics: [String; 4],
    pub(super) device: String,
    pub(super) cameras: Vec<String>,
    pub(super) counters: Arc<Counters>,
    pub(super) pending: Arc<AtomicUsize>,
    pub(super) spare: Sender<Vec<u8>>,
    pub(super) stop: Arc<AtomicBool>,
}

/// Where the sender stands between two turns.
struct State {
    /// The broker session publishes go to; `None` while not connected.
    session: Option<u64>,
    /// The next queue record to publish.
    next: u64,
    /// Records acknowledged ahead of the queue's first, not yet folded into it.
    acked: BTreeSet<u64>,
    /// The newest detections message not yet sent (QoS 0: an older one is worth nothing).
    detections: Option<Vec<u8>>,
    /// Stopping since when, and why.
    stopping: Option<(String, Instant)>,
    /// The final offline status was handed to the client.
    offline_sent: bool,
    last_sync: Instant,
    last_write_error: Option<Instant>,
    last_refusal: Option<Instant>,
    /// A queue record read back for publishing.
    buf: Vec<u8>,
}

/// Whether the sender goes on after an event or a turn.
#[derive(PartialEq)]
enum Flow {
    Go,
    Done,
}

impl SenderThread {
    fn topic(&self, t: Topic) -> &str {
        &self.topics[t.kind() as usize - 1]
    }

    /// Runs until the final offline status is acknowledged, or the stop's grace period ends.
    pub(super) fn run(mut self, rx: &Receiver<ToSender>) {
        let mut st = State {
            session: None,
            next: self.queue.first(),
            acked: BTreeSet::new(),
            detections: None,
            stopping: None,
            offline_sent: false,
            last_sync: Instant::now(),
            last_write_error: None,
            last_refusal: None,
            buf: Vec::new(),
        };
        self.counters.queued.store(self.queue.len(), Ordering::Relaxed);
        loop {
            let wait =
                if st.stopping.is_some() { Duration::from_millis(20) } else { Duration::from_millis(500) };
            let first = match rx.recv_timeout(wait) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => Some(ToSender::Stop("stopped".into())),
            };
            for event in first.into_iter().chain(std::iter::from_fn(|| rx.try_recv().ok())) {
                if self.handle(&mut st, event) == Flow::Done {
                    return self.close();
                }
            }
            self.note_queue_drops();
            st.next = st.next.max(self.queue.first());
            self.publish_due(&mut st);
            self.counters.queued.store(self.queue.len(), Ordering::Relaxed);
            self.sync_now_and_then(&mut st);
            if self.step_stopping(&mut st) == Flow::Done {
                break;
            }
        }
        self.close();
    }

    /// One event: the handler for its kind.
    fn handle(&mut self, st: &mut State, event: ToSender) -> Flow {
        match event {
            ToSender::Message(topic, data) => self.on_message(st, topic, data),
            ToSender::Connected(session) => self.on_connected(st, session),
            ToSender::Disconnected => st.session = None,
            ToSender::Acked(seq, refused) => self.on_acked(st, seq, refused),
            ToSender::OfflineAcked => return Flow::Done,
            ToSender::Stop(reason) => {
                st.stopping.get_or_insert((reason, Instant::now()));
            }
        }
        Flow::Go
    }

    /// A message from the pipeline: detections wait as the newest (dropped while offline);
    /// everything else goes to the queue, or straight out when the queue cannot be written.
    fn on_message(&mut self, st: &mut State, topic: Topic, data: Vec<u8>) {
        self.pending.fetch_sub(1, Ordering::Relaxed);
        match topic {
            Topic::Detections if st.session.is_some() => {
                if let Some(old) = st.detections.replace(data) {
                    self.counters.detections_dropped.fetch_add(1, Ordering::Relaxed);
                    let _ = self.spare.send(old);
                }
                return;
            }
            Topic::Detections => {
                self.counters.detections_dropped.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                if let Err(e) = self.queue.push(topic.kind(), &data) {
                    self.unqueued(st, topic, &data, &e);
                }
            }
        }
        let _ = self.spare.send(data);
    }

    /// A message whose queue record could not be written: it cannot wait for the broker, so it
    /// goes straight out while connected and is lost while not.
    fn unqueued(&mut self, st: &mut State, topic: Topic, data: &[u8], e: &std::io::Error) {
        self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
        let name = self.topic(topic).to_string();
        if !self.wire.publish(st.session, Tag::Direct, &name, false, data.to_vec()) {
            self.counters.unqueued_lost.fetch_add(1, Ordering::Relaxed);
        }
        if st.last_write_error.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
            log::error!(
                "MQTT: cannot write to the queue in {}: {e}; until it can, messages go straight to the \
                 broker while connected and are lost while not ({} lost so far; logged at most every \
                 minute; free space, or give [output.mqtt] queue_dir another disk)",
                self.queue_dir.display(),
                self.counters.unqueued_lost.load(Ordering::Relaxed)
            );
            st.last_write_error = Some(Instant::now());
        }
    }

    /// Connected: the queue is sent again from its first unacknowledged record, after the
    /// retained `online` status.
    fn on_connected(&mut self, st: &mut State, session: u64) {
        st.session = Some(session);
        let unacked_sent = st.next.saturating_sub(self.queue.first());
        if unacked_sent > 0 {
            self.counters.resent.fetch_add(unacked_sent, Ordering::Relaxed);
        }
        st.next = self.queue.first();
        st.acked.clear();
        let online = status(&self.device, "online", "", &self.cameras);
        let topic = self.topic(Topic::Status).to_string();
        self.wire.publish(st.session, Tag::Status(false), &topic, true, online);
    }

    /// A queue record acknowledged (or refused, MQTT 5): the queue's first moves past every
    /// record acknowledged in a row.
    fn on_acked(&mut self, st: &mut State, seq: u64, refused: Option<String>) {
        if let Some(why) = refused {
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
            if st.last_refusal.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                log::error!(
                    "MQTT: the broker refused a message: {why} ({} so far; logged at most every minute): \
                     check the broker's ACL for {}",
                    self.counters.refused.load(Ordering::Relaxed),
                    self.topic(Topic::Hazards).rsplit_once('/').map_or("", |p| p.0)
                );
                st.last_refusal = Some(Instant::now());
            }
        } else {
            self.counters.acked.fetch_add(1, Ordering::Relaxed);
        }
        if seq >= self.queue.first() {
            st.acked.insert(seq);
        }
        let mut first = self.queue.first();
        while st.acked.remove(&first) {
            first += 1;
        }
        self.queue.ack_until(first);
        st.acked.retain(|&s| s >= first);
    }

    /// Logs records the full queue dropped since the last turn.
    fn note_queue_drops(&mut self) {
        let dropped = self.queue.dropped();
        if dropped > self.counters.queue_dropped.load(Ordering::Relaxed) {
            let newly = dropped - self.counters.queue_dropped.swap(dropped, Ordering::Relaxed);
            log::warn!(
                "MQTT: the queue is full ({} MiB): {newly} oldest messages dropped unsent ({} in all)",
                self.queue.bytes() >> 20,
                dropped
            );
        }
    }

    /// While connected: the waiting detections message, then queue records up to the window.
    fn publish_due(&mut self, st: &mut State) {
        if st.session.is_none() {
            return;
        }
        if let Some(d) = st.detections.take() {
            let topic = self.topic(Topic::Detections).to_string();
            if self.wire.publish(st.session, Tag::Unacked, &topic, false, d.clone()) {
                self.counters.detections.fetch_add(1, Ordering::Relaxed);
            }
            let _ = self.spare.send(d);
        }
        while st.next < self.queue.end() && st.next - self.queue.first() < WINDOW {
            let kind = match self.queue.read(st.next, &mut st.buf) {
                Ok(Some(k)) => k,
                Ok(None) => break,
                Err(e) => {
                    log::error!("MQTT: cannot read the queue: {e}; skipping record {}", st.next);
                    self.queue.ack_until(st.next + 1);
                    st.next += 1;
                    continue;
                }
            };
            let topic = Topic::from_kind(kind).unwrap_or(Topic::Hazards);
            let topic = self.topic(topic).to_string();
            if !self.wire.publish(st.session, Tag::Queued(st.next), &topic, false, st.buf.clone()) {
                break;
            }
            st.next += 1;
        }
    }

    /// Flushes the queue to disk at most once a second.
    fn sync_now_and_then(&mut self, st: &mut State) {
        if st.last_sync.elapsed() >= Duration::from_secs(1) {
            if let Err(e) = self.queue.sync() {
                log::warn!("MQTT: cannot flush the queue to disk: {e}");
            }
            st.last_sync = Instant::now();
        }
    }

    /// While stopping: the broker gets a moment to take what is queued (what it does not stays
    /// on disk for the next run), then the retained `offline` status; done 3 s after the stop
    /// at most.
    fn step_stopping(&mut self, st: &mut State) -> Flow {
        let Some((reason, since)) = &st.stopping else { return Flow::Go };
        let drained = self.queue.is_empty() || st.session.is_none();
        if !st.offline_sent && (drained || since.elapsed() >= Duration::from_secs(2)) {
            let topic = self.topic(Topic::Status).to_string();
            let offline = status(&self.device, "offline", reason, &self.cameras);
            st.offline_sent = self.wire.publish(st.session, Tag::Status(true), &topic, true, offline);
            if !st.offline_sent {
                return Flow::Done;
            }
        }
        if since.elapsed() >= Duration::from_secs(3) {
            return Flow::Done;
        }
        Flow::Go
    }

    /// The queue flushed, the event loop told to stop, the client disconnected.
    fn close(&mut self) {
        let _ = self.queue.sync();
        self.stop.store(true, Ordering::Relaxed);
        self.wire.client.disconnect();
        self.counters.queued.store(self.queue.len(), Ordering::Relaxed);
    }
}
