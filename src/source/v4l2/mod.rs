//! `v4l2://` — V4L2 cameras (USB UVC, CSI through V4L2), natively: mmap
//! streaming over raw ioctls, no GStreamer, no OpenCV.
//!
//! `v4l2:///dev/video0?width=640&height=480&fps=30&format=yuyv&buffers=3&timeout_ms=2000`
//! or `v4l2://auto` (the first node that captures video; metadata and output
//! nodes are skipped).
//!
//! * **Negotiation**: the requested format and size when offered, otherwise the
//!   nearest, with the reason logged ([`negotiate`]); the frame rate via S_PARM.
//! * **Newest frame**: every wait drains all filled buffers, keeps the newest and
//!   requeues the rest at once, so no stale frame is ever handed on.
//! * **Timestamps**: the driver's `CLOCK_MONOTONIC` buffer timestamp is the capture time.
//! * **Faults**: a vanished device (ENODEV, EIO), a busy one, or no frame within
//!   the timeout gives [`SourceError::Unavailable`]; the next call reopens the
//!   device with backoff, so the daemon keeps running and resumes by itself.

pub mod device;
pub mod negotiate;
pub mod sys;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::uri::SourceUri;
use super::{FrameSource, Reopen, SourceError};
use crate::clock::instant_from_mono_ns;
use crate::frame::{wall_clock_ns, Frame, PixelFormat};
use device::{ControlInfo, Device};
use negotiate::{CameraFormat, Request};
use sys::{fourcc_str, V4L2_BUF_FLAG_ERROR, V4L2_BUF_FLAG_TIMESTAMP_MASK, V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC};

/// Query keys `v4l2://` accepts.
pub const KEYS: [&str; 6] = ["width", "height", "fps", "format", "buffers", "timeout_ms"];

/// Raw Bayer fourccs (8/10/12/16-bit, MIPI-packed or not): what a CSI sensor's VI node offers
/// before the ISP. jetdetect does not debayer; NVIDIA reaches these sensors through Argus.
const BAYER: [&[u8; 4]; 20] = [
    b"BA81", b"GBRG", b"GRBG", b"RGGB", b"BG10", b"GB10", b"BA10", b"RG10", b"BG12", b"GB12", b"BA12",
    b"RG12", b"pBAA", b"pGAA", b"pgAA", b"pRAA", b"BYR2", b"GB16", b"GR16", b"RG16",
];

/// Why `v4l2://auto` cannot use a node offering `offers` (fourccs), or `None` when one of them is a
/// format jetdetect reads.
pub fn unusable_formats(offers: &[u32]) -> Option<String> {
    if offers.iter().any(|&f| CameraFormat::from_fourcc(f).is_some()) {
        return None;
    }
    let list: Vec<String> = offers.iter().map(|&f| fourcc_str(f)).collect();
    let bayer = !offers.is_empty() && offers.iter().all(|&f| BAYER.iter().any(|b| sys::fourcc(b) == f));
    Some(if offers.is_empty() {
        "offers no capture format".into()
    } else if bayer {
        format!(
            "offers only raw Bayer ({}): a CSI sensor before the ISP, which NVIDIA supports through Argus \
             (nvarguscamerasrc), not raw V4L2 (docs/v4l2.md)",
            list.join(", ")
        )
    } else {
        format!("offers no format jetdetect reads ({})", list.join(", "))
    })
}

/// Why a node cannot serve `v4l2://auto`, or `None` when it can: it must capture video, offer a
/// format jetdetect reads, and not be streamed by another program.
fn why_not(path: &Path) -> Option<String> {
    let device = match Device::open(path) {
        Ok(d) => d,
        Err(e) => return Some(format!("cannot be opened: {e}")),
    };
    match device.capabilities() {
        Ok((_, _, caps)) if Device::can_capture(caps) => {}
        Ok(_) => return Some("is not a video capture node (metadata or output)".into()),
        Err(e) => return Some(format!("is not a V4L2 device: {e}")),
    }
    let offers: Vec<u32> = device.formats().map(|f| f.iter().map(|o| o.fourcc).collect()).unwrap_or_default();
    if let Some(why) = unusable_formats(&offers) {
        return Some(why);
    }
    device
        .is_busy()
        .then(|| "is busy: another program streams from it (nvargus-daemon holds CSI nodes)".into())
}

