//! `gst://`, `rtsp://` and `csi://` sources against real GStreamer: `gst-launch-1.0` with
//! `videotestsrc`, and a real RTSP server (gst-rtsp-server through python3-gi,
//! `tests/rtsp/server.py`) streaming H.264 on 127.0.0.1.
//!
//! Without GStreamer's tools (as build.rs found them) these tests are reported as ignored, unless
//! `JETDETECT_REQUIRE_GST=1` (`.ci/run` sets it and installs them): then a missing tool fails them.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jetdetect::frame::Frame;
use jetdetect::source::gst::GstSource;
use jetdetect::source::{self, FrameSource, SourceError};

use crate::common;

/// Checks that `gst-launch-1.0` (and, with `rtsp`, the RTSP server's Python bindings) are here:
/// the test runs only where build.rs found them or `JETDETECT_REQUIRE_GST` is set.
fn need_gst(rtsp: bool) {
    let gst = Command::new("gst-launch-1.0").arg("--version").output().is_ok_and(|o| o.status.success());
    let py = !rtsp
        || Command::new("/usr/bin/python3")
            .args(["-c", "import gi; gi.require_version('GstRtspServer', '1.0')"])
            .output()
            .is_ok_and(|o| o.status.success());
    assert!(
        gst && py,
        "GStreamer's tools{} are missing: apt install gstreamer1.0-tools \
         gstreamer1.0-plugins-{{base,good,bad}} python3-gi gir1.2-gst-rtsp-server-1.0",
        if rtsp { " or python3-gi's RTSP server" } else { "" }
    );
}

/// The next frame, skipping reports of a stream that is (re)starting, for at most `limit`.
fn frame_within(src: &mut dyn FrameSource, frame: &mut Frame, limit: Duration) -> Result<(), Vec<String>> {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        match src.next_frame(frame) {
            Ok(true) => return Ok(()),
            Ok(false) => panic!("a live stream ended"),
            Err(SourceError::Unavailable(m)) => seen.push(m),
            Err(e) => panic!("{e}"),
        }
    }
    Err(seen)
}

#[test]
#[cfg_attr(not(jetdetect_has_gst), ignore = "needs GStreamer: gst-launch-1.0 (docs/reliability.md)")]
fn gst_pipeline_frames_arrive_at_their_size_with_timestamps_on_the_monotonic_clock() {
    need_gst(false);
    let mut src =
        source::open("gst://videotestsrc is-live=true ! video/x-raw,width=320,height=240,framerate=30/1")
            .unwrap();
    let mut frame = Frame::empty();
    let mut stamps = Vec::new();
    let mut seqs = Vec::new();
    for _ in 0..20 {
        frame_within(src.as_mut(), &mut frame, Duration::from_secs(20)).unwrap();
        assert_eq!((frame.width, frame.height), (320, 240));
        assert_eq!(frame.data.len(), frame.format.frame_len(320, 240).unwrap(), "{}", frame.format);
        let age = frame.captured.elapsed();
        assert!(age < Duration::from_secs(2), "a frame {age:?} old");
        stamps.push(frame.captured);
        seqs.push(frame.seq);
    }
    assert!(frame.data.iter().any(|&b| b != frame.data[0]), "a blank frame");
    assert!(seqs.windows(2).all(|w| w[1] > w[0]), "{seqs:?}");
    assert!(stamps.windows(2).all(|w| w[1] >= w[0]));
    // Stamps follow the buffers' PTS (30 fps), not the moment the pipe was read.
    let span = stamps[19].duration_since(stamps[5]).as_secs_f64() / 14.0;
    assert!((0.015..0.060).contains(&span), "{span} s between frames");
    assert!(src.describe().contains("320x240"), "{}", src.describe());
    assert_eq!(src.nominal_fps(), Some(30.0));
}

#[test]
#[cfg_attr(not(jetdetect_has_gst), ignore = "needs GStreamer: gst-launch-1.0 (docs/reliability.md)")]
fn missing_elements_and_broken_pipelines_are_config_errors_that_name_what_to_install() {
    need_gst(false);
    let mut frame = Frame::empty();
    for (uri, want) in [
        // No Argus on a PC: the error names JetPack's package.
        (
            "csi://0?width=1280&height=720",
            "GStreamer has no element 'nvarguscamerasrc': install NVIDIA's nvidia-l4t-gstreamer",
        ),
        ("gst://videotestsrc ! nosuchelement", "no element 'nosuchelement'"),
        ("gst://videotestsrc ! video/x-raw,width=abc", "does not parse or link"),
    ] {
        let mut src = source::open(uri).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let e = loop {
            match src.next_frame(&mut frame) {
                Err(SourceError::Config(m)) => break m,
                Err(SourceError::Unavailable(_)) if Instant::now() < deadline => continue,
                other => panic!("{uri}: {other:?}"),
            }
        };
        assert!(e.contains(want) && e.starts_with(uri), "{uri}: {e}");
    }
}

