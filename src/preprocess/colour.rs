//! Pixel format -> packed RGB24 conversion.
//!
//! YUV is read as BT.601 limited range ("video range"), which is what V4L2
//! UVC/CSI cameras deliver for YUYV, UYVY and NV12 and what OpenCV's
//! `cvtColor(..., COLOR_YUV2RGB_*)` assumes. GREY is replicated to R, G and B.
//! Supporting a new format means one more arm in [`convert_row`].

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

#[inline(always)]
fn sat(v: i32) -> u8 {
    (v >> SHIFT).clamp(0, 255) as u8
}

/// The luma term of [`yuv_to_rgb`], rounding included.
#[inline(always)]
fn luma(y: u8) -> i32 {
    (y as i32 - 16).max(0) * CY + (1 << (SHIFT - 1))
}

/// BT.601 limited-range YCbCr -> RGB for one pixel: the reference the row
/// converter below must equal (a test compares them over every input).
#[inline]
pub fn yuv_to_rgb(y: u8, u: u8, v: u8) -> [u8; 3] {
    let c = luma(y);
    let d = u as i32 - 128;
    let e = v as i32 - 128;
    [sat(c + CRV * e), sat(c - CGU * d - CGV * e), sat(c + CBU * d)]
}

/// Two horizontally adjacent pixels sharing one chroma sample (4:2:2 pair,
/// one row of a 4:2:0 block) -> their R, G and B. The same integers as
/// [`yuv_to_rgb`], written so that a loop of it vectorises: no tables, no
/// branches, 32-bit lanes.
#[inline(always)]
fn yuv_pair(y0: u8, y1: u8, u: u8, v: u8, r: &mut [u8], g: &mut [u8], b: &mut [u8]) {
    let d = u as i32 - 128;
    let e = v as i32 - 128;
    let (cr, cg, cb) = (CRV * e, -CGU * d - CGV * e, CBU * d);
    let (l0, l1) = (luma(y0), luma(y1));
    r[0] = sat(l0 + cr);
    r[1] = sat(l1 + cr);
    g[0] = sat(l0 + cg);
    g[1] = sat(l1 + cg);
    b[0] = sat(l0 + cb);
    b[1] = sat(l1 + cb);
}

/// A packed 4:2:2 row (YUYV or UYVY: the byte offsets of Y0, U and V in each
/// 4-byte pair are the parameters).
#[inline(always)]
fn packed_422<const Y: usize, const U: usize, const V: usize>(
    row: &[u8],
    r: &mut [u8],
    g: &mut [u8],
    b: &mut [u8],
) {
    let pairs =
        row.chunks_exact(4).zip(r.chunks_exact_mut(2)).zip(g.chunks_exact_mut(2)).zip(b.chunks_exact_mut(2));
    for (((p, r), g), b) in pairs {
        yuv_pair(p[Y], p[Y + 2], p[U], p[V], r, g, b);
    }
}

/// A row of packed 3-byte pixels, channel order given by the byte offsets of R, G and B.
#[inline(always)]
fn packed_rgb<const R: usize, const B: usize>(row: &[u8], r: &mut [u8], g: &mut [u8], b: &mut [u8]) {
    for (((p, r), g), b) in row.chunks_exact(3).zip(r.iter_mut()).zip(g.iter_mut()).zip(b.iter_mut()) {
        (*r, *g, *b) = (p[R], p[1], p[B]);
    }
}

