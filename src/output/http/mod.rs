//! The HTTP server (`[metrics] listen`, off by default): Prometheus text at `/metrics` and, with
//! `[view] enabled`, the live view (a page at `/` showing each camera's picture with its boxes,
//! tracks and zones, and the figures of the last stats interval) and `/snapshot.jpg`.
//!
//! It binds to loopback unless `[metrics] allow_remote`; with a token file every request must
//! carry the token. Requests are read bounded ([`wire`], httparse parsing the head) and answered
//! one per connection, each on its own thread ([`server`]); pictures come from the pipeline's
//! picture tap and are drawn and encoded on the view's own thread ([`view`]), only while someone
//! looks.

pub mod metrics;
pub mod server;
pub mod view;
pub mod wire;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::output::tap::PictureTap;
use crate::output::{Interval, Output, OutputError, Started};
use crate::stats::{DeadlineMisses, Stage};
use server::Content;
use view::View;

/// `[metrics]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// `address:port` for the Prometheus text endpoint; empty (the default) disables it.
    pub listen: String,
    /// Allow `listen` on an address other than loopback (it is refused otherwise).
    pub allow_remote: bool,
    /// A file whose first line is the access token every request must then carry (as
    /// `Authorization: Bearer TOKEN`, or `?token=TOKEN` once, which sets a cookie). Required
    /// with `allow_remote` when `[view] enabled`. Empty: no token.
    #[serde(skip_serializing_if = "path_is_empty")]
    pub token_file: PathBuf,
}

/// `[view]`: the live view (a page at `/` on the `[metrics] listen` server) and snapshots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ViewConfig {
    /// Serve the page, its pictures and `/snapshot.jpg`.
    pub enabled: bool,
    /// One picture per camera per slot of this many ms while someone watches (50 to 10000).
    pub interval_ms: u64,
    /// JPEG quality, 10 to 100.
    pub quality: u8,
}

impl Default for ViewConfig {
    fn default() -> Self {
        ViewConfig { enabled: false, interval_ms: 100, quality: 75 }
    }
}

fn path_is_empty(p: &Path) -> bool {
    p.as_os_str().is_empty()
}

impl MetricsConfig {
    /// Checks the section's own values; `Err((key, message))` names the key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.listen.is_empty() {
            return Ok(());
        }
        let addr: SocketAddr = self.listen.parse().map_err(|_| {
            ("listen", format!("'{}' is not an address:port such as 127.0.0.1:9464", self.listen))
        })?;
        if !addr.ip().is_loopback() && !self.allow_remote {
            return Err((
                "listen",
                format!("{addr} is not a loopback address: set [metrics] allow_remote = true to expose metrics on the network"),
            ));
        }
        Ok(())
    }
}

impl ViewConfig {
    /// Checks the section's own values; `Err((key, message))` names the key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(50..=10_000).contains(&self.interval_ms) {
            return Err((
                "interval_ms",
                format!("{} is out of range: allowed 50 to 10000 (ms between pictures)", self.interval_ms),
            ));
        }
        if !(10..=100).contains(&self.quality) {
            return Err(("quality", format!("{} is out of range: allowed 10 to 100", self.quality)));
        }
        Ok(())
    }
}

/// Why the HTTP server could not be set up: what was being done, and the system's error.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct HttpError {
    context: String,
    source: std::io::Error,
}

/// Reads the access token: the first line of `path`, which must not be empty.
pub fn read_token(path: &Path) -> Result<String, HttpError> {
    let at = |m: &str| format!("[metrics] token_file = {}: {m}", path.display());
    let text = std::fs::read_to_string(path)
        .map_err(|source| HttpError { context: at("cannot read the access token"), source })?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() || token.contains(|c: char| c.is_whitespace() || c == ';' || c.is_control()) {
        return Err(HttpError {
            context: at(
                "the first line must be the token: printable, no spaces or ';' (e.g. `openssl rand -hex 16`)",
            ),
            source: std::io::Error::from(std::io::ErrorKind::InvalidData),
        });
    }
    {
        use std::os::unix::fs::PermissionsExt as _;
        if std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o004 != 0) {
            log::warn!("{}: the access token is readable by every user: chmod 600 it", path.display());
        }
    }
    Ok(token)
}

