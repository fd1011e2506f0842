//! The data every stage shares: pixel formats and frames.
//!
//! A [`Frame`] is one image as a source delivered it: raw bytes in one
//! [`PixelFormat`], with the sequence number and the monotonic time of capture.
//! Nothing here knows about models or cameras; sources produce frames and the
//! preprocessing stage consumes them.

use std::fmt;
use std::str::FromStr;
use std::time::Instant;

/// Pixel layouts a frame can carry. New camera formats are added here, in
/// [`PixelFormat::frame_len`], in the encoders below and in `preprocess::colour`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PixelFormat {
    /// Packed 4:2:2 luma/chroma, `Y0 U Y1 V` (V4L2 `YUYV`).
    Yuyv,
    /// Packed 4:2:2, `U Y0 V Y1` (V4L2 `UYVY`).
    Uyvy,
    /// Planar 4:2:0: a full-size Y plane followed by interleaved `U V` at half size (V4L2 `NV12`).
    Nv12,
    /// 8-bit luma only (V4L2 `GREY`).
    Grey,
    /// Packed 8-bit `R G B` (V4L2 `RGB3`).
    Rgb24,
    /// Packed 8-bit `B G R` (V4L2 `BGR3`).
    Bgr24,
}

impl PixelFormat {
    /// Every format, in the order they are documented.
    pub const ALL: [PixelFormat; 6] = [
        PixelFormat::Yuyv,
        PixelFormat::Uyvy,
        PixelFormat::Nv12,
        PixelFormat::Grey,
        PixelFormat::Rgb24,
        PixelFormat::Bgr24,
    ];

    /// The lower-case name used in URIs and configs.
    pub fn name(self) -> &'static str {
        match self {
            PixelFormat::Yuyv => "yuyv",
            PixelFormat::Uyvy => "uyvy",
            PixelFormat::Nv12 => "nv12",
            PixelFormat::Grey => "grey",
            PixelFormat::Rgb24 => "rgb24",
            PixelFormat::Bgr24 => "bgr24",
        }
    }

    /// Bytes in one tightly packed frame of `width` x `height`, or `None` when
    /// the geometry is impossible for this format (odd width for 4:2:2, odd
    /// width or height for 4:2:0, zero sizes, overflow).
    pub fn frame_len(self, width: u32, height: u32) -> Option<usize> {
        if width == 0 || height == 0 {
            return None;
        }
        let (w, h) = (width as usize, height as usize);
        let px = w.checked_mul(h)?;
        match self {
            PixelFormat::Yuyv | PixelFormat::Uyvy => (w % 2 == 0).then(|| px.checked_mul(2))?,
            PixelFormat::Nv12 => (w % 2 == 0 && h % 2 == 0).then(|| px.checked_add(px / 2))?,
            PixelFormat::Grey => Some(px),
            PixelFormat::Rgb24 | PixelFormat::Bgr24 => px.checked_mul(3),
        }
    }
}

impl fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PixelFormat {
    type Err = crate::named::UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        let found = match lower.as_str() {
            "yuyv" | "yuy2" | "yuyv422" => PixelFormat::Yuyv,
            "uyvy" | "uyvy422" => PixelFormat::Uyvy,
            "nv12" => PixelFormat::Nv12,
            "grey" | "gray" | "y8" | "gray8" => PixelFormat::Grey,
            "rgb24" | "rgb" | "rgb3" => PixelFormat::Rgb24,
            "bgr24" | "bgr" | "bgr3" => PixelFormat::Bgr24,
            _ => {
                let names: Vec<&str> = Self::ALL.iter().map(|f| f.name()).collect();
                let allowed = format!("one of {}", names.join(", "));
                return Err(crate::named::UnknownName::new("unknown pixel format ", s, "", allowed));
            }
        };
        Ok(found)
    }
}

/// A frame whose data does not fit its geometry and format.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The data is longer or shorter than the geometry needs.
    #[error("{label}: a {width}x{height} {format} frame needs {need} bytes, got {got}")]
    Length {
        /// The frame's label (file or device).
        label: String,
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
        /// The pixel format.
        format: PixelFormat,
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        got: usize,
    },
    /// A size the format's chroma subsampling cannot have.
    #[error(
        "{label}: {width}x{height} is not a valid size for {format} \
         (4:2:2 needs an even width, 4:2:0 even width and height)"
    )]
    Size {
        /// The frame's label.
        label: String,
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
        /// The pixel format.
        format: PixelFormat,
    },
}

