//! `csi://`, `rtsp://` and `gst://` sources: GStreamer pipelines run by a supervised
//! `gst-launch-1.0` child that writes its frames to a pipe.
//!
//! **Why a child process and not the `gstreamer` crate.** jetdetect ships as one static
//! aarch64 binary (musl). The `gstreamer` crate links GLib and libgstreamer dynamically, so
//! using it would end the static build and tie the binary to one JetPack's GStreamer. A child
//! keeps the binary static, finds whatever GStreamer the board has (JetPack's, with Argus and
//! NVDEC), and a crash inside a vendor plugin takes down the child, not the daemon. The price is
//! one copy of each frame through a pipe (a 640x480 NV12 frame is 460 kB)
//! and no zero-copy from NVMM memory.
//!
//! **The guarantees V4L2 gives, kept here:**
//! - *The newest frame wins.* The pipeline ends in a one-buffer leaky queue, and the capture
//!   thread reads the pipe as fast as frames come, so nothing queues between GStreamer and
//!   the pipeline's newest-frame slot. Frames the queue drops show as gaps in `seq` (from the
//!   buffers' offsets).
//! - *Capture time on `CLOCK_MONOTONIC`.* A buffer's PTS is pipeline running time on GStreamer's
//!   system clock (monotonic). The source places it on `CLOCK_MONOTONIC` through the smallest
//!   arrival-minus-PTS it has seen, so a stamp is late by the pipeline's fastest transit.
//! - *Reopened with backoff.* A child that exits, a stream that ends or stays silent for
//!   `timeout_ms`, is reported as [`SourceError::Unavailable`] (with the child's own error line)
//!   and started again after 0.25 s, doubling to 5 s.
//! - *No orphan, no zombie.* The child gets `PR_SET_PDEATHSIG` (SIGKILL if the daemon dies),
//!   is asked to stop with SIGINT (so Argus closes cleanly), killed after 2 s, and always reaped.
//! - *Missing elements are named with their package* (`nvarguscamerasrc` on a PC: JetPack's
//!   `nvidia-l4t-gstreamer`), and are a configuration error, not a retry.

pub mod gdp;
pub mod pipeline;

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gdp::{GdpError, GdpReader, Packet, VideoCaps};
pub use pipeline::{Launch, Platform};

use super::{FrameSource, Reopen, SourceError};
use crate::clock::{instant_from_mono_ns, mono_ns};
use crate::frame::{wall_clock_ns, Frame, PixelFormat};

/// The program that runs pipelines.
pub const GST_LAUNCH: &str = "gst-launch-1.0";

/// Lines of the child's standard error kept for error messages.
const STDERR_LINES: usize = 20;

/// How long a child asked to stop with SIGINT gets before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The `csi://`, `rtsp://` and `gst://` source.
pub struct GstSource {
    text: String,
    launch: Launch,
    running: Option<Running>,
    reopen: Reopen,
    reported: Option<String>,
    seq: u64,
    payload: Vec<u8>,
    /// Check for `nvargus-daemon` before each start (`csi://` on a Jetson).
    argus: bool,
    /// End of stream ends the source (`gst://`), rather than restarting it.
    finite: bool,
    /// The stream has ended.
    ended: bool,
}

/// A started child and what is known of its stream.
struct Running {
    child: Child,
    reader: GdpReader<TimedPipe>,
    stderr: Arc<Mutex<Vec<String>>>,
    stderr_thread: Option<std::thread::JoinHandle<()>>,
    caps: Option<VideoCaps>,
    /// Smallest `CLOCK_MONOTONIC` arrival minus PTS seen, in nanoseconds.
    base_ns: Option<u64>,
    last_offset: Option<u64>,
}

impl GstSource {
    /// Builds the pipeline for `text` (a `csi://`, `rtsp://` or `gst://` URI) and starts it.
    /// A bad URI, a missing `gst-launch-1.0` or a missing element is an error; a stream that
    /// cannot be reached yet is not: the source retries, reporting why from `next_frame`.
    pub fn open(text: &str) -> Result<GstSource, SourceError> {
        let platform = Platform::detect(std::path::Path::new("/"));
        let launch = pipeline::build(text, platform)?;
        log::info!("{text}: {platform:?} pipeline: {}", launch.shown());
        let mut src = GstSource {
            text: text.to_string(),
            launch,
            running: None,
            reopen: Reopen::new(),
            reported: None,
            seq: 0,
            payload: Vec::new(),
            // Argus runs only on a Jetson: elsewhere the pipeline's missing element says so.
            argus: platform == Platform::Jetson && pipeline::is_csi(text),
            finite: pipeline::is_gst(text),
            ended: false,
        };
        match src.start() {
            Ok(()) => Ok(src),
            Err(SourceError::Unavailable(m)) => {
                log::warn!("{m}");
                Ok(src)
            }
            Err(e) => Err(e),
        }
    }

