//! Letterbox preprocessing on the CPU.
//!
//! Frames are resized exactly as OpenCV's `cv2.resize(..., INTER_LINEAR)` does
//! for 8-bit RGB images, which is what ultralytics uses: pixel centres aligned,
//! edge pixels replicated, weights in 11-bit fixed point, and the rounding of
//! OpenCV's vectorised vertical pass. The model then sees the same values it saw
//! in training and validation, to the level. Results go straight into the
//! normalised `f32` NCHW planes.
//!
//! Colour conversion is fused into the resize: only the source rows the
//! interpolation reads are converted, one at a time into planar buffers that
//! stay in L1, and a frame the model takes at its own size skips the resize
//! altogether. Only the padding around the picture is filled. The output is
//! identical to converting the whole frame first (a test below pins it). The
//! loops are branch-free over planar rows so that they vectorise (on x86_64
//! with AVX2 where the CPU has it, see [`super::simd`]). Buffers and sampling
//! tables are kept between frames: in steady state nothing is allocated.

use super::colour;
use super::simd::multiversion;
use super::{Fit, Letterbox, PreprocessError, Preprocessor, PAD_VALUE};
use crate::frame::Frame;

/// Fixed-point scale of the interpolation weights (OpenCV's `INTER_RESIZE_COEF_SCALE`).
pub const WEIGHT_ONE: i32 = 2048;
const ONE: i32 = WEIGHT_ONE;

/// Bits per channel in a packed pixel: room for a horizontal tap's sum.
const LANE: u32 = 21;
const LANE_MASK: u64 = (1 << LANE) - 1;

/// 8-bit value -> normalised `f32`: `v / 255`, correctly rounded (a division
/// vectorises; a table lookup does not).
#[inline(always)]
fn unit(v: i32) -> f32 {
    v as f32 / 255.0
}

/// For one output coordinate: the first source index and the weights of it and the next.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tap {
    /// First source pixel.
    pub index: usize,
    /// Weight of `index`, in 1/[`WEIGHT_ONE`].
    pub w0: i32,
    /// Weight of `index + 1`, in 1/[`WEIGHT_ONE`] (0 at the edges).
    pub w1: i32,
}

/// OpenCV `INTER_LINEAR` source positions and weights for `dst` samples over `src` pixels.
pub fn taps(src: u32, dst: u32, out: &mut Vec<Tap>) {
    out.clear();
    let scale = src as f64 / dst as f64;
    for d in 0..dst {
        let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
        let mut i = f.floor();
        let mut frac = f - i;
        if i < 0.0 {
            i = 0.0;
            frac = 0.0;
        }
        if i >= (src - 1) as f32 {
            i = (src - 1) as f32;
            frac = 0.0;
        }
        let q = |w: f32| (w * ONE as f32).round_ties_even() as i32;
        out.push(Tap { index: i as usize, w0: q(1.0 - frac), w1: q(frac) });
    }
}

/// Letterboxes frames into model input tensors on the CPU.
#[derive(Default)]
pub struct CpuPreprocessor {
    xs: Vec<Tap>,
    ys: Vec<Tap>,
    /// One source row as R, G and B planes.
    planes: [Vec<u8>; 3],
    /// The same row, each pixel's channels packed in [`LANE`]-bit lanes of a `u64`.
    packed: Vec<u64>,
    /// Two horizontally resized rows, planar (`new_w` values per channel, scaled by [`ONE`]).
    rows: [Vec<i32>; 2],
    /// Which source row each of `rows` holds.
    row_ids: [Option<usize>; 2],
    geometry: Option<(u32, u32, u32, u32)>,
}

impl CpuPreprocessor {
    /// A preprocessor with empty buffers; they grow on the first frame.
    pub fn new() -> CpuPreprocessor {
        CpuPreprocessor::default()
    }

