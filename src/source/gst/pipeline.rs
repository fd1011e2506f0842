//! The `gst-launch-1.0` pipeline for a `csi://`, `rtsp://` or `gst://` URI.
//!
//! Every pipeline ends in the same tail: conversion to raw video in system memory in a format
//! jetdetect reads, a one-buffer leaky queue (GStreamer never holds an old frame back for us),
//! `gdppay` (buffer boundaries, timestamps and caps on the pipe, see [`super::gdp`]) and
//! `fdsink` on standard output. On a Jetson the conversion is `nvvidconv` (the VIC, out of NVMM
//! memory) and H.264/H.265 is decoded by `nvv4l2decoder` (NVDEC); on a PC by `videoconvert` and
//! `decodebin`'s software decoders. The CSI pipeline is the one in NVIDIA's *Accelerated
//! GStreamer* guide: `nvarguscamerasrc sensor-id=N ! video/x-raw(memory:NVMM),width=..,height=..,
//! framerate=../1,format=NV12 ! nvvidconv flip-method=.. ! ...`.

use super::super::uri::SourceUri;
use super::super::SourceError;

/// Where the pipeline runs, which picks its elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    /// A Jetson: NVIDIA's elements (Argus, NVDEC, VIC).
    Jetson,
    /// Anything else: GStreamer's software elements.
    Pc,
}

impl Platform {
    /// This machine: a Jetson when `root/etc/nv_tegra_release` exists (every L4T release writes
    /// it) or the device tree names a Tegra SoC.
    pub fn detect(root: &std::path::Path) -> Platform {
        let tegra = root.join("etc/nv_tegra_release").exists()
            || std::fs::read(root.join("proc/device-tree/compatible"))
                .map(|c| c.windows(6).any(|w| w == b"tegra"))
                .unwrap_or(false);
        if tegra {
            Platform::Jetson
        } else {
            Platform::Pc
        }
    }
}

/// A pipeline to launch: `gst-launch-1.0 -q` and these words.
///
/// `gst-launch-1.0` escapes the spaces in each of its arguments before it parses their
/// concatenation, so a property value with spaces (`exposuretimerange=34000 33000000`) is one
/// argument, unquoted, and a pipeline is never passed as a single argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// The arguments after `gst-launch-1.0 -q`.
    pub args: Vec<String>,
    /// Which argument holds a password (shown as `***`).
    secret: Option<usize>,
    /// How long the pipeline may send nothing before it is restarted (`timeout_ms`).
    pub timeout: std::time::Duration,
}

impl Default for Launch {
    fn default() -> Launch {
        Launch {
            args: Vec::new(),
            secret: None,
            timeout: std::time::Duration::from_millis(DEFAULT_TIMEOUT_MS),
        }
    }
}

/// Default `timeout_ms`: an RTSP camera's key frame interval is often 2 s, and a pipeline takes
/// about a second to start.
pub const DEFAULT_TIMEOUT_MS: u64 = 5000;

impl Launch {
    /// Appends words split at white space.
    fn words(mut self, text: &str) -> Launch {
        self.args.extend(text.split_whitespace().map(str::to_string));
        self
    }

    /// Appends one argument, spaces and all.
    fn word(mut self, w: impl Into<String>) -> Launch {
        self.args.push(w.into());
        self
    }

    /// The command line a user can paste into a shell to run the same pipeline, any password
    /// replaced by `***` (for logs and errors).
    pub fn shown(&self) -> String {
        let mut out = String::from("gst-launch-1.0");
        for (i, a) in self.args.iter().enumerate() {
            out.push(' ');
            if Some(i) == self.secret {
                let (k, _) = a.split_once('=').unwrap_or((a, ""));
                out += &format!("{k}=***");
            } else if a.contains(|c: char| c.is_whitespace() || "'\"(){}$\\;&|<>*?!".contains(c)) && a != "!"
            {
                out += &format!("'{}'", a.replace('\'', "'\\''"));
            } else {
                out += a;
            }
        }
        out
    }
}

