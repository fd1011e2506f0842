//! Letterbox preprocessing on the CPU.
//!
//! The frame is converted to RGB24 (skipped when it already is), then resized
//! exactly as OpenCV's `cv2.resize(..., INTER_LINEAR)` does for 8-bit images,
//! which is what ultralytics uses: pixel centres aligned, edge pixels
//! replicated, weights in 11-bit fixed point, and the rounding of OpenCV's
//! vectorised vertical pass. The model then sees the same values it saw in
//! training and validation, to the level. Results go straight into the
//! normalised `f32` NCHW planes. Buffers and sampling tables are kept between
//! frames: in steady state nothing is allocated.

use super::{colour, Letterbox, PreprocessError, Preprocessor, PAD_VALUE};
use crate::frame::{Frame, PixelFormat};

/// Fixed-point scale of the interpolation weights (OpenCV's `INTER_RESIZE_COEF_SCALE`).
pub const WEIGHT_ONE: i32 = 2048;
const ONE: i32 = WEIGHT_ONE;

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
    rgb: Vec<u8>,
    xs: Vec<Tap>,
    ys: Vec<Tap>,
    /// Two horizontally resized rows (`new_w * 3` values each, scaled by [`ONE`]).
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

    /// Makes `rows[slot]` hold source row `r`, horizontally resized. Slot 0 is
    /// loaded first for each output row, so a row moving from slot 1 to slot 0
    /// is swapped, not recomputed.
    fn load_row(&mut self, slot: usize, r: usize, rgb: &[u8], stride: usize) {
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
                b[0].clone_from(&a[0]);
                self.row_ids[1] = Some(r);
            }
            return;
        }
        let src = &rgb[r * stride..][..stride];
        let dst = &mut self.rows[slot];
        dst.resize(self.xs.len() * 3, 0);
        for (d, t) in dst.chunks_exact_mut(3).zip(&self.xs) {
            let i0 = t.index * 3;
            let i1 = if t.w1 != 0 { i0 + 3 } else { i0 };
            for c in 0..3 {
                d[c] = src[i0 + c] as i32 * t.w0 + src[i1 + c] as i32 * t.w1;
            }
        }
        self.row_ids[slot] = Some(r);
    }
}

impl Preprocessor for CpuPreprocessor {
    fn run(
        &mut self,
        frame: &Frame,
        dst_w: u32,
        dst_h: u32,
        out: &mut [f32],
    ) -> Result<Letterbox, PreprocessError> {
        frame.check_len().map_err(PreprocessError::BadFrame)?;
        let need = 3 * dst_w as usize * dst_h as usize;
        if out.len() != need {
            return Err(PreprocessError::BadOutput { got: out.len(), need, w: dst_w, h: dst_h });
        }
        let lb = Letterbox::new(frame.width, frame.height, dst_w, dst_h);
        let geometry = (frame.width, frame.height, lb.new_w, lb.new_h);
        if self.geometry != Some(geometry) {
            taps(frame.width, lb.new_w, &mut self.xs);
            taps(frame.height, lb.new_h, &mut self.ys);
            self.geometry = Some(geometry);
        }
        self.row_ids = [None, None];
        let mut rgb = std::mem::take(&mut self.rgb);
        let pixels: &[u8] = if frame.format == PixelFormat::Rgb24 {
            &frame.data
        } else {
            colour::to_rgb(frame, &mut rgb);
            &rgb
        };

        out.fill(PAD_VALUE as f32 / 255.0);
        let plane = dst_w as usize * dst_h as usize;
        let stride = frame.width as usize * 3;
        let last_row = frame.height as usize - 1;
        let lut: [f32; 256] = std::array::from_fn(|v| v as f32 / 255.0);
        for dy in 0..self.ys.len() {
            let ty = self.ys[dy];
            self.load_row(0, ty.index, pixels, stride);
            self.load_row(1, (ty.index + 1).min(last_row), pixels, stride);
            let (r0, r1) = (&self.rows[0], &self.rows[1]);
            let o = (dy + lb.top as usize) * dst_w as usize + lb.left as usize;
            for (dx, (a, b)) in r0.chunks_exact(3).zip(r1.chunks_exact(3)).enumerate() {
                for c in 0..3 {
                    // OpenCV's vectorised vertical pass (VResizeLinearVec_32s8u).
                    let v = (((a[c] >> 4) * ty.w0) >> 16) + (((b[c] >> 4) * ty.w1) >> 16) + 2;
                    out[c * plane + o + dx] = lut[(v >> 2).clamp(0, 255) as usize];
                }
            }
        }
        self.rgb = rgb;
        Ok(lb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let lb = CpuPreprocessor::new().run(&frame, 4, 4, &mut out).unwrap();
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
        CpuPreprocessor::new().run(&frame, 2, 2, &mut out).unwrap();
        for v in &out {
            assert!((v * 255.0 - 100.0).abs() < 1e-3, "{v}");
        }
    }

    #[test]
    fn bad_frames_and_tensors_are_errors() {
        let mut frame = rgb_frame(4, 4, |_, _| [0; 3]);
        let mut p = CpuPreprocessor::new();
        let e = p.run(&frame, 4, 4, &mut [0.0; 5]).unwrap_err().to_string();
        assert!(e.contains("needs 48"), "{e}");
        frame.data.truncate(10);
        let e = p.run(&frame, 4, 4, &mut [0.0; 48]).unwrap_err().to_string();
        assert!(e.contains("needs 48 bytes, got 10"), "{e}");
    }
}
