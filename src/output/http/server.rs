//! The HTTP server's answers: one connection's request read ([`wire`], bounded), the access
//! token checked, routed and answered. Every endpoint is a read (GET or HEAD): none changes the
//! daemon's state.
//!
//! | path | what |
//! |---|---|
//! | `/metrics` | Prometheus text |
//! | `/` (`view.js`, `view.css`) | the live view page, with `[view] enabled` |
//! | `/status.json` | the last stats interval, a latency histogram, the view's cameras |
//! | `/picture.json?camera=C&after=N` | the next picture of camera C after picture N (waits up to 2.5 s) |
//! | `/picture/N.jpg` | picture N, with its overlay |
//! | `/snapshot.jpg?camera=C&raw=1` | a frame captured after the request (raw: without overlay) |
//!
//! Each connection has its own thread (at most [`MAX_CONNECTIONS`]; beyond, the acceptor answers
//! 503 itself), so no request waits behind another's; those that wait for a picture are limited
//! to [`WAITING`] at once (the others get the newest picture if it is new, or 204, at once).

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::view::View;
use super::wire::{self, Head, Reply};

/// Connections served at once, each on its own thread; beyond, a new one is answered 503.
pub const MAX_CONNECTIONS: usize = 256;
/// Requests that may wait for a picture at once.
pub const WAITING: usize = 32;
/// How long `/picture.json` waits for a new picture.
const PICTURE_WAIT: Duration = Duration::from_millis(2500);
/// How long `/snapshot.jpg` waits for a fresh frame.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(5);
/// The cookie the token is kept in once given as `?token=`.
const COOKIE: &str = "jetdetect_token";

const PAGE: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/view.js");
const STYLE: &str = include_str!("page/view.css");
const ICON: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\">\
<rect x=\"2\" y=\"3\" width=\"12\" height=\"10\" fill=\"none\" stroke=\"#f0f\" stroke-width=\"2\"/></svg>";

/// What the workers serve, updated by the output.
pub struct Content {
    /// Prometheus text.
    pub metrics: Mutex<String>,
    /// `/status.json`.
    pub status: Mutex<String>,
    /// The live view, when enabled.
    pub view: Option<Arc<View>>,
    /// The access token, when one is required.
    pub token: Option<String>,
    /// The server listens on loopback only.
    pub loopback: bool,
    pub(super) waiting: AtomicUsize,
    /// Connections being served.
    pub(super) connections: AtomicUsize,
    pub(super) stop: AtomicBool,
}

impl Content {
    /// Content with nothing measured yet.
    pub fn new(view: Option<Arc<View>>, token: Option<String>, loopback: bool) -> Content {
        Content {
            metrics: Mutex::new("# jetdetect: no statistics yet\n".into()),
            status: Mutex::new("{\"stats\":null}".into()),
            view,
            token,
            loopback,
            waiting: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        }
    }
}

fn text(status: u16, body: impl Into<String>) -> Reply {
    Reply::new(status, "text/plain; charset=utf-8", body.into())
}

/// The value of `key` in a query string (`a=1&b=2`), percent-decoded (as written when it does
/// not decode).
pub fn query<'a>(q: &'a str, key: &str) -> Option<std::borrow::Cow<'a, str>> {
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then(|| crate::source::uri::percent_decode(v).map_or(v.into(), Into::into))
    })
}

/// Whether a `Host` header names this machine's loopback (`localhost`, `127.x.y.z`, `[::1]`,
/// with or without a port).
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Compares in time independent of where the strings differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `req` carries `token`: as a bearer token, the cookie, or `?token=`; `Some(true)`
/// when it came as `?token=` (the answer then sets the cookie).
fn authorised(req: &Head, q: &str, token: &str) -> Option<bool> {
    if req.headers("Authorization").any(|v| v.strip_prefix("Bearer ").is_some_and(|t| same(t.trim(), token)))
    {
        return Some(false);
    }
    let cookie = |v: &str| {
        v.split(';').any(|c| {
            c.trim().strip_prefix(COOKIE).and_then(|r| r.strip_prefix('=')).is_some_and(|t| same(t, token))
        })
    };
    if req.headers("Cookie").any(cookie) {
        return Some(false);
    }
    query(q, "token").is_some_and(|t| same(&t, token)).then_some(true)
}