/// Splits a pipeline the way a shell splits a command line: at white space, with `"..."` and
/// `'...'` grouping and `\` escaping the next character (outside single quotes).
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let (mut words, mut cur, mut in_word) = (Vec::new(), String::new(), false);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err("a ' is not closed".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => cur.push(chars.next().ok_or("a \" is not closed")?),
                        Some(c) => cur.push(c),
                        None => return Err("a \" is not closed".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.push(chars.next().ok_or("the pipeline ends in a \\")?);
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// The tail every pipeline ends in, after the conversion to raw video.
pub const TAIL: &str = "queue leaky=downstream max-size-buffers=1 max-size-bytes=0 max-size-time=0 ! gdppay ! fdsink fd=1 sync=false";

/// Raw formats jetdetect reads, as GStreamer names them, in order of preference.
const RAW_FORMATS: &str = "{NV12,YUY2,UYVY,GRAY8,RGB,BGR}";

/// `nvvidconv flip-method` values, by the names `gst-inspect-1.0 nvvidconv` gives them.
pub const FLIPS: [&str; 8] = [
    "none",
    "counterclockwise",
    "rotate-180",
    "clockwise",
    "horizontal-flip",
    "upper-right-diagonal",
    "vertical-flip",
    "upper-left-diagonal",
];

/// `nvarguscamerasrc wbmode` values, by their names in `gst-inspect-1.0 nvarguscamerasrc`.
pub const WB_MODES: [&str; 10] = [
    "off",
    "auto",
    "incandescent",
    "fluorescent",
    "warm-fluorescent",
    "daylight",
    "cloudy-daylight",
    "twilight",
    "shade",
    "manual",
];

/// Keys of `csi://` URIs.
pub const CSI_KEYS: [&str; 12] = [
    "timeout_ms",
    "width",
    "height",
    "fps",
    "sensor_mode",
    "exposure_us",
    "gain",
    "isp_gain",
    "wb",
    "ae_lock",
    "awb_lock",
    "flip",
];

/// Keys of `rtsp://` URIs.
pub const RTSP_KEYS: [&str; 7] =
    ["transport", "latency_ms", "codec", "credentials", "width", "height", "timeout_ms"];

/// RTSP credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub user: String,
    /// Password (never logged).
    pub password: String,
}

/// Where RTSP credentials come from when the URI has no `credentials=` file: these variables.
pub const ENV_USER: &str = "JETDETECT_RTSP_USER";
/// See [`ENV_USER`].
pub const ENV_PASSWORD: &str = "JETDETECT_RTSP_PASSWORD";

/// The pipeline for `uri` on `platform`. `text` is the URI as written (for `gst://`, everything
/// after the scheme is the user's pipeline, given to GStreamer as it is).
pub fn build(text: &str, platform: Platform) -> Result<Launch, SourceError> {
    if let Some(user) = strip_scheme(text, "gst") {
        return gst(text, user, platform);
    }
    let uri = SourceUri::parse(text)?;
    match uri.scheme.as_str() {
        // Argus exists only on a Jetson: on a PC the pipeline is still the Jetson's, and the
        // element check at start names the package that is missing.
        "csi" => csi(&uri),
        "rtsp" => rtsp(&uri, platform, &|k| std::env::var(k).ok()),
        other => Err(SourceError::Config(format!("{text}: '{other}://' is not a GStreamer source"))),
    }
}

/// `text` without `scheme://` (any case), when it has that scheme.
fn strip_scheme<'a>(text: &'a str, scheme: &str) -> Option<&'a str> {
    let (s, rest) = text.split_once("://")?;
    s.eq_ignore_ascii_case(scheme).then_some(rest)
}

