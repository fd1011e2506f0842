//! The systemd notify protocol (`sd_notify`), without libsystemd.
//!
//! When systemd starts a `Type=notify` service it sets `NOTIFY_SOCKET` to a
//! datagram socket (a path, or `@name` in the abstract namespace). We send
//! `READY=1` once the model is loaded and warmed up, `WATCHDOG=1` from the
//! pipeline's heartbeat, `STATUS=...` lines, and `STOPPING=1` on shutdown.
//! Without `NOTIFY_SOCKET` every call is a no-op.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use crate::output::{Health, Interval, Output, Started};
use crate::stats::Stage;

/// A connection to systemd's notify socket, if there is one.
pub struct Notifier {
    socket: Option<(UnixDatagram, String)>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` and `WATCHDOG_USEC` from the environment.
    pub fn from_env() -> Notifier {
        let path = std::env::var("NOTIFY_SOCKET").ok().filter(|p| !p.is_empty());
        let socket = path.and_then(|p| match UnixDatagram::unbound() {
            Ok(s) => Some((s, p)),
            Err(e) => {
                log::warn!("NOTIFY_SOCKET is set but no datagram socket could be made: {e}");
                None
            }
        });
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&us| us > 0)
            .map(Duration::from_micros);
        Notifier { socket, watchdog }
    }

    /// True when systemd is listening.
    pub fn enabled(&self) -> bool {
        self.socket.is_some()
    }

    /// The watchdog period systemd asked for, if any.
    pub fn watchdog_period(&self) -> Option<Duration> {
        self.watchdog
    }

    /// Sends one notify message (e.g. `READY=1`); failures are logged once per call.
    pub fn send(&self, message: &str) {
        let Some((sock, path)) = &self.socket else { return };
        let result = if let Some(name) = path.strip_prefix('@') {
            send_abstract(sock, name, message.as_bytes())
        } else {
            sock.send_to(message.as_bytes(), path).map(|_| ())
        };
        if let Err(e) = result {
            log::warn!("systemd notify '{}' to {path} failed: {e}", message.lines().next().unwrap_or(""));
        }
    }
}

/// Keeps systemd's watchdog fed while the service starts (loading the model can
/// mean a TensorRT engine build of minutes), until dropped. Start-up itself is
/// bounded by the unit's `TimeoutStartSec=`; the watchdog is for the running pipeline.
pub struct StartupKeepalive {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StartupKeepalive {
    /// Starts pinging at half the watchdog period; `None` without a watchdog.
    pub fn start() -> Option<StartupKeepalive> {
        let notifier = Notifier::from_env();
        let period = notifier.watchdog_period()? / 2;
        if !notifier.enabled() {
            return None;
        }
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("startup-watchdog".into())
            .spawn(move || {
                notifier.send(
                    "WATCHDOG=1\nSTATUS=starting: loading the model (a TensorRT build can take minutes)",
                );
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(period) {
                    notifier.send("WATCHDOG=1");
                }
            })
            .ok()?;
        Some(StartupKeepalive { stop: Some(tx), thread: Some(thread) })
    }
}

impl Drop for StartupKeepalive {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(target_os = "linux")]
fn send_abstract(sock: &UnixDatagram, name: &str, msg: &[u8]) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    sock.send_to_addr(msg, &addr).map(|_| ())
}

#[cfg(not(target_os = "linux"))]
fn send_abstract(_: &UnixDatagram, _: &str, _: &[u8]) -> std::io::Result<()> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "abstract sockets need Linux"))
}

/// systemd's notify protocol as an [`Output`]: a keepalive while the pipeline starts, then
/// `READY=1`, `WATCHDOG=1` while stages make progress, `STATUS=` per interval and `STOPPING=1`.
pub struct NotifyOutput {
    notifier: Notifier,
    keepalive: Option<StartupKeepalive>,
    watchdog: Option<Duration>,
    last_watchdog: std::time::Instant,
    stopping_sent: bool,
}

impl NotifyOutput {
    /// From the environment systemd set (a no-op without `NOTIFY_SOCKET`); the startup
    /// keepalive runs from here until [`Output::ready`].
    pub fn from_env() -> NotifyOutput {
        let notifier = Notifier::from_env();
        let watchdog = notifier.watchdog_period().map(|p| p / 2);
        NotifyOutput {
            notifier,
            keepalive: StartupKeepalive::start(),
            watchdog,
            last_watchdog: std::time::Instant::now(),
            stopping_sent: false,
        }
    }

    fn stopping(&mut self) {
        if !self.stopping_sent {
            self.notifier.send("STOPPING=1");
            self.stopping_sent = true;
        }
    }
}

impl Output for NotifyOutput {
    fn ready(&mut self, _: &Started) {
        self.keepalive = None;
        self.notifier.send("READY=1\nSTATUS=running");
        log::info!("ready");
        self.last_watchdog = std::time::Instant::now();
    }

    fn tick(&mut self, health: &Health) {
        if health.stopping {
            self.stopping();
        }
        if let Some(period) = self.watchdog {
            if self.last_watchdog.elapsed() >= period && health.since_progress < 2 * period {
                self.notifier.send("WATCHDOG=1");
                self.last_watchdog = std::time::Instant::now();
            }
        }
    }

    fn interval(&mut self, iv: &Interval<'_>) {
        let e2e = iv.latency.stage(Stage::EndToEnd);
        self.notifier
            .send(&format!("STATUS={:.1} fps, p99 {:.1} ms, {} clients", iv.fps, e2e.p99, iv.clients));
    }

    fn finish(&mut self, _: &Interval<'_>, _: &str) {
        self.stopping();
    }
}
