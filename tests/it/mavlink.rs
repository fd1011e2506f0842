//! `[output.mavlink]` end to end: the daemon on a synthetic scene with known boxes sends to a
//! UDP peer, which parses every frame with rust-mavlink (CRC, ids, fields) and checks the
//! sectors against the scene's ground truth, one message per frame (no repeats), and PX4's
//! silence while blind (the source stalls: `synthetic://?stall=N`). The independent checks are
//! in Python: pymavlink over UDP and a serial link (tests/mavlink/check.py), and the receiving
//! models of PX4 and ArduPilot (tests/mavlink/oracle/), both run by tests/mavlink/run.sh in CI.

use std::collections::HashMap;
use std::io::BufRead;
use std::net::UdpSocket;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jetdetect::frame::GroundTruth;
use jetdetect::geometry::iou;
use mavlink::dialects::ardupilotmega::{
    MavAutopilot, MavDistanceSensor, MavFrame, MavMessage, MavState, MavType,
};
use mavlink::{MavConnection, MavHeader};
use serde::Deserialize;
use serde_json::Value;

use crate::common::Daemon;

/// One received message, when it came (wall clock, µs since the epoch).
struct Received {
    at_us: u64,
    at: Instant,
    header: MavHeader,
    msg: MavMessage,
}

fn wall_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// A free UDP port on 127.0.0.1.
fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Receives on `udpin:127.0.0.1:port` into a channel, on a thread of its own.
fn listen(port: u16) -> mpsc::Receiver<Received> {
    let conn = mavlink::connect::<MavMessage>(&format!("udpin:127.0.0.1:{port}")).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || loop {
        match conn.recv() {
            Ok((header, msg)) => {
                if tx.send(Received { at_us: wall_us(), at: Instant::now(), header, msg }).is_err() {
                    return;
                }
            }
            Err(e) => panic!("MAVLink receive: {e}"),
        }
    });
    rx
}

fn start(dir: &Path, source: &str, extra: &str) -> Daemon {
    Daemon::start(&crate::common::model_config(dir, source, extra), &[])
}

/// Class heights in the test's `[hazards.classes]`, by class id (box, ball, cone).
const HEIGHTS: [f64; 3] = [0.5, 0.3, 0.7];
const HFOV: f64 = 62.2;

#[derive(Deserialize)]
struct Dets {
    capture_wall_ns: u64,
    capture_mono_ns: u64,
    width: u32,
    truth: Vec<GroundTruth>,
    detections: Vec<Value>,
}