/// The conversion to raw video in system memory, scaled to `size` when given.
fn convert(platform: Platform, flip: usize, size: Option<(u32, u32)>) -> String {
    let size = size.map_or(String::new(), |(w, h)| format!(",width={w},height={h}"));
    match platform {
        Platform::Jetson if flip > 0 => {
            format!("nvvidconv flip-method={flip} ! video/x-raw,format=NV12{size}")
        }
        Platform::Jetson => format!("nvvidconv ! video/x-raw,format=NV12{size}"),
        Platform::Pc if size.is_empty() => format!("videoconvert ! video/x-raw,format={RAW_FORMATS}"),
        Platform::Pc => format!("videoconvert ! videoscale ! video/x-raw,format={RAW_FORMATS}{size}"),
    }
}

fn gst(text: &str, user: &str, platform: Platform) -> Result<Launch, SourceError> {
    let mut words = split_words(user).map_err(|e| SourceError::Config(format!("{text}: {e}")))?;
    while words.last().is_some_and(|w| w == "!") {
        words.pop();
    }
    if words.is_empty() {
        return Err(SourceError::Config(format!(
            "{text}: no pipeline after gst://: write its source part, e.g. gst://videotestsrc is-live=true"
        )));
    }
    for sink in ["fdsink", "filesink", "appsink", "autovideosink", "fakesink", "gdppay"] {
        if words.iter().any(|w| w == sink) {
            return Err(SourceError::Config(format!(
                "{text}: the pipeline has '{sink}': give it without a sink, jetdetect appends its own \
                 conversion and sink"
            )));
        }
    }
    let launch = Launch { args: words, ..Launch::default() };
    Ok(launch.words(&format!("! {} ! {TAIL}", convert(platform, 0, None))))
}

/// `lo-hi` as two numbers within `min..=max`.
fn range(uri: &SourceUri, key: &str, min: f64, max: f64) -> Result<Option<(f64, f64)>, SourceError> {
    let Some(v) = uri.get_str(key) else { return Ok(None) };
    let bad = || {
        SourceError::Config(format!(
            "{}: '{key}' = {v} is not a range: write LOW-HIGH with {min} <= LOW <= HIGH <= {max}, e.g. {key}={}-{}",
            uri.text, min, max
        ))
    };
    let (lo, hi) = v.split_once('-').ok_or_else(bad)?;
    let (lo, hi) =
        (lo.trim().parse::<f64>().map_err(|_| bad())?, hi.trim().parse::<f64>().map_err(|_| bad())?);
    if !(min <= lo && lo <= hi && hi <= max) {
        return Err(bad());
    }
    Ok(Some((lo, hi)))
}

/// `timeout_ms`.
fn timeout(uri: &SourceUri) -> Result<std::time::Duration, SourceError> {
    Ok(std::time::Duration::from_millis(uri.get_in("timeout_ms", DEFAULT_TIMEOUT_MS, 100, 600_000)?))
}

/// A name from `names`, as its index.
fn named(uri: &SourceUri, key: &str, names: &[&str], default: usize) -> Result<usize, SourceError> {
    let Some(v) = uri.get_str(key) else { return Ok(default) };
    names.iter().position(|n| n.eq_ignore_ascii_case(v)).ok_or_else(|| {
        SourceError::Config(format!("{}: '{key}' = {v} is not one of: {}", uri.text, names.join(", ")))
    })
}

