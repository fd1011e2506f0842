//! What the MQTT output's three sides share: the client and its book of publishes in flight
//! (the sender publishes, the event loop maps acknowledgements back), the messages the sender
//! is sent, the output's counters and the `status` message.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use super::link::Client;
use super::Topic;
use crate::output::protocol::SCHEMA;

/// What a publish that left was (to map its acknowledgement back).
#[derive(Clone, Copy, Debug)]
pub(super) enum Tag {
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
pub(super) struct Book {
    /// The current session; `None` while not connected.
    pub(super) session: Option<u64>,
    /// Tags of the publishes in the client's queue, oldest first.
    pub(super) fifo: VecDeque<Tag>,
    /// A publish held back by a packet id collision.
    pub(super) collided: Option<Tag>,
    /// Sent QoS 1 publishes by packet id.
    pub(super) inflight: HashMap<u16, Tag>,
}

/// The client and its book, shared by the sender and the event loop.
pub(super) struct Wire {
    pub(super) client: Client,
    pub(super) book: Mutex<Book>,
}

impl Wire {
    pub(super) fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes if `session` is the current one; false when not connected, when the session
    /// has changed, or when the client's queue is full.
    pub(super) fn publish(
        &self,
        session: Option<u64>,
        tag: Tag,
        topic: &str,
        retain: bool,
        payload: Vec<u8>,
    ) -> bool {
        let mut book = self.book();
        if session.is_none() || book.session != session {
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
pub(super) enum ToSender {
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

/// The `status` message, stamped `wall_ns` now.
pub(super) fn status(device: &str, state: &str, reason: &str, cameras: &[String]) -> Vec<u8> {
    status_json(device, state, reason, cameras, ("wall_ns", wall_ns()))
}

/// The last will: the `offline` status the broker publishes when it loses the connection. Its
/// payload is fixed when the output starts, so it carries no `wall_ns` (the moment of the loss
/// is the broker's to know; a subscriber stamps it on receipt) but `since_wall_ns`, when this
/// run's MQTT output started.
pub(super) fn will(device: &str, cameras: &[String]) -> Vec<u8> {
    status_json(device, "offline", "connection lost", cameras, ("since_wall_ns", wall_ns()))
}

fn status_json(device: &str, state: &str, reason: &str, cameras: &[String], time: (&str, u64)) -> Vec<u8> {
    let mut m = serde_json::json!({
        "type": "status",
        "schema": SCHEMA,
        "device": device,
        "state": state,
        "reason": reason,
        "version": env!("CARGO_PKG_VERSION"),
        "cameras": cameras,
    });
    m[time.0] = time.1.into();
    serde_json::to_vec(&m).unwrap_or_default()
}

fn wall_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_will_says_when_its_run_started_not_when_the_loss_was() {
        let cams = ["cam0".to_string()];
        let parse = |b: Vec<u8>| serde_json::from_slice::<serde_json::Value>(&b).unwrap();
        let will = parse(will("rover-1", &cams));
        assert_eq!(
            (will["state"].as_str(), will["reason"].as_str()),
            (Some("offline"), Some("connection lost"))
        );
        assert!(will.get("wall_ns").is_none(), "the will cannot know when the loss is: {will}");
        assert!(will["since_wall_ns"].as_u64().is_some_and(|t| t > 1_700_000_000_000_000_000), "{will}");
        let now = parse(status("rover-1", "offline", "stopped", &cams));
        assert!(now["wall_ns"].as_u64().is_some() && now.get("since_wall_ns").is_none(), "{now}");
        assert_eq!(now["cameras"], will["cameras"]);
    }
}