/// The first usable video capture node under `/dev`, by number; each one passed over is logged
/// with the reason.
pub fn find_capture_node() -> Option<PathBuf> {
    let mut nodes: Vec<(u32, PathBuf)> = std::fs::read_dir("/dev")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n: u32 = name.strip_prefix("video")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    nodes.sort();
    // The search repeats while the camera is missing: say each node's reason once, and again
    // only when it changes.
    static SAID: std::sync::Mutex<BTreeMap<PathBuf, String>> = std::sync::Mutex::new(BTreeMap::new());
    nodes.into_iter().map(|(_, p)| p).find(|p| match why_not(p) {
        None => true,
        Some(why) => {
            let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
            if said.get(p) != Some(&why) {
                log::info!("v4l2://auto: skipping {}: it {why}", p.display());
                said.insert(p.clone(), why);
            }
            false
        }
    })
}

struct Streaming {
    device: Device,
    format: CameraFormat,
    width: u32,
    height: u32,
    bytes_per_line: usize,
}

/// The `v4l2://` source.
pub struct V4l2Source {
    path: Option<PathBuf>,
    request: Request,
    buffers: u32,
    timeout: Duration,
    controls: BTreeMap<String, i64>,
    stream: Option<Streaming>,
    reopen: Reopen,
    seq: u64,
    text: String,
    reported: Option<String>,
}

impl V4l2Source {
    /// Parses the URI and opens the device. Bad parameters and a node that
    /// cannot capture are errors; a camera that is missing or busy is not (a
    /// robot's camera may appear after the daemon starts): the source then
    /// reports [`SourceError::Unavailable`] from `next_frame` while it retries.
    pub fn open(uri: &SourceUri, controls: &BTreeMap<String, i64>) -> Result<V4l2Source, SourceError> {
        let mut src = V4l2Source::configure(uri, controls)?;
        match src.start() {
            Ok(()) => Ok(src),
            Err(SourceError::Unavailable(m)) => {
                log::warn!("{m}: will keep trying");
                src.reported = Some(m.clone());
                let _ = src.fail(m);
                Ok(src)
            }
            Err(other) => Err(other),
        }
    }

    /// The source as the URI describes it, not started: every parameter checked, no device
    /// touched (what `jetdetect check` can know of a camera that may be plugged in later).
    pub fn configure(uri: &SourceUri, controls: &BTreeMap<String, i64>) -> Result<V4l2Source, SourceError> {
        let bad = SourceError::Config;
        uri.check_keys(&KEYS)?;
        let path = match uri.location.as_str() {
            "auto" | "" => None,
            p => Some(PathBuf::from(p)),
        };
        let format = match uri.get_str("format") {
            None => None,
            Some(f) => Some(f.parse::<CameraFormat>().map_err(|e| bad(format!("{}: {e}", uri.text)))?),
        };
        let request = Request {
            width: uri.get_in("width", 640u32, 16, 8192)?,
            height: uri.get_in("height", 480u32, 16, 8192)?,
            fps: uri.get_in("fps", 30.0f64, 0.0, 1000.0)?,
            format,
        };
        Ok(V4l2Source {
            path,
            request,
            buffers: uri.get_in("buffers", 3u32, 2, 32)?,
            timeout: Duration::from_millis(uri.get_in("timeout_ms", 2000u64, 100, 60_000)?),
            controls: controls.clone(),
            stream: None,
            reopen: Reopen::new(),
            seq: 0,
            text: uri.text.clone(),
            reported: None,
        })
    }

    fn device_path(&self) -> Result<PathBuf, SourceError> {
        match &self.path {
            Some(p) => Ok(p.clone()),
            None => find_capture_node()
                .inspect(|p| log::info!("v4l2://auto: using {}", p.display()))
                .ok_or_else(|| {
                    SourceError::Unavailable(format!(
                        "{}: no V4L2 video capture device found under /dev",
                        self.text
                    ))
                }),
        }
    }

