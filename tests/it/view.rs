//! The live view (`[view]`) and snapshots against the real daemon, and the page in a real
//! browser: Debian's headless Chromium, driven by tests/view/browser.py over the DevTools
//! protocol. Without Chromium (as build.rs found it) the browser test is reported as ignored, unless
//! `JETDETECT_REQUIRE_CHROMIUM=1` (set by `.ci/run`, which installs it): then its absence fails it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{free_tcp_port, fresh_dir, model_config, repo, Daemon};

const SCENE: &str = "synthetic://?width=640&height=480&fps=30&format=yuyv&seed=1&objects=5&approach=2";

/// A daemon config in `dir` with the view on `port` and the hazard layer (zones drawn).
fn view_config(dir: &Path, port: u16) -> PathBuf {
    model_config(
        dir,
        SCENE,
        &format!(
            "[metrics]\nlisten = \"127.0.0.1:{port}\"\n[view]\nenabled = true\n[hazards]\nenabled = true\n\
             [hazards.classes]\nbox = {{ height_m = 0.5 }}\nball = {{ height_m = 0.3 }}\ncone = {{ height_m = 0.7 }}\n"
        ),
    )
}

fn get(port: u16, path: &str) -> (u16, Vec<u8>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(15)))
        .http_status_as_error(false)
        .build()
        .into();
    let mut r = agent.get(&format!("http://127.0.0.1:{port}{path}")).call().unwrap();
    let status = r.status().as_u16();
    (status, r.body_mut().with_config().limit(64 << 20).read_to_vec().unwrap())
}

/// `jetdetect_view_pictures_total` now.
fn pictures(port: u16) -> u64 {
    let (_, body) = get(port, "/metrics");
    let text = String::from_utf8(body).unwrap();
    let line = text.lines().find(|l| l.starts_with("jetdetect_view_pictures_total ")).unwrap_or_else(|| {
        panic!("no jetdetect_view_pictures_total in:\n{text}");
    });
    line.split(' ').nth(1).unwrap().parse().unwrap()
}

/// Pixels within `tolerance` of one of the first three class colours.
fn overlay_pixels(img: &image::RgbImage, tolerance: i32) -> usize {
    let palette = &jetdetect::overlay::PALETTE[..3];
    img.pixels()
        .filter(|p| palette.iter().any(|c| (0..3).all(|k| (p[k] as i32 - c[k] as i32).abs() <= tolerance)))
        .count()
}

fn snapshot(cfg: &Path, out: &Path, raw: bool) -> image::RgbImage {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jetdetect"));
    cmd.args(["snapshot", "--config"]).arg(cfg).arg("--out").arg(out);
    if raw {
        cmd.arg("--raw");
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "snapshot failed: {}", String::from_utf8_lossy(&o.stderr));
    image::open(out).unwrap().to_rgb8()
}