/// One object's true position in a rendered frame.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GroundTruth {
    /// Class id of the object (for `synthetic://`, an index into its class names).
    pub class_id: usize,
    /// Left edge in pixels (inclusive).
    pub x1: f32,
    /// Top edge in pixels (inclusive).
    pub y1: f32,
    /// Right edge in pixels (exclusive).
    pub x2: f32,
    /// Bottom edge in pixels (exclusive).
    pub y2: f32,
    /// Fraction of the object's pixels not hidden by objects drawn over it (0..=1).
    pub visible: f32,
    /// Which object of the scene this is (the same object keeps its number from frame to frame).
    #[serde(default)]
    pub object: usize,
    /// For an object closing in, its true time to contact in frames (at the source's rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttc_frames: Option<f32>,
    /// The box around the object's visible pixels, `[x1, y1, x2, y2]`, when others hide part of
    /// it: what a detector can see of it (absent when it is all visible, or not at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown: Option<[f32; 4]>,
    /// For an obstacle a moving camera comes at: where it will be when the vehicle reaches it,
    /// and whether the vehicle hits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub course: Option<Course>,
}

/// Where an obstacle will be when a moving vehicle reaches it (the truth of an ego-motion scene).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Course {
    /// Its centre's offset from the vehicle's path then, metres, positive to the right.
    pub offset_m: f32,
    /// Whether the vehicle hits it: the offset is under half the vehicle's width plus half the
    /// obstacle's.
    pub hit: bool,
}

/// The camera's attitude when a frame was taken, as a flight controller reports its own
/// (MAVLink ATTITUDE): radians, roll right wing down, pitch nose up, yaw clockwise from north,
/// all positive.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Attitude {
    /// Roll, radians.
    pub roll: f64,
    /// Pitch, radians.
    pub pitch: f64,
    /// Yaw (heading), radians.
    pub yaw: f64,
}

impl GroundTruth {
    /// The whole box, `[x1, y1, x2, y2]`.
    pub fn corners(&self) -> [f32; 4] {
        [self.x1, self.y1, self.x2, self.y2]
    }

    /// How well box `b` covers the object: its IoU with the whole box, or with the box of the
    /// part in view ([`GroundTruth::shown`]) where that is higher.
    pub fn overlap(&self, b: [f32; 4]) -> f32 {
        let whole = crate::geometry::iou(b, self.corners());
        self.shown.map_or(whole, |s| whole.max(crate::geometry::iou(b, s)))
    }
}

/// One captured image.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Layout of `data`.
    pub format: PixelFormat,
    /// Tightly packed pixel bytes, `format.frame_len(width, height)` long.
    pub data: Vec<u8>,
    /// Position in the source's stream, starting at 0; gaps mean frames were skipped.
    pub seq: u64,
    /// Monotonic time the frame was captured (for a camera: the driver's timestamp).
    pub captured: Instant,
    /// Wall-clock capture time in nanoseconds since the Unix epoch.
    pub captured_wall_ns: u128,
    /// Where the frame came from (a file name, a device), for messages.
    pub label: String,
    /// Known true object positions (only synthetic sources know them; empty otherwise).
    pub truth: Vec<GroundTruth>,
    /// The camera's true attitude, from a source that knows it (an ego-motion scene).
    pub attitude: Option<Attitude>,
}

impl Frame {
    /// An empty frame, to be filled by a source that reuses its buffers.
    pub fn empty() -> Frame {
        Frame {
            width: 0,
            height: 0,
            format: PixelFormat::Rgb24,
            data: Vec::new(),
            seq: 0,
            captured: Instant::now(),
            captured_wall_ns: 0,
            label: String::new(),
            truth: Vec::new(),
            attitude: None,
        }
    }

    /// Checks that `data` has exactly the length the geometry and format need.
    pub fn check_len(&self) -> Result<(), FrameError> {
        let (width, height, format) = (self.width, self.height, self.format);
        let label = || self.label.clone();
        match self.format.frame_len(self.width, self.height) {
            Some(n) if n == self.data.len() => Ok(()),
            Some(need) => {
                Err(FrameError::Length { label: label(), width, height, format, need, got: self.data.len() })
            }
            None => Err(FrameError::Size { label: label(), width, height, format }),
        }
    }
}

/// Wall-clock time now, in nanoseconds since the Unix epoch.
pub fn wall_clock_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// BT.601 limited-range ("video range") RGB -> YCbCr, as V4L2 cameras deliver it.
#[inline]
pub fn rgb_to_yuv(r: u8, g: u8, b: u8) -> (u8, u8, u8) {
    let (r, g, b) = (r as f32, g as f32, b as f32);
    let y = 16.0 + 0.256_788 * r + 0.504_129 * g + 0.097_906 * b;
    let u = 128.0 - 0.148_223 * r - 0.290_993 * g + 0.439_216 * b;
    let v = 128.0 + 0.439_216 * r - 0.367_788 * g - 0.071_427 * b;
    (clamp_u8(y), clamp_u8(u), clamp_u8(v))
}

