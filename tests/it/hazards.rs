//! Hazards end to end: the daemon on a synthetic scene whose obstacles close in at known speeds
//! (`synthetic://?approach=N`, exact ground truth), read through the socket as a client would;
//! and the latency contract: deadline misses counted, and a blind daemon saying so and why.

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jetdetect::frame::GroundTruth;
use jetdetect::geometry::iou;
use serde::Deserialize;
use serde_json::Value;

use crate::common::Daemon;

fn tmpdir(name: &str) -> PathBuf {
    crate::common::fresh_dir("hazards", name)
}

fn start(dir: &Path, source: &str, extra: &str) -> Daemon {
    Daemon::start(&crate::common::model_config(dir, source, extra), &[])
}

fn read(r: &mut BufReader<UnixStream>) -> Value {
    let mut line = String::new();
    assert!(r.read_line(&mut line).unwrap() > 0, "connection closed");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// A `hazards` message, read through types (docs/protocol.md).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Hazards {
    r#type: String,
    schema: u32,
    camera: String,
    seq: u64,
    capture_mono_ns: u64,
    publish_mono_ns: u64,
    frame_age_ms: f64,
    blind: bool,
    level: String,
    fov_deg: [f64; 2],
    zones: Vec<Zone>,
    obstacles: Vec<Obstacle>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Zone {
    from_deg: f64,
    to_deg: f64,
    level: String,
    track_id: Option<u64>,
    ttc_s: Option<f64>,
    range_estimate_m: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Obstacle {
    track_id: u64,
    class_id: usize,
    class: String,
    score: f32,
    x1: f32,
    y1: f32,
    x2: f32,
    y2: f32,
    azimuth_deg: f64,
    elevation_deg: f64,
    azimuth_span_deg: [f64; 2],
    velocity_px_s: [f64; 2],
    trend: String,
    ttc_s: Option<f64>,
    ttc_confidence: f64,
    range_estimate_m: Option<f64>,
    level: String,
    #[serde(default)]
    course: Option<CourseMsg>,
}

/// An obstacle's `course` (with `[vehicle] width_m`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CourseMsg {
    offset_widths: f64,
    offset_m: Option<f64>,
    miss_m: Option<f64>,
    hit: bool,
}

/// A blind `hazards` message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Blind {
    r#type: String,
    schema: u32,
    camera: String,
    publish_mono_ns: u64,
    blind: bool,
    reason: String,
    detail: String,
    frame_age_ms: f64,
    throttling: bool,
    zones: Vec<Zone>,
    obstacles: Vec<Obstacle>,
}

const LEVELS: [&str; 3] = ["clear", "caution", "danger"];

#[test]
fn a_moving_camera_tells_each_obstacle_hit_or_pass_and_never_raises_danger_for_a_pass() {
    // The daemon on a camera driving at 2 m/s through obstacles, with [vehicle] width_m: its
    // obstacles carry a course, which says hit or pass as the scene's truth does, and one it
    // says will be passed is never `danger`.
    let dir = tmpdir("course");
    let d = start(
        &dir,
        "synthetic://?width=640&height=480&fps=30&format=yuyv&seed=3&objects=8&speed=2",
        "[hazards]\nenabled = true\n[hazards.classes]\nbox = { height_m = 0.45 }\nball = { height_m = 0.4 }\n\
         cone = { height_m = 0.5 }\n[vehicle]\nwidth_m = 0.6\n[latency]\nstale_ms = 3000\n",
    );
    let mut c = d.connect();
    let mut truth: Vec<GroundTruth> = Vec::new();
    let (mut agree, mut disagree, mut hits, mut passes) = (0, 0, 0, 0);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) && agree + disagree < 300 {
        let v = read(&mut c);
        match v["type"].as_str().unwrap() {
            "detections" => truth = serde_json::from_value(v["truth"].clone()).unwrap(),
            "hazards" => {
                let h = Hazards::deserialize(&v).unwrap_or_else(|e| panic!("{e}: {v}"));
                for o in &h.obstacles {
                    let Some(course) = &o.course else { continue };
                    assert!(
                        course.offset_m.is_some() && course.miss_m.is_some(),
                        "every class has a size: {o:?}"
                    );
                    assert!(course.offset_widths.is_finite());
                    if !course.hit {
                        assert_ne!(o.level, "danger", "a pass is caution at most: {o:?}");
                    }
                    // The object under the box, and what the truth says of it.
                    let iou =
                        |g: &GroundTruth| jetdetect::geometry::iou([o.x1, o.y1, o.x2, o.y2], g.corners());
                    let Some(g) =
                        truth.iter().filter(|g| iou(g) >= 0.5).max_by(|a, b| iou(a).total_cmp(&iou(b)))
                    else {
                        continue;
                    };
                    let want = g.course.expect("a moving camera's truth has a course").hit;
                    (hits, passes) = if want { (hits + 1, passes) } else { (hits, passes + 1) };
                    if course.hit == want {
                        agree += 1;
                    } else {
                        disagree += 1;
                    }
                }
            }
            _ => {}
        }
    }
    assert!(agree + disagree >= 100, "{agree} + {disagree} obstacles with a course in 60 s");
    assert!(hits > 0 && passes > 0, "{hits} hits, {passes} passes");
    let share = agree as f64 / (agree + disagree) as f64;
    eprintln!("course: {agree} agree, {disagree} disagree ({hits} hit, {passes} pass obstacle-frames)");
    assert!(
        share >= 0.8,
        "hit or pass as the truth says in {share:.2} of {} obstacle-frames",
        agree + disagree
    );
}

