//! Helpers shared by the integration tests: the daemon as a child process (its
//! stderr drained as it comes, so a chatty daemon never blocks on a full pipe),
//! and snapshots of fixture trees to compare byte for byte.
#![allow(dead_code)] // each test binary uses its own subset

pub mod checks;
pub mod motmetrics;
pub mod ort;

use std::io::{BufReader, Read};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Jetson fixture boards (tests/fixtures/jetson), low-power modes included.
pub const BOARDS: [&str; 8] = [
    "nano-jp4",
    "xavier-nx-jp5",
    "orin-nano-jp6",
    "agx-orin-jp6",
    "agx-orin-jp7",
    "orin-nano-7w",
    "orin-nx-10w",
    "xavier-nx-10w",
];

/// Held by every test that starts a clock session in this process: sessions are process-wide
/// (the panic hook restores every registered one), so one test's deliberate panic must not
/// restore another's clocks.
pub static SESSIONS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`SESSIONS`] (a test that failed while holding it does not block the others).
pub fn sessions() -> std::sync::MutexGuard<'static, ()> {
    SESSIONS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Checks that this is root with a working `unshare(1)` (a private mount namespace), for the
/// tests that mount over a tree or a state directory; `what` says which. Those tests run only
/// where build.rs found both or `JETDETECT_REQUIRE_ROOT` is set, so their absence is a failure.
pub fn need_root_and_unshare(what: &str) {
    let is_root = unsafe { libc::geteuid() } == 0;
    let probe = Command::new("unshare").args(["-m", "true"]).status();
    assert!(
        is_root && probe.is_ok_and(|s| s.success()),
        "{what} needs root and a working unshare(1) (util-linux): run the tests as root"
    );
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `models/obstacles-v8-batch.onnx` with its batch axis fixed at `n` (as an export with
/// `batch=n` would be), written to a temporary file named for `tag`.
pub fn fixed_batch_model(n: i64, tag: &str) -> PathBuf {
    use prost::Message;
    use tract_onnx::pb::tensor_shape_proto::dimension::Value;
    let bytes = std::fs::read(repo().join("models/obstacles-v8-batch.onnx")).unwrap();
    let mut model = tract_onnx::pb::ModelProto::decode(&*bytes).unwrap();
    let graph = model.graph.as_mut().unwrap();
    for v in graph.input.iter_mut().chain(graph.output.iter_mut()) {
        let Some(tract_onnx::pb::type_proto::Value::TensorType(t)) =
            v.r#type.as_mut().unwrap().value.as_mut()
        else {
            panic!("{} is not a tensor", v.name)
        };
        t.shape.as_mut().unwrap().dim[0].value = Some(Value::DimValue(n));
    }
    let path = std::env::temp_dir().join(format!("jetdetect-fixed{n}-{tag}-{}.onnx", std::process::id()));
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

/// Writes `dir/jd.toml`: `source`, the shipped model with its class names, the socket `d.sock`
/// (next to the file), a stats message every second, then `extra` (more sections).
pub fn model_config(dir: &Path, source: &str, extra: &str) -> PathBuf {
    let p = dir.join("jd.toml");
    std::fs::write(
        &p,
        format!(
            "[source]\nuri = \"{source}\"\n[model]\npath = \"{}\"\nnames = \"{}\"\n\
             [output]\nsocket = \"d.sock\"\nstats_interval_s = 1\n{extra}",
            repo().join("models/obstacles-v8.onnx").display(),
            repo().join("models/obstacles.names").display()
        ),
    )
    .unwrap();
    p
}

/// `jetdetect check --config <config>`: its exit code and what it wrote to stderr.
pub fn check_config(config: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_jetdetect"))
        .args(["check", "--config"])
        .arg(config)
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A free TCP port on 127.0.0.1 (bound, then released for the test's server to take).
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// An empty folder for one test: `jd-<suite>-<pid>-<name>` in the temporary directory.
pub fn fresh_dir(suite: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jd-{suite}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Files that are readings, not settings: the hardware moves them on its own (the board emulator
/// does too), so a profile may write one (the EMC `rate`, when it locks the EMC) but never saves or
/// restores it, as jetson_clocks does. [`snapshot`] keeps their names, not their contents.
pub const READINGS: [&str; 5] = ["clk/emc/rate", "cur_freq", "scaling_cur_freq", "clk_rate", "load"];

/// Every file and symlink under `dir`, with contents / targets, sorted; a reading ([`READINGS`])
/// with its name only.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            if meta.file_type().is_symlink() {
                out.push((rel, std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes()));
            } else if meta.is_dir() {
                stack.push(p);
            } else if READINGS.iter().any(|r| rel.ends_with(r)) {
                out.push((rel, b"(reading)".to_vec()));
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Writes `run/jd.toml`: a 15 fps synthetic camera, `model`, the socket `run/d.sock`, stats
/// every second, and the `locked` clock profile on the fixture tree `tree` with its state file
/// at `state`; `extra_power` adds `[power]` keys.
pub fn locked_profile_config(
    run: &Path,
    tree: &Path,
    state: &Path,
    model: &Path,
    extra_power: &str,
) -> PathBuf {
    let cfg = run.join("jd.toml");
    std::fs::write(
        &cfg,
        format!(
            "[source]\nuri = \"synthetic://?width=320&height=240&fps=15\"\n[model]\npath = \"{}\"\n\
             [output]\nsocket = \"d.sock\"\nstats_interval_s = 1\n[power]\nprofile = \"locked\"\nroot = \"{}\"\n\
             state_file = \"{}\"\ntelemetry_ms = 200\n{extra_power}\n",
            model.display(),
            tree.display(),
            state.display()
        ),
    )
    .unwrap();
    cfg
}

/// A running `jetdetect run`.
pub struct Daemon {
    /// The process.
    pub child: Child,
    /// Its socket.
    pub socket: PathBuf,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Daemon {
    /// Starts `cmd` (a `jetdetect run`, possibly behind a wrapper such as unshare) and
    /// waits for `socket` to accept; panics with the daemon's stderr if it exits first.
    pub fn spawn(mut cmd: Command, socket: PathBuf) -> Daemon {
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut pipe = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        });
        let mut d = Daemon { child, socket, stderr: Some(stderr) };
        let deadline = Instant::now() + Duration::from_secs(90);
        while UnixStream::connect(&d.socket).is_err() {
            if let Some(status) = d.child.try_wait().unwrap() {
                let err = d.stderr.take().unwrap().join().unwrap();
                panic!("the daemon exited ({status}) before opening {}:\n{err}", d.socket.display());
            }
            assert!(Instant::now() < deadline, "the daemon did not open {} in time", d.socket.display());
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    /// `jetdetect run --config cfg` with `env`; the config's socket must be `d.sock` beside it.
    pub fn start(cfg: &Path, env: &[(&str, &str)]) -> Daemon {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_jetdetect"));
        cmd.args(["run", "--config"]).arg(cfg);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Daemon::spawn(cmd, cfg.parent().unwrap().join("d.sock"))
    }

    /// A client, with a read timeout.
    pub fn connect(&self) -> BufReader<UnixStream> {
        let s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        BufReader::new(s)
    }

    /// Sends `sig` to the daemon.
    pub fn signal(&self, sig: i32) {
        // SAFETY: plain kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    /// Waits for exit; returns (status code, stderr). Panics on a hang.
    pub fn wait(self, limit: Duration) -> (Option<i32>, String) {
        let (code, _, err) = self.wait_signal(limit);
        (code, err)
    }

    /// Waits for exit; returns (status code, terminating signal, stderr). Panics on a hang.
    pub fn wait_signal(mut self, limit: Duration) -> (Option<i32>, Option<i32>, String) {
        use std::os::unix::process::ExitStatusExt as _;
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let err = self.stderr.take().map(|t| t.join().unwrap()).unwrap_or_default();
                return (status.code(), status.signal(), err);
            }
            if Instant::now() > deadline {
                self.child.kill().unwrap();
                let err = self.stderr.take().map(|t| t.join().unwrap()).unwrap_or_default();
                panic!("the daemon did not exit within {limit:?} (a hang):\n{err}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}
