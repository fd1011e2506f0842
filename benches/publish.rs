//! Publishing one frame: serialising its `detections` message (20 boxes) and
//! writing it to 1 and to 10 connected clients over the UNIX socket, with each
//! client reading on its own thread. Target: < 50 us.
//!
//! `cargo bench --bench publish`; `cargo test --benches` runs each once.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use jetdetect::output::protocol::{write_detections, FrameReport};
use jetdetect::output::socket::SocketServer;
use jetdetect::yolo::{ClassNames, Detection};

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
    let names = ClassNames::from_metadata("{0: 'box', 1: 'ball', 2: 'cone'}").expect("names");
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

criterion_group!(benches, bench);
criterion_main!(benches);