/// Converts row `y` of `frame` into three planes of `frame.width` values
/// each (`r`, `g`, `b`). The frame's length must already have been checked.
///
/// This is the one place pixel formats are decoded on the CPU: whole frames
/// ([`to_rgb`]) and the preprocessor's fused convert-and-resize both use it,
/// so a new format needs one arm here. It is inlined so that a caller
/// compiled for a wider vector unit (the preprocessor's AVX2 path) vectorises
/// it too; the loops are plain so that the compiler can.
#[inline(always)]
pub fn convert_row(frame: &Frame, y: usize, r: &mut [u8], g: &mut [u8], b: &mut [u8]) {
    let w = frame.width as usize;
    let h = frame.height as usize;
    let (r, g, b) = (&mut r[..w], &mut g[..w], &mut b[..w]);
    let src = &frame.data[..];
    match frame.format {
        PixelFormat::Rgb24 => packed_rgb::<0, 2>(&src[y * w * 3..][..w * 3], r, g, b),
        PixelFormat::Bgr24 => packed_rgb::<2, 0>(&src[y * w * 3..][..w * 3], r, g, b),
        PixelFormat::Grey => {
            let row = &src[y * w..][..w];
            r.copy_from_slice(row);
            g.copy_from_slice(row);
            b.copy_from_slice(row);
        }
        PixelFormat::Yuyv => packed_422::<0, 1, 3>(&src[y * w * 2..][..w * 2], r, g, b),
        PixelFormat::Uyvy => packed_422::<1, 0, 2>(&src[y * w * 2..][..w * 2], r, g, b),
        PixelFormat::Nv12 => {
            let (luma, uv) = src.split_at(w * h);
            let lrow = &luma[y * w..][..w];
            let crow = &uv[(y / 2) * w..][..w];
            let pairs = lrow
                .chunks_exact(2)
                .zip(crow.chunks_exact(2))
                .zip(r.chunks_exact_mut(2))
                .zip(g.chunks_exact_mut(2))
                .zip(b.chunks_exact_mut(2));
            for ((((l, c), r), g), b) in pairs {
                yuv_pair(l[0], l[1], c[0], c[1], r, g, b);
            }
        }
    }
}

/// Converts `frame` into packed RGB24 in `rgb` (resized to `w * h * 3`).
/// The frame's length must already have been checked.
pub fn to_rgb(frame: &Frame, rgb: &mut Vec<u8>) {
    let (w, h) = (frame.width as usize, frame.height as usize);
    rgb.resize(w * h * 3, 0);
    let mut planes = [vec![0u8; w], vec![0u8; w], vec![0u8; w]];
    for (y, out) in rgb.chunks_exact_mut(w * 3).enumerate() {
        let [r, g, b] = &mut planes;
        convert_row(frame, y, r, g, b);
        for (x, px) in out.chunks_exact_mut(3).enumerate() {
            px.copy_from_slice(&[r[x], g[x], b[x]]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{encode_rgb, rgb_to_yuv};
    use crate::preprocess::simd::multiversion;

    multiversion! {
        fn convert_row_wide(frame: &Frame, y: usize, r: &mut [u8], g: &mut [u8], b: &mut [u8]) => convert_row
    }

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
    fn the_row_converter_gives_the_formula_for_every_input() {
        // Every (Y, U, V): Y = x along a 256-pixel row, one row per (U, V).
        let w = 256usize;
        let (mut r, mut g, mut b) = (vec![0; w], vec![0; w], vec![0; w]);
        for format in [PixelFormat::Yuyv, PixelFormat::Uyvy, PixelFormat::Nv12] {
            for u in 0..=255u8 {
                for v in 0..=255u8 {
                    let mut frame = Frame::empty();
                    (frame.width, frame.height, frame.format) = (w as u32, 2, format);
                    let ys = (0..w).map(|x| x as u8);
                    frame.data = match format {
                        PixelFormat::Yuyv => {
                            ys.collect::<Vec<_>>().chunks(2).flat_map(|p| [p[0], u, p[1], v]).collect()
                        }
                        PixelFormat::Uyvy => {
                            ys.collect::<Vec<_>>().chunks(2).flat_map(|p| [u, p[0], v, p[1]]).collect()
                        }
                        _ => ys.clone().chain(ys).chain([u, v].repeat(w / 2)).collect(),
                    };
                    frame.data.resize(format.frame_len(w as u32, 2).unwrap(), 0);
                    // Both builds of the loop: the baseline one and, where the CPU has it, the wider one.
                    for wide in [false, true] {
                        r.fill(0);
                        if wide {
                            convert_row_wide(&frame, 0, &mut r, &mut g, &mut b);
                        } else {
                            convert_row(&frame, 0, &mut r, &mut g, &mut b);
                        }
                        for x in 0..w {
                            let want = yuv_to_rgb(x as u8, u, v);
                            assert_eq!([r[x], g[x], b[x]], want, "{format} y {x} u {u} v {v} wide {wide}");
                        }
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