#[test]
fn approaching_obstacles_get_their_time_to_contact_bearing_and_zone_and_misses_are_counted() {
    let dir = tmpdir("approach");
    // 62.2-degree camera; two of four obstacles close in; every frame misses a 1 ms deadline.
    let d = start(
        &dir,
        "synthetic://?width=640&height=480&fps=30&format=yuyv&seed=5&objects=4&approach=2",
        "[hazards]\nenabled = true\n[hazards.classes]\nbox = { height_m = 0.5 }\n\
         [latency]\ndeadline_ms = 1\nstale_ms = 3000\n",
    );
    let mut c = d.connect();
    let mut truth_by_seq: Option<(u64, Vec<GroundTruth>, Vec<Value>)> = None;
    // (seq, capture time) of recent frames: the source's real frame rate, to put the scene's
    // time to contact (in frames) in seconds of capture time even when a loaded machine makes
    // the source fall behind its 30 fps.
    let mut recent: std::collections::VecDeque<(u64, u64)> = Default::default();
    let (mut hazards, mut compared, mut errors, mut misses_seen) = (0, 0, Vec::new(), false);
    let mut tracked_dets = 0;
    // The levels reached by obstacles that are the scene's approaching objects.
    let mut approaching_levels = std::collections::BTreeMap::<String, u32>::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) && (hazards < 150 || !misses_seen) {
        let v = read(&mut c);
        match v["type"].as_str().unwrap() {
            "detections" => {
                #[derive(Deserialize)]
                struct Dets {
                    seq: u64,
                    capture_mono_ns: u64,
                    truth: Vec<GroundTruth>,
                    detections: Vec<Value>,
                }
                let m = Dets::deserialize(&v).unwrap();
                recent.push_back((m.seq, m.capture_mono_ns));
                while recent.front().is_some_and(|f| m.capture_mono_ns - f.1 > 1_000_000_000) {
                    recent.pop_front();
                }
                tracked_dets += m.detections.iter().filter(|d| d["track_id"].is_u64()).count();
                truth_by_seq = Some((m.seq, m.truth, m.detections));
            }
            "hazards" => {
                let h = Hazards::deserialize(&v).unwrap_or_else(|e| panic!("{e}: {v}"));
                hazards += 1;
                assert_eq!(
                    (h.r#type.as_str(), h.schema, h.blind, h.camera.as_str()),
                    ("hazards", 1, false, "cam0")
                );
                let (seq, truth, dets) = truth_by_seq.take().expect("hazards follow their detections");
                assert_eq!(h.seq, seq, "the hazards of the frame just published");
                assert!(h.publish_mono_ns >= h.capture_mono_ns && h.frame_age_ms >= 0.0);
                assert!((h.fov_deg[0] + 31.1).abs() < 0.01 && (h.fov_deg[1] - 31.1).abs() < 0.01, "{h:?}");
                assert_eq!(h.zones.len(), 3);
                assert!(LEVELS.contains(&h.level.as_str()));
                let worst = h.zones.iter().map(|z| LEVELS.iter().position(|l| *l == z.level).unwrap()).max();
                assert_eq!(LEVELS[worst.unwrap()], h.level, "the message's level is its worst zone's");
                for (i, z) in h.zones.iter().enumerate() {
                    assert!(
                        (z.to_deg - z.from_deg - 62.2 / 3.0).abs() < 0.01
                            && LEVELS.contains(&z.level.as_str())
                    );
                    if z.level != "clear" {
                        let o = h
                            .obstacles
                            .iter()
                            .find(|o| Some(o.track_id) == z.track_id)
                            .expect("zone's obstacle");
                        assert_eq!(o.level, z.level, "zone {i}");
                        assert_eq!((o.ttc_s, o.range_estimate_m), (z.ttc_s, z.range_estimate_m));
                    }
                }
                for o in &h.obstacles {
                    assert!(
                        o.track_id > 0 && ["approaching", "receding", "steady"].contains(&o.trend.as_str())
                    );
                    assert!(o.azimuth_span_deg[0] <= o.azimuth_deg && o.azimuth_deg <= o.azimuth_span_deg[1]);
                    assert!((0.0..=1.0).contains(&o.ttc_confidence) && o.ttc_s.is_none_or(|t| t >= 0.0));
                    assert_eq!(o.range_estimate_m.is_some(), o.class == "box", "sizes only for box: {o:?}");
                    // The obstacle is one of the frame's detections, numbered the same.
                    assert!(dets
                        .iter()
                        .any(|d| d["track_id"] == o.track_id
                            && d["x1"].as_f64().map(|x| x as f32) == Some(o.x1)));
                    let _ = (o.class_id, o.score, o.y1, o.y2, o.elevation_deg, o.velocity_px_s);
                    let closing = truth.iter().any(|g| {
                        g.ttc_frames.is_some()
                            && iou([o.x1, o.y1, o.x2, o.y2], [g.x1, g.y1, g.x2, g.y2]) >= 0.5
                    });
                    if closing {
                        *approaching_levels.entry(o.level.clone()).or_default() += 1;
                    }
                    // Its time to contact against the scene's, when it is sure of it.
                    let (Some(ttc), true) = (o.ttc_s, o.ttc_confidence >= 0.5) else { continue };
                    let Some(g) = truth.iter().filter(|g| g.ttc_frames.is_some()).max_by(|a, b| {
                        let iou_of =
                            |g: &GroundTruth| iou([o.x1, o.y1, o.x2, o.y2], [g.x1, g.y1, g.x2, g.y2]);
                        iou_of(a).total_cmp(&iou_of(b))
                    }) else {
                        continue;
                    };
                    if iou([o.x1, o.y1, o.x2, o.y2], [g.x1, g.y1, g.x2, g.y2]) < 0.5 {
                        continue;
                    }
                    let (first, last) = (recent.front().unwrap(), recent.back().unwrap());
                    if last.1 - first.1 < 500_000_000 {
                        continue;
                    }
                    let fps = (last.0 - first.0) as f64 / ((last.1 - first.1) as f64 / 1e9);
                    let want = g.ttc_frames.unwrap() as f64 / fps;
                    compared += 1;
                    errors.push(((ttc - want) / want).abs());
                }
            }
            "stats" => {
                if let Some(dl) = v.get("deadline").filter(|d| d.is_object()) {
                    let by: u64 =
                        dl["by_stage"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
                    assert_eq!(by, dl["missed"].as_u64().unwrap(), "{dl}");
                    assert_eq!(dl["ms"], 1.0);
                    misses_seen |= dl["missed"].as_u64().unwrap() > 0;
                }
                assert!(v["blind"].is_null(), "not blind while frames come: {v}");
            }
            _ => {}
        }
    }
    d.signal(libc::SIGTERM);
    let (code, err) = d.wait(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{err}");
    assert!(hazards >= 150 && misses_seen, "{hazards} hazards messages, misses seen {misses_seen}:\n{err}");
    assert!(tracked_dets > hazards, "detections carry their track numbers");
    errors.sort_by(f64::total_cmp);
    assert!(compared >= 20, "only {compared} confident times to contact on approaching objects");
    let median = errors[errors.len() / 2];
    let p90 = errors[errors.len() * 9 / 10];
    eprintln!(
        "time to contact against the truth: median relative error {median:.3}, p90 {p90:.3}, over {compared}"
    );
    // docs/hazards.md measures 0.04 to 0.06 on 10-minute runs; 0.026 here, twice that on a loaded machine.
    assert!(median < 0.1, "median relative error of the time to contact {median:.3} over {compared}");
    // Closing in is what the levels are for: the approaching objects reached caution or danger.
    eprintln!("levels of the approaching objects' obstacles: {approaching_levels:?}");
    let alarmed = approaching_levels.get("caution").copied().unwrap_or(0)
        + approaching_levels.get("danger").copied().unwrap_or(0);
    assert!(alarmed > 0, "approaching objects never reached caution or danger: {approaching_levels:?}");
    assert!(err.contains("past the 1 ms deadline"), "the log line counts the misses:\n{err}");
}

#[test]
fn a_missing_camera_makes_the_daemon_blind_and_it_says_why() {
    let dir = tmpdir("blind");
    let d = start(
        &dir,
        "v4l2:///dev/video-none-jd?timeout_ms=100",
        "[hazards]\nenabled = true\n[latency]\nstale_ms = 300\n",
    );
    let mut c = d.connect();
    let (mut blind_msgs, mut stats_blind) = (Vec::new(), false);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) && (blind_msgs.len() < 3 || !stats_blind) {
        let v = read(&mut c);
        match v["type"].as_str().unwrap() {
            "hazards" => {
                let b = Blind::deserialize(&v).unwrap_or_else(|e| panic!("{e}: {v}"));
                assert!(b.blind && b.r#type == "hazards" && b.schema == 1 && b.camera == "cam0");
                assert_eq!(b.reason, "camera", "{b:?}");
                assert!(b.detail.contains("/dev/video-none-jd: cannot open"), "{b:?}");
                assert!(b.frame_age_ms > 300.0 && b.zones.is_empty() && b.obstacles.is_empty());
                let _ = b.throttling;
                blind_msgs.push((Instant::now(), b.publish_mono_ns));
            }
            "stats" => stats_blind |= v["blind"]["reason"] == "camera",
            "detections" => panic!("no camera, no detections: {v}"),
            _ => {}
        }
    }
    d.signal(libc::SIGTERM);
    let (code, err) = d.wait(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        blind_msgs.len() >= 3 && stats_blind,
        "{} blind messages, stats blind {stats_blind}:\n{err}",
        blind_msgs.len()
    );
    // Repeated at the stale_ms rate, not every 20 ms tick.
    let gap = (blind_msgs[2].1 - blind_msgs[1].1) as f64 / 1e6;
    assert!((250.0..2000.0).contains(&gap), "{gap} ms between blind messages");
    assert!(err.contains("blind: no fresh frame for") && err.contains("camera: /dev/video-none-jd"), "{err}");
    assert!(err.contains("no frame processed in the last"), "the periodic line says so:\n{err}");
}

/// `jetdetect eval --hazards`'s line (docs/hazards.md), read through types.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HazardEval {
    source: String,
    frames: u64,
    seconds: f64,
    tracking: EvalTracking,
    ttc: EvalTtc,
    danger: EvalDanger,
    targets: std::collections::BTreeMap<String, bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalTracking {
    mota: f64,
    idf1: f64,
    id_switches: u64,
    switches_per_100_track_s: f64,
    track_seconds: f64,
    objects: u64,
    misses: u64,
    false_positives: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalTtc {
    closing: u64,
    compared: u64,
    coverage: f64,
    median_rel_error: f64,
    p90_rel_error: f64,
    within_15pct: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalDanger {
    episodes: u64,
    recalled: u64,
    recall: f64,
    short_episodes: u64,
    short_recalled: u64,
    recall_all: f64,
    detected_episodes: u64,
    detected_recalled: u64,
    recall_detected: f64,
    alarms: u64,
    false_alarms: u64,
    early_alarms: u64,
    false_per_min: f64,
    mean_delay_s: f64,
    lead_recalled: u64,
    recall_lead_1s: f64,
    mean_lead_s: f64,
    pass_alarms: u64,
    false_danger_per_min: f64,
}

fn eval(args: &[&str]) -> std::process::Output {
    eval_with(Path::new("configs/demo.toml"), args)
}

fn eval_with(config: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_jetdetect"))
        .args(["eval", "--hazards", "--config"])
        .arg(config)
        .args(args)
        .current_dir(crate::common::repo())
        .output()
        .unwrap()
}

/// Half a minute of objects coming, crossing, hiding each other, closing in and leaving, scored as
/// `jetdetect eval --hazards` scores the 10-minute runs of docs/hazards.md. The run is deterministic
/// (the scene's seed, the model on tract): it scores IDF1 0.976, MOTA 0.968, TTC median error 0.050
/// (84 % within 15 %), danger recall 11 of 12. The bounds sit just outside those, near the
/// documented 10-minute figures, so a regression of the chain shows: a TTC error 5 times as large,
/// a recall of 10 in 12, identities that switch.
#[test]
fn eval_hazards_scores_tracking_time_to_contact_and_alarms() {
    let dir = tmpdir("eval-replay");
    let saved = dir.join("dets.jsonl");
    let out = eval(&["--frames", "900", "--save-detections", saved.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: HazardEval = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    eprintln!("{r:#?}");
    assert!(r.source.contains("leave=1") && r.frames == 900 && (r.seconds - 30.0).abs() < 1e-6);
    let t = &r.tracking;
    assert!(t.objects > 1500 && t.track_seconds > 50.0, "{t:?}");
    assert!(t.idf1 > 0.95 && t.mota > 0.95, "{t:?}");
    assert!(t.switches_per_100_track_s < 5.0, "{t:?}");
    let per_100 = t.id_switches as f64 * 100.0 / t.track_seconds;
    assert!((per_100 - t.switches_per_100_track_s).abs() < 1e-3, "{t:?}");
    assert!(t.misses + t.false_positives < t.objects, "{t:?}");
    assert!(r.ttc.compared > 100 && r.ttc.compared <= r.ttc.closing && r.ttc.coverage > 0.8, "{:?}", r.ttc);
    assert!(r.ttc.median_rel_error < 0.08 && r.ttc.p90_rel_error >= r.ttc.median_rel_error, "{:?}", r.ttc);
    assert!(r.ttc.within_15pct > 0.75, "{:?}", r.ttc);
    let d = &r.danger;
    assert!(d.episodes >= 10 && d.recall > 0.9 && d.recalled <= d.episodes, "{d:?}");
    assert!(d.short_recalled <= d.short_episodes && d.recall_all <= 1.0, "{d:?}");
    // Episodes the detector saw are a part of all, and the layer flags more of them.
    assert!(d.detected_episodes <= d.episodes && d.detected_recalled <= d.recalled, "{d:?}");
    let share = d.detected_recalled as f64 / d.detected_episodes as f64;
    assert!(d.detected_episodes > 0 && (d.recall_detected - share).abs() < 1e-3, "{d:?}");
    assert!(d.alarms >= d.recalled / 2 && d.false_per_min < 10.0, "{d:?}");
    assert!(d.false_alarms + d.early_alarms <= d.alarms && d.mean_delay_s >= 0.0, "{d:?}");
    // A still camera's scene: no obstacle is passed, and every alarm's lead is measured.
    assert_eq!(d.pass_alarms, 0, "{d:?}");
    assert!(d.lead_recalled <= d.recalled && d.mean_lead_s > 0.0, "{d:?}");
    assert!((d.recall_lead_1s - d.lead_recalled as f64 / d.episodes as f64).abs() < 1e-3, "{d:?}");
    assert!((d.false_danger_per_min - d.false_per_min).abs() < 1e-9, "{d:?}");
    assert_eq!(r.targets.len(), 7, "{:?}", r.targets);

    // The saved detections, read back instead of running the model: the same scores, exactly.
    let replay = |config: &Path| {
        let out = eval_with(config, &["--frames", "900", "--detections", saved.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(replay(Path::new("configs/demo.toml")), stdout);
    // Another [hazards] on them (the demo's, but danger raised at once; its other keys are the
    // defaults or only feed range estimates): at least as many alarms, tracking untouched.
    let at_once = crate::common::model_config(&dir, "synthetic://", "[hazards]\ndanger_frames = 1\n");
    let r1: HazardEval = serde_json::from_str(replay(&at_once).trim()).unwrap();
    assert_eq!(format!("{:?}", r1.tracking), format!("{:?}", r.tracking));
    assert!(
        r1.danger.alarms >= r.danger.alarms && r1.danger.recalled >= r.danger.recalled,
        "{:?}",
        r1.danger
    );
    // A file from another scene is refused, naming the scene it was made on.
    let out = eval(&[
        "--frames",
        "30",
        "--source",
        "synthetic://?fps=0&approach=1",
        "--detections",
        saved.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("dets.jsonl:1: recorded on --source 'synthetic://"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn eval_hazards_needs_a_source_with_objects_closing_in() {
    let out = eval(&["--frames", "30", "--source", "synthetic://?fps=0&width=320&height=240"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no object of the source's ground truth closes in") && err.contains("approach=N"),
        "{err}"
    );
    let out = eval(&["--fps", "0"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("'0' is not a frame rate above 0"));
}
