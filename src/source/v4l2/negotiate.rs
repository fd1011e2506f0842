//! Choosing a camera format and size: the request when offered, otherwise the
//! nearest, always with a reason the user can read. Pure logic, unit-tested
//! on recorded driver offers.

use std::fmt;
use std::str::FromStr;

use super::device::{FormatOffer, SizeOffer};
use super::sys::{fourcc, fourcc_str};
use crate::frame::PixelFormat;

/// A camera pixel format jetdetect can read: a raw [`PixelFormat`] or MJPEG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CameraFormat {
    /// Uncompressed, handed on as is.
    Raw(PixelFormat),
    /// Motion JPEG, decoded to RGB24 in the source.
    Mjpeg,
}

impl CameraFormat {
    /// Formats in order of preference when the requested one is not offered:
    /// cheap to convert first, MJPEG (a decode per frame) after the 4:2:x ones.
    pub const PREFERENCE: [CameraFormat; 7] = [
        CameraFormat::Raw(PixelFormat::Yuyv),
        CameraFormat::Raw(PixelFormat::Uyvy),
        CameraFormat::Raw(PixelFormat::Nv12),
        CameraFormat::Mjpeg,
        CameraFormat::Raw(PixelFormat::Rgb24),
        CameraFormat::Raw(PixelFormat::Bgr24),
        CameraFormat::Raw(PixelFormat::Grey),
    ];

    /// The V4L2 fourcc.
    pub fn fourcc(self) -> u32 {
        match self {
            CameraFormat::Raw(PixelFormat::Yuyv) => fourcc(b"YUYV"),
            CameraFormat::Raw(PixelFormat::Uyvy) => fourcc(b"UYVY"),
            CameraFormat::Raw(PixelFormat::Nv12) => fourcc(b"NV12"),
            CameraFormat::Raw(PixelFormat::Grey) => fourcc(b"GREY"),
            CameraFormat::Raw(PixelFormat::Rgb24) => fourcc(b"RGB3"),
            CameraFormat::Raw(PixelFormat::Bgr24) => fourcc(b"BGR3"),
            CameraFormat::Mjpeg => fourcc(b"MJPG"),
        }
    }

    /// The format for a fourcc, if jetdetect reads it (`JPEG` is read as MJPEG).
    pub fn from_fourcc(v: u32) -> Option<CameraFormat> {
        if v == fourcc(b"JPEG") {
            return Some(CameraFormat::Mjpeg);
        }
        CameraFormat::PREFERENCE.into_iter().find(|f| f.fourcc() == v)
    }

    /// The frame format the source hands on (`None`: decoded to RGB24).
    pub fn pixel_format(self) -> Option<PixelFormat> {
        match self {
            CameraFormat::Raw(p) => Some(p),
            CameraFormat::Mjpeg => None,
        }
    }
}

impl fmt::Display for CameraFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CameraFormat::Raw(p) => write!(f, "{p}"),
            CameraFormat::Mjpeg => f.write_str("mjpeg"),
        }
    }
}

impl FromStr for CameraFormat {
    type Err = crate::named::UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "mjpeg" | "mjpg" | "jpeg" => Ok(CameraFormat::Mjpeg),
            other => other.parse::<PixelFormat>().map(CameraFormat::Raw).map_err(|_| {
                let allowed = "yuyv, uyvy, nv12, mjpeg, rgb24, bgr24 or grey";
                crate::named::UnknownName::new("unknown camera format ", s, "", allowed)
            }),
        }
    }
}

/// What the user asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// Wanted width.
    pub width: u32,
    /// Wanted height.
    pub height: u32,
    /// Wanted frame rate (0: the driver's default).
    pub fps: f64,
    /// Wanted format (`None`: the best offered, by [`CameraFormat::PREFERENCE`]).
    pub format: Option<CameraFormat>,
}

/// What to ask the driver for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    /// Format.
    pub format: CameraFormat,
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
}

/// Sizes a format offers that are valid for `format`, nearest to the request first.
fn nearest_size(sizes: &[SizeOffer], w: u32, h: u32) -> Option<(u32, u32)> {
    let mut candidates: Vec<(u32, u32)> = Vec::new();
    for s in sizes {
        match *s {
            SizeOffer::Discrete(sw, sh) => candidates.push((sw, sh)),
            SizeOffer::Stepwise { min_w, max_w, step_w, min_h, max_h, step_h } => {
                let snap = |v: u32, lo: u32, hi: u32, step: u32| {
                    let v = v.clamp(lo, hi);
                    lo + (v - lo) / step * step
                };
                candidates.push((snap(w, min_w, max_w, step_w), snap(h, min_h, max_h, step_h)));
            }
        }
    }
    // Nearest by pixel count, then by aspect ratio, then larger first.
    let want = w as f64 * h as f64;
    let aspect = w as f64 / h as f64;
    candidates.into_iter().min_by(|a, b| {
        let key = |&(cw, ch): &(u32, u32)| {
            (
                (cw as f64 * ch as f64 / want).ln().abs(),
                (cw as f64 / ch as f64 / aspect).ln().abs(),
                u64::MAX - cw as u64 * ch as u64,
            )
        };
        let (ka, kb) = (key(a), key(b));
        ka.0.total_cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then(ka.2.cmp(&kb.2))
    })
}