    /// Opens, negotiates, applies controls and starts streaming.
    fn start(&mut self) -> Result<(), SourceError> {
        let path = self.device_path()?;
        let gone = |what: &str, e: std::io::Error| {
            let hint = match e.raw_os_error() {
                Some(libc::EBUSY) => " (busy: another program is using the camera)",
                Some(libc::ENOENT) | Some(libc::ENODEV) => " (not present: unplugged?)",
                Some(libc::EACCES) | Some(libc::EPERM) => {
                    " (permission denied: add the user to the 'video' group)"
                }
                _ => "",
            };
            SourceError::Unavailable(format!("{}: {what}: {e}{hint}", path.display()))
        };
        let device = Device::open(&path).map_err(|e| gone("cannot open", e))?;
        let (driver, card, caps) = device.capabilities().map_err(|e| gone("not a V4L2 device", e))?;
        if !Device::can_capture(caps) {
            return Err(SourceError::Config(format!(
                "{}: '{card}' ({driver}) cannot stream video capture (device caps {caps:#x}): pick another /dev/video node \
                 (`jetdetect probe-camera` lists them)",
                path.display()
            )));
        }
        let offers = device.formats().map_err(|e| gone("cannot list formats", e))?;
        let (choice, reason) = negotiate::choose(&self.request, &offers).map_err(|e| {
            // A Bayer-only node is a CSI sensor before the ISP: say how it is really reached.
            let fourccs: Vec<u32> = offers.iter().map(|o| o.fourcc).collect();
            let why = unusable_formats(&fourccs).filter(|w| w.contains("Bayer"));
            SourceError::Config(match why {
                Some(w) => format!("{}: {e}; it {w}", path.display()),
                None => format!("{}: {e}", path.display()),
            })
        })?;
        if let Some(r) = reason {
            log::warn!("{}: {r}", path.display());
        }
        let set = device
            .set_format(choice.format.fourcc(), choice.width, choice.height)
            .map_err(|e| gone("cannot set the format", e))?;
        let format = CameraFormat::from_fourcc(set.pixelformat).ok_or_else(|| {
            SourceError::Config(format!(
                "{}: the driver switched to {}, which jetdetect cannot read",
                path.display(),
                fourcc_str(set.pixelformat)
            ))
        })?;
        if (set.width, set.height, set.pixelformat) != (choice.width, choice.height, choice.format.fourcc()) {
            log::warn!(
                "{}: asked for {}x{} {}, the driver set {}x{} {}",
                path.display(),
                choice.width,
                choice.height,
                choice.format,
                set.width,
                set.height,
                format
            );
        }
        if let Some(px) = format.pixel_format() {
            if px.frame_len(set.width, set.height).is_none() {
                return Err(SourceError::Config(format!(
                    "{}: {}x{} is not a valid size for {format}",
                    path.display(),
                    set.width,
                    set.height
                )));
            }
        }
        let fps = if self.request.fps > 0.0 {
            match device.set_frame_rate(self.request.fps) {
                Ok(Some(f)) => {
                    if (f - self.request.fps).abs() > 0.5 {
                        log::warn!(
                            "{}: asked for {} fps, the driver set {f:.2}",
                            path.display(),
                            self.request.fps
                        );
                    }
                    Some(f)
                }
                Ok(None) => None,
                Err(e) => {
                    log::warn!("{}: cannot set the frame rate: {e}", path.display());
                    None
                }
            }
        } else {
            None
        };
        apply_controls(&device, &self.controls)?;
        let mut device = device;
        let granted = device.start(self.buffers).map_err(|e| gone("cannot start streaming", e))?;
        log::info!(
            "{}: '{card}' ({driver}) streaming {}x{} {format}{} with {granted} mmap buffers",
            path.display(),
            set.width,
            set.height,
            fps.map(|f| format!(" @ {f:.2} fps")).unwrap_or_default()
        );
        self.stream = Some(Streaming {
            device,
            format,
            width: set.width,
            height: set.height,
            bytes_per_line: set.bytesperline as usize,
        });
        self.reopen.reset();
        Ok(())
    }

