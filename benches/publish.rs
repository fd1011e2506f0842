//! Publishing one frame: serialising its `detections` message (20 boxes) and
//! writing it to 1 and to 10 connected clients over the UNIX socket, with each
//! client reading on its own thread; and the MAVLink and ROS 2 outputs' share for
//! the same frame with 20 tracked obstacles. Target: < 50 us each.
//!
//! `cargo bench --bench publish`; `cargo test --benches` runs each once.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use jetdetect::output::protocol::write_detections;
use jetdetect::output::socket::SocketServer;
use jetdetect::report::FrameReport;
use jetdetect::yolo::Detection;

fn report() -> FrameReport {
    let mut r = FrameReport::new();
    r.seq = 1234;
    r.width = 1280;
    r.height = 720;
    r.captured_wall_ns = 1_790_000_000_000_000_000;
    r.detections = (0..20)
        .map(|i| {
            let x = 50.0 + 55.0 * i as f32;
            Detection {
                class_id: i % 3,
                score: 0.5 + i as f32 / 50.0,
                x1: x,
                y1: 100.0,
                x2: x + 40.0,
                y2: 180.5,
            }
        })
        .collect();
    r
}

fn bench(c: &mut Criterion) {
    let names = common::names();
    let r = report();
    let mut g = c.benchmark_group("publish one frame");
    let mut line = Vec::with_capacity(8192);
    g.bench_function("serialise only (20 detections)", |b| {
        b.iter(|| {
            line.clear();
            write_detections(&mut line, &r, &names, Instant::now(), 0);
        })
    });
    for clients in [1usize, 10] {
        let path =
            std::env::temp_dir().join(format!("jetdetect-bench-{}-{clients}.sock", std::process::id()));
        let mut server = SocketServer::bind(&path, None, 4 << 20).expect("bind");
        let readers: Vec<_> = (0..clients)
            .map(|_| {
                let mut s = UnixStream::connect(&path).expect("connect");
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 1 << 16];
                    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
                })
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        while server.clients() < clients && Instant::now() < deadline {
            server.accept(b"{\"type\":\"hello\"}\n");
        }
        assert_eq!(server.clients(), clients);
        g.bench_function(format!("{clients} client(s)"), |b| {
            b.iter(|| {
                line.clear();
                write_detections(&mut line, &r, &names, Instant::now(), 0);
                server.broadcast(&line);
            })
        });
        assert_eq!(server.clients(), clients, "no client may be dropped as slow");
        drop(server);
        for t in readers {
            t.join().expect("reader");
        }

        // The floor: the same line written to the same number of reading sockets with plain
        // write() calls, nothing else (what the kernel costs per client on this machine).
        let pairs: Vec<(UnixStream, std::thread::JoinHandle<()>)> = (0..clients)
            .map(|_| {
                let (w, mut r) = UnixStream::pair().expect("socketpair");
                let t = std::thread::spawn(move || {
                    let mut buf = vec![0u8; 1 << 16];
                    while matches!(r.read(&mut buf), Ok(n) if n > 0) {}
                });
                (w, t)
            })
            .collect();
        let (mut writers, threads): (Vec<UnixStream>, Vec<_>) = pairs.into_iter().unzip();
        g.bench_function(format!("{clients} client(s), write() only (floor)"), |b| {
            b.iter(|| {
                for w in &mut writers {
                    std::io::Write::write_all(w, &line).expect("write");
                }
            })
        });
        drop(writers);
        for t in threads {
            t.join().expect("reader");
        }
    }
    g.finish();
}

