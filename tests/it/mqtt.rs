//! `[output.mqtt]` against a real broker: Debian's mosquitto, started here on a free 127.0.0.1
//! port, and its own `mosquitto_sub` as the independent subscriber (tests/mqtt/check.py does the
//! same with paho-mqtt in CI). Without mosquitto (as build.rs found it) the tests that need a broker
//! are reported as ignored, unless `JETDETECT_REQUIRE_MQTT=1` (set by `.ci/run`, which installs
//! it): then a missing mosquitto fails them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{free_tcp_port as free_port, fresh_dir, repo, Daemon};

/// Checks that mosquitto and its clients are here: a test that calls this runs only where build.rs
/// found them or `JETDETECT_REQUIRE_MQTT` is set.
fn need_mosquitto() {
    let ok = ["mosquitto", "mosquitto_sub", "mosquitto_pub"]
        .iter()
        .all(|p| Command::new(p).arg("--help").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok());
    assert!(
        ok,
        "mosquitto / mosquitto_sub / mosquitto_pub are missing: apt install mosquitto mosquitto-clients"
    );
}

/// A mosquitto broker with its config in `dir`.
struct Broker {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Broker {
    /// Writes `dir/mosquitto.conf` (a listener on `port` plus `listener_extra`, then `extra`)
    /// and starts the broker.
    fn start(dir: &Path, listener_extra: &str, extra: &str) -> Broker {
        let port = free_port();
        let conf = format!(
            "user root\nlistener {port} 127.0.0.1\n{listener_extra}\npersistence true\npersistence_location {}/\n\
             max_queued_messages 0\nlog_type error\nlog_type warning\nlog_type notice\nlog_dest stderr\n{extra}\n",
            dir.display()
        );
        std::fs::write(dir.join("mosquitto.conf"), conf).unwrap();
        let mut b = Broker { dir: dir.to_path_buf(), port, child: None };
        b.restart();
        b
    }

    fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("mosquitto.log"))
            .unwrap();
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(self.dir.join("mosquitto.conf"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "mosquitto did not listen:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the broker (SIGTERM: it saves its sessions, as a service restart does).
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("mosquitto.log")).unwrap_or_default()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `mosquitto_sub` with a persistent session (QoS 1), printing `retained topic payload` lines.
struct Sub {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Sub {
    fn start(port: u16, id: &str, args: &[&str]) -> Sub {
        let mut child = Command::new("mosquitto_sub")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-q",
                "1",
                "-c",
                "-i",
                id,
                "-t",
                "jetdetect/#",
            ])
            .args(["-F", "%r %t %p"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                l.lock().unwrap().push(line);
            }
        });
        Sub { child, lines }
    }

    /// Waits until a probe published with `mosquitto_pub` arrives (the subscription is live).
    fn wait_ready(&self, port: u16, topic: &str, pub_args: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let _ = Command::new("mosquitto_pub")
                .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q", "1", "-t", topic, "-m", "probe"])
                .args(pub_args)
                .output();
            std::thread::sleep(Duration::from_millis(100));
            if self.lines.lock().unwrap().iter().any(|l| l.starts_with(&format!("0 {topic} "))) {
                return;
            }
            assert!(Instant::now() < deadline, "the subscriber never saw its probe");
        }
    }

    /// The messages on `topic` (payloads parsed), with their retained flag.
    fn messages(&self, topic: &str) -> Vec<(bool, serde_json::Value)> {
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .filter_map(|l| {
                let (retained, rest) = l.split_once(' ')?;
                let (t, payload) = rest.split_once(' ')?;
                (t == topic).then(|| {
                    let v =
                        serde_json::from_str(payload).unwrap_or_else(|e| panic!("{topic}: {e}: {payload}"));
                    (retained == "1", v)
                })
            })
            .collect()
    }
}

impl Drop for Sub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A test's folder, an open broker there and a subscriber to `jetdetect/#` that is live.
fn open_broker(name: &str) -> (PathBuf, Broker, Sub) {
    need_mosquitto();
    let dir = fresh_dir("mqtt", name);
    let broker = Broker::start(&dir, "allow_anonymous true", "");
    let sub = Sub::start(broker.port, &format!("watcher-{name}"), &[]);
    sub.wait_ready(broker.port, "jetdetect/probe/x", &[]);
    (dir, broker, sub)
}