#[test]
#[cfg_attr(not(jetdetect_has_gst), ignore = "needs GStreamer: gst-launch-1.0 (docs/reliability.md)")]
fn a_gst_pipeline_that_ends_well_ends_the_stream_and_one_that_fails_is_retried() {
    need_gst(false);
    let mut src = source::open("gst://videotestsrc num-buffers=5 ! video/x-raw,width=64,height=48").unwrap();
    let mut frame = Frame::empty();
    let mut frames = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match src.next_frame(&mut frame) {
            Ok(true) => frames += 1,
            Ok(false) => break,
            other => panic!("{other:?}"),
        }
        assert!(Instant::now() < deadline, "no end of stream");
    }
    // A non-live source outruns the reader: the leaky queue keeps the newest, so some of the
    // five may be dropped, never all.
    assert!((1..=5).contains(&frames), "{frames} frames");
    assert!(!src.next_frame(&mut frame).unwrap(), "the stream ended for good");
    let mut src =
        source::open("gst://filesrc location=/nonexistent/jd.yuv ! rawvideoparse width=64 height=48")
            .unwrap();
    match src.next_frame(&mut frame) {
        Err(SourceError::Unavailable(m)) => {
            assert!(m.contains("the pipeline ended") && m.contains("retrying"), "{m}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
#[cfg_attr(not(jetdetect_has_gst), ignore = "needs GStreamer: gst-launch-1.0 (docs/reliability.md)")]
fn the_child_is_stopped_and_reaped_when_the_source_goes() {
    need_gst(false);
    let mut src =
        GstSource::open("gst://videotestsrc is-live=true ! video/x-raw,width=64,height=48").unwrap();
    let mut frame = Frame::empty();
    frame_within(&mut src, &mut frame, Duration::from_secs(20)).unwrap();
    let pid = src.pid().expect("a running child");
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    drop(src);
    // Gone, not a zombie: its parent (this process) reaped it.
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "child {pid} left behind");
}

#[test]
#[cfg_attr(not(jetdetect_has_gst), ignore = "needs GStreamer: gst-launch-1.0 (docs/reliability.md)")]
fn the_pipeline_dies_with_a_killed_daemon() {
    need_gst(false);
    let dir = common::fresh_dir("gst", "orphan");
    // One frame, then silence for 100 s: a child with nothing to write never meets the closed
    // pipe that would end it, so only PR_SET_PDEATHSIG can.
    let cfg = common::model_config(
        &dir,
        "gst://videotestsrc is-live=true ! video/x-raw,width=320,height=240,framerate=1/100",
        "",
    );
    let daemon = common::Daemon::start(&cfg, &[]);
    let mut lines = daemon.connect();
    let mut line = String::new();
    while !line.contains("\"detections\"") {
        line.clear();
        lines.read_line(&mut line).unwrap();
    }
    let children = children_of(daemon.child.id());
    assert_eq!(children.len(), 1, "{children:?}");
    daemon.signal(libc::SIGKILL);
    let (_, signal, _) = daemon.wait_signal(Duration::from_secs(10));
    assert_eq!(signal, Some(libc::SIGKILL));
    let deadline = Instant::now() + Duration::from_secs(5);
    while running(children[0]) {
        assert!(Instant::now() < deadline, "gst-launch-1.0 ({}) outlived the daemon", children[0]);
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Child processes of `pid`, from every thread's `children` list.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let text = std::fs::read_to_string(task.unwrap().path().join("children")).unwrap_or_default();
        out.extend(text.split_whitespace().map(|p| p.parse::<u32>().unwrap()));
    }
    out
}

/// True while `pid` exists and is not a zombie (reaping an orphan is its new parent's job).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

/// `tests/rtsp/server.py` on `port`, once it listens.
fn rtsp_server(port: u16, auth: Option<(&str, &str)>) -> KillOnDrop {
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg(common::repo().join("tests/rtsp/server.py")).args(["--port", &port.to_string()]);
    if let Some((u, p)) = auth {
        cmd.args(["--user", u, "--password", p]);
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("ready"), "the RTSP server said '{line}'");
    KillOnDrop(child)
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[cfg_attr(
    not(jetdetect_has_rtsp_server),
    ignore = "needs GStreamer and python3-gi's GstRtspServer (docs/reliability.md)"
)]
fn an_rtsp_camera_that_restarts_is_read_again_without_reopening_the_source() {
    need_gst(true);
    let port = crate::common::free_tcp_port();
    let server = rtsp_server(port, None);
    let uri = format!("rtsp://127.0.0.1:{port}/cam?latency_ms=0");
    let mut src = source::open(&uri).unwrap();
    let mut frame = Frame::empty();
    for _ in 0..10 {
        frame_within(src.as_mut(), &mut frame, Duration::from_secs(30)).unwrap();
        assert_eq!((frame.width, frame.height), (320, 240));
    }
    let before = frame.seq;
    drop(server);
    // The stream is reported gone, with the reason, and the source keeps trying.
    let deadline = Instant::now() + Duration::from_secs(30);
    let gone = loop {
        match src.next_frame(&mut frame) {
            Ok(true) => assert!(Instant::now() < deadline, "frames after the server was killed"),
            Err(SourceError::Unavailable(m)) => break m,
            other => panic!("{other:?}"),
        }
    };
    assert!(gone.starts_with(&uri) && gone.contains("retrying"), "{gone}");
    let _server = rtsp_server(port, None);
    frame_within(src.as_mut(), &mut frame, Duration::from_secs(60)).unwrap_or_else(|seen| panic!("{seen:?}"));
    assert_eq!((frame.width, frame.height), (320, 240));
    assert!(frame.seq > before);
}

#[test]
#[cfg_attr(
    not(jetdetect_has_rtsp_server),
    ignore = "needs GStreamer and python3-gi's GstRtspServer (docs/reliability.md)"
)]
fn rtsp_credentials_come_from_a_file_and_wrong_ones_are_named() {
    need_gst(true);
    let port = crate::common::free_tcp_port();
    let _server = rtsp_server(port, Some(("robot", "s3cret word")));
    let dir = common::fresh_dir("gst", "credentials");
    let good = dir.join("good");
    std::fs::write(&good, "robot:s3cret word\n").unwrap();
    let bad = dir.join("bad");
    std::fs::write(&bad, "robot:guess\n").unwrap();
    let mut frame = Frame::empty();
    let mut src =
        source::open(&format!("rtsp://127.0.0.1:{port}/cam?credentials={}", good.display())).unwrap();
    frame_within(src.as_mut(), &mut frame, Duration::from_secs(30)).unwrap();
    let uri = format!("rtsp://127.0.0.1:{port}/cam?credentials={}", bad.display());
    let mut src = source::open(&uri).unwrap();
    let seen = frame_within(src.as_mut(), &mut frame, Duration::from_secs(8)).unwrap_err();
    assert!(seen.iter().any(|m| m.contains("401 Unauthorized")), "{seen:?}");
    assert!(seen.iter().all(|m| !m.contains("guess")), "{seen:?}");
    // Nobody listening: said so, and retried.
    let closed = crate::common::free_tcp_port();
    let mut src = source::open(&format!("rtsp://127.0.0.1:{closed}/cam")).unwrap();
    let seen = frame_within(src.as_mut(), &mut frame, Duration::from_secs(5)).unwrap_err();
    assert!(seen.iter().any(|m| m.contains("cannot open the stream")), "{seen:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(not(jetdetect_has_gst), ignore = "needs GStreamer: gst-launch-1.0 (docs/reliability.md)")]
fn an_unreachable_rtsp_camera_is_named_and_the_other_cameras_keep_being_served() {
    need_gst(false);
    let dir = common::fresh_dir("gst", "cameras");
    let closed = crate::common::free_tcp_port();
    let cfg = dir.join("jd.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[source]]\nname = \"sim\"\nuri = \"synthetic://?width=320&height=240&fps=15&format=yuyv\"\n\
             [[source]]\nname = \"ip\"\nuri = \"rtsp://127.0.0.1:{closed}/cam?timeout_ms=1000\"\n\
             [model]\npath = \"{}\"\n[output]\nsocket = \"d.sock\"\nstats_interval_s = 1\n",
            common::repo().join("models/obstacles-v8.onnx").display()
        ),
    )
    .unwrap();
    let d = common::Daemon::start(&cfg, &[]);
    let mut c = d.connect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut line = String::new();
    let stats = loop {
        assert!(
            Instant::now() < deadline,
            "in 30 s, no stats with the RTSP camera unavailable and 5 frames processed from the other"
        );
        line.clear();
        c.read_line(&mut line).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["type"] == "detections" {
            assert_eq!(v["camera"], "sim", "{v}");
        }
        let ip = v["cameras"].as_array().and_then(|c| c.iter().find(|c| c["name"] == "ip")).cloned();
        // Counts are cumulative: on a loaded machine the RTSP camera can be declared unavailable
        // before the other has processed 5 frames, so wait for both rather than the first.
        let sim_processed = v["cameras"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "sim"))
            .and_then(|c| c["frames"]["processed"].as_u64())
            .unwrap_or(0);
        if let Some(ip) = ip.filter(|ip| ip["source"]["state"] == "unavailable" && sim_processed >= 5) {
            break (v, ip);
        }
    };
    let (v, ip) = stats;
    let sim = v["cameras"].as_array().unwrap().iter().find(|c| c["name"] == "sim").unwrap().clone();
    assert!(
        ip["source"]["error"].as_str().unwrap().contains(&format!("rtsp://127.0.0.1:{closed}/cam")),
        "{ip}"
    );
    assert_eq!(ip["frames"]["captured"], 0, "{ip}");
    assert_eq!(sim["source"]["state"], "streaming", "{sim}");
    assert!(sim["frames"]["processed"].as_u64().unwrap() >= 5, "{sim}");
    d.signal(libc::SIGTERM);
    let (code, err) = d.wait(Duration::from_secs(15));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(&format!("camera ip: rtsp://127.0.0.1:{closed}/cam")), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
