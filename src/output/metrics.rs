//! An optional Prometheus text endpoint (`[metrics] listen`), off by default.
//!
//! A small blocking HTTP/1.0 responder on its own thread: `GET /metrics`
//! returns the text rendered by the publisher at its last update; anything
//! else is a 404. It binds to loopback unless the config explicitly allows
//! another address.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::pipeline::publish::Interval;
use crate::stats::{DeadlineMisses, Stage};

/// The running endpoint.
pub struct MetricsServer {
    text: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: std::net::SocketAddr,
}

fn serve(mut stream: TcpStream, text: &Mutex<String>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    // The request line may come in several segments: read until the end of the headers (or
    // 1 KiB, EOF, an error or the timeout), not just what the first read returns.
    let mut buf = [0u8; 1024];
    let mut n = 0;
    while n < buf.len() && !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    let request = String::from_utf8_lossy(&buf[..n]);
    let path = request.split_whitespace().nth(1).unwrap_or("");
    let (status, body) =
        if request.starts_with("GET ") && (path == "/metrics" || path.starts_with("/metrics?")) {
            ("200 OK", text.lock().map(|t| t.clone()).unwrap_or_default())
        } else {
            ("404 Not Found", "try GET /metrics\n".to_string())
        };
    let _ = write!(
        stream,
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Why the metrics endpoint could not be set up: what was being done, and the system's error.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct MetricsError {
    context: String,
    source: std::io::Error,
}

impl MetricsServer {
    /// Listens on `addr` (already validated by the config).
    pub fn start(addr: &str) -> Result<MetricsServer, MetricsError> {
        let at = |what: &str| {
            let context = format!("[metrics] listen = {addr}{what}");
            move |source| MetricsError { context, source }
        };
        let listener = TcpListener::bind(addr).map_err(at(": cannot listen"))?;
        let local = listener.local_addr().map_err(at(""))?;
        listener.set_nonblocking(true).map_err(at(""))?;
        let text = Arc::new(Mutex::new(String::from("# jetdetect: no statistics yet\n")));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, s) = (text.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let _ = stream.set_nonblocking(false);
                            serve(stream, &t);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(50))
                        }
                        Err(e) => {
                            log::warn!("metrics: accept failed: {e}");
                            std::thread::sleep(Duration::from_millis(200));
                        }
                    }
                }
            })
            .map_err(|source| MetricsError { context: "cannot start the metrics thread".into(), source })?;
        log::info!("metrics on http://{local}/metrics");
        Ok(MetricsServer { text, stop, thread: Some(thread), addr: local })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Replaces the text served.
    pub fn update(&self, text: String) {
        if let Ok(mut t) = self.text.lock() {
            *t = text;
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Renders the Prometheus text format for interval `iv`; `misses` are the deadline misses since
/// start.
pub fn render(iv: &Interval<'_>, misses: &DeadlineMisses) -> String {
    use std::fmt::Write as _;
    let (totals, fps, clients, interval, t) = (iv.totals, iv.fps, iv.clients, iv.latency, iv.telemetry);
    let mut s = String::with_capacity(2048);
    let _ = writeln!(s, "# HELP jetdetect_frames_total Frames by outcome since start.");
    let _ = writeln!(s, "# TYPE jetdetect_frames_total counter");
    for (kind, v) in [
        ("captured", totals.captured),
        ("processed", totals.processed),
        ("dropped", totals.dropped),
        ("published", totals.published),
        ("error", totals.errors),
    ] {
        let _ = writeln!(s, "jetdetect_frames_total{{outcome=\"{kind}\"}} {v}");
    }
    let _ = writeln!(s, "# HELP jetdetect_fps Frames processed per second over the last interval.");
    let _ = writeln!(s, "# TYPE jetdetect_fps gauge\njetdetect_fps {fps}");
    let _ = writeln!(s, "# HELP jetdetect_clients Clients connected to the detections socket.");
    let _ = writeln!(s, "# TYPE jetdetect_clients gauge\njetdetect_clients {clients}");
    let _ = writeln!(s, "# HELP jetdetect_latency_seconds Per-stage latency over the last interval.");
    let _ = writeln!(s, "# TYPE jetdetect_latency_seconds summary");
    for stage in Stage::ALL {
        let p = interval.stage(stage);
        for (q, v) in [("0.5", p.p50), ("0.9", p.p90), ("0.99", p.p99), ("1", p.max)] {
            let _ =
                writeln!(s, "jetdetect_latency_seconds{{stage=\"{stage}\",quantile=\"{q}\"}} {}", v / 1e3);
        }
    }
    if let Some([cur, _, _]) = t.gpu_mhz {
        let _ = writeln!(s, "# TYPE jetdetect_gpu_mhz gauge\njetdetect_gpu_mhz {cur}");
    }
    if !t.temp_c.is_empty() {
        let _ = writeln!(s, "# TYPE jetdetect_temperature_celsius gauge");
        for (zone, c) in &t.temp_c {
            let _ = writeln!(s, "jetdetect_temperature_celsius{{zone=\"{zone}\"}} {c}");
        }
    }
    if !t.power_mw.is_empty() {
        let _ = writeln!(s, "# TYPE jetdetect_power_watts gauge");
        for (rail, mw) in &t.power_mw {
            let _ = writeln!(s, "jetdetect_power_watts{{rail=\"{rail}\"}} {}", mw / 1e3);
        }
    }
    let _ = writeln!(s, "# TYPE jetdetect_throttling gauge\njetdetect_throttling {}", t.throttling as u8);
    let _ = writeln!(s, "# TYPE jetdetect_clocks_pinned gauge\njetdetect_clocks_pinned {}", t.pinned as u8);
    if iv.deadline_ms > 0.0 {
        let _ = writeln!(s, "# HELP jetdetect_deadline_seconds [latency] deadline_ms.");
        let _ = writeln!(
            s,
            "# TYPE jetdetect_deadline_seconds gauge\njetdetect_deadline_seconds {}",
            iv.deadline_ms / 1e3
        );
        let _ = writeln!(
            s,
            "# HELP jetdetect_deadline_misses_total Frames past the deadline since start, by the stage that took longest."
        );
        let _ = writeln!(s, "# TYPE jetdetect_deadline_misses_total counter");
        for stage in &Stage::ALL[..5] {
            let _ = writeln!(
                s,
                "jetdetect_deadline_misses_total{{stage=\"{stage}\"}} {}",
                misses.by_stage[*stage]
            );
        }
    }
    let _ =
        writeln!(s, "# HELP jetdetect_blind 1 while a camera had no fresh frame within its freshness bound.");
    let _ = writeln!(s, "# TYPE jetdetect_blind gauge\njetdetect_blind {}", iv.blind.is_some() as u8);
    if !iv.cameras.is_empty() {
        // Per camera: its own counters, rate, freshness and blindness. Camera names are
        // letters, digits, '_' and '-' (checked in the config): nothing to escape.
        let _ = writeln!(s, "# HELP jetdetect_camera_frames_total Frames per camera since start.");
        let _ = writeln!(s, "# TYPE jetdetect_camera_frames_total counter");
        for c in iv.cameras {
            let f = &c.frames;
            for (kind, v) in [
                ("captured", f.captured),
                ("processed", f.processed),
                ("dropped", f.dropped),
                ("error", f.errors),
            ] {
                let _ = writeln!(
                    s,
                    "jetdetect_camera_frames_total{{camera=\"{}\",outcome=\"{kind}\"}} {v}",
                    c.name
                );
            }
        }
        let _ = writeln!(
            s,
            "# HELP jetdetect_camera_fps Frames processed per second per camera over the last interval."
        );
        let _ = writeln!(s, "# TYPE jetdetect_camera_fps gauge");
        for c in iv.cameras {
            let _ = writeln!(s, "jetdetect_camera_fps{{camera=\"{}\"}} {}", c.name, c.fps.processed);
        }
        let _ = writeln!(
            s,
            "# HELP jetdetect_camera_frame_age_seconds Age of each camera's newest published frame."
        );
        let _ = writeln!(s, "# TYPE jetdetect_camera_frame_age_seconds gauge");
        for c in iv.cameras {
            if let Some(ms) = c.frame_age_ms {
                let _ =
                    writeln!(s, "jetdetect_camera_frame_age_seconds{{camera=\"{}\"}} {}", c.name, ms / 1e3);
            }
        }
        let _ = writeln!(
            s,
            "# HELP jetdetect_camera_blind 1 while the camera had no fresh frame within its bound."
        );
        let _ = writeln!(s, "# TYPE jetdetect_camera_blind gauge");
        for c in iv.cameras {
            let _ =
                writeln!(s, "jetdetect_camera_blind{{camera=\"{}\"}} {}", c.name, c.blind.is_some() as u8);
        }
    }
    s
}

/// The Prometheus endpoint as an [`crate::pipeline::publish::Output`]: the page is rendered
/// once per stats interval.
pub struct MetricsOutput {
    addr: String,
    server: Option<MetricsServer>,
    misses: DeadlineMisses,
}

impl MetricsOutput {
    /// Serves on `addr` (`[metrics] listen`) once the pipeline opens its outputs.
    pub fn new(addr: &str) -> MetricsOutput {
        MetricsOutput { addr: addr.to_string(), server: None, misses: DeadlineMisses::default() }
    }
}

impl crate::pipeline::publish::Output for MetricsOutput {
    fn open(&mut self) -> crate::error::Result<()> {
        self.server = Some(MetricsServer::start(&self.addr)?);
        Ok(())
    }

    fn interval(&mut self, iv: &Interval<'_>) {
        self.misses.add(iv.misses);
        if let Some(server) = &self.server {
            server.update(render(iv, &self.misses));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::report::FrameCounters;
    use crate::power::telemetry::Telemetry;
    use crate::stats::LatencyStats;

    #[test]
    fn serves_metrics_and_404s_the_rest() {
        let m = MetricsServer::start("127.0.0.1:0").unwrap();
        let mut stats = LatencyStats::new();
        stats.record([1000, 2000, 3000, 100, 50, 6150]);
        let mut t = Telemetry::default();
        t.temp_c.insert("gpu-thermal".into(), 44.5);
        let mut misses = DeadlineMisses::default();
        misses.by_stage[Stage::Inference] = 3;
        let source = crate::pipeline::report::SourceState::default();
        let blind = crate::pipeline::report::Blind {
            camera: "rear".into(),
            reason: crate::pipeline::report::BlindReason::Camera,
            detail: "gone".into(),
            for_ms: 1500.0,
            throttling: false,
        };
        let iv = Interval {
            uptime_s: 10.0,
            interval_s: 5.0,
            totals: FrameCounters { captured: 5, ..Default::default() },
            delta: FrameCounters::default(),
            fps: 29.5,
            clients: 2,
            source: &source,
            cameras: &[crate::pipeline::report::CameraStats {
                name: "rear".into(),
                uri: "v4l2:///dev/video1".into(),
                source: source.clone(),
                frames: FrameCounters { captured: 5, ..Default::default() },
                fps: Default::default(),
                frame_age_ms: Some(1500.0),
                stale_ms: 1000.0,
                latency_ms: Default::default(),
                blind: Some(blind.clone()),
            }],
            latency: &stats,
            telemetry: &t,
            deadline_ms: 50.0,
            misses: &misses,
            blind: Some(&blind),
        };
        m.update(render(&iv, &misses));
        let get = |path: &str| {
            let mut c = TcpStream::connect(m.local_addr()).unwrap();
            // In pieces, as a slow client may send it: the server reads to the blank line.
            for piece in ["GET ", path, " HTTP/1.0\r\n", "\r\n"] {
                c.write_all(piece.as_bytes()).unwrap();
                c.flush().unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            let mut out = String::new();
            c.read_to_string(&mut out).unwrap();
            out
        };
        let body = get("/metrics");
        assert!(body.starts_with("HTTP/1.0 200 OK"), "{body}");
        assert!(body.contains("jetdetect_frames_total{outcome=\"captured\"} 5"), "{body}");
        assert!(
            body.contains("jetdetect_latency_seconds{stage=\"inference\",quantile=\"0.5\"} 0.003"),
            "{body}"
        );
        assert!(body.contains("jetdetect_temperature_celsius{zone=\"gpu-thermal\"} 44.5"), "{body}");
        assert!(body.contains("jetdetect_deadline_misses_total{stage=\"inference\"} 3"), "{body}");
        assert!(
            body.contains("jetdetect_deadline_seconds 0.05") && body.contains("jetdetect_blind 1"),
            "{body}"
        );
        assert!(
            body.contains("jetdetect_camera_frames_total{camera=\"rear\",outcome=\"captured\"} 5"),
            "{body}"
        );
        assert!(body.contains("jetdetect_camera_frame_age_seconds{camera=\"rear\"} 1.5"), "{body}");
        assert!(body.contains("jetdetect_camera_blind{camera=\"rear\"} 1"), "{body}");
        assert!(get("/").starts_with("HTTP/1.0 404"));
    }
}