/// A config: a synthetic camera of `frames` frames at `fps`, hazards on, `[output.mqtt]` with `mqtt`.
fn config(dir: &Path, fps: u32, frames: u32, mqtt: &str) -> PathBuf {
    let p = dir.join("jd.toml");
    std::fs::write(
        &p,
        format!(
            "[source]\nuri = \"synthetic://?width=320&height=240&fps={fps}&seed=3&objects=3&frames={frames}\"\n\
             [model]\npath = \"{}\"\nnames = \"{}\"\n[output]\nsocket = \"d.sock\"\nstats_interval_s = 1\n\
             [hazards]\nenabled = true\n[output.mqtt]\nqueue_dir = \"queue\"\n{mqtt}",
            repo().join("models/obstacles-v8.onnx").display(),
            repo().join("models/obstacles.names").display()
        ),
    )
    .unwrap();
    p
}

/// What a socket client saw: hazards messages' capture times and the stats messages' `uptime_s`.
#[derive(Default)]
struct Seen {
    hazards: Vec<u64>,
    stats: Vec<f64>,
}

/// Reads the daemon's socket on a thread until the daemon closes it.
fn read_socket(d: &Daemon) -> std::thread::JoinHandle<Seen> {
    let mut r = d.connect();
    std::thread::spawn(move || {
        let mut seen = Seen::default();
        let mut line = String::new();
        while r.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            match v["type"].as_str() {
                Some("hazards") if v["blind"] == false => {
                    seen.hazards.push(v["capture_mono_ns"].as_u64().unwrap())
                }
                Some("stats") => seen.stats.push(v["uptime_s"].as_f64().unwrap()),
                _ => {}
            }
            line.clear();
        }
        seen
    })
}

/// The frame hazards messages on the subscriber, in arrival order, by their capture time
/// (unique, and increasing across runs: the monotonic clock is the system's).
fn hazard_seqs(sub: &Sub, device: &str) -> Vec<u64> {
    sub.messages(&format!("jetdetect/{device}/hazards"))
        .iter()
        .filter(|(_, v)| v["blind"] == false)
        .map(|(_, v)| v["capture_mono_ns"].as_u64().unwrap())
        .collect()
}

/// Waits until `done` holds, or 20 s; false on a timeout.
fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

/// Checks that `got` (arrival order, QoS 1 duplicates allowed) holds every one of `want`
/// (increasing keys), in order; returns the duplicates, and the messages `want` does not have
/// (sent before the socket client connected).
fn same_in_order(what: &str, want: &[u64], got: &[u64]) -> (usize, usize) {
    let mut firsts = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for &g in got {
        if seen.insert(g) {
            firsts.push(g);
        }
    }
    let missing: Vec<_> = want.iter().filter(|w| !seen.contains(w)).collect();
    assert!(missing.is_empty(), "{what}: {} of {} lost: {missing:?}", missing.len(), want.len());
    if let Some(at) = firsts.windows(2).position(|w| w[1] <= w[0]) {
        panic!(
            "{what}: out of order at {at}: {:?}",
            &firsts[at.saturating_sub(2)..(at + 4).min(firsts.len())]
        );
    }
    (got.len() - firsts.len(), firsts.len() - want.len())
}