    fn set_geometry(&mut self, frame: &Frame, lb: &Letterbox) {
        let geometry = (frame.width, frame.height, lb.new_w, lb.new_h);
        if self.geometry == Some(geometry) {
            return;
        }
        taps(frame.width, lb.new_w, &mut self.xs);
        taps(frame.height, lb.new_h, &mut self.ys);
        for p in &mut self.planes {
            p.resize(frame.width as usize, 0);
        }
        self.packed.resize(frame.width as usize, 0);
        for r in &mut self.rows {
            r.resize(lb.new_w as usize * 3, 0);
        }
        self.geometry = Some(geometry);
    }

    /// Makes `rows[slot]` hold source row `r`, converted and horizontally
    /// resized. Slot 0 is loaded first for each output row, so a row moving
    /// from slot 1 to slot 0 is swapped, not recomputed.
    #[inline(always)]
    fn load_row(&mut self, slot: usize, r: usize, frame: &Frame) {
        if self.row_ids[slot] == Some(r) {
            return;
        }
        let other = 1 - slot;
        if self.row_ids[other] == Some(r) {
            if slot == 0 {
                self.rows.swap(0, 1);
                self.row_ids.swap(0, 1);
            } else {
                let (a, b) = self.rows.split_at_mut(1);
                b[0].copy_from_slice(&a[0]);
                self.row_ids[1] = Some(r);
            }
            return;
        }
        let [pr, pg, pb] = &mut self.planes;
        colour::convert_row(frame, r, pr, pg, pb);
        // The three channels side by side in one u64 (SWAR): one multiply per
        // weight resizes all three, and no lane carries into the next, as each
        // sum is at most 255 * 2048 * 2 < 2^21.
        for (((p, &r), &g), &b) in self.packed.iter_mut().zip(pr.iter()).zip(pg.iter()).zip(pb.iter()) {
            *p = r as u64 | (g as u64) << LANE | (b as u64) << (2 * LANE);
        }
        let n = self.xs.len();
        let last = frame.width as usize - 1;
        let (dr, rest) = self.rows[slot].split_at_mut(n);
        let (dg, db) = rest.split_at_mut(n);
        let src = &self.packed[..=last];
        for (((t, r), g), b) in self.xs.iter().zip(dr).zip(dg).zip(db) {
            // At the right edge w1 is 0 and index + 1 would be past the row.
            let (i, j) = (t.index, (t.index + 1).min(last));
            let v = src[i] * t.w0 as u64 + src[j] * t.w1 as u64;
            (*r, *g, *b) = ((v & LANE_MASK) as i32, (v >> LANE & LANE_MASK) as i32, (v >> (2 * LANE)) as i32);
        }
        self.row_ids[slot] = Some(r);
    }

    /// Writes the picture part of the letterboxed frame into the planes.
    #[inline(always)]
    fn fill_picture(&mut self, frame: &Frame, lb: &Letterbox, dst_w: usize, out: &mut [f32]) {
        let plane = out.len() / 3;
        let (top, left) = (lb.top as usize, lb.left as usize);
        let (nw, nh) = (lb.new_w as usize, lb.new_h as usize);
        let (out_r, rest) = out.split_at_mut(plane);
        let (out_g, out_b) = rest.split_at_mut(plane);
        let at = |y: usize| (top + y) * dst_w + left;

        if nw == frame.width as usize && nh == frame.height as usize {
            // The model's own size: no resize (the taps would be 1 and 0), convert straight into the planes.
            for y in 0..nh {
                let [pr, pg, pb] = &mut self.planes;
                colour::convert_row(frame, y, pr, pg, pb);
                let o = at(y);
                for (src, dst) in self.planes.iter().zip([&mut *out_r, &mut *out_g, &mut *out_b]) {
                    for (d, &s) in dst[o..o + nw].iter_mut().zip(src) {
                        *d = unit(s as i32);
                    }
                }
            }
            return;
        }

        self.row_ids = [None, None];
        let last_row = frame.height as usize - 1;
        for dy in 0..nh {
            let ty = self.ys[dy];
            self.load_row(0, ty.index, frame);
            if ty.w1 != 0 {
                self.load_row(1, (ty.index + 1).min(last_row), frame);
            }
            let o = at(dy);
            for (c, plane) in [&mut *out_r, &mut *out_g, &mut *out_b].into_iter().enumerate() {
                let a = &self.rows[0][c * nw..][..nw];
                let dst = &mut plane[o..o + nw];
                if ty.w1 == 0 {
                    for (d, &a) in dst.iter_mut().zip(a) {
                        let v = (((a >> 4) * ty.w0) >> 16) + 2;
                        *d = unit((v >> 2).clamp(0, 255));
                    }
                } else {
                    let b = &self.rows[1][c * nw..][..nw];
                    for ((d, &a), &b) in dst.iter_mut().zip(a).zip(b) {
                        // OpenCV's vectorised vertical pass (VResizeLinearVec_32s8u).
                        let v = (((a >> 4) * ty.w0) >> 16) + (((b >> 4) * ty.w1) >> 16) + 2;
                        *d = unit((v >> 2).clamp(0, 255));
                    }
                }
            }
        }
    }
}

