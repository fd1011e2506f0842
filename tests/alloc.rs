//! Zero heap allocations per frame in steady state, for every stage jetdetect
//! owns: source, preprocessing, decoding, message serialisation, statistics.
//! A counting global allocator sees every allocation in this test binary.

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use jetdetect::config::Config;
use jetdetect::engine::{self, EngineOptions};
use jetdetect::frame::Frame;
use jetdetect::output::protocol::write_detections;
use jetdetect::preprocess::{CpuPreprocessor, Fit, Preprocessor};
use jetdetect::report::FrameReport;
use jetdetect::source;
use jetdetect::stats::LatencyStats;
use jetdetect::yolo::{ClassNames, DecodeOptions, Decoder, Layout, LayoutHint};

#[path = "common/ort.rs"]
mod ort;

struct Counting;
static COUNT: AtomicU64 = AtomicU64::new(0);
static ON: AtomicBool = AtomicBool::new(false);
/// While set, the first `TRACED_MAX` counted allocations keep a backtrace, so a failure names
/// the code that allocated (the whole-daemon test: its threads cannot be counted one by one).
static TRACE: AtomicBool = AtomicBool::new(false);
const TRACED_MAX: usize = 4;
static TRACED: std::sync::Mutex<Vec<(String, std::backtrace::Backtrace)>> = std::sync::Mutex::new(Vec::new());

thread_local! {
    /// Set while this thread records a backtrace: the recording's own allocations are not traced.
    static IN_TRACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While set, only the pipeline's own threads count in `COUNT` (capture, inference, and the
/// thread that runs the pipeline, the publisher); the others' allocations go to `OTHERS`.
static PIPELINE_ONLY: AtomicBool = AtomicBool::new(false);
static OTHERS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread is one of the pipeline's: 0 not known yet, 1 yes, 2 no.
    static PIPELINE: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

fn pipeline_thread() -> bool {
    PIPELINE.with(|p| {
        if p.get() == 0 {
            p.set(2); // provisional: should the lookup allocate, this is not re-entered
            // With several cameras each capture thread is "capture <camera>".
            let yes = matches!(std::thread::current().name(), Some(n) if n == "capture" || n == "inference" || n.starts_with("capture "));
            p.set(if yes { 1 } else { 2 });
        }
        p.get() == 1
    })
}

fn counted(l: AllocLayout) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    if PIPELINE_ONLY.load(Ordering::Relaxed) && !pipeline_thread() {
        OTHERS.fetch_add(1, Ordering::Relaxed);
        return;
    }
    COUNT.fetch_add(1, Ordering::Relaxed);
    if TRACE.load(Ordering::Relaxed) && !IN_TRACE.with(|t| t.replace(true)) {
        if let Ok(mut v) = TRACED.try_lock() {
            if v.len() < TRACED_MAX {
                let thread = std::thread::current().name().unwrap_or("?").to_string();
                v.push((
                    format!("{} bytes, thread {thread}", l.size()),
                    std::backtrace::Backtrace::force_capture(),
                ));
            }
        }
        IN_TRACE.with(|t| t.set(false));
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: AllocLayout) -> *mut u8 {
        counted(l);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: AllocLayout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: AllocLayout, n: usize) -> *mut u8 {
        counted(l);
        unsafe { System.realloc(p, l, n) }
    }
}