#[test]
#[cfg_attr(
    not(jetdetect_has_mosquitto),
    ignore = "needs mosquitto and mosquitto-clients (docs/reliability.md)"
)]
fn hazards_stats_and_status_reach_the_broker_and_survive_its_outage() {
    let (dir, mut broker, sub) = open_broker("outage");
    // The outage: 8 s here; JETDETECT_MQTT_OUTAGE_S=30 for the figure.
    let outage: u64 = std::env::var("JETDETECT_MQTT_OUTAGE_S").ok().and_then(|s| s.parse().ok()).unwrap_or(8);
    let fps = 10;
    let frames = (outage as u32 + 12) * fps;
    let cfg = config(
        &dir,
        fps,
        frames,
        &format!("url = \"mqtt://127.0.0.1:{}\"\ndevice = \"rover-1\"\ndetections_hz = 2\n", broker.port),
    );
    let d = Daemon::start(&cfg, &[]);
    let socket = read_socket(&d);
    std::thread::sleep(Duration::from_secs(3));
    broker.stop();
    let stopped = Instant::now();
    std::thread::sleep(Duration::from_secs(outage));
    broker.restart();
    let down = stopped.elapsed();
    let (code, err) = d.wait(Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    let seen = socket.join().unwrap();
    assert!(seen.hazards.len() as u64 > outage * fps as u64 / 2, "too few frames: {err}");
    let all = wait_for(|| hazard_seqs(&sub, "rover-1").len() >= seen.hazards.len())
        && wait_for(|| {
            sub.messages("jetdetect/rover-1/status").last().is_some_and(|(_, v)| v["state"] == "offline")
        });
    assert!(
        all,
        "not every hazards message arrived ({} of {}), or no offline status:\n{err}\nbroker:\n{}",
        hazard_seqs(&sub, "rover-1").len(),
        seen.hazards.len(),
        broker.log()
    );
    let (dups, early) = same_in_order("hazards", &seen.hazards, &hazard_seqs(&sub, "rover-1"));
    assert!(early <= 5, "{early} hazards messages the socket client never saw");
    // Stats: every interval's message (the last one, at the stop, included), in order.
    let stats: Vec<f64> = sub
        .messages("jetdetect/rover-1/stats")
        .iter()
        .map(|(_, v)| v["uptime_s"].as_f64().unwrap())
        .collect();
    let key = |v: &[f64]| v.iter().map(|x| (x * 1000.0).round() as u64).collect::<Vec<_>>();
    let (stat_dups, _) = same_in_order("stats", &key(&seen.stats), &key(&stats));
    // Detections: QoS 0, at most 2 a second, none while the broker was down.
    let dets = sub.messages("jetdetect/rover-1/detections");
    assert!(!dets.is_empty(), "no detections messages");
    assert!(dets.iter().all(|(_, v)| v["type"] == "detections" && v["camera"] == "cam0"));
    assert!((dets.len() as f64) <= 2.2 * (frames / fps) as f64, "{} detections messages", dets.len());
    // Status: online on connect (twice: before and after the outage), offline at the stop.
    let status = sub.messages("jetdetect/rover-1/status");
    let states: Vec<&str> = status.iter().map(|(_, v)| v["state"].as_str().unwrap()).collect();
    assert!(states.iter().filter(|s| **s == "online").count() >= 2, "{states:?}");
    assert_eq!(status.last().unwrap().1["reason"], "end of source", "{status:?}");
    assert!(err.contains(&format!("MQTT: connected to mqtt://127.0.0.1:{}", broker.port)), "{err}");
    assert!(err.contains("again after"), "{err}");
    assert!(
        err.lines()
            .filter(|l| l.contains(&format!("127.0.0.1:{}", broker.port)) && l.contains("retrying"))
            .count()
            <= 3,
        "one line per kind of failure, not one per retry:\n{err}"
    );
    assert!(err.contains("0 left queued on disk"), "{err}");
    eprintln!(
        "MQTT outage of {:.1} s: {} hazards and {} stats messages, all arrived in order; QoS 1 duplicates: {dups} + {stat_dups}",
        down.as_secs_f64(),
        seen.hazards.len(),
        seen.stats.len()
    );
    // A new subscriber gets the retained status: the robot is offline, and why.
    let late = Command::new("mosquitto_sub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &broker.port.to_string(),
            "-t",
            "jetdetect/rover-1/status",
            "-C",
            "1",
            "-W",
            "5",
        ])
        .args(["-F", "%r %p"])
        .output()
        .unwrap();
    let late = String::from_utf8_lossy(&late.stdout);
    assert!(late.starts_with("1 ") && late.contains("\"state\":\"offline\""), "{late}");
}