#[test]
fn obstacles_reach_a_udp_peer_in_their_sectors_once_per_frame_and_stop_while_blind() {
    let dir = crate::common::fresh_dir("mavlink", "udp");
    let port = free_port();
    let rx = listen(port);
    // 5 fps: frames 200 ms apart; after 40 frames the camera stalls for 2.5 s, past stale_ms
    // (600), and comes back. PX4's reading, with the 3D messages on (PX4 ignores them; they
    // are checked here against the tracks).
    let d = start(
        &dir,
        "synthetic://?width=640&height=480&fps=5&format=yuyv&seed=5&objects=4&approach=2&stall=40&stall_ms=2500",
        &format!(
            "[output.mavlink]\nurl = \"udpout:127.0.0.1:{port}\"\nautopilot = \"px4\"\nmax_distance_m = 60\n\
             obstacle_distance_3d = true\n\
             [hazards]\nenabled = true\n[hazards.classes]\nbox = {{ height_m = 0.5 }}\n\
             ball = {{ height_m = 0.3 }}\ncone = {{ height_m = 0.7 }}\n[latency]\nstale_ms = 600\n"
        ),
    );
    let mut c = d.connect();
    // The socket's detections (with the scene's truth) by capture time, read alongside.
    let (dtx, drx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        while c.read_line(&mut line).is_ok_and(|n| n > 0) {
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["type"] == "detections" {
                let _ = dtx.send(Dets::deserialize(&v).unwrap());
            }
            line.clear();
        }
    });
    let mut got = Vec::new();
    let started = Instant::now();
    // Until seeing again after the stall, and a little more.
    let mut resumed_at = None;
    while started.elapsed() < Duration::from_secs(60)
        && resumed_at.is_none_or(|t: Instant| t.elapsed() < Duration::from_secs(2))
    {
        let Ok(r) = rx.recv_timeout(Duration::from_millis(100)) else { continue };
        if let MavMessage::HEARTBEAT(h) = &r.msg {
            let blind_before = got.iter().any(|g: &Received| matches!(&g.msg, MavMessage::HEARTBEAT(h) if h.system_status == MavState::MAV_STATE_CRITICAL));
            if blind_before && h.system_status == MavState::MAV_STATE_ACTIVE && resumed_at.is_none() {
                resumed_at = Some(Instant::now());
            }
        }
        got.push(r);
    }
    d.signal(libc::SIGTERM);
    let (code, err) = d.wait(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{err}");
    // The goodbye.
    while let Ok(r) = rx.recv_timeout(Duration::from_millis(300)) {
        got.push(r);
    }
    assert!(resumed_at.is_some(), "never blind and back ({} messages):\n{err}", got.len());
    let dets: HashMap<u64, Dets> = drx.try_iter().map(|m| (m.capture_wall_ns / 1000, m)).collect();

    // Every message: ours, MAVLink 2 (rust-mavlink checked the CRC with each message's extra).
    for r in &got {
        assert_eq!((r.header.system_id, r.header.component_id), (1, 191), "{:?}", r.msg);
    }
    let states: Vec<MavState> = got
        .iter()
        .filter_map(|r| match &r.msg {
            MavMessage::HEARTBEAT(h) => {
                assert_eq!(
                    (h.mavtype, h.autopilot),
                    (MavType::MAV_TYPE_ONBOARD_CONTROLLER, MavAutopilot::MAV_AUTOPILOT_INVALID)
                );
                Some(h.system_status)
            }
            _ => None,
        })
        .collect();
    let mut order = states.clone();
    order.dedup();
    assert_eq!(
        order
            .iter()
            .filter(|s| **s != MavState::MAV_STATE_STANDBY && **s != MavState::MAV_STATE_BOOT)
            .copied()
            .collect::<Vec<_>>(),
        [
            MavState::MAV_STATE_ACTIVE,
            MavState::MAV_STATE_CRITICAL,
            MavState::MAV_STATE_ACTIVE,
            MavState::MAV_STATE_POWEROFF
        ],
        "heartbeat states"
    );
    let texts: Vec<String> = got
        .iter()
        .filter_map(|r| match &r.msg {
            MavMessage::STATUSTEXT(t) => {
                Some(String::from_utf8_lossy(&t.text[..]).trim_end_matches('\0').to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        ["jetdetect: seeing", "jetdetect: blind, no_frames", "jetdetect: seeing", "jetdetect: stopping"]
    );

    // The sectors: geometry, and each tracked, unhidden object of the scene where it should be.
    let blind_span = {
        let idx = |s: MavState, from: usize| {
            got.iter()
                .skip(from)
                .position(|r| matches!(&r.msg, MavMessage::HEARTBEAT(h) if h.system_status == s))
                .unwrap()
                + from
        };
        let b = idx(MavState::MAV_STATE_CRITICAL, 0);
        (b, idx(MavState::MAV_STATE_ACTIVE, b))
    };
    let fx = 320.0 / (HFOV.to_radians() / 2.0).tan();
    let (mut compared, mut within, mut distances) = (0, 0, 0);
    let mut last_seeing: Option<(Instant, u64, u64)> = None; // (received, received wall µs, capture µs)
    let mut stamps = Vec::new();
    // The sector whose centre (angle_offset + j * increment) is nearest `az`, and what sector
    // j reaches: its 10 degrees and 2.5 more each side.
    let sector = |az: f64| (((az + 20.0) / 10.0).round() as i64).rem_euclid(36) as usize;
    let reach = |j: usize| {
        let c = -20.0 + 10.0 * j as f64;
        let c = c - 360.0 * (c / 360.0).round();
        (c - 7.5, c + 7.5)
    };
    for (i, r) in got.iter().enumerate() {
        let MavMessage::OBSTACLE_DISTANCE(m) = &r.msg else { continue };
        distances += 1;
        assert!(
            !(blind_span.0..blind_span.1).contains(&i),
            "OBSTACLE_DISTANCE while the heartbeat said blind (message {i}, blind {blind_span:?})"
        );
        if i < blind_span.0 {
            last_seeing = Some((r.at, r.at_us, m.time_usec));
        }
        stamps.push(m.time_usec);
        assert_eq!(
            (m.frame, m.sensor_type),
            (MavFrame::MAV_FRAME_BODY_FRD, MavDistanceSensor::MAV_DISTANCE_SENSOR_UNKNOWN)
        );
        assert_eq!((m.min_distance, m.max_distance), (30, 6000));
        assert_eq!((m.increment_f, m.increment, m.angle_offset), (10.0, 10, -20.0));
        assert!(m.distances[36..].iter().all(|&d| d == u16::MAX), "only 36 sectors carry data");
        // Outside the 62.2-degree view (beyond the sectors at -30 and 30): unknown.
        for j in 6..35 {
            assert_eq!(m.distances[j], u16::MAX, "sector {j} is outside the view: {:?}", &m.distances[..36]);
        }
        let Some(frame) = dets.get(&m.time_usec) else { continue };
        assert_eq!(frame.width, 640);
        let span = |g: &GroundTruth| {
            let a = |x: f32| ((x as f64 - 320.0) / fx).atan().to_degrees();
            (a(g.x1), a(g.x2))
        };
        let truths: Vec<(f64, f64, &GroundTruth)> = frame
            .truth
            .iter()
            .map(|g| {
                let az = (((g.x1 + g.x2) as f64 / 2.0 - 320.0) / fx).atan().to_degrees();
                (az, fx * HEIGHTS[g.class_id] / (g.y2 - g.y1) as f64, g)
            })
            .collect();
        for &(az, range, g) in &truths {
            // Unhidden, tracked (a confirmed track on a detection matching it), within range,
            // with no nearer object within a sector's reach of it.
            let tracked = frame.detections.iter().any(|d| {
                let b = |k: &str| d[k].as_f64().unwrap() as f32;
                d["track_id"].is_u64()
                    && iou([b("x1"), b("y1"), b("x2"), b("y2")], [g.x1, g.y1, g.x2, g.y2]) > 0.7
            });
            let nearer_nearby = truths.iter().any(|&(_, r2, g2)| {
                !std::ptr::eq(g, g2)
                    && r2 < range * 1.1
                    && span(g2).0 < span(g).1 + 16.0
                    && span(g2).1 > span(g).0 - 16.0
            });
            if g.visible < 0.95 || !tracked || nearer_nearby || range > 59.0 {
                continue;
            }
            compared += 1;
            // The sector at its centre holds its range (within 10 %), and every sector that
            // reaches well into it (1 degree past the true edge, for the box's error) too.
            let (l, r) = span(g);
            let at_range = |j: usize| ((m.distances[j] as f64 / 100.0 - range) / range).abs() <= 0.10;
            let covering: Vec<usize> =
                (0..36).filter(|&j| reach(j).1 > l + 1.0 && reach(j).0 < r - 1.0).collect();
            if at_range(sector(az)) && covering.iter().all(|&j| at_range(j)) {
                within += 1;
            } else {
                eprintln!(
                    "object {} (class {}) at azimuth {az:.1} ({l:.1}..{r:.1}, sector {}), {range:.2} m: \
                     sectors {covering:?} hold {:?}; truth {:?}; detections {:?}",
                    g.object,
                    g.class_id,
                    sector(az),
                    covering.iter().map(|&j| m.distances[j]).collect::<Vec<_>>(),
                    frame.truth,
                    frame.detections
                );
            }
        }
    }
    eprintln!("{distances} OBSTACLE_DISTANCE; {within}/{compared} tracked objects at 10 % of their true range in their sectors");
    assert!(compared >= 20, "only {compared} comparisons");
    assert!(within as f64 >= compared as f64 * 0.95, "{within}/{compared} in their sectors at 10 %");

    // Once per frame: no capture time twice (a repeat would look fresh to the autopilot), and
    // every frame the socket published went out (5 fps is far below max_rate_hz).
    let mut unique = stamps.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), stamps.len(), "a frame's OBSTACLE_DISTANCE sent twice");
    let published = dets.len();
    assert!(stamps.len() + 2 >= published, "{} OBSTACLE_DISTANCE for {published} frames", stamps.len());
    // Silence: the last data sent before the stall went out as soon as its frame was ready,
    // and nothing came after it until the camera was back.
    let (_, sent_us, capture_us) = last_seeing.unwrap();
    let age_ms = (sent_us - capture_us) as f64 / 1000.0;
    assert!(age_ms <= 600.0, "data {age_ms:.0} ms old sent");

    // OBSTACLE_DISTANCE_3D: the track ids and positions of the frame's ranged obstacles, each
    // batch closed by a message with the next stamp and nothing within range.
    let (mut three_d, mut closes) = (0, 0);
    let mut batch_stamp = None;
    for r in &got {
        let MavMessage::OBSTACLE_DISTANCE_3D(m) = &r.msg else { continue };
        assert_eq!(m.frame, MavFrame::MAV_FRAME_BODY_FRD);
        let range = (m.x * m.x + m.y * m.y + m.z * m.z).sqrt();
        if m.obstacle_id == u16::MAX {
            closes += 1;
            assert!(range > m.max_distance, "a closing message within range: {m:?}");
            if let Some(stamp) = batch_stamp.take() {
                assert_eq!(m.time_boot_ms, u32::wrapping_add(stamp, 1), "the close takes the next stamp");
            }
            continue;
        }
        three_d += 1;
        batch_stamp = Some(m.time_boot_ms);
        assert!((0.3 - 1e-4..=60.0).contains(&range) && m.x > 0.0, "{m:?}");
        let frame = dets.values().find(|f| (f.capture_mono_ns / 1_000_000) as u32 == m.time_boot_ms);
        let Some(frame) = frame else { continue };
        let det = frame.detections.iter().find(|d| d["track_id"].as_u64() == Some(m.obstacle_id as u64));
        let det = det.unwrap_or_else(|| panic!("obstacle {} is no track of its frame", m.obstacle_id));
        let cx = (det["x1"].as_f64().unwrap() + det["x2"].as_f64().unwrap()) / 2.0;
        let az = ((cx - 320.0) / fx).atan().to_degrees();
        assert!(((m.y.atan2(m.x) as f64).to_degrees() - az).abs() < 0.05, "{m:?} vs azimuth {az}");
    }
    assert_eq!(closes, distances, "one closing message per frame");
    assert!(three_d > 50, "{three_d} OBSTACLE_DISTANCE_3D");
    assert!(err.contains("MAVLink udpout:127.0.0.1"), "{err}");
}

#[test]
fn a_peer_that_is_not_there_and_a_missing_serial_port_do_not_hold_the_pipeline_up() {
    let dir = crate::common::fresh_dir("mavlink", "dead");
    // Nobody listens on the UDP port; the serial device does not exist (retried every second).
    for url in [
        format!("udpout:127.0.0.1:{}", free_port()),
        format!("serial:{}:921600", dir.join("no-tty").display()),
    ] {
        let d = start(
            &dir,
            "synthetic://?width=320&height=240&fps=0&seed=2&frames=60",
            &format!(
                "[output.mavlink]\nurl = \"{url}\"\nautopilot = \"ardupilot\"\n[hazards]\nenabled = true\n"
            ),
        );
        let (code, err) = d.wait(Duration::from_secs(120));
        assert_eq!(code, Some(0), "{url}: {err}");
        assert!(err.contains("60 processed") || err.contains("60 captured"), "{url}: {err}");
        if url.starts_with("serial") {
            assert!(err.contains("cannot connect") && err.contains("no-tty"), "{err}");
            assert!(err.matches("cannot connect").count() <= 2, "throttled: {err}");
        }
    }
}

#[test]
fn a_mavlink_output_without_hazards_is_a_config_error_naming_the_key() {
    let dir = crate::common::fresh_dir("mavlink", "config");
    let p = dir.join("jd.toml");
    std::fs::write(&p, "[output.mavlink]\nurl = \"udpout:127.0.0.1:14550\"\nautopilot = \"px4\"\n").unwrap();
    let (code, err) = crate::common::check_config(&p);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "jd.toml:2: [output.mavlink] url: the MAVLink output sends the hazard layer's obstacles"
        ),
        "{err}"
    );
    std::fs::write(
        &p,
        "[hazards]\nenabled = true\n[output.mavlink]\nurl = \"serial:/dev/ttyTHS1\"\nautopilot = \"px4\"\n",
    )
    .unwrap();
    let (_, err) = crate::common::check_config(&p);
    assert!(
        err.contains("jd.toml:4: [output.mavlink] url: \"serial:/dev/ttyTHS1\": Incomplete port settings"),
        "{err}"
    );
    // Whose reading: required, and a word of the two.
    std::fs::write(&p, "[hazards]\nenabled = true\n[output.mavlink]\nurl = \"udpout:127.0.0.1:14550\"\n")
        .unwrap();
    let (code, err) = crate::common::check_config(&p);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("[output.mavlink] autopilot: missing: say whose reading"), "{err}");
    assert!(err.contains("px4 or ardupilot"), "{err}");
    std::fs::write(&p, "[hazards]\nenabled = true\n[output.mavlink]\nautopilot = \"inav\"\n").unwrap();
    let (_, err) = crate::common::check_config(&p);
    assert!(
        err.contains("jd.toml:4") && err.contains("'inav' is not an autopilot: use px4, ardupilot"),
        "{err}"
    );
    // The repeat rate is gone, and says what to do instead.
    std::fs::write(&p, "[hazards]\nenabled = true\n[output.mavlink]\nautopilot = \"px4\"\nrate_hz = 10\n")
        .unwrap();
    let (_, err) = crate::common::check_config(&p);
    assert!(err.contains("jd.toml:5: [output.mavlink] rate_hz: was removed"), "{err}");
}