/// The traced allocations' backtraces, the project's own source lines only.
fn traced() -> String {
    let v = std::mem::take(&mut *TRACED.lock().unwrap_or_else(|e| e.into_inner()));
    let mut out = String::new();
    for (what, bt) in v {
        out.push_str(&format!("allocation ({what}):\n"));
        let text = bt.to_string();
        let ours: Vec<&str> =
            text.lines().filter(|l| l.contains("./src/") || l.contains("./tests/")).collect();
        for l in if ours.is_empty() { text.lines().collect() } else { ours } {
            out.push_str(&format!("    {}\n", l.trim()));
        }
    }
    out
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f`. The count is process-wide, so tests hold `SERIAL`.
fn count(f: impl FnOnce()) -> u64 {
    COUNT.store(0, Ordering::SeqCst);
    ON.store(true, Ordering::SeqCst);
    f();
    ON.store(false, Ordering::SeqCst);
    COUNT.load(Ordering::SeqCst)
}

fn model() -> std::path::PathBuf {
    concat!(env!("CARGO_MANIFEST_DIR"), "/models/obstacles-v8.onnx").into()
}

#[test]
fn steady_state_allocates_nothing_per_frame_outside_the_engine() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut engine =
        engine::open(jetdetect::engine::EngineKind::Tract, &model(), &EngineOptions::default()).unwrap();
    let out_shape = engine.output_shape().to_vec();
    let layout = Layout::detect(&out_shape, LayoutHint::Auto).unwrap();
    let (w, h) = engine.input_size();
    let names = ClassNames::from_metadata(&engine.metadata()["names"]).unwrap();
    for format in ["yuyv", "nv12", "rgb24", "grey"] {
        let mut src =
            source::open(&format!("synthetic://?width=640&height=480&fps=0&format={format}&objects=8"))
                .unwrap();
        let mut frame = Frame::empty();
        let mut pre = CpuPreprocessor::new();
        let mut decoder = Decoder::new(layout, DecodeOptions::default());
        let mut dets = Vec::new();
        let mut report = FrameReport::new();
        let mut line = Vec::new();
        let mut stats = LatencyStats::new();
        let mut step = |engine: &mut Box<dyn engine::Engine>, measure: bool| -> [u64; 5] {
            let mut n = [0u64; 5];
            let mut run = |i: usize, f: &mut dyn FnMut()| {
                if measure {
                    n[i] = count(f);
                } else {
                    f();
                }
            };
            run(0, &mut || assert!(src.next_frame(&mut frame).unwrap()));
            run(1, &mut || {
                pre.run(&frame, Fit::Letterbox, w, h, engine.input_mut()).unwrap();
            });
            let mut output = Vec::new();
            output.extend_from_slice(engine.run().unwrap());
            let lb = jetdetect::preprocess::Letterbox::new(frame.width, frame.height, w, h);
            run(2, &mut || decoder.decode(&output, &lb, &mut dets));
            run(3, &mut || {
                report.detections.clear();
                report.detections.extend_from_slice(&dets);
                report.truth.clone_from(&frame.truth);
                line.clear();
                write_detections(&mut line, &report, &names, Instant::now(), 0);
            });
            run(4, &mut || stats.record_stages(&report.stage_us(Instant::now())));
            n
        };
        for _ in 0..5 {
            step(&mut engine, false);
        }
        for _ in 0..20 {
            let n = step(&mut engine, true);
            assert_eq!(
                n, [0; 5],
                "{format}: allocations per frame in [source, preprocess, decode, serialise, stats]"
            );
        }
    }
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Allocations in one `Detector::detect` after five warm-up frames.
fn detect_allocations(config: &Config) -> u64 {
    let mut detector = jetdetect::daemon::detector(config).unwrap();
    let mut src = source::open("synthetic://?width=640&height=480&fps=0&format=yuyv").unwrap();
    let mut frame = Frame::empty();
    for _ in 0..5 {
        src.next_frame(&mut frame).unwrap();
        detector.detect(&frame).unwrap();
    }
    src.next_frame(&mut frame).unwrap();
    count(|| {
        detector.detect(&frame).unwrap();
    })
}

#[test]
fn engine_allocations_per_frame_are_reported() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut config = Config::default();
    config.model.path = model();
    config.engine.kind = jetdetect::engine::EngineKind::Tract;
    let n = detect_allocations(&config);
    // tract allocates the intermediate tensors of each run; this pins the figure
    // so a change shows up here (docs/benchmarks.md).
    eprintln!("allocations in one Detector::detect (tract run included): {n}");
    assert!(n < 2000, "{n} allocations per frame");
}

/// The shipped model on ONNX Runtime's CPU provider (a test that calls this is ignored where
/// build.rs found no library, unless `JETDETECT_REQUIRE_ORT` is set).
fn onnxruntime_cpu() -> Config {
    let lib = ort::library();
    let mut config = Config::default();
    config.model.path = model();
    config.engine.kind = jetdetect::engine::EngineKind::OnnxRuntime;
    config.engine.library = lib;
    config.engine.providers = vec![jetdetect::engine::Provider::Cpu];
    config
}

#[test]
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn onnxruntime_engine_allocations_per_frame_are_reported() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut config = onnxruntime_cpu();
    let n = detect_allocations(&config);
    // Counts the Rust side only: ONNX Runtime's own C++ allocations do not go through
    // Rust's global allocator.
    eprintln!("Rust allocations in one Detector::detect (ONNX Runtime CPU, I/O bound once): {n}");
    assert_eq!(n, 0, "Rust allocations per frame around a bound ONNX Runtime session");
    // Preprocessing as a graph in its own session, bound to the engine's input: one more bound run.
    config.preprocess.device = jetdetect::preprocess::Device::Gpu;
    let n = detect_allocations(&config);
    eprintln!("Rust allocations in one Detector::detect (graph preprocessing + engine, CPU provider): {n}");
    assert_eq!(n, 0, "Rust allocations per frame with the preprocessing graph");
}

const FROM: usize = 60;
const TO: usize = 260;

/// The daemon's config for the whole-daemon tests: ONNX Runtime (tract allocates inside its
/// runs, reported above), the hazard layer with tracking, times to contact, range estimates,
/// zones and the deadline count (a 1 ms deadline: every frame misses it), and the periodic work
/// (telemetry, stats messages) set to happen outside the window.
fn daemon_config(tag: &str) -> Config {
    let mut config = onnxruntime_cpu();
    config.source.first_mut().uri =
        "synthetic://?width=640&height=480&fps=0&format=yuyv&objects=6&seed=9&approach=2".into();
    config.hazards.enabled = true;
    for (class, h) in [("box", 0.5), ("ball", 0.3), ("cone", 0.7)] {
        let size = jetdetect::hazard::ClassSize { height_m: Some(h), width_m: None };
        config.hazards.classes.insert(class.into(), size);
    }
    config.latency.deadline_ms = 1.0;
    config.output.socket =
        std::env::temp_dir().join(format!("jetdetect-alloc-{}-{tag}.sock", std::process::id()));
    config.output.stats_interval_s = 3600;
    config.power.telemetry_ms = 3_600_000;
    config
}

/// What one counted run of the daemon saw.
struct DaemonRun {
    /// Allocations over frames FROM..TO (every thread, or the pipeline's only).
    allocations: u64,
    /// With `pipeline_only`: the other threads' allocations over the same frames (read by the
    /// ROS 2 case, which needs its feature).
    #[cfg_attr(not(feature = "ros2"), allow(dead_code))]
    others: u64,
    /// Lines the socket client read.
    lines: usize,
    summary: jetdetect::pipeline::RunSummary,
}

/// Runs the daemon per `config` with one reading socket client and counts allocations over
/// frames FROM..TO: on every thread, or with `pipeline_only` on the pipeline's own (capture,
/// inference, and this thread, the publisher) with the rest counted apart. Inside the window
/// the publisher stalls for ten frames (as on a loaded board): the reports queue up and
/// inference finds the queue full, which must not cost an allocation either.
fn count_daemon(config: &Config, pipeline_only: bool) -> DaemonRun {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    let socket = config.output.socket.clone();
    let client = std::thread::spawn(move || {
        use std::io::Read;
        let mut buf = vec![0u8; 1 << 16];
        let mut stream = loop {
            match std::os::unix::net::UnixStream::connect(&socket) {
                Ok(s) => break s,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        };
        let mut lines = 0usize;
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
        }
        lines
    });
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = Arc::new([AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)]);
    /// Switches the counting on at frame FROM and off at frame TO, stalling in between.
    struct Window(Arc<AtomicUsize>, Arc<[AtomicU64; 2]>);
    impl jetdetect::output::Output for Window {
        fn frame(&mut self, _: &FrameReport, _: u64, _: Instant) {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            if (FROM + 20..FROM + 30).contains(&n) {
                std::thread::sleep(std::time::Duration::from_millis(40));
            }
            if n == FROM {
                COUNT.store(0, Ordering::SeqCst);
                OTHERS.store(0, Ordering::SeqCst);
                TRACE.store(true, Ordering::SeqCst);
                ON.store(true, Ordering::SeqCst);
            } else if n == TO {
                ON.store(false, Ordering::SeqCst);
                TRACE.store(false, Ordering::SeqCst);
                self.1[0].store(COUNT.load(Ordering::SeqCst), Ordering::SeqCst);
                self.1[1].store(OTHERS.load(Ordering::SeqCst), Ordering::SeqCst);
            }
        }
    }
    let mut outputs = jetdetect::daemon::outputs(config, None);
    outputs.push(Box::new(Window(seen.clone(), counted.clone())));
    let options = jetdetect::daemon::RunOptions {
        outputs,
        max_frames: Some(TO as u64 + 5),
        quiet: true,
        ..Default::default()
    };
    PIPELINE.with(|p| p.set(1)); // this thread publishes
    PIPELINE_ONLY.store(pipeline_only, Ordering::SeqCst);
    let summary = jetdetect::daemon::run(config, options, jetdetect::shutdown::Shutdown::new())
        .expect("the daemon runs");
    ON.store(false, Ordering::SeqCst);
    TRACE.store(false, Ordering::SeqCst);
    PIPELINE_ONLY.store(false, Ordering::SeqCst);
    let lines = client.join().unwrap();
    DaemonRun {
        allocations: counted[0].load(Ordering::SeqCst),
        others: counted[1].load(Ordering::SeqCst),
        lines,
        summary,
    }
}

/// The daemon itself, every thread of it (capture, inference, publisher with a reading client,
/// the MAVLink link to a UDP peer), over 200 frames in steady state: not one allocation.
#[test]
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn the_whole_daemon_allocates_nothing_per_frame() {
    use std::sync::Arc;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut config = daemon_config("all");
    // The MAVLink output sends every frame's obstacles to a UDP peer, read on a thread of its
    // own (its thread and the crate's serialisation count too).
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    config.output.mavlink = Some(jetdetect::output::mavlink::MavlinkConfig {
        url: format!("udpout:{}", peer.local_addr().unwrap()),
        // Every message it can send: OBSTACLE_DISTANCE and each track's 3D, as fast as allowed.
        autopilot: Some(jetdetect::output::mavlink::Autopilot::Px4),
        obstacle_distance_3d: Some(true),
        max_rate_hz: 100.0,
        ..Default::default()
    });
    let mav_stop = Arc::new(AtomicBool::new(false));
    let mav_reader = {
        let stop = mav_stop.clone();
        peer.set_read_timeout(Some(std::time::Duration::from_millis(100))).unwrap();
        std::thread::spawn(move || {
            let (mut buf, mut n) = (vec![0u8; 512], 0usize);
            while !stop.load(Ordering::Relaxed) {
                if peer.recv(&mut buf).is_ok() {
                    n += 1;
                }
            }
            n
        })
    };
    let run = count_daemon(&config, false);
    mav_stop.store(true, Ordering::Relaxed);
    let datagrams = mav_reader.join().unwrap();
    let n = run.allocations;
    eprintln!(
        "allocations in the whole daemon over frames {FROM}..{TO} (ONNX Runtime CPU, one client): {n}; \
         {} captured, {} dropped, client read {} lines, MAVLink peer {datagrams} datagrams",
        run.summary.frames.captured, run.summary.frames.dropped, run.lines
    );
    assert!(run.lines > TO, "the client read every message: {}", run.lines);
    assert!(datagrams > TO, "the MAVLink peer got every frame's obstacles: {datagrams}");
    assert_eq!(n, 0, "allocations in {} steady-state frames of the whole daemon:\n{}", TO - FROM, traced());
}

/// Three cameras whose newest frames go through one engine run (a dynamic batch axis, ONNX
/// Runtime's choice of up to four per run), each with its own hazard layer: the whole daemon
/// still makes no allocation per frame.
#[test]
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn several_cameras_batched_allocate_nothing_per_frame() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut config = daemon_config("cameras");
    config.model.path = model().with_file_name("obstacles-v8-batch.onnx");
    let first = config.source.0[0].clone();
    config.source.0 = ["yuyv", "nv12", "rgb24"]
        .iter()
        .enumerate()
        .map(|(i, format)| jetdetect::config::SourceConfig {
            name: format!("c{i}"),
            uri: format!(
                "synthetic://?width=640&height=480&fps=0&format={format}&objects=6&seed={}&approach=2",
                9 + i
            ),
            ..first.clone()
        })
        .collect();
    let run = count_daemon(&config, false);
    let n = run.allocations;
    let per_camera: Vec<u64> = run.summary.cameras.iter().map(|c| c.frames.processed).collect();
    eprintln!(
        "allocations in the whole daemon over frames {FROM}..{TO}, three cameras batched (ONNX Runtime CPU): {n}; \
         processed per camera {per_camera:?}, client read {} lines",
        run.lines
    );
    assert!(run.lines > TO, "the client read every message: {}", run.lines);
    assert!(per_camera.iter().all(|&p| p > 20), "every camera served: {per_camera:?}");
    assert_eq!(
        n,
        0,
        "allocations in {} steady-state frames of three batched cameras:\n{}",
        TO - FROM,
        traced()
    );
}

/// With the ROS 2 output on, the pipeline's threads (capture, inference, publisher) still make
/// no allocation: the output hands each frame's boxes over through a slot. Its own thread and
/// RustDDS's allocate to build and send each sample; that figure is printed, not held to zero.
#[cfg(feature = "ros2")]
#[test]
#[cfg_attr(not(jetdetect_has_ort), ignore = "needs ONNX Runtime: ORT_DYLIB_PATH (docs/reliability.md)")]
fn with_ros2_on_the_pipeline_threads_allocate_nothing_per_frame() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut config = daemon_config("ros2");
    config.output.ros2 = Some(jetdetect::output::ros2::Ros2Config {
        domain_id: 200 + (std::process::id() % 30) as u16,
        interfaces: vec!["127.0.0.1".into()],
        ..Default::default()
    });
    let run = count_daemon(&config, true);
    eprintln!(
        "with ROS 2: allocations over frames {FROM}..{TO}: pipeline threads {}, ROS 2 and DDS threads {} \
         ({:.1} per frame); {} captured, {} dropped",
        run.allocations,
        run.others,
        run.others as f64 / (TO - FROM) as f64,
        run.summary.frames.captured,
        run.summary.frames.dropped
    );
    assert!(run.lines > TO, "the client read every message: {}", run.lines);
    assert!(run.others > 0, "the ROS 2 thread published (and allocated) nothing: is the output on?");
    assert_eq!(run.allocations, 0, "pipeline threads' allocations with ROS 2 on:\n{}", traced());
}