#[test]
#[cfg_attr(
    not(jetdetect_has_mosquitto),
    ignore = "needs mosquitto and mosquitto-clients (docs/reliability.md)"
)]
fn a_restart_while_the_broker_is_down_loses_nothing() {
    // The subscriber's session is made, then the broker goes away with it saved.
    let (dir, mut broker, sub) = open_broker("restart");
    broker.stop();
    let cfg =
        config(&dir, 10, 25, &format!("url = \"mqtt://127.0.0.1:{}\"\ndevice = \"rover-2\"\n", broker.port));
    let mut want = Vec::new();
    for run in 0..2 {
        let d = Daemon::start(&cfg, &[]);
        let socket = read_socket(&d);
        let (code, err) = d.wait(Duration::from_secs(60));
        assert_eq!(code, Some(0), "{err}");
        assert!(
            err.contains(&format!(
                "MQTT: connection refused by 127.0.0.1:{}: is the broker running",
                broker.port
            )),
            "{err}"
        );
        if run == 1 {
            assert!(err.contains("messages from an earlier run wait in"), "{err}");
            // The warning about the broker counts them too (it said 0 when it came before the
            // sender thread had counted the queue).
            let waiting = err
                .split("MQTT: ")
                .find_map(|l| l.split(" messages from an earlier run").next()?.parse::<u64>().ok());
            let warned = err
                .lines()
                .find(|l| l.contains("retrying with backoff"))
                .and_then(|l| l.rsplit("); ").next()?.split(' ').next()?.parse::<u64>().ok());
            assert!(waiting.is_some_and(|n| n > 0) && warned >= waiting, "{waiting:?} vs {warned:?}:\n{err}");
        }
        want.extend(socket.join().unwrap().hazards);
    }
    // The hazards messages of both runs (each run's frames counted from 1) arrive once the
    // broker is back and a third run connects.
    broker.restart();
    let d = Daemon::start(
        &config(&dir, 10, 5, &format!("url = \"mqtt://127.0.0.1:{}\"\ndevice = \"rover-2\"\n", broker.port)),
        &[],
    );
    let socket = read_socket(&d);
    let (code, err) = d.wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    want.extend(socket.join().unwrap().hazards);
    assert!(
        wait_for(|| hazard_seqs(&sub, "rover-2").len() >= want.len()),
        "{} of the three runs' {} hazards messages arrived:\n{err}\nbroker:\n{}",
        hazard_seqs(&sub, "rover-2").len(),
        want.len(),
        broker.log()
    );
    let got = hazard_seqs(&sub, "rover-2");
    let (dups, early) = same_in_order("three runs' hazards", &want, &got);
    assert!(early <= 15, "{early} hazards messages the socket clients never saw");
    eprintln!(
        "MQTT: three runs, the first two offline: {} hazards messages arrived in order, {dups} duplicates",
        want.len()
    );
}

