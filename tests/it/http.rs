//! The HTTP server against careless and hostile clients, on the real daemon: oversized request
//! lines and headers are refused early (414, 431) at a bounded cost in memory, before the token
//! is even looked at; heads sent in part are dropped after their deadline; and `/metrics` is
//! answered through half-sent heads and a burst of 200 long-polls, each of which is answered
//! too (docs/security.md, docs/live-view.md).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{free_tcp_port, fresh_dir, model_config, Daemon};

/// The daemon with the view on `port`, and an access token when `token` is set.
fn start(dir: &Path, port: u16, token: bool) -> Daemon {
    start_limited(dir, port, token, None)
}

/// [`start`], with at most `files` open file descriptors when given (`ulimit -n`).
fn start_limited(dir: &Path, port: u16, token: bool, files: Option<u32>) -> Daemon {
    let token_file = dir.join("view.token");
    std::fs::write(&token_file, "s3cret\n").unwrap();
    let token = if token { format!("token_file = \"{}\"\n", token_file.display()) } else { String::new() };
    let cfg = model_config(
        dir,
        "synthetic://?width=320&height=240&fps=15&seed=3&objects=2",
        &format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n{token}[view]\nenabled = true\n"),
    );
    let d = match files {
        None => Daemon::start(&cfg, &[]),
        Some(n) => {
            let mut cmd = std::process::Command::new("sh");
            cmd.arg("-c")
                .arg(format!("ulimit -n {n} && exec \"$0\" run --config \"$1\""))
                .arg(env!("CARGO_BIN_EXE_jetdetect"))
                .arg(&cfg);
            Daemon::spawn(cmd, dir.join("d.sock"))
        }
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the HTTP server did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    d
}

/// Sends `head` (and `tail`, from another thread, while the answer is read) and returns the
/// status the server answers with, or what went wrong.
fn ask(port: u16, head: &[u8], tail: Option<Vec<u8>>, limit: Duration) -> Result<u16, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(limit)).unwrap();
    s.write_all(head).map_err(|e| e.to_string())?;
    let writer = tail.map(|t| {
        let mut w = s.try_clone().unwrap();
        std::thread::spawn(move || {
            for chunk in t.chunks(64 << 10) {
                if w.write_all(chunk).is_err() {
                    break; // refused and closed: expected
                }
            }
        })
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("{e} after {} bytes", answer.len())),
        }
    }
    drop(writer);
    let text = String::from_utf8_lossy(&answer);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status line in {text:?}"))
}

/// The daemon's resident memory, KiB.
fn rss_kib(d: &Daemon) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.child.id())).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn oversized_requests_are_refused_before_the_token_at_a_bounded_cost() {
    let dir = fresh_dir("http", "limits");
    let port = free_tcp_port();
    let d = start(&dir, port, true);
    let t = Duration::from_secs(10);
    assert_eq!(ask(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", None, t), Ok(401), "no token");
    let before = rss_kib(&d);
    // Four at once, each a 50 MB URL: 414 once the line passes 4 KiB, the rest never read.
    let long: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || ask(port, b"GET /", Some(vec![b'a'; 50 << 20]), t)))
        .collect();
    for l in long {
        assert_eq!(l.join().unwrap(), Ok(414));
    }
    // A 50 MB header, with no token: refused for its size (the head is all that is read).
    let mut big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    big.extend(vec![b'b'; 1 << 10]);
    assert_eq!(ask(port, &big, Some(vec![b'b'; 50 << 20]), t), Ok(431));
    let many = format!("GET /metrics HTTP/1.1\r\n{}\r\n", "X-A: b\r\n".repeat(100));
    assert_eq!(ask(port, many.as_bytes(), None, t), Ok(431));
    assert_eq!(
        ask(port, b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n", None, t),
        Ok(400),
        "TLS to plain HTTP"
    );
    let grown = rss_kib(&d).saturating_sub(before);
    // Before: 75 MB -> 447 MB for the four URLs; now each connection holds at most 16 KiB of head.
    assert!(grown < 64 << 10, "the daemon grew by {grown} KiB answering oversized requests");
    // With the token, it answers.
    let ok = ask(port, b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n", None, t);
    assert_eq!(ok, Ok(200));
}

#[test]
fn metrics_is_answered_through_half_sent_heads_and_a_burst_of_long_polls() {
    let dir = fresh_dir("http", "burst");
    let port = free_tcp_port();
    let _d = start(&dir, port, false);
    // Half-sent heads, held open.
    let stalled: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: loc").unwrap();
            s
        })
        .collect();
    for burst in 0..3 {
        // 200 long-polls for a picture newer than any there will be: each waits (2.5 s) or, past
        // the waiting places, gets 204 at once.
        let polls: Vec<_> = (0..200)
            .map(|_| {
                std::thread::spawn(move || {
                    let start = Instant::now();
                    let r = ask(
                        port,
                        b"GET /picture.json?camera=cam0&after=18446744073709551614 HTTP/1.1\r\nHost: localhost\r\n\r\n",
                        None,
                        Duration::from_secs(10),
                    );
                    (r, start.elapsed())
                })
            })
            .collect();
        // /metrics, probed all through the burst.
        let until = Instant::now() + Duration::from_secs(3);
        let mut slowest = Duration::ZERO;
        while Instant::now() < until {
            let start = Instant::now();
            let r =
                ask(port, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", None, Duration::from_secs(10));
            assert_eq!(r, Ok(200), "burst {burst}: /metrics");
            slowest = slowest.max(start.elapsed());
            std::thread::sleep(Duration::from_millis(100));
        }
        // Before: one probe waited 3 s, another 15 s. A generous bound: a second.
        assert!(slowest < Duration::from_secs(1), "burst {burst}: /metrics took {slowest:?}");
        for p in polls {
            let (r, took) = p.join().unwrap();
            assert_eq!(r, Ok(204), "burst {burst}: a long-poll");
            assert!(took < Duration::from_secs(5), "burst {burst}: a long-poll took {took:?}");
        }
    }
    drop(stalled);
}

/// More connections than the daemon has file descriptors: accepting fails (EMFILE) while they
/// are open. tiny_http's acceptor thread ended at the first such failure, and nothing was
/// answered again until a restart; the acceptor now waits and goes on, and heads that never
/// finish are dropped after their deadline, freeing their descriptors.
#[test]
fn running_out_of_descriptors_does_not_stop_the_server() {
    let dir = fresh_dir("http", "emfile");
    let port = free_tcp_port();
    let _d = start_limited(&dir, port, false, Some(96));
    let probe =
        || ask(port, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", None, Duration::from_secs(10));
    assert_eq!(probe(), Ok(200));
    // Half-sent heads, more than the descriptors left; held past the head deadline.
    let stalled: Vec<TcpStream> = (0..150)
        .filter_map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: loc").ok()?;
            Some(s)
        })
        .collect();
    assert!(stalled.len() >= 50, "only {} connections were made", stalled.len());
    std::thread::sleep(Duration::from_secs(3));
    drop(stalled);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match probe() {
            Ok(200) => break,
            other => {
                assert!(Instant::now() < deadline, "/metrics after the descriptors came back: {other:?}")
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
