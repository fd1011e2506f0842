//! 50 robots on one broker (docs/benchmarks.md, docs/fleet.md): one process runs DEVICES real
//! `[output.mqtt]` outputs (each with its own threads, on-disk queue and connection), all fed at
//! the daemon's rates: a hazards message per frame at FPS (QoS 1, through the queue) and
//! detections at 2 per second (QoS 0). The frames are a synthetic scene's ground truth run
//! through the real hazard layer (tracks, times to contact, zones), so every payload is one the
//! daemon would send. A subscriber in the same process (rumqttc) takes every hazards message
//! and measures the delay from the output's `publish_mono_ns` (the moment the pipeline handed
//! the frame over) to its arrival; the broker is Debian's mosquitto, started here on a free
//! 127.0.0.1 port, its CPU time read from /proc.
//!
//! `cargo bench --bench fleet` (DEVICES=50 SECONDS=30 FPS=30 OUT=file.json to change; needs
//! `apt install mosquitto`). Prints the figures and, with OUT, writes them as JSON.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jetdetect::clock::mono_ns;
use jetdetect::frame::Frame;
use jetdetect::hazard::{CameraConfig, HazardFrame, Hazards, HazardsConfig};
use jetdetect::output::mqtt::link::{self, Net};
use jetdetect::output::mqtt::{MqttConfig, MqttOutput};
use jetdetect::output::Output;
use jetdetect::output::Started;
use jetdetect::report::{CameraId, FrameReport};
use jetdetect::stats::StageTimes;
use jetdetect::yolo::{ClassNames, Detection};

fn env(name: &str, default: f64) -> f64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// CPU seconds (user + system) of process `pid`.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |p| p.1);
    let f: Vec<f64> = after.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the name; the state is not a number.
    let ticks = f.get(10).copied().unwrap_or(0.0) + f.get(11).copied().unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The frames every simulated robot sends: a synthetic scene's truth through the hazard layer.
fn scene(frames: usize, fps: f64, names: &ClassNames) -> Vec<(Vec<Detection>, HazardFrame)> {
    let uri =
        format!("synthetic://?width=640&height=480&fps=1000&seed=5&objects=4&approach=2&frames={frames}");
    let mut src = jetdetect::source::open(&uri).expect("synthetic source");
    let mut cfg = HazardsConfig { enabled: true, ..Default::default() };
    for (class, h) in [("box", 0.5), ("ball", 0.3), ("cone", 0.7)] {
        cfg.classes.insert(class.into(), jetdetect::hazard::ClassSize { height_m: Some(h), width_m: None });
    }
    let mut hz = Hazards::new(&cfg, &CameraConfig::default(), names).expect("hazards");
    let t0 = Instant::now();
    let mut frame = Frame::empty();
    let mut out = Vec::new();
    let mut i = 0;
    while src.next_frame(&mut frame).expect("frame") {
        let dets: Vec<Detection> = frame
            .truth
            .iter()
            .filter(|t| t.visible > 0.3)
            .map(|t| Detection { class_id: t.class_id, score: 0.9, x1: t.x1, y1: t.y1, x2: t.x2, y2: t.y2 })
            .collect();
        let mut h = HazardFrame::with_capacity(16);
        hz.update(&dets, t0 + Duration::from_secs_f64(i as f64 / fps), frame.width, frame.height, &mut h);
        out.push((dets, h));
        i += 1;
    }
    out
}