#[test]
#[cfg_attr(
    not(jetdetect_has_mosquitto),
    ignore = "needs mosquitto and mosquitto-clients (docs/reliability.md)"
)]
fn tls_logins_and_acls_are_enforced_and_bad_ones_get_one_clear_line() {
    need_mosquitto();
    let dir = fresh_dir("mqtt", "tls");
    let certs = dir.join("certs");
    let out = Command::new("bash").arg(repo().join("tests/mqtt/certs.sh")).arg(&certs).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let c = |f: &str| certs.join(f).display().to_string();
    let passwd = dir.join("passwd");
    for (i, (user, pw)) in [("robot1", "r1-secret"), ("watcher", "w-secret")].iter().enumerate() {
        let mut cmd = Command::new("mosquitto_passwd");
        if i == 0 {
            cmd.arg("-c");
        }
        assert!(cmd.args(["-b"]).arg(&passwd).args([user, pw]).status().unwrap().success());
    }
    std::fs::write(dir.join("acl"), "user watcher\ntopic read jetdetect/#\n\npattern write jetdetect/%u/#\n")
        .unwrap();
    std::fs::write(dir.join("robot1.pw"), "r1-secret\n").unwrap();
    std::fs::write(dir.join("wrong.pw"), "not-it\n").unwrap();
    let tls =
        |cert: &str, key: &str| format!("cafile {}\ncertfile {}\nkeyfile {}\n", c("ca.pem"), c(cert), c(key));
    let auth = format!(
        "allow_anonymous false\npassword_file {}\nacl_file {}\n",
        passwd.display(),
        dir.join("acl").display()
    );
    let broker = Broker::start(&dir, &format!("{}{auth}", tls("server.pem", "server.key")), "");
    // A second listener with an expired certificate.
    let expired_port = free_port();
    let mut conf = std::fs::read_to_string(dir.join("mosquitto.conf")).unwrap();
    conf.push_str(&format!("listener {expired_port} 127.0.0.1\n{}", tls("expired.pem", "expired.key")));
    std::fs::write(dir.join("mosquitto.conf"), conf).unwrap();
    let mut broker = broker;
    broker.stop();
    broker.restart();
    let port = broker.port;
    let sub_tls = ["--cafile", &c("ca.pem"), "-u", "watcher", "-P", "w-secret"];
    let sub = Sub::start(port, "watcher-tls", &sub_tls);
    sub.wait_ready(
        port,
        "jetdetect/robot1/probe",
        &["--cafile", &c("ca.pem"), "-u", "robot1", "-P", "r1-secret"],
    );
    let ca = c("ca.pem");
    let pw = dir.join("robot1.pw").display().to_string();
    let run = |name: &str, mqtt: String| -> String {
        let d = fresh_dir("mqtt", &format!("tls-{name}"));
        let cfg = config(&d, 10, if name == "acl" { 50 } else { 20 }, &mqtt);
        let daemon = Daemon::start(&cfg, &[]);
        let (code, err) = daemon.wait(Duration::from_secs(60));
        assert_eq!(code, Some(0), "{name}: {err}");
        err
    };
    // The right CA, user and device: everything arrives over TLS.
    let err = run(
        "good",
        format!("url = \"mqtts://127.0.0.1:{port}\"\ndevice = \"robot1\"\nusername = \"robot1\"\npassword_file = \"{pw}\"\nca = \"{ca}\"\n"),
    );
    assert!(err.contains("0 left queued on disk"), "{err}");
    assert!(!err.contains("r1-secret"), "the password is never logged:\n{err}");
    assert!(
        wait_for(|| !hazard_seqs(&sub, "robot1").is_empty()),
        "no hazards from robot1 over TLS:\n{err}\n{}",
        broker.log()
    );
    // Publishing under another robot's name: the ACL refuses it, and over MQTT 5 the broker
    // says so, which is logged.
    let err = run(
        "acl",
        format!(
            "url = \"mqtts://127.0.0.1:{port}\"\nprotocol = \"5\"\ndevice = \"robot2\"\nusername = \"robot1\"\n\
             password_file = \"{pw}\"\nca = \"{ca}\"\n"
        ),
    );
    // mosquitto answers a refused publish with a PUBACK saying NotAuthorized (MQTT 5), or, as
    // Debian's 2.0.11 does over TLS, by dropping the connection: either is named.
    assert!(
        (err.contains("MQTT: the broker refused a message: NotAuthorized") && err.contains("check the broker's ACL for jetdetect/robot2"))
            || err.contains("times in a row within seconds of accepting it: it refuses what this device sends; check that the broker's ACL lets user \"robot1\" publish under jetdetect/robot2/"),
        "{err}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(sub.messages("jetdetect/robot2/hazards").is_empty(), "robot1 wrote under robot2's name");
    // Bad input: one clear line each, retried, the daemon runs to its end.
    let cases = [
        ("wrong-ca", format!("url = \"mqtts://127.0.0.1:{port}\"\nusername = \"robot1\"\npassword_file = \"{pw}\"\nca = \"{}\"\n", c("other-ca.pem")),
            "the broker's certificate is not signed by the CA in [output.mqtt] ca".to_string()),
        ("expired", format!("url = \"mqtts://127.0.0.1:{expired_port}\"\nca = \"{ca}\"\n"),
            "the broker's certificate has expired".to_string()),
        ("password", format!("url = \"mqtts://127.0.0.1:{port}\"\nusername = \"robot1\"\npassword_file = \"{}\"\nca = \"{ca}\"\n", dir.join("wrong.pw").display()),
            format!("refused the login (user \"robot1\", password from {})", dir.join("wrong.pw").display())),
        ("unreachable", format!("url = \"mqtt://127.0.0.1:{}\"\n", free_port()),
            "is the broker running and listening there?".to_string()),
    ];
    for (name, mqtt, want) in cases {
        let err = run(name, format!("{mqtt}device = \"robot1\"\n"));
        let lines: Vec<&str> =
            err.lines().filter(|l| l.contains("MQTT:") && l.contains("retrying")).collect();
        assert!(lines.iter().any(|l| l.contains(&want)), "{name}: no {want:?} in\n{err}");
        assert_eq!(lines.len(), 1, "{name}: one line, not one per retry:\n{err}");
        assert!(err.contains("left queued on disk for the next run"), "{err}");
    }
}

#[test]
fn bad_mqtt_values_are_config_errors_naming_the_file_line_and_key() {
    let dir = fresh_dir("mqtt", "config");
    for (section, want) in [
        ("[output.mqtt]\nurl = \"http://broker\"\n", "jd.toml:10: [output.mqtt] url: \"http://broker\": give mqtt://host[:port]"),
        (
            "[output.mqtt]\nurl = \"mqtt://broker\"\nca = \"/etc/hostname\"\n",
            "jd.toml:11: [output.mqtt] ca: is for TLS: use an mqtts:// url",
        ),
        (
            "[output.mqtt]\nurl = \"mqtts://broker\"\nusername = \"r\"\npassword_file = \"/nonexistent/pw\"\n",
            "jd.toml:12: [output.mqtt] password_file: /nonexistent/pw: No such file or directory",
        ),
        ("[output.mqtt]\nurl = \"mqtt://broker\"\ndevice = \"robot/1\"\n", "[output.mqtt] device: \"robot/1\" cannot be a topic level"),
        ("[output.mqtt]\nurl = \"mqtt://broker\"\nprotocol = \"4\"\n", "unknown variant `4`, expected `3.1.1` or `5`"),
        ("[output.mqtt]\nurl = \"mqtt://broker\"\nqueue_mib = 0\n", "[output.mqtt] queue_mib: 0 is out of range: allowed 1 to 65536"),
    ] {
        let cfg = crate::common::model_config(&dir, "synthetic://", section);
        let (code, err) = crate::common::check_config(&cfg);
        assert_eq!(code, Some(1), "{section}: {err}");
        assert!(err.contains(want), "{section}: want {want:?} in {err}");
    }
}

#[test]
#[cfg_attr(
    not(jetdetect_has_mosquitto),
    ignore = "needs mosquitto and mosquitto-clients (docs/reliability.md)"
)]
fn the_fleet_command_shows_every_robot_live_and_offline_after() {
    need_mosquitto();
    let dir = fresh_dir("mqtt", "fleet");
    let broker = Broker::start(&dir, "allow_anonymous true", "");
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let robots: Vec<Daemon> = ["rover-a", "rover-b"]
        .iter()
        .map(|name| {
            let d = dir.join(name);
            std::fs::create_dir_all(&d).unwrap();
            Daemon::start(&config(&d, 10, 60, &format!("url = \"{url}\"\ndevice = \"{name}\"\n")), &[])
        })
        .collect();
    let fleet = |seconds: &str| -> Vec<serde_json::Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_jetdetect"))
            .args(["fleet", "--broker", &url, "--json", "--every", "0.5", "--for", seconds])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let live = fleet("2.5");
    let last = &live.last().unwrap()["devices"];
    let names: Vec<&str> = last.as_array().unwrap().iter().map(|d| d["device"].as_str().unwrap()).collect();
    assert_eq!(names, ["rover-a", "rover-b"], "{last}");
    for d in last.as_array().unwrap() {
        assert_eq!(d["state"], "online", "{d}");
        assert!(d["fps"].as_f64().unwrap() > 5.0, "{d}");
        assert!(d["p99_ms"].as_f64().unwrap() > 0.0, "{d}");
        assert!(d["last_seen_s"].as_f64().unwrap() < 1.0, "{d}");
    }
    for r in robots {
        let (code, err) = r.wait(Duration::from_secs(60));
        assert_eq!(code, Some(0), "{err}");
    }
    // Later, from the retained status alone: both offline, and why.
    let after = fleet("1");
    let last = &after.last().unwrap()["devices"];
    for d in last.as_array().unwrap() {
        assert_eq!(
            (d["state"].as_str(), d["reason"].as_str()),
            (Some("offline"), Some("end of source")),
            "{d}"
        );
    }
    assert_eq!(last.as_array().unwrap().len(), 2);
    // The table form, for people.
    let out = Command::new(env!("CARGO_BIN_EXE_jetdetect"))
        .args(["fleet", "--broker", &url, "--for", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("DEVICE") && text.contains("rover-a") && text.contains("offline"), "{text}");
    // A bad broker URL is refused at once, naming the flag.
    let out = Command::new(env!("CARGO_BIN_EXE_jetdetect"))
        .args(["fleet", "--broker", "http://x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--broker: \"http://x\": give mqtt://"), "{out:?}");
}

#[test]
#[cfg_attr(
    not(jetdetect_has_mosquitto),
    ignore = "needs mosquitto and mosquitto-clients (docs/reliability.md)"
)]
fn a_bridge_carries_a_robot_to_the_central_broker() {
    need_mosquitto();
    // The central broker, and a site broker the robots use, bridged to it as in docs/fleet.md.
    let central_dir = fresh_dir("mqtt", "bridge-central");
    let central = Broker::start(&central_dir, "allow_anonymous true", "");
    let site_dir = fresh_dir("mqtt", "bridge-site");
    let site = Broker::start(
        &site_dir,
        "allow_anonymous true",
        &format!(
            "connection central\naddress 127.0.0.1:{}\ntopic jetdetect/# out 1\ncleansession false\n\
             bridge_protocol_version mqttv311\nrestart_timeout 1\n",
            central.port
        ),
    );
    let sub = Sub::start(central.port, "central-watcher", &[]);
    sub.wait_ready(central.port, "jetdetect/probe/x", &[]);
    // The bridge is up once a message published on the site reaches the central broker.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let _ = Command::new("mosquitto_pub")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &site.port.to_string(),
                "-q",
                "1",
                "-t",
                "jetdetect/site/x",
                "-m",
                "up",
            ])
            .output();
        std::thread::sleep(Duration::from_millis(200));
        if sub.lines.lock().unwrap().iter().any(|l| l.starts_with("0 jetdetect/site/x ")) {
            break;
        }
        assert!(Instant::now() < deadline, "the bridge never came up:\n{}", site.log());
    }
    let cfg = config(
        &site_dir,
        10,
        30,
        &format!("url = \"mqtt://127.0.0.1:{}\"\ndevice = \"rover-9\"\n", site.port),
    );
    let d = Daemon::start(&cfg, &[]);
    let socket = read_socket(&d);
    let (code, err) = d.wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    let want = socket.join().unwrap().hazards;
    assert!(
        wait_for(|| hazard_seqs(&sub, "rover-9").len() >= want.len()
            && sub.messages("jetdetect/rover-9/status").last().is_some_and(|(_, v)| v["state"] == "offline")),
        "{} of {} hazards messages crossed the bridge:\n{err}\n{}",
        hazard_seqs(&sub, "rover-9").len(),
        want.len(),
        site.log()
    );
    same_in_order("bridged hazards", &want, &hazard_seqs(&sub, "rover-9"));
}