    fn start(&mut self) -> Result<(), SourceError> {
        if self.argus {
            if let Err(m) = pipeline::argus_check(std::path::Path::new("/")) {
                return Err(self.fail(m));
            }
        }
        let mut cmd = Command::new(GST_LAUNCH);
        cmd.arg("-q")
            .args(&self.launch.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Die with the daemon: SIGKILL when the thread that started us exits.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The daemon died before prctl took effect: nobody will read our frames.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            SourceError::Config(if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "{}: {GST_LAUNCH} is not installed: install Debian's gstreamer1.0-tools (on a Jetson it \
                     comes with JetPack)",
                    self.text
                )
            } else {
                format!("{}: cannot start {GST_LAUNCH}: {e}", self.text)
            })
        })?;
        let stdout = child.stdout.take().expect("piped");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let stderr_thread =
            spawn_stderr_reader(child.stderr.take().expect("piped"), stderr.clone(), self.text.clone());
        self.running = Some(Running {
            child,
            reader: GdpReader::new(TimedPipe { pipe: stdout, timeout: self.launch.timeout }),
            stderr,
            stderr_thread,
            caps: None,
            base_ns: None,
            last_offset: None,
        });
        Ok(())
    }

    /// Stops the child (if any) and turns what it said into an error: a configuration error
    /// when the pipeline cannot work as written, else [`SourceError::Unavailable`] with backoff.
    fn fail(&mut self, what: String) -> SourceError {
        let said = self.running.take().map(stop).map(|(_, said)| said).unwrap_or_default();
        self.failed(said, what)
    }

    /// [`GstSource::fail`] for a child already stopped, which said `said`.
    fn failed(&mut self, said: Vec<String>, what: String) -> SourceError {
        self.reopen.failed();
        let diagnosis = diagnose(&said);
        match diagnosis {
            Diagnosis::Fatal(m) => SourceError::Config(format!("{}: {m}", self.text)),
            Diagnosis::Transient(m) => {
                let m = format!(
                    "{}: {what}{}; retrying",
                    self.text,
                    m.map(|m| format!(": {m}")).unwrap_or_default()
                );
                self.reported = Some(m.clone());
                SourceError::Unavailable(m)
            }
        }
    }
}

/// Keeps the last [`STDERR_LINES`] lines the child writes to standard error (so it never blocks
/// on a full pipe), logging each at debug level.
fn spawn_stderr_reader(
    stderr: ChildStderr,
    lines: Arc<Mutex<Vec<String>>>,
    label: String,
) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("gst-stderr".into())
        .spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                log::debug!("{label}: gst-launch-1.0: {line}");
                let mut l = lines.lock().unwrap_or_else(|p| p.into_inner());
                if l.len() == STDERR_LINES {
                    l.remove(0);
                }
                l.push(line);
            }
        })
        .inspect_err(|e| log::warn!("cannot start a thread for the pipeline's errors: {e}"))
        .ok()
}

/// Stops a child: SIGINT, then SIGKILL after [`STOP_GRACE`]; always reaped. Returns its exit
/// status when it had exited by itself, and what it wrote on standard error.
fn stop(r: Running) -> (Option<std::process::ExitStatus>, Vec<String>) {
    stop_after(r, Duration::ZERO)
}

/// [`stop`], after waiting up to `own` for the child to exit by itself (its output has ended).
fn stop_after(mut r: Running, own: Duration) -> (Option<std::process::ExitStatus>, Vec<String>) {
    let deadline = Instant::now() + own;
    let own = loop {
        match r.child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => break None,
        }
    };
    let pid = r.child.id() as libc::pid_t;
    if let Ok(None) = r.child.try_wait() {
        // SAFETY: plain kill(2) on our own child, which has not been reaped yet.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = r.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Ok(None) = r.child.try_wait() {
            let _ = r.child.kill();
        }
    }
    let _ = r.child.wait();
    // The child has exited, so its end of the pipe is closed: the thread reads the last words
    // and ends.
    if let Some(t) = r.stderr_thread.take() {
        let _ = t.join();
    }
    let lines = r.stderr.lock().unwrap_or_else(|p| p.into_inner()).clone();
    (own, lines)
}

/// What the child's error output means.
#[derive(Debug, PartialEq)]
enum Diagnosis {
    /// The pipeline cannot work as written (missing element, syntax): no point retrying.
    Fatal(String),
    /// The stream may come back; the reason, when the child gave one.
    Transient(Option<String>),
}

