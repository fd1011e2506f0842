//! Frame -> model input: colour conversion, letterbox resize, normalisation.
//!
//! The output is what YOLO models exported by ultralytics expect: RGB, `f32` in
//! `0..=1`, NCHW, the frame scaled to fit the input with its aspect ratio kept
//! and the borders filled with grey 114/255 ([`Letterbox`] has the exact
//! arithmetic). The CPU implementation lives in [`cpu`]; an accelerator
//! implementation is another type implementing [`Preprocessor`].

pub mod colour;
pub mod cpu;
pub mod graph;
pub mod simd;

use serde::{Deserialize, Serialize};

use crate::frame::Frame;
pub use cpu::CpuPreprocessor;

/// `[preprocess]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PreprocessConfig {
    /// Where preprocessing runs: `cpu`, or `gpu` / `dla` (a generated ONNX
    /// graph run by the ONNX Runtime engine's providers, DLA through TensorRT).
    pub device: Device,
}

impl Default for PreprocessConfig {
    fn default() -> Self {
        PreprocessConfig { device: Device::Cpu }
    }
}

named_enum! {
    /// `[preprocess] device` and `--preprocess`: where preprocessing runs.
    pub enum Device {
        /// On the CPU ([`CpuPreprocessor`]).
        Cpu = "cpu",
        /// A generated ONNX graph ([`graph`]) run by the engine on its GPU.
        Gpu = "gpu",
        /// The DLA form of that graph, run on a DLA core through TensorRT.
        Dla = "dla",
    }
}

impl std::str::FromStr for Device {
    type Err = crate::named::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| {
            crate::named::UnknownName::new(
                "[preprocess] device: ",
                s,
                " is not a device",
                r#""cpu", "gpu" or "dla""#,
            )
        })
    }
}

/// Grey used for the letterbox borders, as in ultralytics (114 of 255).
pub const PAD_VALUE: u8 = 114;

/// How a frame is fitted into the model input: as the model's authors fitted it when they
/// validated it (the layout decides: [`crate::yolo::Layout::fit`]; no config names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// Scaled to fit with its aspect ratio kept, centred, the rest grey: ultralytics'
    /// `LetterBox` for YOLO models.
    Letterbox,
    /// Scaled to the input's width and height, each axis on its own, no border: ultralytics'
    /// `LetterBox(scale_fill=True)`, which its RT-DETR predictor uses.
    Stretch,
}

/// How a source frame was placed into the model input, so that boxes can be
/// mapped back. Same arithmetic as ultralytics' `LetterBox` + `scale_boxes`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Letterbox {
    /// Source frame width in pixels.
    pub src_w: u32,
    /// Source frame height in pixels.
    pub src_h: u32,
    /// Model input width.
    pub dst_w: u32,
    /// Model input height.
    pub dst_h: u32,
    /// Horizontal gain from source to model pixels: `min(dst_w / src_w, dst_h / src_h)` for a
    /// letterbox, `dst_w / src_w` stretched.
    pub scale_x: f32,
    /// Vertical gain: the same as `scale_x` for a letterbox, `dst_h / src_h` stretched.
    pub scale_y: f32,
    /// Width of the resized frame inside the input.
    pub new_w: u32,
    /// Height of the resized frame inside the input.
    pub new_h: u32,
    /// Columns of padding left of the frame.
    pub left: u32,
    /// Rows of padding above the frame.
    pub top: u32,
}

impl Letterbox {
    /// Places a `src_w` x `src_h` frame into a `dst_w` x `dst_h` input, centred.
    pub fn new(src_w: u32, src_h: u32, dst_w: u32, dst_h: u32) -> Letterbox {
        let scale = (dst_h as f32 / src_h as f32).min(dst_w as f32 / src_w as f32);
        // Python's round() rounds half to even; match it exactly.
        let new_w = ((src_w as f32 * scale).round_ties_even() as u32).clamp(1, dst_w);
        let new_h = ((src_h as f32 * scale).round_ties_even() as u32).clamp(1, dst_h);
        let dw = (dst_w - new_w) as f32 / 2.0;
        let dh = (dst_h - new_h) as f32 / 2.0;
        let left = (dw - 0.1).round_ties_even().max(0.0) as u32;
        let top = (dh - 0.1).round_ties_even().max(0.0) as u32;
        Letterbox { src_w, src_h, dst_w, dst_h, scale_x: scale, scale_y: scale, new_w, new_h, left, top }
    }