#[test]
#[cfg_attr(
    not(jetdetect_has_mosquitto),
    ignore = "needs mosquitto and mosquitto-clients (docs/reliability.md)"
)]
fn a_queue_that_cannot_be_written_is_reported_and_counted_not_fatal() {
    use std::os::unix::process::CommandExt as _;
    let (dir, broker, sub) = open_broker("disk-full");
    let cfg = config(
        &dir,
        10,
        40,
        &format!("url = \"mqtt://127.0.0.1:{}\"\ndevice = \"rover-full\"\n", broker.port),
    );
    // The daemon may write files of at most 8 KiB (RLIMIT_FSIZE, SIGXFSZ ignored, as a full
    // disk answers: the write fails): the queue's first segment fills after a few messages.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jetdetect"));
    cmd.args(["run", "--config"]).arg(&cfg);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit { rlim_cur: 8192, rlim_max: 8192 };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let d = Daemon::spawn(cmd, dir.join("d.sock"));
    let socket = read_socket(&d);
    let (code, err) = d.wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("MQTT: cannot write to the queue in"), "{err}");
    assert!(err.contains("File too large"), "{err}");
    assert_eq!(err.matches("cannot write to the queue").count(), 1, "logged once, not per message:\n{err}");
    assert!(err.contains("40 processed"), "detection went on at full rate:\n{err}");
    // Connected all along: what the queue could not take went straight to the broker.
    assert!(err.contains("0 of them lost, the rest sent directly"), "{err}");
    let want = socket.join().unwrap().hazards;
    assert!(wait_for(|| hazard_seqs(&sub, "rover-full").len() >= want.len()), "{err}");
    same_in_order("hazards with a full disk", &want, &hazard_seqs(&sub, "rover-full"));
}
