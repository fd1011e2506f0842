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

/// [`yuv_to_rgb`]'s products, tabulated per 8-bit input: the same integers,
/// three table reads and adds per pixel instead of five multiplies.
struct YuvTables {
    y: [i32; 256],
    rv: [i32; 256],
    gu: [i32; 256],
    gv: [i32; 256],
    bu: [i32; 256],
}

const fn yuv_tables() -> YuvTables {
    let mut t = YuvTables { y: [0; 256], rv: [0; 256], gu: [0; 256], gv: [0; 256], bu: [0; 256] };
    let mut i = 0;
    while i < 256 {
        let luma = if i < 16 { 0 } else { i as i32 - 16 };
        let c = i as i32 - 128;
        t.y[i] = luma * CY + (1 << (SHIFT - 1));
        t.rv[i] = CRV * c;
        t.gu[i] = -CGU * c;
        t.gv[i] = -CGV * c;
        t.bu[i] = CBU * c;
        i += 1;
    }
    t
}

static TABLES: YuvTables = yuv_tables();

/// A pixel's chroma terms, shared by the pixels of a 4:2:2 pair or 4:2:0 block.
#[derive(Clone, Copy)]
struct Chroma {
    r: i32,
    g: i32,
    b: i32,
}

#[inline(always)]
fn chroma(u: u8, v: u8) -> Chroma {
    let t = &TABLES;
    Chroma { r: t.rv[v as usize], g: t.gu[u as usize] + t.gv[v as usize], b: t.bu[u as usize] }
}

#[inline(always)]
fn rgb(y: u8, c: Chroma) -> [u8; 3] {
    let l = TABLES.y[y as usize];
    [sat(l + c.r), sat(l + c.g), sat(l + c.b)]
}

/// Which pixels of a row to convert.
#[derive(Clone, Copy)]
pub enum Columns<'a> {
    /// Every pixel, left to right.
    All,
    /// Only these columns (ascending): a downscale reads a fraction of them.
    Some(&'a [u32]),
}

/// Converts row `y` of `frame` to RGB, calling `emit(x, [r, g, b])` for each
/// column asked for. The frame's length must already have been checked.
///
/// This is the one place pixel formats are decoded on the CPU: whole frames
/// ([`to_rgb`]) and the preprocessor's fused convert-and-resize both use it,
/// so a new format needs one arm here.
#[inline(always)]
pub fn convert_row(frame: &Frame, y: usize, cols: Columns, mut emit: impl FnMut(usize, [u8; 3])) {
    let w = frame.width as usize;
    let h = frame.height as usize;
    let src = &frame.data[..];
    match frame.format {
        PixelFormat::Rgb24 | PixelFormat::Bgr24 => {
            let row = &src[y * w * 3..][..w * 3];
            let (r, b) = if frame.format == PixelFormat::Rgb24 { (0, 2) } else { (2, 0) };
            let px = |x: usize| [row[x * 3 + r], row[x * 3 + 1], row[x * 3 + b]];
            match cols {
                Columns::All => {
                    for (x, p) in row.chunks_exact(3).enumerate() {
                        emit(x, [p[r], p[1], p[b]]);
                    }
                }
                Columns::Some(list) => list.iter().for_each(|&x| emit(x as usize, px(x as usize))),
            }
        }
        PixelFormat::Grey => {
            let row = &src[y * w..][..w];
            match cols {
                Columns::All => row.iter().enumerate().for_each(|(x, &v)| emit(x, [v; 3])),
                Columns::Some(list) => list.iter().for_each(|&x| emit(x as usize, [row[x as usize]; 3])),
            }
        }
        PixelFormat::Yuyv | PixelFormat::Uyvy => {
            let (yo, uo, vo) = if frame.format == PixelFormat::Yuyv { (0, 1, 3) } else { (1, 0, 2) };
            let row = &src[y * w * 2..][..w * 2];
            match cols {
                Columns::All => {
                    for (pair, i) in row.chunks_exact(4).enumerate() {
                        let c = chroma(i[uo], i[vo]);
                        emit(pair * 2, rgb(i[yo], c));
                        emit(pair * 2 + 1, rgb(i[yo + 2], c));
                    }
                }
                Columns::Some(list) => {
                    for &x in list {
                        let x = x as usize;
                        let i = &row[(x & !1) * 2..][..4];
                        emit(x, rgb(i[yo + (x & 1) * 2], chroma(i[uo], i[vo])));
                    }
                }
            }
        }
        PixelFormat::Nv12 => {
            let (luma, uv) = src.split_at(w * h);
            let lrow = &luma[y * w..][..w];
            let crow = &uv[(y / 2) * w..][..w];
            match cols {
                Columns::All => {
                    for (pair, (l, c)) in lrow.chunks_exact(2).zip(crow.chunks_exact(2)).enumerate() {
                        let c = chroma(c[0], c[1]);
                        emit(pair * 2, rgb(l[0], c));
                        emit(pair * 2 + 1, rgb(l[1], c));
                    }
                }
                Columns::Some(list) => {
                    for &x in list {
                        let x = x as usize;
                        let c = x & !1;
                        emit(x, rgb(lrow[x], chroma(crow[c], crow[c + 1])));
                    }
                }
            }
        }
    }
}

/// Converts `frame` into packed RGB24 in `rgb` (resized to `w * h * 3`).
/// The frame's length must already have been checked.
pub fn to_rgb(frame: &Frame, rgb: &mut Vec<u8>) {
    let (w, h) = (frame.width as usize, frame.height as usize);
    rgb.resize(w * h * 3, 0);
    if frame.format == PixelFormat::Rgb24 {
        rgb.copy_from_slice(&frame.data);
        return;
    }
    for (y, out) in rgb.chunks_exact_mut(w * 3).enumerate() {
        convert_row(frame, y, Columns::All, |x, p| out[x * 3..x * 3 + 3].copy_from_slice(&p));
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
    fn tables_give_the_formula_for_every_input() {
        for y in 0..=255u8 {
            for u in 0..=255u8 {
                for v in 0..=255u8 {
                    assert_eq!(rgb(y, chroma(u, v)), yuv_to_rgb(y, u, v), "{y} {u} {v}");
                }
            }
        }
    }

    #[test]
    fn some_columns_equal_the_same_columns_of_the_whole_row() {
        let (w, h) = (10u32, 4u32);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i * 37 % 251) as u8).collect();
        for format in PixelFormat::ALL {
            let mut frame = Frame::empty();
            encode_rgb(&rgb, w, h, format, &mut frame.data);
            (frame.width, frame.height, frame.format) = (w, h, format);
            let mut whole = Vec::new();
            to_rgb(&frame, &mut whole);
            let cols = [0u32, 1, 4, 7, 9];
            for y in 0..h as usize {
                let mut seen = Vec::new();
                convert_row(&frame, y, Columns::Some(&cols), |x, p| seen.push((x, p)));
                let want: Vec<(usize, [u8; 3])> = cols
                    .iter()
                    .map(|&x| {
                        let i = (y * w as usize + x as usize) * 3;
                        (x as usize, [whole[i], whole[i + 1], whole[i + 2]])
                    })
                    .collect();
                assert_eq!(seen, want, "{format} row {y}");
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