    /// Stretches a `src_w` x `src_h` frame over a `dst_w` x `dst_h` input.
    pub fn stretched(src_w: u32, src_h: u32, dst_w: u32, dst_h: u32) -> Letterbox {
        let (scale_x, scale_y) = (dst_w as f32 / src_w as f32, dst_h as f32 / src_h as f32);
        Letterbox {
            src_w,
            src_h,
            dst_w,
            dst_h,
            scale_x,
            scale_y,
            new_w: dst_w,
            new_h: dst_h,
            left: 0,
            top: 0,
        }
    }

    /// Places a frame as `fit` says.
    pub fn fit(fit: Fit, src_w: u32, src_h: u32, dst_w: u32, dst_h: u32) -> Letterbox {
        match fit {
            Fit::Letterbox => Letterbox::new(src_w, src_h, dst_w, dst_h),
            Fit::Stretch => Letterbox::stretched(src_w, src_h, dst_w, dst_h),
        }
    }

    /// Maps a point in model-input pixels back to source pixels, clipped to the frame.
    pub fn to_source(&self, x: f32, y: f32) -> (f32, f32) {
        let sx = (x - self.left as f32) / self.scale_x;
        let sy = (y - self.top as f32) / self.scale_y;
        (sx.clamp(0.0, self.src_w as f32), sy.clamp(0.0, self.src_h as f32))
    }
}

/// Why a frame could not be preprocessed.
#[derive(Debug, thiserror::Error)]
pub enum PreprocessError {
    /// The frame's bytes do not match its declared geometry and format.
    #[error("bad frame: {0}")]
    BadFrame(#[from] crate::frame::FrameError),
    /// The output tensor does not have the size the model input needs.
    #[error("output tensor has {got} values, the model input {w}x{h} needs {need}")]
    BadOutput {
        /// Values in the given tensor.
        got: usize,
        /// Values needed.
        need: usize,
        /// Input width.
        w: u32,
        /// Input height.
        h: u32,
    },
}

/// Turns frames into model input tensors.
pub trait Preprocessor: Send {
    /// Writes `frame`, placed as `fit` says, into `out` (`3 * dst_w * dst_h` values, NCHW)
    /// and returns the placement.
    fn run(
        &mut self,
        frame: &Frame,
        fit: Fit,
        dst_w: u32,
        dst_h: u32,
        out: &mut [f32],
    ) -> Result<Letterbox, PreprocessError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letterbox_matches_ultralytics_arithmetic() {
        // 640x480 -> 320x320: gain 0.5, 320x240 frame, 40 rows of padding on top.
        let lb = Letterbox::new(640, 480, 320, 320);
        assert_eq!((lb.new_w, lb.new_h, lb.left, lb.top), (320, 240, 0, 40));
        // 810x1080 (bus.jpg) -> 640x640: gain 0.5926, 480x640, left pad 80.
        let lb = Letterbox::new(810, 1080, 640, 640);
        assert_eq!((lb.new_w, lb.new_h, lb.left, lb.top), (480, 640, 80, 0));
        // Odd padding: 100x51 -> 64x64 -> 64x33 (32.64 rounds to 33), dh = 15.5 -> top 15.
        let lb = Letterbox::new(100, 51, 64, 64);
        assert_eq!((lb.new_w, lb.new_h, lb.left, lb.top), (64, 33, 0, 15));
        // Upscaling is allowed, as in ultralytics' default.
        let lb = Letterbox::new(160, 120, 320, 320);
        assert_eq!((lb.new_w, lb.new_h, lb.top), (320, 240, 40));
    }

    #[test]
    fn a_stretched_frame_fills_the_input_and_maps_back_per_axis() {
        // ultralytics' LetterBox(scale_fill=True): 640x480 -> 320x320, gains 0.5 and 2/3, no border.
        let lb = Letterbox::fit(Fit::Stretch, 640, 480, 320, 320);
        assert_eq!((lb.new_w, lb.new_h, lb.left, lb.top), (320, 320, 0, 0));
        assert_eq!(lb.to_source(160.0, 160.0), (320.0, 240.0));
        assert_eq!(lb.to_source(32.0, 32.0), (64.0, 48.0));
        assert_eq!(Letterbox::fit(Fit::Letterbox, 640, 480, 320, 320), Letterbox::new(640, 480, 320, 320));
    }

    #[test]
    fn points_map_back_to_source_and_clip() {
        let lb = Letterbox::new(640, 480, 320, 320);
        assert_eq!(lb.to_source(160.0, 160.0), (320.0, 240.0));
        assert_eq!(lb.to_source(0.0, 0.0), (0.0, 0.0)); // inside the padding: clipped
        assert_eq!(lb.to_source(400.0, 400.0), (640.0, 480.0));
    }
}