/// A running server: its acceptor and, with the view, the encoder.
struct Running {
    acceptor: JoinHandle<()>,
    encoder: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

/// The HTTP server as an [`Output`]: the metrics and status are rendered once per stats
/// interval; pictures flow through its [`PictureTap`].
pub struct HttpOutput {
    listen: String,
    token_file: PathBuf,
    content: Option<Arc<Content>>,
    view: Option<Arc<View>>,
    running: Option<Running>,
    misses: DeadlineMisses,
    interval_s: u64,
}

impl HttpOutput {
    /// The server `[metrics]` and `[view]` ask for, bound when the pipeline opens its outputs;
    /// `cameras` are the cameras' names in config order, `interval_s` is `[output]
    /// stats_interval_s`.
    pub fn new(
        metrics: &MetricsConfig,
        view: &ViewConfig,
        cameras: Vec<String>,
        interval_s: u64,
    ) -> HttpOutput {
        let v = view;
        let view = v.enabled.then(|| {
            let tap = Arc::new(PictureTap::new(cameras.len(), Duration::from_millis(v.interval_ms)));
            Arc::new(View::new(tap, cameras, v.interval_ms, v.quality))
        });
        HttpOutput {
            listen: metrics.listen.clone(),
            token_file: metrics.token_file.clone(),
            content: None,
            view,
            running: None,
            misses: DeadlineMisses::default(),
            interval_s,
        }
    }

    /// The address bound, once open.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.running.as_ref().map(|r| r.addr)
    }

    fn start(&mut self) -> Result<(), HttpError> {
        let at = |what: &str| {
            let context = format!("[metrics] listen = {}{what}", self.listen);
            move |source| HttpError { context, source }
        };
        let token = match self.token_file.as_os_str().is_empty() {
            true => None,
            false => Some(read_token(&self.token_file)?),
        };
        let listener = TcpListener::bind(&self.listen).map_err(|e| {
            let hint = match e.kind() {
                std::io::ErrorKind::AddrInUse => {
                    " (another program, or another jetdetect, has that port: stop it or choose another [metrics] listen)"
                }
                _ => "",
            };
            at(&format!(": cannot listen{hint}"))(e)
        })?;
        let addr = listener.local_addr().map_err(at(""))?;
        let content = Arc::new(Content::new(self.view.clone(), token, addr.ip().is_loopback()));
        let encoder = match &self.view {
            Some(v) => Some(v.start().map_err(at(": cannot start the view's thread"))?),
            None => None,
        };
        let c = content.clone();
        let acceptor = std::thread::Builder::new().name("http".into()).spawn(move || accept(listener, c));
        let acceptor = match acceptor {
            Ok(a) => a,
            Err(e) => {
                if let Some(v) = &self.view {
                    v.stop();
                }
                return Err(at(": cannot start the acceptor thread")(e));
            }
        };
        self.content = Some(content);
        self.running = Some(Running { acceptor, encoder, addr });
        log::info!("metrics on http://{addr}/metrics");
        Ok(())
    }