fn main() {
    // `cargo test --benches` runs every bench once with `--bench`; this one needs a broker and
    // half a minute, so it runs only under `cargo bench` (or when asked by name).
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if Command::new("mosquitto").arg("-h").output().is_err() {
        eprintln!("fleet bench: mosquitto is not installed (apt install mosquitto): skipped");
        return;
    }
    let devices = env("DEVICES", 50.0) as usize;
    let seconds = env("SECONDS", 30.0);
    let fps = env("FPS", 30.0);
    let warmup = 3.0;
    let names = ClassNames::from_file(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/obstacles.names"),
    )
    .expect("class names");
    let frames = scene(300, fps, &names);

    let dir = std::env::temp_dir().join(format!("jetdetect-fleet-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(dir.join("mosquitto.conf"), format!("user root\nlistener {port} 127.0.0.1\nallow_anonymous true\nmax_inflight_messages 0\nmax_queued_messages 0\n")).unwrap();
    let mut broker = Command::new("mosquitto")
        .arg("-c")
        .arg(dir.join("mosquitto.conf"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = format!("mqtt://127.0.0.1:{port}");

    // The subscriber: delay per hazards message, count per device.
    let delays: Arc<Mutex<Vec<f64>>> = Arc::default();
    let per_device: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let measuring = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sub_cfg = MqttConfig { url: url.clone(), ..MqttConfig::default() };
    let settings = link::settings(&sub_cfg, "fleet-bench-sub".into(), None).unwrap();
    let (sub, mut conn) = link::connect(&settings, 1024);
    {
        let (delays, per_device, measuring, sub) =
            (Arc::clone(&delays), Arc::clone(&per_device), Arc::clone(&measuring), sub.clone());
        std::thread::spawn(move || loop {
            match conn.next(&settings) {
                Net::Connected => sub.subscribe("jetdetect/+/hazards").unwrap(),
                Net::Message { topic, payload, .. } => {
                    let now = mono_ns(Instant::now());
                    let text = String::from_utf8_lossy(&payload);
                    let Some(at) = text.find("\"publish_mono_ns\":") else { continue };
                    let digits: String = text[at + 18..].chars().take_while(|c| c.is_ascii_digit()).collect();
                    let sent: u64 = digits.parse().unwrap_or(now);
                    let device = topic.split('/').nth(1).unwrap_or("").to_string();
                    *per_device.lock().unwrap().entry(device).or_default() += 1;
                    if measuring.load(std::sync::atomic::Ordering::Relaxed) {
                        delays.lock().unwrap().push(now.saturating_sub(sent) as f64 / 1e6);
                    }
                }
                Net::Closed => return,
                _ => {}
            }
        });
    }
    std::thread::sleep(Duration::from_millis(500));

    // The robots.
    let started = Started {
        source: "synthetic".into(),
        cameras: vec![("cam0".into(), "synthetic".into())],
        engine: "bench".into(),
        runtime: BTreeMap::new(),
        input: [256, 256],
        names: names.clone(),
    };
    let mut outputs: Vec<MqttOutput> = (0..devices)
        .map(|i| {
            let cfg = MqttConfig {
                url: url.clone(),
                device: format!("sim-{i:02}"),
                queue_dir: dir.join(format!("queue-{i:02}")),
                detections_hz: 2.0,
                ..MqttConfig::default()
            };
            let mut o = MqttOutput::new(&cfg, true, vec!["cam0".into()]);
            o.open().expect("open");
            o.ready(&started);
            o
        })
        .collect();
    let mut report = FrameReport::new();
    report.camera = CameraId::new(0, "cam0");
    report.width = 640;
    report.height = 480;
    let period = Duration::from_secs_f64(1.0 / fps);
    let start = Instant::now();
    let mut sent = 0u64;
    let mut tick = 0u64;
    let (mut broker_cpu0, mut self_cpu0, mut measure_start) = (0.0, 0.0, None);
    while start.elapsed().as_secs_f64() < warmup + seconds {
        if measure_start.is_none() && start.elapsed().as_secs_f64() >= warmup {
            measuring.store(true, std::sync::atomic::Ordering::Relaxed);
            broker_cpu0 = cpu_s(broker.id());
            self_cpu0 = cpu_s(std::process::id());
            measure_start = Some(Instant::now());
        }
        let (dets, hz) = &frames[tick as usize % frames.len()];
        report.detections.clone_from(dets);
        report.hazards.clone_from(hz);
        for o in outputs.iter_mut() {
            let now = Instant::now();
            report.seq = tick;
            report.captured = now - Duration::from_millis(25);
            report.captured_wall_ns = 0;
            report.infer_start = now - Duration::from_millis(20);
            report.infer_end = now;
            report.times = StageTimes::default();
            o.frame(&report, 0, now);
            sent += 1;
        }
        tick += 1;
        let next = start + period * tick as u32;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let window = measure_start.map_or(0.0, |t| t.elapsed().as_secs_f64());
    measuring.store(false, std::sync::atomic::Ordering::Relaxed);
    let broker_cpu = cpu_s(broker.id()) - broker_cpu0;
    let self_cpu = cpu_s(std::process::id()) - self_cpu0;
    let hazards_sent: Vec<u64> =
        outputs.iter().map(|o| o.counters().acked.load(std::sync::atomic::Ordering::Relaxed)).collect();
    drop(outputs);
    std::thread::sleep(Duration::from_secs(2));
    let mut d = delays.lock().unwrap().clone();
    d.sort_by(f64::total_cmp);
    let per = per_device.lock().unwrap().clone();
    let received: u64 = per.values().sum();
    let acked: u64 = hazards_sent.iter().sum();
    let rate = sent as f64 / (warmup + seconds);
    let summary = serde_json::json!({
        "devices": devices,
        "fps_per_device": fps,
        "messages_per_s": (rate * 100.0).round() / 100.0,
        "hazards_handed_over": sent,
        "hazards_acked_by_broker": acked,
        "hazards_received": received,
        "devices_seen": per.len(),
        "delay_ms": {"p50": pct(&d, 0.5), "p90": pct(&d, 0.9), "p99": pct(&d, 0.99), "max": d.last().copied().unwrap_or(f64::NAN), "samples": d.len()},
        "broker_cpu_pct": (broker_cpu / window * 1000.0).round() / 10.0,
        "publisher_process_cpu_pct": (self_cpu / window * 1000.0).round() / 10.0,
        "window_s": (window * 10.0).round() / 10.0,
    });
    println!(
        "fleet: {devices} robots x {fps} hazards/s (+2 detections/s each) = {:.0} msg/s to mosquitto for {:.0} s\n\
         delay p50 {:.2} p90 {:.2} p99 {:.2} max {:.2} ms over {} messages; broker CPU {:.1}% of one core, \
         publishing process {:.1}%\nhazards: {sent} handed over, {acked} acknowledged, {received} received; {} devices seen",
        rate * (1.0 + 2.0 / fps),
        window,
        pct(&d, 0.5),
        pct(&d, 0.9),
        pct(&d, 0.99),
        d.last().copied().unwrap_or(f64::NAN),
        d.len(),
        broker_cpu / window * 100.0,
        self_cpu / window * 100.0,
        per.len()
    );
    if let Ok(path) = std::env::var("OUT") {
        std::fs::write(path, serde_json::to_string_pretty(&summary).unwrap()).unwrap();
    }
    sub.disconnect();
    let _ = broker.kill();
    let _ = broker.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(per.len(), devices, "the subscriber did not see every device");
}