fn diagnose(lines: &[String]) -> Diagnosis {
    for l in lines {
        if let Some(rest) = l.split("no element \"").nth(1) {
            let element = rest.split('"').next().unwrap_or(rest);
            return Diagnosis::Fatal(format!(
                "GStreamer has no element '{element}': install {}",
                pipeline::package_of(element)
            ));
        }
        if l.contains("erroneous pipeline") || l.contains("could not link") {
            return Diagnosis::Fatal(format!("the pipeline does not parse or link: {}", l.trim()));
        }
    }
    let text = lines.join("\n");
    let hint = if text.contains("Unauthorized") || text.contains("401") {
        Some("the camera refused the user or password (401 Unauthorized): check the credentials file or JETDETECT_RTSP_USER/PASSWORD".to_string())
    } else if text.contains("missing a plug-in") || text.contains("No suitable plugins") {
        Some("no decoder for the stream: install gstreamer1.0-libav (avdec_h264/avdec_h265) or gstreamer1.0-plugins-bad (openh264dec)".to_string())
    } else if text.contains("Connecting to nvargus-daemon failed") {
        Some("cannot reach nvargus-daemon's socket /tmp/argus_socket (under systemd, install the drop-in systemd/cameras.conf: PrivateTmp=no)".to_string())
    } else if text.contains("No cameras available") {
        Some(
            "Argus sees no camera with this sensor id (check the ribbon cable, then `ls /dev/video*`)"
                .to_string(),
        )
    } else if text.contains("Failed to create CaptureSession") {
        Some("Argus could not open the camera: another process holds it, or nvargus-daemon needs a restart (sudo systemctl restart nvargus-daemon)".to_string())
    } else if text.contains("Could not open resource") || text.contains("Could not connect") {
        Some("cannot open the stream (camera or host down, wrong port, path or file?)".to_string())
    } else {
        lines.iter().rev().find(|l| l.contains("ERROR")).or(lines.last()).map(|l| l.trim().to_string())
    };
    Diagnosis::Transient(hint)
}

impl GstSource {
    /// The process id of the running `gst-launch-1.0`, if one is running.
    pub fn pid(&self) -> Option<u32> {
        self.running.as_ref().map(|r| r.child.id())
    }
}

impl Drop for GstSource {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            stop(r);
        }
    }
}

impl FrameSource for GstSource {
    fn describe(&self) -> String {
        match self.running.as_ref().and_then(|r| r.caps) {
            Some(c) => format!("{} ({}x{} {})", self.text, c.width, c.height, c.format),
            None => self.text.clone(),
        }
    }