multiversion! {
    /// [`CpuPreprocessor::fill_picture`], vectorised as wide as this CPU goes.
    fn picture(pre: &mut CpuPreprocessor, frame: &Frame, lb: &Letterbox, dst_w: usize, out: &mut [f32])
        => CpuPreprocessor::fill_picture
}

/// Fills the part of each plane outside the picture with the padding grey.
fn pad(out: &mut [f32], dst_w: usize, lb: &Letterbox) {
    let value = unit(PAD_VALUE as i32);
    let (top, left) = (lb.top as usize, lb.left as usize);
    let (nw, nh) = (lb.new_w as usize, lb.new_h as usize);
    let plane = out.len() / 3;
    for p in out.chunks_exact_mut(plane) {
        p[..top * dst_w].fill(value);
        p[(top + nh) * dst_w..].fill(value);
        if nw < dst_w {
            for row in p[top * dst_w..(top + nh) * dst_w].chunks_exact_mut(dst_w) {
                row[..left].fill(value);
                row[left + nw..].fill(value);
            }
        }
    }
}

impl Preprocessor for CpuPreprocessor {
    fn run(
        &mut self,
        frame: &Frame,
        fit: Fit,
        dst_w: u32,
        dst_h: u32,
        out: &mut [f32],
    ) -> Result<Letterbox, PreprocessError> {
        frame.check_len()?;
        let need = 3 * dst_w as usize * dst_h as usize;
        if out.len() != need {
            return Err(PreprocessError::BadOutput { got: out.len(), need, w: dst_w, h: dst_h });
        }
        let lb = Letterbox::fit(fit, frame.width, frame.height, dst_w, dst_h);
        self.set_geometry(frame, &lb);
        pad(out, dst_w as usize, &lb);
        picture(self, frame, &lb, dst_w as usize, out);
        Ok(lb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::PixelFormat;

    fn rgb_frame(w: u32, h: u32, f: impl Fn(u32, u32) -> [u8; 3] + Copy) -> Frame {
        let mut frame = Frame::empty();
        frame.width = w;
        frame.height = h;
        frame.format = PixelFormat::Rgb24;
        frame.data = (0..h).flat_map(|y| (0..w).flat_map(move |x| f(x, y))).collect();
        frame
    }

    #[test]
    fn opencv_taps_replicate_edges() {
        let mut t = Vec::new();
        taps(4, 2, &mut t); // downscale x2: centres at 0.5 and 2.5
        assert_eq!(t, vec![Tap { index: 0, w0: 1024, w1: 1024 }, Tap { index: 2, w0: 1024, w1: 1024 }]);
        taps(2, 4, &mut t); // upscale x2: -0.25 clamps to 0, 1.25 clamps to the last pixel
        assert_eq!(t[0], Tap { index: 0, w0: 2048, w1: 0 });
        assert_eq!(t[1], Tap { index: 0, w0: 1536, w1: 512 });
        assert_eq!(t[2], Tap { index: 0, w0: 512, w1: 1536 });
        assert_eq!(t[3], Tap { index: 1, w0: 2048, w1: 0 });
    }

    #[test]
    fn identity_size_copies_pixels_and_pads_with_114() {
        // 4x2 into 4x4: no resize, one padding row above and below.
        let frame = rgb_frame(4, 2, |x, y| [x as u8 * 10, y as u8 * 100, 7]);
        let mut out = vec![0.0; 3 * 16];
        let lb = CpuPreprocessor::new().run(&frame, Fit::Letterbox, 4, 4, &mut out).unwrap();
        assert_eq!((lb.top, lb.left, lb.new_w, lb.new_h), (1, 0, 4, 2));
        let at = |c: usize, x: usize, y: usize| (out[c * 16 + y * 4 + x] * 255.0).round() as u8;
        assert_eq!(at(0, 0, 0), 114);
        assert_eq!(at(1, 3, 3), 114);
        assert_eq!((at(0, 3, 1), at(1, 3, 1), at(2, 3, 1)), (30, 0, 7));
        assert_eq!((at(0, 2, 2), at(1, 2, 2)), (20, 100));
    }

    #[test]
    fn downscale_averages_neighbours() {
        let frame = rgb_frame(4, 4, |x, _| [if x % 2 == 0 { 0 } else { 200 }; 3]);
        let mut out = vec![0.0; 3 * 4];
        CpuPreprocessor::new().run(&frame, Fit::Letterbox, 2, 2, &mut out).unwrap();
        for v in &out {
            assert!((v * 255.0 - 100.0).abs() < 1e-3, "{v}");
        }
    }

    /// OpenCV's `INTER_LINEAR` taps, written from its source (`modules/imgproc/src/resize.cpp`,
    /// `resize`'s linear set-up: `fx = (float)((dx + 0.5) * scale_x - 0.5)`, `sx = cvFloor(fx)`,
    /// `fx -= sx`, clamped to the borders with `fx = 0`, then
    /// `saturate_cast<short>((1.f - fx) * INTER_RESIZE_COEF_SCALE)` and `fx * ...` with
    /// `INTER_RESIZE_COEF_SCALE = 2048`), not from [`taps`]: `(index, w0, w1)` per sample.
    fn opencv_taps(src: u32, dst: u32) -> Vec<(usize, i32, i32)> {
        let scale = src as f64 / dst as f64;
        (0..dst)
            .map(|dx| {
                let fx = ((dx as f64 + 0.5) * scale - 0.5) as f32;
                let sx = fx.floor() as i64;
                let (sx, fx) = if sx < 0 {
                    (0, 0.0)
                } else if sx >= src as i64 - 1 {
                    (src as i64 - 1, 0.0)
                } else {
                    (sx, fx - sx as f32)
                };
                // saturate_cast<short> rounds half to even (cvRound).
                let q = |w: f32| (w * 2048.0).round_ties_even() as i32;
                (sx as usize, q(1.0 - fx), q(fx))
            })
            .collect()
    }

    /// ultralytics' `LetterBox` geometry (`ultralytics/data/augment.py`): `r = min(h'/h, w'/w)`,
    /// `new_unpad = round(w r), round(h r)`, `left = round(dw - 0.1)`, `top = round(dh - 0.1)`
    /// with Python's round (half to even); not from [`Letterbox`]. `(new_w, new_h, left, top)`.
    fn ultralytics_letterbox(w: u32, h: u32, dw: u32, dh: u32) -> (u32, u32, u32, u32) {
        let r = (dh as f64 / h as f64).min(dw as f64 / w as f64);
        let (nw, nh) = ((w as f64 * r).round_ties_even(), (h as f64 * r).round_ties_even());
        let (pw, ph) = ((dw as f64 - nw) / 2.0, (dh as f64 - nh) / 2.0);
        (nw as u32, nh as u32, (pw - 0.1).round_ties_even() as u32, (ph - 0.1).round_ties_even() as u32)
    }

    /// The plain algorithm the fused one must equal, with its own geometry and taps: the whole
    /// frame to RGB24, then OpenCV's two passes per pixel (`INTER_RESIZE_COEF_BITS` fixed point,
    /// the vertical pass `((a >> 4) * b0 >> 16) + ((b >> 4) * b1 >> 16) + 2 >> 2`), padding 114
    /// first. The colour conversion is the one thing it shares with the code under test: it is
    /// checked against OpenCV through the NumPy/ultralytics references (tests/it/reference.rs).
    fn reference(frame: &Frame, dst_w: u32, dst_h: u32) -> Vec<f32> {
        let (new_w, new_h, left, top) = ultralytics_letterbox(frame.width, frame.height, dst_w, dst_h);
        let mut rgb = Vec::new();
        colour::to_rgb(frame, &mut rgb);
        let (xs, ys) = (opencv_taps(frame.width, new_w), opencv_taps(frame.height, new_h));
        let plane = (dst_w * dst_h) as usize;
        let mut out = vec![114.0 / 255.0; 3 * plane];
        let w = frame.width as usize;
        let hpass = |r: usize, &(index, w0, w1): &(usize, i32, i32), c: usize| {
            let i1 = if w1 != 0 { index + 1 } else { index };
            rgb[(r * w + index) * 3 + c] as i32 * w0 + rgb[(r * w + i1) * 3 + c] as i32 * w1
        };
        for (dy, ty) in ys.iter().enumerate() {
            let r1 = (ty.0 + 1).min(frame.height as usize - 1);
            for (dx, tx) in xs.iter().enumerate() {
                for c in 0..3 {
                    let (a, b) = (hpass(ty.0, tx, c), hpass(r1, tx, c));
                    let v = (((a >> 4) * ty.1) >> 16) + (((b >> 4) * ty.2) >> 16) + 2;
                    let o = (dy + top as usize) * dst_w as usize + dx + left as usize;
                    out[c * plane + o] = (v >> 2).clamp(0, 255) as f32 / 255.0;
                }
            }
        }
        out
    }

    #[test]
    fn fused_conversion_equals_converting_the_whole_frame_first() {
        use crate::frame::encode_rgb;
        let mut pre = CpuPreprocessor::new();
        // Downscales (sparse and dense columns), upscales, the model's own size, odd sizes, both bars.
        for (w, h, dw, dh) in [
            (64, 36, 16, 16),
            (64, 48, 40, 40),
            (30, 20, 64, 64),
            (32, 24, 32, 32),
            (32, 32, 32, 32),
            (22, 40, 20, 24),
            (90, 10, 40, 40),
        ] {
            let rgb: Vec<u8> = (0..w * h * 3).map(|i| ((i * 7919) % 256) as u8).collect(); // 0 and 255 included
            for format in PixelFormat::ALL {
                let mut frame = Frame::empty();
                encode_rgb(&rgb, w, h, format, &mut frame.data);
                (frame.width, frame.height, frame.format) = (w, h, format);
                let mut out = vec![-1.0; (3 * dw * dh) as usize];
                pre.run(&frame, Fit::Letterbox, dw, dh, &mut out).unwrap();
                let want = reference(&frame, dw, dh);
                let diff = out.iter().zip(&want).filter(|(a, b)| a != b).count();
                assert_eq!(diff, 0, "{format} {w}x{h} -> {dw}x{dh}: {diff} values differ");
            }
        }
    }

    #[test]
    fn bad_frames_and_tensors_are_errors() {
        let mut frame = rgb_frame(4, 4, |_, _| [0; 3]);
        let mut p = CpuPreprocessor::new();
        let e = p.run(&frame, Fit::Letterbox, 4, 4, &mut [0.0; 5]).unwrap_err().to_string();
        assert!(e.contains("needs 48"), "{e}");
        frame.data.truncate(10);
        let e = p.run(&frame, Fit::Letterbox, 4, 4, &mut [0.0; 48]).unwrap_err().to_string();
        assert!(e.contains("needs 48 bytes, got 10"), "{e}");
    }
}