#[test]
fn check_says_whose_reading_the_messages_are_shaped_for_and_warns_of_settings_that_work_against_it() {
    let dir = crate::common::fresh_dir("mavlink", "check");
    let p = crate::common::model_config(
        &dir,
        "synthetic://?frames=1",
        "[hazards]\nenabled = true\n[output.mavlink]\nautopilot = \"ardupilot\"\nblind = \"silent\"\n",
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jetdetect"))
        .args(["check", "--config"])
        .arg(&p)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("# MAVLink: shaped for ardupilot: OBSTACLE_DISTANCE per frame; while blind: nothing"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# warning: [output.mavlink] blind = \"silent\": ArduPilot marks the sensor NoData"),
        "{stdout}"
    );
    // The resolved config says it back.
    assert!(
        stdout.contains("autopilot = \"ardupilot\"") && stdout.contains("blind = \"silent\""),
        "{stdout}"
    );
}

#[test]
fn the_flight_controllers_attitude_reaches_the_collision_course() {
    // The daemon, with [vehicle] width_m, sends to a peer that answers as a flight controller
    // turning right at 0.6 rad/s (ATTITUDE at 50 Hz). The scene's camera does not turn, so the
    // obstacles' boxes do not slide; told that the vehicle turns, the layer predicts each
    // obstacle farther right when reached (a static point seen from a vehicle turning right
    // drifts left, so one that does not has its own motion to the right): the courses' offsets
    // move right once the ATTITUDE comes, which they do only if it reached the layer.
    let dir = crate::common::fresh_dir("mavlink", "attitude");
    let fc = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = fc.local_addr().unwrap().port();
    let d = start(
        &dir,
        "synthetic://?width=640&height=480&fps=30&format=yuyv&seed=5&objects=4&approach=2",
        &format!(
            "[output.mavlink]\nurl = \"udpout:127.0.0.1:{port}\"\nautopilot = \"px4\"\n\
             [hazards]\nenabled = true\n[hazards.classes]\nbox = {{ height_m = 0.5 }}\n\
             ball = {{ height_m = 0.3 }}\ncone = {{ height_m = 0.7 }}\n[vehicle]\nwidth_m = 0.6\n"
        ),
    );
    // The daemon's address, from its first datagram; then ATTITUDE from "the flight controller"
    // once `turning` is set.
    let mut buf = [0u8; 2048];
    fc.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let (_, daemon) = fc.recv_from(&mut buf).expect("the daemon sends");
    let turning = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let on = turning.clone();
    std::thread::spawn(move || {
        let header = MavHeader { system_id: 1, component_id: 1, sequence: 0 };
        let t0 = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(20));
            if !on.load(std::sync::atomic::Ordering::Relaxed) {
                continue;
            }
            let t = t0.elapsed().as_secs_f32();
            let msg = MavMessage::ATTITUDE(mavlink::dialects::ardupilotmega::ATTITUDE_DATA {
                time_boot_ms: (t * 1000.0) as u32,
                roll: 0.0,
                pitch: 0.0,
                yaw: (0.6 * t + std::f32::consts::PI) % std::f32::consts::TAU - std::f32::consts::PI,
                rollspeed: 0.0,
                pitchspeed: 0.0,
                yawspeed: 0.6,
            });
            let mut out = Vec::new();
            mavlink::write_v2_msg(&mut out, header, &msg).unwrap();
            if fc.send_to(&out, daemon).is_err() {
                return;
            }
        }
    });
    let mut c = d.connect();
    let mut offsets = |secs: u64| {
        let (mut v, until) = (Vec::new(), Instant::now() + Duration::from_secs(secs));
        let mut line = String::new();
        while Instant::now() < until {
            line.clear();
            assert!(c.read_line(&mut line).unwrap() > 0, "the daemon closed the socket");
            let m: Value = serde_json::from_str(&line).unwrap();
            for o in m["obstacles"].as_array().into_iter().flatten() {
                if let Some(w) = o["course"]["offset_widths"].as_f64() {
                    v.push(w);
                }
            }
        }
        v.sort_by(f64::total_cmp);
        assert!(v.len() >= 20, "{} courses in {secs} s", v.len());
        v[v.len() / 2]
    };
    let still = offsets(4);
    turning.store(true, std::sync::atomic::Ordering::Relaxed);
    let _settle = offsets(2);
    let turned = offsets(4);
    eprintln!("median offset, in obstacle widths: {still:.2} without ATTITUDE, {turned:.2} turning");
    assert!(turned - still > 1.0, "{still} -> {turned}");
}
