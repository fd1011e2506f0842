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
                    *book = Book { session: Some(sessions), ..Book::default() };
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
