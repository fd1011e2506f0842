//! Letterbox preprocessing on the CPU.
//!
//! The frame is converted to RGB24 (skipped when it already is), then resized
//! with the same bilinear sampling as OpenCV's `INTER_LINEAR` (pixel centres
//! aligned, edge pixels replicated) straight into the normalised `f32` NCHW
//! planes, so no intermediate 8-bit resized image is rounded. Buffers and
//! sampling tables are kept between frames: in steady state nothing is allocated.

use super::{colour, Letterbox, PreprocessError, Preprocessor, PAD_VALUE};
use crate::frame::{Frame, PixelFormat};

/// For one output coordinate: the first source index and the weight of the next one.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tap {
    index: usize,
    frac: f32,
}

/// OpenCV `INTER_LINEAR` source positions for `dst` samples over `src` pixels.
fn taps(src: u32, dst: u32, out: &mut Vec<Tap>) {
    out.clear();
    let scale = src as f64 / dst as f64;
    for d in 0..dst {
        let f = (d as f64 + 0.5) * scale - 0.5;
        let mut i = f.floor();
        let mut frac = f - i;
        if i < 0.0 {
            i = 0.0;
            frac = 0.0;
        }
        if i >= (src - 1) as f64 {
            i = (src - 1) as f64;
            frac = 0.0;
        }
        out.push(Tap {
            index: i as usize,
            frac: frac as f32,
        });
    }
}

/// Letterboxes frames into model input tensors on the CPU.
#[derive(Default)]
pub struct CpuPreprocessor {
    rgb: Vec<u8>,
    xs: Vec<Tap>,
    ys: Vec<Tap>,
    geometry: Option<(u32, u32, u32, u32)>,
}

impl CpuPreprocessor {
    /// A preprocessor with empty buffers; they grow on the first frame.
    pub fn new() -> CpuPreprocessor {
        CpuPreprocessor::default()
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
            return Err(PreprocessError::BadOutput {
                got: out.len(),
                need,
                w: dst_w,
                h: dst_h,
            });
        }
        let lb = Letterbox::new(frame.width, frame.height, dst_w, dst_h);
        let geometry = (frame.width, frame.height, lb.new_w, lb.new_h);
        if self.geometry != Some(geometry) {
            taps(frame.width, lb.new_w, &mut self.xs);
            taps(frame.height, lb.new_h, &mut self.ys);
            self.geometry = Some(geometry);
        }
        let rgb: &[u8] = if frame.format == PixelFormat::Rgb24 {
            &frame.data
        } else {
            colour::to_rgb(frame, &mut self.rgb);
            &self.rgb
        };

        out.fill(PAD_VALUE as f32 / 255.0);
        let plane = dst_w as usize * dst_h as usize;
        let (r_plane, rest) = out.split_at_mut(plane);
        let (g_plane, b_plane) = rest.split_at_mut(plane);
        let stride = frame.width as usize * 3;
        let last_row = frame.height as usize - 1;
        let k = 1.0 / 255.0;
        for (dy, ty) in self.ys.iter().enumerate() {
            let row0 = &rgb[ty.index * stride..][..stride];
            let row1 = &rgb[(ty.index + 1).min(last_row) * stride..][..stride];
            let o = (dy + lb.top as usize) * dst_w as usize + lb.left as usize;
            let (r_out, g_out, b_out) = (
                &mut r_plane[o..o + self.xs.len()],
                &mut g_plane[o..o + self.xs.len()],
                &mut b_plane[o..o + self.xs.len()],
            );
            let wy = ty.frac;
            for (dx, tx) in self.xs.iter().enumerate() {
                let i0 = tx.index * 3;
                let i1 = if tx.frac > 0.0 { i0 + 3 } else { i0 };
                let wx = tx.frac;
                let mut px = [0f32; 3];
                for (c, p) in px.iter_mut().enumerate() {
                    let (a, b) = (row0[i0 + c] as f32, row0[i1 + c] as f32);
                    let (cc, d) = (row1[i0 + c] as f32, row1[i1 + c] as f32);
                    let top = a + (b - a) * wx;
                    let bottom = cc + (d - cc) * wx;
                    *p = (top + (bottom - top) * wy) * k;
                }
                r_out[dx] = px[0];
                g_out[dx] = px[1];
                b_out[dx] = px[2];
            }
        }
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
        frame.data = (0..h)
            .flat_map(|y| (0..w).flat_map(move |x| f(x, y)))
            .collect();
        frame
    }

    #[test]
    fn opencv_taps_replicate_edges() {
        let mut t = Vec::new();
        taps(4, 2, &mut t); // downscale x2: centres at 0.5 and 2.5
        assert_eq!(
            t,
            vec![
                Tap {
                    index: 0,
                    frac: 0.5
                },
                Tap {
                    index: 2,
                    frac: 0.5
                }
            ]
        );
        taps(2, 4, &mut t); // upscale x2: -0.25 clamps to 0, 1.25 clamps to the last pixel
        assert_eq!(
            t[0],
            Tap {
                index: 0,
                frac: 0.0
            }
        );
        assert_eq!(
            t[1],
            Tap {
                index: 0,
                frac: 0.25
            }
        );
        assert_eq!(
            t[2],
            Tap {
                index: 0,
                frac: 0.75
            }
        );
        assert_eq!(
            t[3],
            Tap {
                index: 1,
                frac: 0.0
            }
        );
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