    fn stop(&mut self) {
        if let Some(v) = &self.view {
            v.stop();
        }
        if let Some(c) = &self.content {
            c.stop.store(true, Ordering::Relaxed);
        }
        if let Some(r) = self.running.take() {
            // The acceptor waits in accept(): a connection of our own wakes it to see the stop.
            let mut wake = r.addr;
            if wake.ip().is_unspecified() {
                wake.set_ip(match wake {
                    SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            let _ = std::net::TcpStream::connect_timeout(&wake, Duration::from_millis(500));
            // Connections still being answered end on their own within their timeouts (5 s).
            for t in std::iter::once(r.acceptor).chain(r.encoder) {
                if !crate::output::join_within(t, Duration::from_secs(3)) {
                    log::warn!("http: a thread did not stop within 3 s; leaving it");
                }
            }
        }
    }
}

/// The acceptor: each connection on its own thread, up to [`server::MAX_CONNECTIONS`]; past
/// them, it answers 503 itself and closes. Stops when `content.stop` is set (and a connection
/// wakes it).
fn accept(listener: TcpListener, content: Arc<Content>) {
    let mut failed_spawn = false;
    for stream in listener.incoming() {
        if content.stop.load(Ordering::Relaxed) {
            return;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors, or an aborted connection: go on after a breath.
                log::debug!("http: accept: {e}");
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        if content.connections.fetch_add(1, Ordering::Relaxed) >= server::MAX_CONNECTIONS {
            content.connections.fetch_sub(1, Ordering::Relaxed);
            let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
            let busy = wire::Reply::new(
                503,
                "text/plain; charset=utf-8",
                format!("{} connections are being answered: try again\n", server::MAX_CONNECTIONS),
            );
            let _ = busy.write(&mut &stream, true);
            continue;
        }
        let c = content.clone();
        let spawned =
            std::thread::Builder::new().name("http conn".into()).stack_size(256 << 10).spawn(move || {
                server::serve(stream, &c);
                c.connections.fetch_sub(1, Ordering::Relaxed);
            });
        if let Err(e) = spawned {
            content.connections.fetch_sub(1, Ordering::Relaxed);
            if !std::mem::replace(&mut failed_spawn, true) {
                log::warn!("http: cannot start a connection's thread: {e}; that connection is dropped");
            }
        }
    }
}

impl Drop for HttpOutput {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Output for HttpOutput {
    fn open(&mut self) -> Result<(), OutputError> {
        self.start()?;
        Ok(())
    }

    fn ready(&mut self, started: &Started) {
        if let (Some(v), Some(r)) = (&self.view, &self.running) {
            v.set_names(&started.names);
            let host = match r.addr.ip().is_unspecified() {
                true => format!("<this machine's address>:{}", r.addr.port()),
                false => r.addr.to_string(),
            };
            let token = match self.token_file.as_os_str().is_empty() {
                true => String::new(),
                false => format!(" (first visit: /?token=<the token in {}>)", self.token_file.display()),
            };
            log::info!("live view on http://{host}/{token}");
        }
    }

    fn interval(&mut self, iv: &Interval<'_>) {
        self.misses.add(iv.misses);
        let Some(c) = &self.content else { return };
        let mut text = metrics::render(iv, &self.misses);
        if let Some(v) = &self.view {
            let (n, ms) = v.encoded();
            text.push_str(&format!(
                "# HELP jetdetect_view_pictures_total Pictures drawn and encoded for the live view and snapshots.\n\
                 # TYPE jetdetect_view_pictures_total counter\njetdetect_view_pictures_total {n}\n\
                 # HELP jetdetect_view_encode_seconds Mean time to draw and encode one picture.\n\
                 # TYPE jetdetect_view_encode_seconds gauge\njetdetect_view_encode_seconds {}\n",
                ms / 1e3
            ));
            if let Ok(mut s) = c.status.lock() {
                *s = status(iv, v, self.interval_s);
            }
        }
        if let Ok(mut m) = c.metrics.lock() {
            *m = text;
        }
    }

    fn finish(&mut self, _run: &Interval<'_>, _reason: &str) {
        if let Some(v) = &self.view {
            v.stop();
        }
    }

    fn picture_tap(&self) -> Option<Arc<PictureTap>> {
        self.view.as_ref().map(|v| v.tap().clone())
    }
}

/// `/status.json`: the interval's `stats` message (as on the socket), the end-to-end latency
/// histogram, and the view's settings and counters.
fn status(iv: &Interval<'_>, v: &View, interval_s: u64) -> String {
    let mut stats = Vec::with_capacity(4096);
    crate::output::protocol::write_stats(&mut stats, iv);
    let stats: serde_json::Value = serde_json::from_slice(&stats).unwrap_or(serde_json::Value::Null);
    let (bin_ms, counts) = iv.latency.histogram(Stage::EndToEnd as usize, 24);
    let (encoded, encode_ms) = v.encoded();
    serde_json::json!({
        "stats": stats,
        "stats_interval_s": interval_s,
        "histogram": {"stage": "end_to_end", "bin_ms": bin_ms, "counts": counts},
        "view": {
            "cameras": v.cameras,
            "interval_ms": v.interval_ms,
            "pictures": encoded,
            "encode_ms": (encode_ms * 1e3).round() / 1e3,
        },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // In pieces, as a slow client may send it.
        for piece in request.as_bytes().chunks(7) {
            c.write_all(piece).unwrap();
            c.flush().unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        out
    }

    /// A server on a free loopback port, one camera, with the view when `token` (empty: none).
    fn output(view: bool, token: &Path) -> HttpOutput {
        let metrics =
            MetricsConfig { listen: "127.0.0.1:0".into(), token_file: token.into(), ..Default::default() };
        let view = ViewConfig { enabled: view, ..Default::default() };
        HttpOutput::new(&metrics, &view, vec!["cam0".into()], 5)
    }

    #[test]
    fn metrics_only_serves_metrics_and_refuses_writes() {
        let mut o = output(false, Path::new(""));
        o.open().unwrap();
        let addr = o.local_addr().unwrap();
        let r = get(addr, "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(r.starts_with("HTTP/1.0 200") || r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(r.contains("no statistics yet"), "{r}");
        let r = get(addr, "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        assert!(r.contains(" 404 ") && r.contains("[view] enabled"), "{r}");
        let r = get(
            addr,
            "POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        assert!(r.contains(" 405 ") && r.contains("Allow: GET, HEAD"), "{r}");
        let r = get(addr, "GET /metrics HTTP/1.1\r\nHost: rebound.example:9464\r\nConnection: close\r\n\r\n");
        assert!(r.contains(" 403 ") && r.contains("not a loopback address"), "DNS rebinding: {r}");
        assert!(o.picture_tap().is_none(), "no view: inference hands over nothing");
        let mut twin = output(false, Path::new(""));
        twin.listen = addr.to_string();
        let e = twin.start().unwrap_err().to_string();
        assert!(e.contains("cannot listen") && e.contains("choose another [metrics] listen"), "{e}");
    }

    #[test]
    fn the_token_is_required_once_set() {
        let dir = std::env::temp_dir().join(format!("jd-http-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("view.token");
        std::fs::write(&file, "s3cret\n").unwrap();
        let mut o = output(true, &file);
        o.open().unwrap();
        let addr = o.local_addr().unwrap();
        let close = "Host: x\r\nConnection: close\r\n\r\n";
        let r = get(addr, &format!("GET /status.json HTTP/1.1\r\n{close}"));
        assert!(r.contains(" 401 ") && r.contains("token_file"), "{r}");
        let r = get(addr, &format!("GET /status.json HTTP/1.1\r\nAuthorization: Bearer wrong\r\n{close}"));
        assert!(r.contains(" 401 "), "{r}");
        let r = get(addr, &format!("GET /status.json HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n{close}"));
        assert!(r.contains(" 200 ") && r.contains("{\"stats\":null}"), "{r}");
        let r = get(addr, &format!("GET /?token=s3cret HTTP/1.1\r\n{close}"));
        assert!(r.contains(" 200 ") && r.contains("Set-Cookie: jetdetect_token=s3cret;"), "{r}");
        assert!(r.contains("Content-Security-Policy: default-src 'self'"), "{r}");
        let r =
            get(addr, &format!("GET /view.js HTTP/1.1\r\nCookie: a=b; jetdetect_token=s3cret\r\n{close}"));
        assert!(r.contains(" 200 ") && r.contains("text/javascript"), "{r}");
        let r = get(
            addr,
            &format!("GET /snapshot.jpg?camera=nope HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n{close}"),
        );
        assert!(r.contains(" 404 ") && r.contains("the cameras are cam0"), "{r}");

        std::fs::write(&file, "two words\n").unwrap();
        let e = read_token(&file).unwrap_err().to_string();
        assert!(e.contains("token_file") && e.contains("no spaces"), "{e}");
        let e = read_token(&dir.join("missing")).unwrap_err().to_string();
        assert!(e.contains("cannot read the access token"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