    fn fail(&mut self, message: String) -> SourceError {
        self.stream = None;
        self.reopen.failed();
        SourceError::Unavailable(message)
    }

    /// Copies buffer contents into `frame`, dropping row padding and decoding MJPEG.
    fn fill(s: &Streaming, data: &[u8], frame: &mut Frame) -> Result<(), SourceError> {
        match s.format.pixel_format() {
            None => super::mjpeg::decode(data, frame, (s.width, s.height))
                .map_err(|e| SourceError::Decode(format!("{}: {e}", s.device.path().display())))?,
            Some(px) => {
                let need = px.frame_len(s.width, s.height).unwrap_or(0);
                let tight = need / s.height as usize;
                let stride = if px == PixelFormat::Nv12 {
                    s.bytes_per_line.max(s.width as usize)
                } else {
                    s.bytes_per_line.max(tight)
                };
                frame.data.resize(need, 0);
                if stride == tight || px == PixelFormat::Nv12 && stride == s.width as usize {
                    if data.len() < need {
                        return Err(SourceError::Decode(format!(
                            "{}: short buffer: {} of {need} bytes",
                            s.device.path().display(),
                            data.len()
                        )));
                    }
                    frame.data.copy_from_slice(&data[..need]);
                } else {
                    // Padded rows: copy each row's pixels (NV12: luma rows, then chroma rows).
                    let rows = need / tight;
                    let row_bytes = if px == PixelFormat::Nv12 { s.width as usize } else { tight };
                    if data.len() < (rows - 1) * stride + row_bytes {
                        return Err(SourceError::Decode(format!(
                            "{}: short padded buffer",
                            s.device.path().display()
                        )));
                    }
                    for r in 0..rows {
                        frame.data[r * row_bytes..(r + 1) * row_bytes]
                            .copy_from_slice(&data[r * stride..r * stride + row_bytes]);
                    }
                }
                frame.width = s.width;
                frame.height = s.height;
                frame.format = px;
            }
        }
        Ok(())
    }
}

fn apply_controls(device: &Device, wanted: &BTreeMap<String, i64>) -> Result<(), SourceError> {
    if wanted.is_empty() {
        return Ok(());
    }
    let available = device.controls();
    for (key, &value) in wanted {
        let wanted_key = device::control_key(key);
        let Some(c) = available.iter().find(|c| c.key == wanted_key) else {
            let names: Vec<&str> = available.iter().map(|c| c.key.as_str()).collect();
            return Err(SourceError::Config(format!(
                "{}: [source.controls] {key}: no such control; this camera has: {}",
                device.path().display(),
                names.join(", ")
            )));
        };
        let v = value;
        if v < c.min || v > c.max {
            return Err(SourceError::Config(format!(
                "{}: [source.controls] {key} = {value} is out of range: allowed {} to {}",
                device.path().display(),
                c.min,
                c.max
            )));
        }
        match device.set_control(c, v) {
            Ok(got) if got == v => log::info!("{}: control {} = {got}", device.path().display(), c.name),
            Ok(got) => {
                log::warn!("{}: control {} set to {v}, reads back {got}", device.path().display(), c.name)
            }
            Err(e) => log::warn!("{}: control {} = {v} failed: {e}", device.path().display(), c.name),
        }
    }
    Ok(())
}

/// Controls of the device at `path`, with current values (for `probe-camera`).
pub fn describe_controls(device: &Device) -> Vec<(ControlInfo, Option<i64>)> {
    device
        .controls()
        .into_iter()
        .map(|c| {
            let v = device.get_control(&c).ok();
            (c, v)
        })
        .collect()
}

impl FrameSource for V4l2Source {
    fn describe(&self) -> String {
        match &self.stream {
            Some(s) => format!("{} ({}x{} {})", self.text, s.width, s.height, s.format),
            None => format!("{} (not streaming)", self.text),
        }
    }

