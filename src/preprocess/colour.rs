//! Pixel format -> packed RGB24 conversion.
//!
//! YUV is read as BT.601 limited range ("video range"), which is what V4L2
//! UVC/CSI cameras deliver for YUYV, UYVY and NV12 and what OpenCV's
//! `cvtColor(..., COLOR_YUV2RGB_*)` assumes. GREY is replicated to R, G and B.
//! Supporting a new format means one more arm in [`to_rgb`].

use crate::frame::{Frame, PixelFormat};

// BT.601 limited-range coefficients in 20-bit fixed point: the precision
// OpenCV's cvtColor uses, so conversions agree with it to the level.
const SHIFT: i32 = 20;
const CY: i32 = 1_220_542; // 1.164 = 255 / 219
const CRV: i32 = 1_673_527; // 1.596
const CGU: i32 = 409_993; // 0.391
const CGV: i32 = 852_492; // 0.813
const CBU: i32 = 2_116_026; // 2.018

/// The conversion's coefficients `(Y, R-V, G-U, G-V, B-U)` in units of 2^-20,
/// for implementations elsewhere (the accelerator graph) to share.
pub const COEFFICIENTS: (i32, i32, i32, i32, i32) = (CY, CRV, CGU, CGV, CBU);

#[inline]
fn sat(v: i32) -> u8 {
    (v >> SHIFT).clamp(0, 255) as u8
}

/// BT.601 limited-range YCbCr -> RGB for one pixel.
#[inline]
pub fn yuv_to_rgb(y: u8, u: u8, v: u8) -> [u8; 3] {
    let c = (y as i32 - 16).max(0) * CY + (1 << (SHIFT - 1));
    let d = u as i32 - 128;
    let e = v as i32 - 128;
    [sat(c + CRV * e), sat(c - CGU * d - CGV * e), sat(c + CBU * d)]
}

/// Converts `frame` into packed RGB24 in `rgb` (resized to `w * h * 3`).
/// The frame's length must already have been checked.
pub fn to_rgb(frame: &Frame, rgb: &mut Vec<u8>) {
    let (w, h) = (frame.width as usize, frame.height as usize);
    rgb.resize(w * h * 3, 0);
    let src = &frame.data;
    match frame.format {
        PixelFormat::Rgb24 => rgb.copy_from_slice(src),
        PixelFormat::Bgr24 => {
            for (o, i) in rgb.chunks_exact_mut(3).zip(src.chunks_exact(3)) {
                o.copy_from_slice(&[i[2], i[1], i[0]]);
            }
        }
        PixelFormat::Grey => {
            for (o, &y) in rgb.chunks_exact_mut(3).zip(src.iter()) {
                o.fill(y);
            }
        }
        PixelFormat::Yuyv | PixelFormat::Uyvy => {
            let (yo, uo, vo) = if frame.format == PixelFormat::Yuyv { (0, 1, 3) } else { (1, 0, 2) };
            for (o, i) in rgb.chunks_exact_mut(6).zip(src.chunks_exact(4)) {
                let (u, v) = (i[uo], i[vo]);
                o[..3].copy_from_slice(&yuv_to_rgb(i[yo], u, v));
                o[3..].copy_from_slice(&yuv_to_rgb(i[yo + 2], u, v));
            }
        }
        PixelFormat::Nv12 => {
            let (luma, chroma) = src.split_at(w * h);
            for y in 0..h {
                let crow = &chroma[(y / 2) * w..(y / 2) * w + w];
                let lrow = &luma[y * w..(y + 1) * w];
                let orow = &mut rgb[y * w * 3..(y + 1) * w * 3];
                for x in 0..w {
                    let c = x & !1;
                    orow[x * 3..x * 3 + 3].copy_from_slice(&yuv_to_rgb(lrow[x], crow[c], crow[c + 1]));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{encode_rgb, rgb_to_yuv};

    #[test]
    fn yuv_round_trip_is_within_two_levels() {
        for r in (0..=255).step_by(15) {
            for g in (0..=255).step_by(15) {
                for b in (0..=255).step_by(15) {
                    let (y, u, v) = rgb_to_yuv(r as u8, g as u8, b as u8);
                    let back = yuv_to_rgb(y, u, v);
                    for (a, b) in [r, g, b].iter().zip(back) {
                        assert!((*a - b as i32).abs() <= 2, "{r},{g},{b} -> {back:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn every_format_decodes_a_flat_colour() {
        let (w, h) = (6u32, 4u32);
        let rgb: Vec<u8> = [200u8, 80, 30].repeat((w * h) as usize);
        for format in PixelFormat::ALL {
            let mut frame = Frame::empty();
            encode_rgb(&rgb, w, h, format, &mut frame.data);
            frame.width = w;
            frame.height = h;
            frame.format = format;
            frame.check_len().unwrap();
            let mut out = Vec::new();
            to_rgb(&frame, &mut out);
            assert_eq!(out.len(), rgb.len());
            let expect: [u8; 3] = if format == PixelFormat::Grey {
                let y = rgb_to_yuv(200, 80, 30).0;
                [y, y, y]
            } else {
                [200, 80, 30]
            };
            for px in out.chunks_exact(3) {
                for (a, b) in px.iter().zip(expect) {
                    assert!((*a as i32 - b as i32).abs() <= 2, "{format}: {px:?} vs {expect:?}");
                }
            }
        }
    }
}