/// Serves one connection: reads its request's head (bounded in size and time: [`wire`]),
/// answers it, and closes. The token is checked on the head alone: nothing more is read.
pub fn serve(mut stream: TcpStream, c: &Content) {
    // Short read timeouts, so that the head's deadline is looked at; a client that does not
    // read its answer holds only this connection's thread, for at most the write timeout.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let _ = stream.set_nodelay(true);
    let (reply, body) = match wire::read_head(&mut stream, Instant::now() + wire::HEAD_TIMEOUT) {
        Ok(head) => {
            let (path, q) = head.target.split_once('?').unwrap_or((&head.target, ""));
            (route(&head, path, q, c), head.method != "HEAD")
        }
        Err(e) => match e.answer() {
            Some((status, why)) => (text(status, why), true),
            None => return,
        },
    };
    let _ = reply.write(&mut stream, body);
    linger(stream);
}

/// Closes after the answer without cutting it off: what the client still sends (a body, the
/// rest of an oversized head) is read and dropped for a moment, up to 1 MiB, so that closing
/// with unread data (which sends a reset, and can destroy the answer in the client's buffer)
/// happens only to a client that keeps sending.
fn linger(mut stream: TcpStream) {
    use std::io::Read as _;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let until = Instant::now() + Duration::from_secs(1);
    let mut scratch = [0u8; 8192];
    let mut dropped = 0usize;
    while Instant::now() < until && dropped < 1 << 20 {
        match stream.read(&mut scratch) {
            Ok(0) => return,
            Ok(n) => dropped += n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

fn route(req: &Head, path: &str, q: &str, c: &Content) -> Reply {
    if !matches!(req.method.as_str(), "GET" | "HEAD") {
        return text(405, "jetdetect's HTTP server only answers GET and HEAD: nothing here changes state\n")
            .with("Allow", "GET, HEAD");
    }
    let mut set_cookie = false;
    match &c.token {
        // No token on loopback: only pages named by a loopback address may read the server. A
        // web page elsewhere that rebinds its own host name to 127.0.0.1 (DNS rebinding) sends
        // that name as Host, and is refused.
        None if c.loopback => {
            if let Some(host) = req.header("Host") {
                if !loopback_host(host) {
                    return text(
                        403,
                        format!(
                            "Host '{host}' is not a loopback address: without [metrics] token_file this server \
                             answers only pages opened as http://127.0.0.1:PORT/ or http://localhost:PORT/\n"
                        ),
                    );
                }
            }
        }
        None => {}
        Some(token) => match authorised(req, q, token) {
            Some(from_query) => set_cookie = from_query,
            None => {
                return text(
                    401,
                    "an access token is required ([metrics] token_file): send `Authorization: Bearer TOKEN`, \
                     or open /?token=TOKEN once in a browser\n",
                )
                .with("WWW-Authenticate", "Bearer realm=\"jetdetect\"");
            }
        },
    }
    let mut r = answer(path, q, c);
    if set_cookie {
        if let Some(t) = &c.token {
            // The token is checked against the file's: it cannot carry `;` or line breaks into
            // the header unless the file has them, and then no request matches it anyway.
            r.headers.push(("Set-Cookie", format!("{COOKIE}={t}; Path=/; HttpOnly; SameSite=Strict")));
        }
    }
    r
}

fn answer(path: &str, q: &str, c: &Content) -> Reply {
    let locked = |m: &Mutex<String>| m.lock().map(|t| t.clone()).unwrap_or_default();
    if path == "/metrics" {
        return Reply::new(200, "text/plain; version=0.0.4", locked(&c.metrics));
    }
    let Some(view) = &c.view else {
        return text(404, "try GET /metrics (the live view is off: [view] enabled = true turns it on)\n");
    };
    let camera = |view: &View| -> Result<usize, Reply> {
        let name = query(q, "camera").unwrap_or_default();
        view.camera(&name).ok_or_else(|| {
            text(404, format!("no camera called '{name}': the cameras are {}\n", view.cameras.join(", ")))
        })
    };
    match path {
        "/" | "/index.html" => Reply::new(200, "text/html; charset=utf-8", PAGE)
            .with(
                "Content-Security-Policy",
                "default-src 'self'; img-src 'self'; connect-src 'self'; frame-ancestors 'none'",
            )
            .with("X-Frame-Options", "DENY"),
        "/view.js" => Reply::new(200, "text/javascript; charset=utf-8", SCRIPT),
        "/view.css" => Reply::new(200, "text/css; charset=utf-8", STYLE),
        "/favicon.svg" => Reply::new(200, "image/svg+xml", ICON),
        "/status.json" => Reply::new(200, "application/json", locked(&c.status)),
        "/picture.json" => {
            let cam = match camera(view) {
                Ok(c) => c,
                Err(r) => return r,
            };
            view.want(cam, false);
            let after: u64 = query(q, "after").and_then(|a| a.parse().ok()).unwrap_or(0);
            let wait = match waiting(c) {
                Some(_guard) => view.wait_for(cam, Instant::now() + PICTURE_WAIT, |p| p.id > after),
                // Too many waiting: the newest there is, if new.
                None => view.wait_for(cam, Instant::now(), |p| p.id > after),
            };
            match wait {
                Some(p) => Reply::new(200, "application/json", p.meta.clone()),
                None => Reply::new(204, "application/json", ""),
            }
        }
        p if p.starts_with("/picture/") && p.ends_with(".jpg") => {
            let id = p["/picture/".len()..p.len() - 4].parse::<u64>().ok();
            match id.and_then(|id| view.picture(id)) {
                Some(p) => Reply::new(200, "image/jpeg", p.jpeg.clone()),
                None => text(404, "that picture is no longer kept: ask /picture.json for the newest\n"),
            }
        }
        "/snapshot.jpg" => {
            let cam = match camera(view) {
                Ok(c) => c,
                Err(r) => return r,
            };
            let raw = query(q, "raw").is_some_and(|v| v != "0" && v != "false");
            let asked = Instant::now();
            view.want(cam, raw);
            let Some(_guard) = waiting(c) else {
                return text(503, "too many requests are waiting for pictures: try again\n");
            };
            let fresh = |p: &super::view::Encoded| p.captured >= asked && (!raw || p.raw.is_some());
            match view.wait_for(cam, asked + SNAPSHOT_WAIT, fresh) {
                Some(p) => {
                    let body = if raw { p.raw.clone().unwrap_or_default() } else { p.jpeg.clone() };
                    Reply::new(200, "image/jpeg", body)
                }
                None => text(
                    503,
                    format!(
                        "camera {} delivered no frame through inference in {} s (is it blind? see /status.json)\n",
                        view.cameras[cam],
                        SNAPSHOT_WAIT.as_secs()
                    ),
                ),
            }
        }
        _ => text(404, "not here: / (the live view), /snapshot.jpg, /status.json, /metrics\n"),
    }
}

/// A place among the requests allowed to wait, while held.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn waiting(c: &Content) -> Option<Waiting<'_>> {
    let n = c.waiting.fetch_add(1, Ordering::Relaxed);
    let g = Waiting(&c.waiting);
    (n < WAITING).then_some(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_and_tokens() {
        assert_eq!(query("camera=front&after=12", "after").as_deref(), Some("12"));
        assert_eq!(query("camera=front&raw", "raw").as_deref(), Some(""));
        assert_eq!(query("token=a%2Bb%3d", "token").as_deref(), Some("a+b="));
        assert_eq!(query("token=%zz%4", "token").as_deref(), Some("%zz%4"));
        assert!(query("camera=x", "after").is_none());
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "ab"));
        for ok in ["127.0.0.1:9464", "localhost:9464", "LOCALHOST", "[::1]:9464", "127.1.2.3"] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in ["evil.example:9464", "192.168.1.20:9464", "[fe80::1]:80", "127.0.0.1.evil.example"] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }
}