    fn next_frame(&mut self, frame: &mut Frame) -> Result<bool, SourceError> {
        if self.stream.is_none() {
            if !self.reopen.wait_turn() {
                return Err(SourceError::Unavailable(
                    self.reported.clone().unwrap_or_else(|| format!("{}: reconnecting", self.text)),
                ));
            }
            match self.start() {
                Ok(()) => {
                    if self.reported.take().is_some() {
                        log::info!("{}: camera is back", self.text);
                    }
                }
                Err(SourceError::Unavailable(m)) => {
                    self.reported = Some(m.clone());
                    return Err(self.fail(m));
                }
                Err(other) => return Err(other),
            }
        }
        let s = self.stream.as_ref().expect("streaming");
        match s.device.wait(self.timeout.as_millis() as i32) {
            Ok(true) => {}
            Ok(false) => {
                let m = format!(
                    "{}: no frame for {} ms: reopening the device",
                    s.device.path().display(),
                    self.timeout.as_millis()
                );
                self.reported = Some(m.clone());
                return Err(self.fail(m));
            }
            Err(e) => {
                let m = format!("{}: {e}: the camera went away; retrying", s.device.path().display());
                self.reported = Some(m.clone());
                return Err(self.fail(m));
            }
        }
        // Drain: keep only the newest filled buffer, requeue older ones at once.
        let mut newest = None;
        loop {
            match s.device.dequeue() {
                Ok(Some(b)) => {
                    if let Some(old) = newest.replace(b) {
                        let _ = s.device.queue(old.index);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let m = format!("{}: {e}: the camera went away; retrying", s.device.path().display());
                    self.reported = Some(m.clone());
                    return Err(self.fail(m));
                }
            }
        }
        let Some(b) = newest else {
            return Err(SourceError::Unavailable(format!("{}: woke up without a frame", self.text)));
        };
        let result = if b.flags & V4L2_BUF_FLAG_ERROR != 0 {
            Err(SourceError::Decode(format!(
                "{}: the driver flagged frame {} as corrupt",
                self.text, b.sequence
            )))
        } else {
            V4l2Source::fill(s, s.device.data(b.index, b.bytes), frame)
        };
        let requeue = s.device.queue(b.index);
        result?;
        if let Err(e) = requeue {
            let m = format!("{}: {e}: the camera went away; retrying", self.text);
            return Err(self.fail(m));
        }
        frame.captured = if b.flags & V4L2_BUF_FLAG_TIMESTAMP_MASK == V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC
            && b.timestamp_ns > 0
        {
            instant_from_mono_ns(b.timestamp_ns).min(Instant::now())
        } else {
            Instant::now()
        };
        frame.captured_wall_ns = wall_clock_ns();
        frame.seq = self.seq;
        frame.truth.clear();
        if frame.label.is_empty() {
            frame.label = self.text.clone();
        }
        self.seq += 1;
        Ok(true)
    }

    fn nominal_fps(&self) -> Option<f64> {
        (self.request.fps > 0.0).then_some(self.request.fps)
    }

    fn geometry(&self) -> Option<(PixelFormat, u32, u32)> {
        let s = self.stream.as_ref()?;
        let format = match s.format {
            CameraFormat::Raw(f) => f,
            CameraFormat::Mjpeg => PixelFormat::Rgb24,
        };
        Some((format, s.width, s.height))
    }
}

/// Why `probe-camera` found nothing to list.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// `/dev` could not be listed.
    #[error("/dev: {0}")]
    Dev(#[source] std::io::Error),
    /// No `/dev/video*` node.
    #[error("no /dev/video* nodes: is a camera connected and its driver loaded?")]
    NoNodes,
    /// The node asked for cannot be opened.
    #[error("{}: cannot open: {source}", path.display())]
    Open {
        /// The node.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The node asked for does not answer V4L2's capability query.
    #[error("{}: not a V4L2 device: {source}", path.display())]
    NotV4l2 {
        /// The node.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Lists every V4L2 node with its capabilities, formats, sizes, rates and controls.
pub fn probe(path: Option<&Path>) -> Result<String, ProbeError> {
    use std::fmt::Write;
    let mut nodes: Vec<PathBuf> = match path {
        Some(p) => vec![p.to_path_buf()],
        None => std::fs::read_dir("/dev")
            .map_err(ProbeError::Dev)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("video")))
            .collect(),
    };
    nodes.sort();
    if nodes.is_empty() {
        return Err(ProbeError::NoNodes);
    }
    let mut out = String::new();
    let single = path.is_some();
    for p in nodes {
        let d = match Device::open(&p) {
            Ok(d) => d,
            Err(source) if single => return Err(ProbeError::Open { path: p, source }),
            Err(e) => {
                let _ = writeln!(out, "{}: cannot open: {e}", p.display());
                continue;
            }
        };
        let (driver, card, caps) = match d.capabilities() {
            Ok(c) => c,
            Err(source) if single => return Err(ProbeError::NotV4l2 { path: p, source }),
            Err(e) => {
                let _ = writeln!(out, "{}: not a V4L2 device: {e}", p.display());
                continue;
            }
        };
        let role = if Device::can_capture(caps) {
            "video capture"
        } else if caps & sys::V4L2_CAP_META_CAPTURE != 0 {
            "metadata (not usable)"
        } else if caps & sys::V4L2_CAP_VIDEO_CAPTURE_MPLANE != 0 {
            "multi-planar capture (not supported)"
        } else {
            "not a capture node"
        };
        let _ = writeln!(out, "{}: {card} ({driver}), {role}, caps {caps:#010x}", p.display());
        if !Device::can_capture(caps) {
            continue;
        }
        for f in d.formats().unwrap_or_default() {
            let usable = if CameraFormat::from_fourcc(f.fourcc).is_some() {
                ""
            } else {
                "  [not supported by jetdetect]"
            };
            let _ = writeln!(out, "  {} {}{usable}", fourcc_str(f.fourcc), f.description);
            for s in f.sizes.iter().take(12) {
                match *s {
                    device::SizeOffer::Discrete(w, h) => {
                        let rates: Vec<String> =
                            d.frame_rates(f.fourcc, w, h).iter().map(|r| format!("{r:.0}")).collect();
                        let _ = writeln!(
                            out,
                            "    {w}x{h}  fps: {}",
                            if rates.is_empty() { "?".into() } else { rates.join(" ") }
                        );
                    }
                    device::SizeOffer::Stepwise { min_w, max_w, step_w, min_h, max_h, step_h } => {
                        let _ = writeln!(
                            out,
                            "    {min_w}x{min_h} to {max_w}x{max_h} in steps of {step_w}x{step_h}"
                        );
                    }
                }
            }
        }
        let controls = describe_controls(&d);
        if !controls.is_empty() {
            let _ = writeln!(out, "  controls ([source.controls] key = value):");
        }
        for (c, v) in controls {
            let value = v.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
            let menu = if c.menu.is_empty() {
                String::new()
            } else {
                format!(
                    " {{{}}}",
                    c.menu.iter().map(|(i, n)| format!("{i}: {n}")).collect::<Vec<_>>().join(", ")
                )
            };
            let _ = writeln!(
                out,
                "    {:<32} {:<8} {} .. {} step {} default {} = {value}{}{menu}",
                c.key,
                c.kind,
                c.min,
                c.max,
                c.step,
                c.default,
                if c.read_only { " (read-only)" } else { "" }
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_passes_over_a_bayer_only_node_and_says_how_csi_sensors_are_reached() {
        let f = |c: &[u8; 4]| sys::fourcc(c);
        assert_eq!(unusable_formats(&[f(b"YUYV"), f(b"RG10")]), None, "one readable format is enough");
        assert_eq!(unusable_formats(&[f(b"MJPG")]), None);
        let why = unusable_formats(&[f(b"RG10"), f(b"RG12")]).unwrap();
        assert!(why.contains("raw Bayer (RG10, RG12)") && why.contains("Argus"), "{why}");
        let why = unusable_formats(&[f(b"Y16 ")]).unwrap();
        assert!(why.contains("no format jetdetect reads (Y16 )"), "{why}");
        assert_eq!(unusable_formats(&[]).unwrap(), "offers no capture format");
    }
}