/// The MAVLink output (`[output.mavlink]`) for one frame of 20 tracked, ranged obstacles, with
/// every message it can send on (OBSTACLE_DISTANCE, and OBSTACLE_DISTANCE_3D for all 20 plus the
/// batch's closing message): what the publisher thread pays (encoding them into the hand-off
/// slot), and apart from it what the sending thread pays per frame (serialising and sending the
/// 22 messages over UDP to a reading peer).
fn bench_mavlink(c: &mut Criterion) {
    use jetdetect::output::mavlink::MavlinkOutput;
    use jetdetect::output::Output;
    use mavlink::dialects::ardupilotmega::MavMessage;
    use mavlink::MavConnection;

    let names = common::names();
    let mut hazards = common::hazards();
    let mut r = report();
    for d in &mut r.detections {
        d.score = 0.9; // above the tracker's threshold for starting a track
    }
    // Ten frames 33 ms apart, the boxes drifting: every box becomes a confirmed track.
    let t0 = Instant::now();
    for k in 0..10 {
        for d in &mut r.detections {
            d.x1 += 1.0;
            d.x2 += 1.0;
        }
        r.captured = t0 + Duration::from_millis(33 * k);
        hazards.update(&r.detections, r.captured, r.width, r.height, &mut r.hazards);
    }
    let ranged = r.hazards.obstacles.iter().filter(|o| o.range_m.is_some()).count();
    assert_eq!(ranged, 20, "every box a tracked obstacle with a range");

    let peer = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let url = format!("udpout:{}", peer.local_addr().expect("addr"));
    let received = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let reader = {
        let received = received.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            peer.set_read_timeout(Some(Duration::from_millis(500))).expect("timeout");
            while peer.recv(&mut buf).is_ok() {
                received.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
    };
    let mut g = c.benchmark_group("publish one frame, MAVLink");
    let mut out = MavlinkOutput::new(&every_message(&url));
    out.open().expect("open");
    // The camera the report comes from: frames of any other camera are not this output's.
    out.ready(&jetdetect::output::Started {
        source: String::new(),
        cameras: vec![(r.camera.name.to_string(), String::new())],
        engine: String::new(),
        runtime: Default::default(),
        input: [256, 256],
        names: names.clone(),
    });
    g.bench_function("frame() on the publisher thread (20 obstacles)", |b| {
        b.iter(|| out.frame(&r, 0, Instant::now()))
    });
    // What was measured reaches the link: a frame sent is 22 datagrams (one frame at least, in
    // `cargo test --benches`, which runs each bench once).
    std::thread::sleep(Duration::from_millis(300));
    let got = received.load(std::sync::atomic::Ordering::Relaxed);
    assert!(got >= 22, "the MAVLink output sent {got} datagrams: frame() did nothing");
    drop(out);

    // The sending thread's work per frame, on this thread: OBSTACLE_DISTANCE, 20 x 3D, the close.
    let conn = mavlink::connect::<MavMessage>(&url).expect("connect");
    let messages = out_messages(&r);
    g.bench_function("send 22 messages over UDP (the sending thread's work)", |b| {
        b.iter(|| {
            for m in &messages {
                conn.send_default(m).expect("send");
            }
        })
    });
    g.finish();
    drop(conn);
    reader.join().expect("reader");

    // The ROS 2 output (`[output.ros2]`, feature `ros2`): the publisher thread's share for the
    // same frame (its boxes into the hand-over slot, the zones JSON written once); the node's
    // thread builds the messages and RustDDS sends them, off the pipeline.
    #[cfg(feature = "ros2")]
    {
        use jetdetect::output::ros2::{Ros2Config, Ros2Output};
        use jetdetect::output::Started;
        let mut g = c.benchmark_group("publish one frame, ROS 2");
        let config = Ros2Config {
            domain_id: 220 + (std::process::id() % 10) as u16,
            interfaces: vec!["127.0.0.1".into()],
            ..Default::default()
        };
        let mut out = Ros2Output::new(&config, true);
        out.open().expect("open the ROS 2 node");
        out.ready(&Started {
            source: String::new(),
            cameras: vec![("cam0".into(), String::new())],
            engine: String::new(),
            runtime: Default::default(),
            input: [256, 256],
            names: names.clone(),
        });
        g.bench_function("frame() on the publisher thread (20 detections + zones JSON)", |b| {
            b.iter(|| out.frame(&r, 0, Instant::now()))
        });
        g.finish();
    }
}

/// A MAVLink config that sends every message it can: OBSTACLE_DISTANCE and, for each ranged
/// obstacle, OBSTACLE_DISTANCE_3D (PX4 ignores those; here they are the most work per frame).
fn every_message(url: &str) -> jetdetect::output::mavlink::MavlinkConfig {
    use jetdetect::output::mavlink::{Autopilot, MavlinkConfig};
    MavlinkConfig {
        url: url.into(),
        autopilot: Some(Autopilot::Px4),
        obstacle_distance_3d: Some(true),
        ..Default::default()
    }
}

/// The messages the MAVLink output sends for `r`, encoded as it encodes them.
fn out_messages(r: &FrameReport) -> Vec<mavlink::dialects::ardupilotmega::MavMessage> {
    use jetdetect::output::mavlink::encode;
    use mavlink::dialects::ardupilotmega::MavMessage;
    let limits = every_message("udpout:127.0.0.1:1").profile().limits;
    let mut d = Default::default();
    encode::obstacle_distance(&r.hazards, 0, &limits, &mut d);
    let mut v = vec![MavMessage::OBSTACLE_DISTANCE(d)];
    v.extend(
        r.hazards
            .obstacles
            .iter()
            .filter_map(|o| encode::obstacle_3d(o, 0, &limits, false))
            .map(MavMessage::OBSTACLE_DISTANCE_3D),
    );
    v.push(MavMessage::OBSTACLE_DISTANCE_3D(encode::close_3d(0, &limits)));
    assert_eq!(v.len(), 22);
    v
}

criterion_group!(benches, bench, bench_mavlink);
criterion_main!(benches);
