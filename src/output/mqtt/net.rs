//! The `mqtt-net` thread: rumqttc's event loop. It connects, reconnects with backoff (jittered,
//! and held back when the broker drops each connection at once), and maps each acknowledgement
//! back to what was published through the order in which publishes left.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use super::link::{self, Net, Settings};
use super::shared::{Book, Counters, Tag, ToSender, Wire};

/// The wait before the first reconnection attempt; it doubles with each failure, up to
/// [`LAST_RETRY`] (a broker back after an outage is found within 5 s).
const FIRST_RETRY: Duration = Duration::from_millis(250);
/// A connection that lasts this long resets the backoff.
const STABLE: Duration = Duration::from_secs(10);
/// The longest wait between reconnection attempts.
const LAST_RETRY: Duration = Duration::from_secs(5);

/// The event loop's thread: connects, reconnects with backoff, and reports to the sender.
pub(super) fn net_loop(
    mut connection: link::Connection,
    wire: &Wire,
    settings: &Settings,
    tx: &Sender<ToSender>,
    stop: &AtomicBool,
    counters: &Counters,
    scope: &str,
) {
    let mut state = NetState {
        wire,
        settings,
        tx,
        stop,
        counters,
        scope,
        sessions: 0,
        backoff: FIRST_RETRY,
        last_failure: None,
        down_since: None,
        connected_at: None,
        quick_drops: 0,
        last_quick_warning: None,
    };
    loop {
        match connection.next(settings) {
            Net::Connected => state.connected(),
            Net::Sent(pkid) => state.sent(pkid),
            Net::AwaitAck(_) => {
                let mut book = wire.book();
                book.collided = book.fifo.pop_front();
            }
            Net::Acked { pkid, refused } => state.acked(pkid, refused),
            Net::Failed(why) => {
                {
                    let mut book = wire.book();
                    // Requests still in the client's queue belong to the lost session.
                    connection.clean();
                    *book = Book::default();
                }
                if !state.failed(why) {
                    return;
                }
            }
            Net::Closed => return,
            Net::Message { .. } | Net::Other => {}
        }
    }
}

/// What the event loop remembers between events: the session count, the backoff, and what
/// was last said about failures (so that a broker down for an hour is one warning).
struct NetState<'a> {
    wire: &'a Wire,
    settings: &'a Settings,
    tx: &'a Sender<ToSender>,
    stop: &'a AtomicBool,
    counters: &'a Counters,
    /// The topic prefix this device publishes under (for the ACL hint).
    scope: &'a str,
    /// Sessions so far; the current one's number is in the book.
    sessions: u64,
    /// The wait before the next attempt.
    backoff: Duration,
    /// The last failure warned about, and when.
    last_failure: Option<(String, Instant)>,
    /// Since when the broker is unreachable (None while connected).
    down_since: Option<Instant>,
    /// When the current connection was accepted.
    connected_at: Option<Instant>,
    /// Connections the broker dropped within seconds of accepting them, in a row.
    quick_drops: u32,
    /// When the quick-drop error was last logged.
    last_quick_warning: Option<Instant>,
}

impl NetState<'_> {
    /// A new session: a fresh book, and the sender told.
    fn connected(&mut self) {
        self.sessions += 1;
        *self.wire.book() = Book { session: Some(self.sessions), ..Book::default() };
        self.connected_at = Some(Instant::now());
        match self.down_since.take() {
            Some(t) => log::info!(
                "MQTT: connected to {} again after {:.1} s; {} messages queued meanwhile are being sent",
                self.settings.url_text,
                t.elapsed().as_secs_f64(),
                self.counters.queued.load(Ordering::Relaxed)
            ),
            None => log::info!("MQTT: connected to {}", self.settings.url_text),
        }
        if self.quick_drops == 0 {
            self.last_failure = None;
        }
        let _ = self.tx.send(ToSender::Connected(self.sessions));
    }

    /// A publish left with packet id `pkid`: the oldest one waiting (or the one held back for
    /// an out-of-order ack) is in flight under it.
    fn sent(&mut self, pkid: u16) {
        let mut book = self.wire.book();
        let tag = book.collided.take().or_else(|| book.fifo.pop_front());
        if let (Some(tag), true) = (tag, pkid != 0) {
            book.inflight.insert(pkid, tag);
        }
    }

    /// The broker acknowledged `pkid`: the sender learns which message that was.
    fn acked(&mut self, pkid: u16, refused: Option<String>) {
        let tag = self.wire.book().inflight.remove(&pkid);
        let _ = match tag {
            Some(Tag::Queued(seq)) => self.tx.send(ToSender::Acked(seq, refused)),
            Some(Tag::Status(true)) => self.tx.send(ToSender::OfflineAcked),
            _ => Ok(()),
        };
    }

    /// The connection is lost or could not be made (`why`, a line for the user): the sender is
    /// told, the failure said once, and the backoff waited. `false` when the output stops.
    fn failed(&mut self, why: String) -> bool {
        let _ = self.tx.send(ToSender::Disconnected);
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        self.down_since.get_or_insert_with(Instant::now);
        // A connection that lasted resets the backoff; one the broker drops at once does
        // not, so a broker refusing what this device sends is not hammered.
        match self.connected_at.take().map(|t| t.elapsed()) {
            Some(up) if up >= STABLE => {
                self.backoff = FIRST_RETRY;
                self.quick_drops = 0;
            }
            Some(_) => self.quick_drops += 1,
            None => {}
        }
        self.say(why);
        self.wait_backoff()
    }

    /// Logs a failure: the broker's quick drops as one error a minute, any other failure once
    /// until it changes or a minute passes.
    fn say(&mut self, why: String) {
        let repeat = self
            .last_failure
            .as_ref()
            .is_some_and(|(w, t)| *w == why && t.elapsed() < Duration::from_secs(60));
        if self.quick_drops >= 3 {
            if self.last_quick_warning.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                log::error!(
                    "MQTT: the broker at {} closed the connection {} times in a row within seconds of \
                     accepting it: it refuses what this device sends; check that the broker's ACL lets {} publish \
                     under {}/ (and the broker's log); retrying every {} s at most",
                    self.settings.url_text,
                    self.quick_drops,
                    match &self.settings.login {
                        Some((u, _)) => format!("user {u:?}"),
                        None => "anonymous clients".into(),
                    },
                    self.scope,
                    LAST_RETRY.as_secs()
                );
                self.last_quick_warning = Some(Instant::now());
            }
        } else if !repeat && self.quick_drops == 0 {
            log::warn!(
                "MQTT: {why}; retrying with backoff (up to {} s); {} messages queued on disk",
                LAST_RETRY.as_secs(),
                self.counters.queued.load(Ordering::Relaxed)
            );
            self.last_failure = Some((why, Instant::now()));
        }
    }

    /// Waits the backoff (±25 % jitter, so that a fleet does not come back to a restarted
    /// broker in step) and doubles it. `false` when the output stops meanwhile.
    fn wait_backoff(&mut self) -> bool {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        let jitter = 0.75 + 0.5 * (nanos % 1000) as f64 / 1000.0;
        let until = Instant::now() + self.backoff.mul_f64(jitter);
        while Instant::now() < until && !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        self.backoff = (self.backoff * 2).min(LAST_RETRY);
        true
    }
}