/// A camera that offers none of the formats jetdetect reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the camera offers none of the formats jetdetect reads (YUYV, UYVY, NV12, MJPG, RGB3, BGR3, GREY); it offers: {}",
    if offered.is_empty() { "nothing".to_string() } else { offered.join(" ") }
)]
pub struct NoUsableFormat {
    /// The FOURCCs it offers.
    pub offered: Vec<String>,
}

/// Picks a format and size from the driver's offers; the second value is the
/// reason when it is not exactly what was asked.
pub fn choose(req: &Request, offers: &[FormatOffer]) -> Result<(Choice, Option<String>), NoUsableFormat> {
    let offered = |f: CameraFormat| offers.iter().find(|o| o.fourcc == f.fourcc());
    let mut reasons = Vec::new();
    let format = match req.format {
        Some(f) if offered(f).is_some() => f,
        wanted => {
            let fallback =
                CameraFormat::PREFERENCE.into_iter().find(|f| offered(*f).is_some()).ok_or_else(|| {
                    NoUsableFormat { offered: offers.iter().map(|o| fourcc_str(o.fourcc)).collect() }
                })?;
            if let Some(w) = wanted {
                reasons.push(format!("{w} is not offered; using {fallback}"));
            }
            fallback
        }
    };
    let sizes = &offered(format).expect("chosen from the offers").sizes;
    let (width, height) = if sizes.is_empty() {
        (req.width, req.height) // the driver does not enumerate: let S_FMT adjust
    } else {
        let exact = sizes.iter().any(|s| match *s {
            SizeOffer::Discrete(w, h) => (w, h) == (req.width, req.height),
            SizeOffer::Stepwise { min_w, max_w, step_w, min_h, max_h, step_h } => {
                (min_w..=max_w).contains(&req.width)
                    && (min_h..=max_h).contains(&req.height)
                    && (req.width - min_w).is_multiple_of(step_w)
                    && (req.height - min_h).is_multiple_of(step_h)
            }
        });
        if exact {
            (req.width, req.height)
        } else {
            let (w, h) = nearest_size(sizes, req.width, req.height).expect("sizes is not empty");
            reasons.push(format!(
                "{}x{} is not offered for {format}; using the nearest, {w}x{h}",
                req.width, req.height
            ));
            (w, h)
        }
    };
    let reason = (!reasons.is_empty()).then(|| reasons.join("; "));
    Ok((Choice { format, width, height }, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(code: &[u8; 4], sizes: Vec<SizeOffer>) -> FormatOffer {
        FormatOffer { fourcc: fourcc(code), description: String::new(), sizes }
    }

    /// A typical USB UVC webcam: YUYV up to 640x480, MJPEG up to 1920x1080.
    fn uvc() -> Vec<FormatOffer> {
        let d = SizeOffer::Discrete;
        vec![
            offer(b"YUYV", vec![d(640, 480), d(320, 240), d(160, 120)]),
            offer(b"MJPG", vec![d(1920, 1080), d(1280, 720), d(640, 480)]),
        ]
    }

    fn req(w: u32, h: u32, f: Option<&str>) -> Request {
        Request { width: w, height: h, fps: 30.0, format: f.map(|f| f.parse().unwrap()) }
    }

    #[test]
    fn exact_requests_are_taken_as_is() {
        let (c, why) = choose(&req(1280, 720, Some("mjpeg")), &uvc()).unwrap();
        assert_eq!((c.format, c.width, c.height), (CameraFormat::Mjpeg, 1280, 720));
        assert!(why.is_none());
    }

    #[test]
    fn missing_sizes_and_formats_fall_back_with_a_reason() {
        let (c, why) = choose(&req(1280, 720, Some("yuyv")), &uvc()).unwrap();
        assert_eq!((c.width, c.height), (640, 480));
        assert!(why.unwrap().contains("1280x720 is not offered for yuyv; using the nearest, 640x480"));
        let (c, why) = choose(&req(640, 480, Some("nv12")), &uvc()).unwrap();
        assert_eq!(c.format, CameraFormat::Raw(PixelFormat::Yuyv));
        assert!(why.unwrap().contains("nv12 is not offered; using yuyv"));
        let (c, _) = choose(&req(1000, 560, None), &uvc()).unwrap();
        assert_eq!((c.format, c.width, c.height), (CameraFormat::Raw(PixelFormat::Yuyv), 640, 480));
    }

    #[test]
    fn stepwise_sizes_snap_to_the_grid() {
        // vivid-like: continuous sizes from 16x16 to 4096x2160 in steps of 2.
        let offers = vec![offer(
            b"NV12",
            vec![SizeOffer::Stepwise {
                min_w: 16,
                max_w: 4096,
                step_w: 2,
                min_h: 16,
                max_h: 2160,
                step_h: 2,
            }],
        )];
        let (c, why) = choose(&req(640, 480, Some("nv12")), &offers).unwrap();
        assert_eq!((c.width, c.height), (640, 480));
        assert!(why.is_none());
        let (c, why) = choose(&req(641, 5000, Some("nv12")), &offers).unwrap();
        assert_eq!((c.width, c.height), (640, 2160));
        assert!(why.is_some());
    }

    #[test]
    fn cameras_with_no_usable_format_are_named() {
        let e = choose(&req(640, 480, None), &[offer(b"Y16 ", vec![]), offer(b"H264", vec![])]).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("it offers: Y16  H264"), "{e}");
        assert_eq!(CameraFormat::from_fourcc(fourcc(b"JPEG")), Some(CameraFormat::Mjpeg));
        assert!("h264".parse::<CameraFormat>().unwrap_err().to_string().contains("unknown camera format"));
    }
}