    fn next_frame(&mut self, frame: &mut Frame) -> Result<bool, SourceError> {
        if self.ended {
            return Ok(false);
        }
        if self.running.is_none() {
            if !self.reopen.wait_turn() {
                return Err(SourceError::Unavailable(
                    self.reported.clone().unwrap_or_else(|| format!("{}: restarting", self.text)),
                ));
            }
            self.start()?;
        }
        loop {
            let r = self.running.as_mut().expect("running");
            let packet = match r.reader.next(&mut self.payload) {
                Ok(Some(p)) => p,
                Ok(None) => {
                    // The output ended, so the child is exiting: it gets a second to do so and
                    // say why. A `gst://` pipeline that ends well (a file played to its end:
                    // gst-launch exits 0 at end of stream) ends the stream, as a `file://`
                    // source does; a camera's or RTSP stream's end is a fault, restarted.
                    let r = self.running.take().expect("running");
                    let (status, said) = stop_after(r, Duration::from_secs(1));
                    if self.finite && status.is_some_and(|s| s.success()) {
                        self.ended = true;
                        return Ok(false);
                    }
                    return Err(self.failed(said, "the pipeline ended".into()));
                }
                Err(GdpError::Io(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
                    let m = format!("no frame for {} ms", self.launch.timeout.as_millis());
                    return Err(self.fail(m));
                }
                Err(e) => return Err(self.fail(e.to_string())),
            };
            match packet {
                Packet::Caps(c) => match VideoCaps::parse(&c) {
                    Ok(caps) => {
                        if r.caps != Some(caps) {
                            log::info!(
                                "{}: {}x{} {}{}",
                                self.text,
                                caps.width,
                                caps.height,
                                caps.format,
                                caps.fps.map(|f| format!(" @ {f:.2} fps")).unwrap_or_default()
                            );
                        }
                        r.caps = Some(caps);
                    }
                    Err(e) => {
                        if let Some(r) = self.running.take() {
                            stop(r);
                        }
                        return Err(SourceError::Config(format!("{}: {e}", self.text)));
                    }
                },
                Packet::Event(_) => {}
                Packet::Buffer { pts, offset } => {
                    let arrived = Instant::now();
                    let Some(caps) = r.caps else {
                        return Err(self.fail("a frame came before its caps".into()));
                    };
                    if let Err(e) = caps.unpad(&self.payload, &mut frame.data) {
                        return Err(SourceError::Decode(format!("{}: {e}", self.text)));
                    }
                    frame.width = caps.width;
                    frame.height = caps.height;
                    frame.format = caps.format;
                    frame.captured = match pts {
                        Some(pts) => {
                            let candidate = mono_ns(arrived).saturating_sub(pts);
                            let base = r.base_ns.map_or(candidate, |b| b.min(candidate));
                            r.base_ns = Some(base);
                            instant_from_mono_ns(base.saturating_add(pts)).min(arrived)
                        }
                        None => arrived,
                    };
                    frame.captured_wall_ns = wall_clock_ns();
                    frame.label.clone_from(&self.text);
                    frame.truth.clear();
                    // Frames GStreamer's leaky queue dropped show as a gap in the offsets.
                    let step = match (r.last_offset, offset) {
                        (Some(last), Some(now)) if now > last => now - last,
                        _ => 1,
                    };
                    r.last_offset = offset;
                    frame.seq = self.seq + step - 1;
                    self.seq += step;
                    if self.reported.take().is_some() {
                        log::info!("{}: the stream is back", self.text);
                        self.reopen.reset();
                    }
                    return Ok(true);
                }
            }
        }
    }

    fn nominal_fps(&self) -> Option<f64> {
        self.running.as_ref().and_then(|r| r.caps).and_then(|c| c.fps)
    }

    fn geometry(&self) -> Option<(PixelFormat, u32, u32)> {
        self.running.as_ref().and_then(|r| r.caps).map(|c| (c.format, c.width, c.height))
    }
}

/// The child's standard output, read with a timeout (`poll(2)` before each read), so a stream
/// that stalls without closing is noticed.
struct TimedPipe {
    pipe: ChildStdout,
    timeout: Duration,
}

impl Read for TimedPipe {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut pfd = libc::pollfd { fd: self.pipe.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = self.timeout.as_millis().min(i32::MAX as u128) as i32;
        loop {
            // SAFETY: one valid pollfd for an open descriptor we own.
            let n = unsafe { libc::poll(&mut pfd, 1, ms) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no data"));
            }
            return self.pipe.read(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    /// The lines are what `gst-launch-1.0` 1.22 and Argus print (recorded here, or from NVIDIA's
    /// forum reports for Argus).
    #[test]
    fn the_childs_errors_become_advice() {
        let d = diagnose(&lines("WARNING: erroneous pipeline: no element \"nvarguscamerasrc\""));
        assert_eq!(
            d,
            Diagnosis::Fatal(
                "GStreamer has no element 'nvarguscamerasrc': install NVIDIA's nvidia-l4t-gstreamer \
                 (JetPack; it exists only on a Jetson)"
                    .into()
            )
        );
        let d =
            diagnose(&lines("WARNING: erroneous pipeline: could not parse caps \"video/x-raw,width=abc\""));
        assert!(matches!(d, Diagnosis::Fatal(m) if m.contains("does not parse or link")));
        let transient = |text: &str| match diagnose(&lines(text)) {
            Diagnosis::Transient(Some(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(transient(
            "ERROR: from element /GstPipeline:pipeline0/GstRTSPSrc:rtspsrc0: Unauthorized\n\
             Additional debug info:\nUnauthorized (401)\nERROR: pipeline doesn't want to preroll."
        )
        .contains("401 Unauthorized"));
        assert!(transient(
            "ERROR: from element /GstPipeline:pipeline0/GstRTSPSrc:rtspsrc0: Could not open resource for reading \
             and writing.\nFailed to connect. (Generic error)"
        )
        .contains("cannot open the stream"));
        assert!(transient(
            "(Argus) Error FileOperationFailed: Connecting to nvargus-daemon failed: No such file or directory \
             (in src/rpc/socket/client/SocketClientDispatch.cpp, function openSocketConnection(), line 205)"
        )
        .contains("systemd/cameras.conf"));
        assert!(transient("ERROR: from element /GstPipeline:pipeline0/GstDecodeBin:decodebin0: Your GStreamer installation is missing a plug-in.")
            .contains("gstreamer1.0-libav"));
        assert_eq!(diagnose(&[]), Diagnosis::Transient(None));
    }
}