fn csi(uri: &SourceUri) -> Result<Launch, SourceError> {
    uri.check_keys(&CSI_KEYS)?;
    let sensor: u32 = if uri.location.is_empty() {
        0
    } else {
        uri.location.parse().map_err(|_| {
            SourceError::Config(format!(
                "{}: '{}' is not a sensor id: write csi://0, csi://1, ...",
                uri.text, uri.location
            ))
        })?
    };
    let width = uri.get_in("width", 1920u32, 2, 8192)?;
    let height = uri.get_in("height", 1080u32, 2, 8192)?;
    let fps = uri.get_in("fps", 30u32, 1, 1000)?;
    let mut l = Launch::default().word("nvarguscamerasrc").word(format!("sensor-id={sensor}"));
    l.timeout = timeout(uri)?;
    if uri.has("sensor_mode") {
        l = l.word(format!("sensor-mode={}", uri.get_in("sensor_mode", 0u32, 0, 64)?));
    }
    if let Some((lo, hi)) = range(uri, "exposure_us", 1.0, 10_000_000.0)? {
        // Argus takes nanoseconds.
        l = l.word(format!("exposuretimerange={} {}", (lo * 1000.0).round(), (hi * 1000.0).round()));
    }
    if let Some((lo, hi)) = range(uri, "gain", 1.0, 1000.0)? {
        l = l.word(format!("gainrange={lo} {hi}"));
    }
    if let Some((lo, hi)) = range(uri, "isp_gain", 1.0, 256.0)? {
        l = l.word(format!("ispdigitalgainrange={lo} {hi}"));
    }
    if uri.has("wb") {
        l = l.word(format!("wbmode={}", named(uri, "wb", &WB_MODES, 1)?));
    }
    if uri.has("ae_lock") {
        l = l.word(format!("aelock={}", uri.get("ae_lock", false)?));
    }
    if uri.has("awb_lock") {
        l = l.word(format!("awblock={}", uri.get("awb_lock", false)?));
    }
    let flip = named(uri, "flip", &FLIPS, 0)?;
    Ok(l.words(&format!(
        "! video/x-raw(memory:NVMM),width={width},height={height},framerate={fps}/1,format=NV12 ! {} ! {TAIL}",
        convert(Platform::Jetson, flip, None)
    )))
}

/// A property value as one `gst-launch-1.0` argument: its parser drops a backslash and keeps
/// the character after it, so backslashes are doubled.
fn value(v: &str) -> String {
    v.replace('\\', "\\\\")
}

/// Reads `user:password` (first line) from a credentials file.
pub fn read_credentials(path: &str, uri: &str) -> Result<Credentials, SourceError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SourceError::Config(format!("{uri}: cannot read the credentials file {path}: {e}")))?;
    let line = text.lines().next().unwrap_or("").trim_end();
    let (user, password) = line.split_once(':').ok_or_else(|| {
        SourceError::Config(format!("{uri}: the credentials file {path} must hold one line USER:PASSWORD"))
    })?;
    Ok(Credentials { user: user.to_string(), password: password.to_string() })
}