#[inline]
fn clamp_u8(v: f32) -> u8 {
    v.round().clamp(0.0, 255.0) as u8
}

/// Encodes a packed RGB24 image into `format`, writing into `out` (resized as needed).
/// Chroma is averaged over each 2x1 (4:2:2) or 2x2 (4:2:0) block.
pub fn encode_rgb(rgb: &[u8], width: u32, height: u32, format: PixelFormat, out: &mut Vec<u8>) {
    let (w, h) = (width as usize, height as usize);
    debug_assert_eq!(rgb.len(), w * h * 3);
    let len = format.frame_len(width, height).expect("valid geometry");
    out.resize(len, 0);
    match format {
        PixelFormat::Rgb24 => out.copy_from_slice(rgb),
        PixelFormat::Bgr24 => {
            for (o, i) in out.chunks_exact_mut(3).zip(rgb.chunks_exact(3)) {
                o[0] = i[2];
                o[1] = i[1];
                o[2] = i[0];
            }
        }
        PixelFormat::Grey => {
            for (o, i) in out.iter_mut().zip(rgb.chunks_exact(3)) {
                *o = rgb_to_yuv(i[0], i[1], i[2]).0;
            }
        }
        PixelFormat::Yuyv | PixelFormat::Uyvy => {
            let uyvy = format == PixelFormat::Uyvy;
            for (o, i) in out.chunks_exact_mut(4).zip(rgb.chunks_exact(6)) {
                let (y0, u0, v0) = rgb_to_yuv(i[0], i[1], i[2]);
                let (y1, u1, v1) = rgb_to_yuv(i[3], i[4], i[5]);
                let u = (u0 as u16 + u1 as u16).div_ceil(2) as u8;
                let v = (v0 as u16 + v1 as u16).div_ceil(2) as u8;
                if uyvy {
                    o.copy_from_slice(&[u, y0, v, y1]);
                } else {
                    o.copy_from_slice(&[y0, u, y1, v]);
                }
            }
        }
        PixelFormat::Nv12 => {
            let (luma, chroma) = out.split_at_mut(w * h);
            for (o, i) in luma.iter_mut().zip(rgb.chunks_exact(3)) {
                *o = rgb_to_yuv(i[0], i[1], i[2]).0;
            }
            for by in 0..h / 2 {
                for bx in 0..w / 2 {
                    let (mut su, mut sv) = (0u32, 0u32);
                    for (dy, dx) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                        let p = ((2 * by + dy) * w + 2 * bx + dx) * 3;
                        let (_, u, v) = rgb_to_yuv(rgb[p], rgb[p + 1], rgb[p + 2]);
                        su += u as u32;
                        sv += v as u32;
                    }
                    let c = by * w + 2 * bx;
                    chroma[c] = ((su + 2) / 4) as u8;
                    chroma[c + 1] = ((sv + 2) / 4) as u8;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_len_rejects_impossible_geometry() {
        assert_eq!(PixelFormat::Yuyv.frame_len(640, 480), Some(640 * 480 * 2));
        assert_eq!(PixelFormat::Nv12.frame_len(640, 480), Some(640 * 480 * 3 / 2));
        assert_eq!(PixelFormat::Yuyv.frame_len(641, 480), None);
        assert_eq!(PixelFormat::Nv12.frame_len(640, 481), None);
        assert_eq!(PixelFormat::Grey.frame_len(0, 10), None);
        assert_eq!(PixelFormat::Rgb24.frame_len(3, 1), Some(9));
    }

    #[test]
    fn names_round_trip() {
        for f in PixelFormat::ALL {
            assert_eq!(f.name().parse::<PixelFormat>().unwrap(), f);
        }
        let err = "mjpg".parse::<PixelFormat>().unwrap_err().to_string();
        assert!(err.contains("yuyv, uyvy, nv12, grey, rgb24, bgr24"), "{err}");
    }

    #[test]
    fn bt601_limited_range_extremes() {
        assert_eq!(rgb_to_yuv(0, 0, 0), (16, 128, 128));
        assert_eq!(rgb_to_yuv(255, 255, 255), (235, 128, 128));
        let (y, u, v) = rgb_to_yuv(255, 0, 0);
        assert_eq!((y, u, v), (81, 90, 240));
    }
}