#[test]
fn nothing_is_encoded_unless_asked_and_snapshots_come_with_and_without_boxes() {
    let dir = fresh_dir("view", "snapshot");
    let port = free_tcp_port();
    let cfg = view_config(&dir, port);
    let daemon = Daemon::start(&cfg, &[]);
    // Three stats intervals with the view closed: no picture drawn or encoded.
    std::thread::sleep(Duration::from_millis(3500));
    assert_eq!(pictures(port), 0, "nobody watched, yet pictures were encoded");
    let (status, body) = get(port, "/status.json");
    assert_eq!(status, 200);
    let s: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(s["stats"]["fps"]["processed"].as_f64().unwrap() > 5.0, "{s}");
    assert!(s["histogram"]["counts"].as_array().unwrap().iter().any(|c| c.as_u64() > Some(0)), "{s}");
    assert_eq!(s["view"]["cameras"][0], "cam0", "{s}");

    let drawn = snapshot(&cfg, &dir.join("drawn.jpg"), false);
    let raw = snapshot(&cfg, &dir.join("raw.jpg"), true);
    assert_eq!((drawn.width(), drawn.height(), raw.width(), raw.height()), (640, 480, 640, 480));
    let (with, without) = (overlay_pixels(&drawn, 40), overlay_pixels(&raw, 40));
    assert!(with > 2000 && without < with / 10, "overlay colours: {with} drawn, {without} raw");

    // Unknown camera: a clear answer naming the cameras.
    let (status, body) = get(port, "/snapshot.jpg?camera=rear");
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("the cameras are cam0"));

    // Once nobody asks (requests last 3 s), encoding stops again.
    std::thread::sleep(Duration::from_millis(4500));
    let settled = pictures(port);
    assert!(settled >= 2, "the snapshots were encoded: {settled}");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(pictures(port), settled, "pictures were encoded after the last request lapsed");
    daemon.signal(libc::SIGTERM);
    let (code, err) = daemon.wait(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(&format!("live view on http://127.0.0.1:{port}/")), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn each_camera_has_its_own_pictures() {
    let dir = fresh_dir("view", "cameras");
    let port = free_tcp_port();
    let cfg = dir.join("jd.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[source]]\nname = \"front\"\nuri = \"synthetic://?width=640&height=480&fps=30&format=yuyv&seed=1\"\n\
             [[source]]\nname = \"rear\"\nuri = \"synthetic://?width=320&height=240&fps=10&format=nv12&seed=2\"\n\
             [model]\npath = \"{}\"\nnames = \"{}\"\n[output]\nsocket = \"d.sock\"\nstats_interval_s = 1\n\
             [metrics]\nlisten = \"127.0.0.1:{port}\"\n[view]\nenabled = true\n",
            repo().join("models/obstacles-v8.onnx").display(),
            repo().join("models/obstacles.names").display()
        ),
    )
    .unwrap();
    let daemon = Daemon::start(&cfg, &[]);
    for (camera, size) in [("rear", (320, 240)), ("front", (640, 480)), ("", (640, 480))] {
        let (status, body) = get(port, &format!("/snapshot.jpg?camera={camera}"));
        assert_eq!(status, 200, "{camera}: {}", String::from_utf8_lossy(&body));
        let img = image::load_from_memory(&body).unwrap();
        assert_eq!((img.width(), img.height()), size, "camera '{camera}'");
    }
    // A viewer of the rear camera gets the rear camera's pictures, each named by its camera.
    let (status, body) = get(port, "/picture.json?camera=rear&after=0");
    assert_eq!(status, 200);
    let meta: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (meta["camera"].as_str(), meta["detections"]["width"].as_u64()),
        (Some("rear"), Some(320)),
        "{meta}"
    );
    let (status, jpeg) = get(port, &format!("/{}", meta["image"].as_str().unwrap()));
    assert_eq!(status, 200);
    assert_eq!(image::load_from_memory(&jpeg).unwrap().width(), 320);
    daemon.signal(libc::SIGTERM);
    let (code, err) = daemon.wait(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn snapshot_names_what_is_missing() {
    let dir = fresh_dir("view", "snapshot-errors");
    let cfg = model_config(&dir, SCENE, "");
    let o = Command::new(env!("CARGO_BIN_EXE_jetdetect"))
        .args(["snapshot", "--out"])
        .arg(dir.join("x.jpg"))
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("[view] enabled = true"), "{err}");
    // Nothing listens there: the error says what was tried and what to check.
    let port = free_tcp_port();
    let o = Command::new(env!("CARGO_BIN_EXE_jetdetect"))
        .args(["snapshot", "--url", &format!("http://127.0.0.1:{port}"), "--out"])
        .arg(dir.join("x.jpg"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("is jetdetect running"), "{err}");
    assert!(!dir.join("x.jpg").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn detect_draw_writes_each_image_with_its_boxes() {
    let dir = fresh_dir("view", "draw");
    let o = Command::new(env!("CARGO_BIN_EXE_jetdetect"))
        .args(["detect", "--config"])
        .arg(repo().join("configs/demo.toml"))
        .arg("--draw")
        .arg(&dir)
        .arg(repo().join("tests/fixtures/images"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = String::from_utf8_lossy(&o.stdout);
    for line in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let name = Path::new(v["image"].as_str().unwrap()).file_stem().unwrap().to_str().unwrap().to_string();
        let img = image::open(dir.join(format!("{name}.jpg"))).unwrap().to_rgb8();
        assert_eq!(
            (img.width() as u64, img.height() as u64),
            (v["width"].as_u64().unwrap(), v["height"].as_u64().unwrap())
        );
        let boxes = v["detections"].as_array().unwrap().len();
        let drawn = overlay_pixels(&img, 40);
        assert!(boxes == 0 || drawn > 200, "{name}: {boxes} boxes but {drawn} overlay pixels");
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Chromium's path (`CHROMIUM` or `chromium`): a test that asks for it runs only where build.rs
/// found it or `JETDETECT_REQUIRE_CHROMIUM` is set, so its absence here is a failure.
fn chromium() -> String {
    let name = std::env::var("CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let ok = Command::new(&name).arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(ok, "{name} is missing or does not start: apt install chromium (or set CHROMIUM to its path)");
    name
}

/// Whether a pixel near `(x, y)` (within `reach` along the axis across the edge) is within
/// `tolerance` of `colour`.
fn near(img: &image::RgbaImage, x: f64, y: f64, vertical_edge: bool, colour: [u8; 3], reach: i64) -> bool {
    (-reach..=reach).any(|d| {
        let (px, py) = if vertical_edge { (x as i64 + d, y as i64) } else { (x as i64, y as i64 + d) };
        if px < 0 || py < 0 || px >= img.width() as i64 || py >= img.height() as i64 {
            return false;
        }
        let p = img.get_pixel(px as u32, py as u32);
        (0..3).all(|k| (p[k] as i32 - colour[k] as i32).abs() <= 60)
    })
}

fn iou(a: [f64; 4], b: [f64; 4]) -> f64 {
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let i = w * h;
    i / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - i)
}

#[test]
#[cfg_attr(not(jetdetect_has_chromium), ignore = "needs Chromium and python3 (docs/reliability.md)")]
fn a_browser_shows_the_live_picture_with_boxes_where_the_truth_is() {
    let chromium = chromium();
    let dir = fresh_dir("view", "browser");
    let port = free_tcp_port();
    let cfg = view_config(&dir, port);
    let daemon = Daemon::start(&cfg, &[]);
    let started = Instant::now();
    let out = dir.join("browser");
    let o = Command::new("python3")
        .arg(repo().join("tests/view/browser.py"))
        .arg(format!("http://127.0.0.1:{port}/"))
        .arg(&out)
        .env("CHROMIUM", &chromium)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "browser.py failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("{} ({:.1} s)", String::from_utf8_lossy(&o.stdout).trim(), started.elapsed().as_secs_f64());
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(r["errors"], serde_json::json!([]), "the page logged errors");
    let seen: Vec<u64> = r["pictures"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert!(
        seen.len() >= 8 && seen.windows(2).all(|w| w[0] < w[1]),
        "the picture did not keep updating: {seen:?}"
    );
    assert!(r["bars"].as_u64().unwrap() > 0 && r["e2e"].as_str().unwrap().ends_with(" ms"), "{r}");
    assert_eq!(r["natural"], serde_json::json!([640, 480]), "{r}");

    // The shown picture's own boxes, checked in the screenshot at the ground truth's edges.
    let shot = image::open(out.join("shot.png")).unwrap().to_rgba8();
    let rect: Vec<f64> = r["rect"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let (sx, sy) = (rect[2] / 640.0, rect[3] / 480.0);
    let meta = &r["meta"];
    let dets = meta["detections"]["detections"].as_array().unwrap();
    let corners = |v: &serde_json::Value| ["x1", "y1", "x2", "y2"].map(|k| v[k].as_f64().unwrap());
    // Where something drawn after (or over) a box may hide its edge: the other boxes' edges
    // and labels, and the caption.
    let reach = 8.0;
    let hidden = |i: usize, x: f64, y: f64| {
        let inside = |r: [f64; 4]| x >= r[0] && x <= r[2] && y >= r[1] && y <= r[3];
        inside([0.0, 0.0, 260.0, 12.0])
            || dets.iter().enumerate().filter(|(j, _)| *j != i).any(|(_, d)| {
                let [x1, y1, x2, y2] = corners(d);
                let (r, e) = (reach + 2.0, 2.0 * reach);
                inside([x1 - r, y1 - r, x2 + r, y1 + r])
                    || inside([x1 - r, y2 - r, x2 + r, y2 + r])
                    || inside([x1 - r, y1 - r, x1 + r, y2 + r])
                    || inside([x2 - r, y1 - r, x2 + r, y2 + r])
                    || inside([x1 - e, y1 - 12.0 - e, x1 + 200.0, y1 + e])
            })
    };
    let mut checked = 0;
    for t in meta["detections"]["truth"].as_array().unwrap() {
        if t["visible"].as_f64().unwrap() < 0.95 || !t["shown"].is_null() {
            continue;
        }
        let tb = corners(t);
        let Some((i, _)) = dets.iter().enumerate().find(|(_, d)| iou(corners(d), tb) >= 0.75) else {
            continue;
        };
        let c = meta["colours"][i].as_str().unwrap();
        let colour = [1, 3, 5].map(|k| u8::from_str_radix(&c[k..k + 2], 16).unwrap());
        let (x1, y1, x2, y2) = (tb[0], tb[1], tb[2], tb[3]);
        let at = |x: f64, y: f64| (rect[0] + x * sx, rect[1] + y * sy);
        let (mx, my) = ((x1 + x2) / 2.0, (y1 + y2) / 2.0);
        let mut edges = 0;
        for (x, y, vertical) in [(mx, y1, false), (mx, y2, false), (x1, my, true), (x2, my, true)] {
            if hidden(i, x, y) {
                continue;
            }
            let (px, py) = at(x, y);
            assert!(
                near(&shot, px, py, vertical, colour, reach as i64),
                "no {c} box edge near truth ({x:.0}, {y:.0}) of {t} (screenshot {})",
                out.join("shot.png").display()
            );
            edges += 1;
        }
        checked += (edges >= 2) as usize;
    }
    assert!(
        checked >= 2,
        "too few unoccluded, detected objects with two visible edges to check: {checked}\n{meta}"
    );
    daemon.signal(libc::SIGTERM);
    let (code, err) = daemon.wait(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