fn rtsp(
    uri: &SourceUri,
    platform: Platform,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Launch, SourceError> {
    uri.check_keys(&RTSP_KEYS)?;
    let host_path = uri.location.as_str();
    if host_path.split('/').next().is_some_and(|authority| authority.contains('@')) {
        return Err(SourceError::Config(format!(
            "rtsp://{}: credentials in the URI end up in configs and logs: put USER:PASSWORD in a file \
             and add credentials=FILE, or set {ENV_USER} and {ENV_PASSWORD}",
            host_path.rsplit_once('@').map_or(host_path, |(_, h)| h)
        )));
    }
    if host_path.is_empty() || host_path.starts_with('/') {
        return Err(SourceError::Config(format!("{}: no host: write rtsp://HOST[:PORT]/PATH", uri.text)));
    }
    let transport = match uri.get_str("transport").unwrap_or("tcp") {
        "tcp" => "tcp",
        "udp" => "udp",
        t => {
            return Err(SourceError::Config(format!("{}: transport '{t}' is not tcp or udp", uri.text)));
        }
    };
    let latency = uri.get_in("latency_ms", 100u32, 0, 10_000)?;
    let codec = match uri.get_str("codec").unwrap_or("h264") {
        "h264" => "h264",
        "h265" => "h265",
        c => return Err(SourceError::Config(format!("{}: codec '{c}' is not h264 or h265", uri.text))),
    };
    let size = match (uri.has("width"), uri.has("height")) {
        (false, false) => None,
        (true, true) => Some((uri.get_in("width", 0u32, 2, 8192)?, uri.get_in("height", 0u32, 2, 8192)?)),
        _ => {
            return Err(SourceError::Config(format!("{}: give both width and height, or neither", uri.text)))
        }
    };
    let credentials = match uri.get_str("credentials") {
        Some(path) => Some(read_credentials(path, &uri.text)?),
        None => match (env(ENV_USER), env(ENV_PASSWORD)) {
            (Some(user), Some(password)) => Some(Credentials { user, password }),
            (None, None) => None,
            _ => {
                return Err(SourceError::Config(format!(
                    "{}: set both {ENV_USER} and {ENV_PASSWORD}, or neither",
                    uri.text
                )))
            }
        },
    };
    let mut l = Launch { timeout: timeout(uri)?, ..Launch::default() }
        .word("rtspsrc")
        .word(format!("location=rtsp://{}", value(host_path)))
        .word(format!("protocols={transport}"))
        .word(format!("latency={latency}"));
    if let Some(c) = &credentials {
        l = l.word(format!("user-id={}", value(&c.user))).word(format!("user-pw={}", value(&c.password)));
        l.secret = Some(l.args.len() - 1);
    }
    let decode = match platform {
        Platform::Jetson => format!("rtp{codec}depay ! {codec}parse ! nvv4l2decoder"),
        Platform::Pc => format!("rtp{codec}depay ! {codec}parse ! decodebin"),
    };
    Ok(l.words(&format!("! {decode} ! {} ! {TAIL}", convert(platform, 0, size))))
}

/// The check a `csi://` source makes on a Jetson before each start: `nvarguscamerasrc` is a
/// client of `nvargus-daemon`, which owns the CSI cameras; without it the pipeline fails with
/// Argus's "Failed to create CaptureSession". Reads `root/proc` (`root` stands for `/`).
pub fn argus_check(root: &std::path::Path) -> Result<(), String> {
    let running = std::fs::read_dir(root.join("proc"))
        .map(|dir| {
            dir.flatten().any(|e| {
                e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
                    && std::fs::read_to_string(e.path().join("comm"))
                        .is_ok_and(|c| c.trim_end() == "nvargus-daemon")
            })
        })
        .unwrap_or(false);
    if running {
        Ok(())
    } else {
        Err("nvargus-daemon is not running, and CSI cameras are reached only through it: \
             sudo systemctl restart nvargus-daemon (jetdetect.service starts after it)"
            .into())
    }
}

/// True for a `gst://` URI.
pub fn is_gst(text: &str) -> bool {
    strip_scheme(text, "gst").is_some()
}

/// True for a `csi://` URI.
pub fn is_csi(text: &str) -> bool {
    strip_scheme(text, "csi").is_some()
}

/// The Debian (or JetPack) package that provides a GStreamer element, for "no element" errors.
pub fn package_of(element: &str) -> &'static str {
    match element {
        "nvarguscamerasrc" | "nvvidconv" | "nvv4l2decoder" => {
            "NVIDIA's nvidia-l4t-gstreamer (JetPack; it exists only on a Jetson)"
        }
        "rtspsrc" | "rtph264depay" | "rtph265depay" | "v4l2src" => "gstreamer1.0-plugins-good",
        "h264parse" | "h265parse" | "gdppay" | "openh264dec" => "gstreamer1.0-plugins-bad",
        "avdec_h264" | "avdec_h265" => "gstreamer1.0-libav",
        "videoconvert" | "videoscale" | "decodebin" | "videotestsrc" | "uridecodebin" => {
            "gstreamer1.0-plugins-base"
        }
        _ => "the GStreamer plugin package that provides it (gst-inspect-1.0 lists what is installed)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtsp_env(text: &str, platform: Platform, env: &[(&str, &str)]) -> Result<Launch, SourceError> {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        rtsp(&SourceUri::parse(text).unwrap(), platform, &|k| {
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn csi_pipelines_are_nvidias_documented_ones() {
        // NVIDIA's Accelerated GStreamer guide (and jetson-inference): Argus into NVMM NV12 at the
        // sensor's size and rate, then nvvidconv (with flip-method) out of NVMM.
        assert_eq!(
            build("csi://0", Platform::Jetson).unwrap().shown(),
            format!(
                "gst-launch-1.0 nvarguscamerasrc sensor-id=0 ! 'video/x-raw(memory:NVMM),width=1920,height=1080,\
                 framerate=30/1,format=NV12' ! nvvidconv ! video/x-raw,format=NV12 ! {TAIL}"
            )
        );
        let l = build(
            "csi://1?width=1280&height=720&fps=60&sensor_mode=4&exposure_us=34-33000&gain=1-8&\
             isp_gain=1-1&wb=daylight&ae_lock=true&awb_lock=false&flip=rotate-180",
            Platform::Jetson,
        )
        .unwrap();
        assert_eq!(
            l.shown(),
            format!(
                "gst-launch-1.0 nvarguscamerasrc sensor-id=1 sensor-mode=4 'exposuretimerange=34000 33000000' \
                 'gainrange=1 8' 'ispdigitalgainrange=1 1' wbmode=5 aelock=true awblock=false ! \
                 'video/x-raw(memory:NVMM),width=1280,height=720,framerate=60/1,format=NV12' ! \
                 nvvidconv flip-method=2 ! video/x-raw,format=NV12 ! {TAIL}"
            )
        );
        // A range is one argument: gst-launch-1.0 escapes its spaces itself.
        assert!(l.args.contains(&"exposuretimerange=34000 33000000".to_string()));
        // The same elements on a PC: Argus has no software stand-in.
        assert_eq!(build("csi://0", Platform::Pc).unwrap(), build("csi://0", Platform::Jetson).unwrap());
    }

    #[test]
    fn bad_csi_options_are_named() {
        for (uri, want) in [
            ("csi://x", "not a sensor id"),
            ("csi://0?exposure_us=100", "not a range"),
            ("csi://0?gain=8-1", "not a range"),
            ("csi://0?wb=sunny", "not one of: off, auto"),
            ("csi://0?flip=upside-down", "not one of: none"),
            ("csi://0?fps=0", "out of range"),
            ("csi://0?exposure=1", "unknown key 'exposure'"),
        ] {
            let e = build(uri, Platform::Jetson).unwrap_err().to_string();
            assert!(e.contains(want), "{uri}: {e}");
        }
    }

    #[test]
    fn rtsp_pipelines_per_platform_with_hidden_passwords() {
        let pc = rtsp_env("rtsp://127.0.0.1:8554/cam", Platform::Pc, &[]).unwrap();
        assert_eq!(
            pc.shown(),
            format!(
                "gst-launch-1.0 rtspsrc location=rtsp://127.0.0.1:8554/cam protocols=tcp latency=100 ! \
                 rtph264depay ! h264parse ! decodebin ! videoconvert ! 'video/x-raw,format={RAW_FORMATS}' ! {TAIL}"
            )
        );
        let env = [(ENV_USER, "robot"), (ENV_PASSWORD, "s3 cret\\x")];
        let j = rtsp_env(
            "rtsp://cam.local/live?transport=udp&latency_ms=0&codec=h265&width=640&height=480",
            Platform::Jetson,
            &env,
        )
        .unwrap();
        assert_eq!(
            j.shown(),
            format!(
                "gst-launch-1.0 rtspsrc location=rtsp://cam.local/live protocols=udp latency=0 user-id=robot \
                 user-pw=*** ! rtph265depay ! h265parse ! nvv4l2decoder ! nvvidconv ! \
                 video/x-raw,format=NV12,width=640,height=480 ! {TAIL}"
            )
        );
        assert!(j.args.contains(&"user-pw=s3 cret\\\\x".to_string()), "{:?}", j.args);
        let dir = std::env::temp_dir().join(format!("jd-cred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("cam");
        std::fs::write(&file, "viewer:pa:ss\n").unwrap();
        let f = rtsp_env(&format!("rtsp://h/p?credentials={}", file.display()), Platform::Pc, &env).unwrap();
        assert!(
            f.args.contains(&"user-id=viewer".to_string()) && f.args.contains(&"user-pw=pa:ss".to_string())
        );
        assert!(!f.shown().contains("pa:ss"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_rtsp_uris_are_named_and_never_echo_a_password() {
        let e = rtsp_env("rtsp://bob:hunter2@cam/live", Platform::Pc, &[]).unwrap_err().to_string();
        assert!(
            e.contains("credentials=FILE") && !e.contains("hunter2") && e.contains("rtsp://cam/live"),
            "{e}"
        );
        for (uri, env, want) in [
            ("rtsp://cam/live?transport=sctp", &[][..], "not tcp or udp"),
            ("rtsp://cam/live?codec=mjpeg", &[][..], "not h264 or h265"),
            ("rtsp://cam/live?width=640", &[][..], "both width and height"),
            ("rtsp:///live", &[][..], "no host"),
            (
                "rtsp://cam/live?credentials=/nonexistent/jd",
                &[][..],
                "cannot read the credentials file /nonexistent/jd",
            ),
            ("rtsp://cam/live", &[(ENV_USER, "u")][..], "set both"),
            ("rtsp://cam/live?user=bob", &[][..], "unknown key 'user'"),
        ] {
            let e = rtsp_env(uri, Platform::Pc, env).unwrap_err().to_string();
            assert!(e.contains(want), "{uri}: {e}");
        }
    }

    #[test]
    fn gst_pipelines_get_jetdetects_conversion_and_sink() {
        let p =
            build("gst://videotestsrc is-live=true ! \"video/x-raw, width=320\" !", Platform::Pc).unwrap();
        assert_eq!(
            p.args[..5],
            ["videotestsrc", "is-live=true", "!", "video/x-raw, width=320", "!"].map(String::from)
        );
        assert_eq!(
            p.shown(),
            format!(
                "gst-launch-1.0 videotestsrc is-live=true ! 'video/x-raw, width=320' ! videoconvert ! \
                 'video/x-raw,format={RAW_FORMATS}' ! {TAIL}"
            )
        );
        let j = build("GST://v4l2src device=/dev/video1", Platform::Jetson).unwrap();
        assert_eq!(
            j.shown(),
            format!(
                "gst-launch-1.0 v4l2src device=/dev/video1 ! nvvidconv ! video/x-raw,format=NV12 ! {TAIL}"
            )
        );
        for (uri, want) in [
            ("gst://", "no pipeline after gst://"),
            ("gst://videotestsrc ! autovideosink", "'autovideosink'"),
            ("gst://videotestsrc ! \"video/x-raw", "not closed"),
        ] {
            let e = build(uri, Platform::Pc).unwrap_err().to_string();
            assert!(e.contains(want), "{uri}: {e}");
        }
    }

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(
            split_words(r#" a  "b c" 'd "e' f\ g "h\"i" "#).unwrap(),
            ["a", "b c", "d \"e", "f g", "h\"i"].map(String::from)
        );
        assert!(split_words("a 'b").is_err());
    }

    #[test]
    fn argus_needs_its_daemon() {
        let dir = std::env::temp_dir().join(format!("jd-argus-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("proc/1")).unwrap();
        std::fs::write(dir.join("proc/1/comm"), "systemd\n").unwrap();
        let e = argus_check(&dir).unwrap_err();
        assert!(e.contains("systemctl restart nvargus-daemon"), "{e}");
        std::fs::create_dir_all(dir.join("proc/812")).unwrap();
        std::fs::write(dir.join("proc/812/comm"), "nvargus-daemon\n").unwrap();
        assert_eq!(argus_check(&dir), Ok(()));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(is_csi("CSI://1") && !is_csi("rtsp://cam/csi://"));
    }

    #[test]
    fn the_platform_is_read_from_the_root() {
        let dir = std::env::temp_dir().join(format!("jd-platform-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        assert_eq!(Platform::detect(&dir), Platform::Pc);
        std::fs::write(dir.join("etc/nv_tegra_release"), "# R36 (release), REVISION: 4.3\n").unwrap();
        assert_eq!(Platform::detect(&dir), Platform::Jetson);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
