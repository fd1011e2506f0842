//! The preprocessing as an ONNX graph, for accelerators.
//!
//! [`build`] writes, for one frame geometry and pixel format, a graph that takes
//! the frame's raw bytes (`uint8`) and returns the letterboxed, normalised
//! `f32` NCHW model input: the same arithmetic as [`super::cpu`], expressed in
//! operators every ONNX Runtime provider and TensorRT on the GPU can run, so the
//! CPU only hands over bytes. It is not a DLA graph: its `uint8` input, `Gather`,
//! `Cast`, `Floor` and `Pad` are not DLA layers (TensorRT's DLA layer table), so
//! TensorRT places them on the GPU even when a DLA core is asked for.
//!
//! The graph reproduces the CPU path step by step rather than approximating
//! it: BT.601 conversion rounded to 8 bits, then OpenCV's `INTER_LINEAR` with
//! the very sampling taps and 11-bit weights of [`super::cpu`] (gathered, not
//! re-derived by a `Resize` operator) and OpenCV's truncating vertical pass.
//! Intermediate values stay integers or multiples of 1/2048 below 2^24, which
//! `f32` holds exactly, so in FP32 the result matches the CPU bit for bit except
//! where a product needs more than 24 bits, which moves a value by one level at
//! most. FP16 is another matter: the weighted sums reach 32640, which FP16 can
//! represent, but FP16 holds integers exactly only up to 2048 (above that its
//! steps are 2, 4, ... up to 32), so in FP16 the sums are rounded and the output
//! moves by more than a level; run this graph in FP32.

use prost::Message;
use tract_onnx::pb;

use super::{cpu, Fit, Letterbox, PAD_VALUE};
use crate::frame::PixelFormat;

/// ONNX opset the graph is written for (Unsqueeze/Slice/Pad with tensor inputs).
pub const OPSET: i64 = 13;
/// Name of the graph's input: the frame bytes.
pub const INPUT: &str = "frame";
/// Name of the graph's output: the model input tensor.
pub const OUTPUT: &str = "images";

/// A generated preprocessing graph and its interface.
#[derive(Clone, Debug)]
pub struct PreprocessGraph {
    /// The serialised ONNX model.
    pub onnx: Vec<u8>,
    /// Shape of the `uint8` input [`INPUT`] (frame bytes, see [`input_shape`]).
    pub input_shape: Vec<usize>,
    /// Shape of the `f32` output [`OUTPUT`]: `[1, 3, dst_h, dst_w]`.
    pub output_shape: [usize; 4],
    /// Where the frame lands in the output.
    pub letterbox: Letterbox,
}

/// The shape a frame's bytes are given to the graph in: `[H, W, 3]` for RGB/BGR,
/// `[H, W]` for GREY, `[H, 2W]` for YUYV/UYVY, `[3H/2, W]` for NV12.
pub fn input_shape(format: PixelFormat, width: u32, height: u32) -> Vec<usize> {
    let (w, h) = (width as usize, height as usize);
    match format {
        PixelFormat::Rgb24 | PixelFormat::Bgr24 => vec![h, w, 3],
        PixelFormat::Grey => vec![h, w],
        PixelFormat::Yuyv | PixelFormat::Uyvy => vec![h, w * 2],
        PixelFormat::Nv12 => vec![h * 3 / 2, w],
    }
}

/// A geometry the preprocessing graph cannot be built for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// A frame size the pixel format cannot have, or an empty model input.
    #[error(
        "no preprocessing graph for {width}x{height} {format} into {}x{}: \
         4:2:2 needs an even width, 4:2:0 even width and height",
        dst.0, dst.1
    )]
    Geometry {
        /// The frames' format.
        format: PixelFormat,
        /// Frame width.
        width: u32,
        /// Frame height.
        height: u32,
        /// The model input `(width, height)`.
        dst: (u32, u32),
    },
    /// A letterbox resize that no fixed DLA convolution does.
    #[error(
        "[preprocess] device = \"dla\": {width}x{height} frames letterboxed into {}x{} are \
         resized to {}x{}, and that resize weighs its source pixels differently from pixel to pixel, \
         which no fixed DLA convolution does: the DLA form needs each side to stay or shrink by a \
         whole factor (for this model e.g. {}x{} or {}x{} frames). Use a camera mode of such a size, \
         or [preprocess] device = \"gpu\"",
        dst.0, dst.1, resized.0, resized.1, resized.0 * 2, resized.1 * 2, resized.0 * 3, resized.1 * 3
    )]
    DlaResize {
        /// Frame width.
        width: u32,
        /// Frame height.
        height: u32,
        /// The model input `(width, height)`.
        dst: (u32, u32),
        /// The letterboxed picture's size inside it.
        resized: (u32, u32),
    },
}

/// Builds the graph turning `width` x `height` frames of `format` into a
/// `dst_w` x `dst_h` model input.
pub fn build(
    format: PixelFormat,
    width: u32,
    height: u32,
    fit: Fit,
    dst_w: u32,
    dst_h: u32,
) -> Result<PreprocessGraph, GraphError> {
    if format.frame_len(width, height).is_none() || dst_w == 0 || dst_h == 0 {
        return Err(GraphError::Geometry { format, width, height, dst: (dst_w, dst_h) });
    }
    let lb = Letterbox::fit(fit, width, height, dst_w, dst_h);
    let mut g = Graph::default();
    let shape = input_shape(format, width, height);
    let (w, h) = (width as i64, height as i64);
    let rows = Axis::new(height, lb.new_h);
    let cols = Axis::new(width, lb.new_w);
    // Only the rows and columns the resize reads are converted: conversion is per
    // pixel and the horizontal pass per row, so selecting first changes no value.
    let row_sel = rows.selection().map(|r| g.const_i64(&r, &[r.len() as i64]));
    let col_sel = cols.selection().map(|c| g.const_i64(&c, &[c.len() as i64]));
    let r = rows.lines.len() as i64;
    let raw = g.node("Cast", &[INPUT], vec![attr_int("to", pb::tensor_proto::DataType::Float as i64)]);
    // Pixels as [rows, cols, C] floats holding integers 0..=255, C = 1 (grey) or 3 (RGB).
    let (pixels, channels) = match format {
        PixelFormat::Rgb24 | PixelFormat::Bgr24 => {
            let x = g.select(&raw, row_sel.as_deref(), 0);
            let x = g.select(&x, col_sel.as_deref(), 1);
            if format == PixelFormat::Bgr24 {
                let order = g.const_i64(&[2, 1, 0], &[3]);
                (g.node("Gather", &[&x, &order], vec![attr_int("axis", 2)]), 3)
            } else {
                (x, 3)
            }
        }
        PixelFormat::Grey => {
            let x = g.select(&raw, row_sel.as_deref(), 0);
            let x = g.select(&x, col_sel.as_deref(), 1);
            (g.unsqueeze(&x, 2), 1)
        }
        PixelFormat::Yuyv | PixelFormat::Uyvy => {
            // [rows, 2W] -> [rows, W/2, 4] macropixels; the two lumas interleave back to [rows, W, 1].
            let x = g.select(&raw, row_sel.as_deref(), 0);
            let quads = g.reshape(&x, &[r, w / 2, 4]);
            let pick = |g: &mut Graph, k: i64| g.slice(&quads, k, k + 1, 2);
            let (y0, u, y1, v) = if format == PixelFormat::Yuyv {
                (pick(&mut g, 0), pick(&mut g, 1), pick(&mut g, 2), pick(&mut g, 3))
            } else {
                (pick(&mut g, 1), pick(&mut g, 0), pick(&mut g, 3), pick(&mut g, 2))
            };
            let mut planes = Vec::new();
            for (a, b) in [(&y0, &y1), (&u, &u), (&v, &v)] {
                let plane = g.node("Concat", &[a, b], vec![attr_int("axis", 2)]);
                let plane = g.reshape(&plane, &[r, w, 1]);
                planes.push(g.select(&plane, col_sel.as_deref(), 1));
            }
            (g.yuv_to_rgb(&planes[0], &planes[1], &planes[2]), 3)
        }
        PixelFormat::Nv12 => {
            // Luma rows, and for each the chroma row [W/2 x (U, V)] that covers it.
            let luma_rows: Vec<i64> = rows.lines.clone();
            let chroma_rows: Vec<i64> = rows.lines.iter().map(|y| h + y / 2).collect();
            let y = match &row_sel {
                Some(sel) => g.node("Gather", &[&raw, sel], vec![attr_int("axis", 0)]),
                None => g.slice(&raw, 0, h, 0),
            };
            debug_assert_eq!(luma_rows.len() as i64, r);
            let c = g.const_i64(&chroma_rows, &[r]);
            let uv = g.node("Gather", &[&raw, &c], vec![attr_int("axis", 0)]);
            let uv = g.reshape(&uv, &[r, w / 2, 2]);
            let mut planes = vec![g.unsqueeze(&y, 2)];
            for k in 0..2 {
                let half = g.slice(&uv, k, k + 1, 2);
                let full = g.node("Concat", &[&half, &half], vec![attr_int("axis", 2)]);
                planes.push(g.reshape(&full, &[r, w, 1]));
            }
            for p in &mut planes {
                *p = g.select(p, col_sel.as_deref(), 1);
            }
            (g.yuv_to_rgb(&planes[0], &planes[1], &planes[2]), 3)
        }
    };
    let resized = g.resize(&pixels, &rows, &cols);
    // [nh, nw, C] -> [C, nh, nw] -> 3 planes -> /255 -> letterbox borders.
    let planes = g.node("Transpose", &[&resized], vec![attr_ints("perm", &[2, 0, 1])]);
    let planes = if channels == 1 {
        let to = g.const_i64(&[3, lb.new_h as i64, lb.new_w as i64], &[3]);
        g.node("Expand", &[&planes, &to], vec![])
    } else {
        planes
    };
    let scale = g.const_f32(&[255.0], &[]);
    let normalised = g.node("Div", &[&planes, &scale], vec![]);
    let (bottom, right) = (dst_h - lb.new_h - lb.top, dst_w - lb.new_w - lb.left);
    let pads = g.const_i64(&[0, lb.top as i64, lb.left as i64, 0, bottom as i64, right as i64], &[6]);
    let fill = g.const_f32(&[PAD_VALUE as f32 / 255.0], &[]);
    let padded = g.node("Pad", &[&normalised, &pads, &fill], vec![]);
    let output_shape = [1, 3, dst_h as usize, dst_w as usize];
    let shape4 = g.const_i64(&output_shape.map(|d| d as i64), &[4]);
    g.nodes.push(node("Reshape", &[&padded, &shape4], &[OUTPUT], vec![]));

    let description = format!(
        "jetdetect preprocessing: {width}x{height} {format} -> letterbox {}x{} at ({}, {}) in \
         {dst_w}x{dst_h}, RGB f32 NCHW /255, pad {PAD_VALUE}",
        lb.new_w, lb.new_h, lb.left, lb.top
    );
    let model = g.finish(&shape, output_shape, description);
    Ok(PreprocessGraph { onnx: model.encode_to_vec(), input_shape: shape, output_shape, letterbox: lb })
}

/// Arithmetic of the DLA form: FP16 for TensorRT (the DLA computes nothing
/// else), FP32 to run the very same graph on the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// FP16: what TensorRT builds for the DLA.
    Half,
    /// FP32: the same layers, for checking on the CPU.
    Float,
}

/// One axis of the DLA form's resize: for each output line the source lines
/// it reads (one or two), with one pair of weights for all lines, so that the
/// weighting is a fixed convolution.
struct FixedAxis {
    /// Source lines read per output line (1 or 2): the kernel size on this axis.
    taps: usize,
    /// Weight of each tap.
    weights: [f32; 2],
    /// For each output line, its taps' source lines.
    lines: Vec<[usize; 2]>,
}

impl FixedAxis {
    /// OpenCV's `INTER_LINEAR` taps from `src` lines to `dst`, if every output
    /// line weighs its source lines alike: the size stays, or shrinks by a
    /// whole factor (1/3: one line each; 1/2, 1/4: two lines at one half each).
    fn new(src: u32, dst: u32) -> Option<FixedAxis> {
        let mut taps = Vec::new();
        cpu::taps(src, dst, &mut taps);
        let first = taps.first()?;
        let (w0, w1) = (first.w0, first.w1);
        if taps.iter().any(|t| (t.w0, t.w1) != (w0, w1)) {
            return None;
        }
        let one = cpu::WEIGHT_ONE as f32;
        let lines = taps.iter().map(|t| [t.index, t.index + usize::from(w1 != 0)]).collect();
        Some(FixedAxis {
            taps: if w1 == 0 { 1 } else { 2 },
            weights: [w0 as f32 / one, w1 as f32 / one],
            lines,
        })
    }
}

/// Builds the DLA form of the graph for `width` x `height` frames of `format`
/// into a `dst_w` x `dst_h` model input.
///
/// Only data movement runs on the GPU: the bytes are cast to FP16 and
/// gathered into the planes the DLA reads, `[1, K, kh * dst_h, kw * dst_w]`
/// (K = 3 components, or 1 for GREY; for each output pixel its `kh` x `kw`
/// source samples side by side; the letterbox border reads a pad sample).
/// The arithmetic is DLA layers. YUV: a Scale (luma - 16) and a ReLU (the
/// black clamp), a 1x1 convolution that converts the colour (BT.601, the
/// matrix of [`super::colour`]) and normalises (/255), and a Clip to 0..=1,
/// all per source sample as the CPU path does; then a depthwise convolution
/// with kernel = stride = `kh` x `kw` resizes (left out where nothing is
/// averaged). RGB and GREY: one convolution that resizes, orders the channels
/// and normalises. [`crate::engine::dla`] checks every layer against
/// TensorRT's DLA table.
///
/// The weights of a convolution are the same everywhere, so the resize must
/// be one the same weights do: each axis keeps its size or shrinks by a
/// whole factor (640x480, 1280x720, 1920x1080 into 640x640). Other sizes are
/// an error that says so.
pub fn build_dla(
    format: PixelFormat,
    width: u32,
    height: u32,
    fit: Fit,
    dst_w: u32,
    dst_h: u32,
    precision: Precision,
) -> Result<PreprocessGraph, GraphError> {
    use pb::tensor_proto::DataType;
    if format.frame_len(width, height).is_none() || dst_w == 0 || dst_h == 0 {
        return Err(GraphError::Geometry { format, width, height, dst: (dst_w, dst_h) });
    }
    let lb = Letterbox::fit(fit, width, height, dst_w, dst_h);
    let (Some(rows), Some(cols)) = (FixedAxis::new(height, lb.new_h), FixedAxis::new(width, lb.new_w)) else {
        return Err(GraphError::DlaResize {
            width,
            height,
            dst: (dst_w, dst_h),
            resized: (lb.new_w, lb.new_h),
        });
    };
    let elem = match precision {
        Precision::Half => DataType::Float16,
        Precision::Float => DataType::Float,
    };
    let (w, h) = (width as usize, height as usize);
    let yuv = matches!(format, PixelFormat::Yuyv | PixelFormat::Uyvy | PixelFormat::Nv12);
    let k = if format == PixelFormat::Grey { 1 } else { 3 };
    // The frame as a 2-D byte array, and where component `c` of pixel (x, y) is in it.
    let (raw_rows, raw_cols) = match format {
        PixelFormat::Rgb24 | PixelFormat::Bgr24 => (h, 3 * w),
        PixelFormat::Grey => (h, w),
        PixelFormat::Yuyv | PixelFormat::Uyvy => (h, 2 * w),
        PixelFormat::Nv12 => (h * 3 / 2, w),
    };
    let row_of = |c: usize, y: usize| if format == PixelFormat::Nv12 && c > 0 { h + y / 2 } else { y };
    let col_of = |c: usize, x: usize| match format {
        PixelFormat::Rgb24 => 3 * x + c,
        PixelFormat::Bgr24 => 3 * x + 2 - c,
        PixelFormat::Grey => x,
        PixelFormat::Yuyv => [2 * x, 4 * (x / 2) + 1, 4 * (x / 2) + 3][c],
        PixelFormat::Uyvy => [2 * x + 1, 4 * (x / 2), 4 * (x / 2) + 2][c],
        PixelFormat::Nv12 => [x, 2 * (x / 2), 2 * (x / 2) + 1][c],
    };
    let (cy, crv, cgu, cgv, cbu) = super::colour::COEFFICIENTS;
    let f = |c: i32| c as f32 / (1 << 20) as f32;
    let pad = PAD_VALUE as f32;
    // The border's sample, per component: what the layers below turn into PAD_VALUE.
    let pads: Vec<f32> = if yuv { vec![16.0 + pad / f(cy), 128.0, 128.0] } else { vec![pad; k] };

    let mut g = Graph { stage: "unpack/", ..Graph::default() };
    let shape = input_shape(format, width, height);
    let raw = g.node("Cast", &[INPUT], vec![attr_int("to", elem as i64)]);
    let raw = g.reshape(&raw, &[raw_rows as i64, raw_cols as i64]);
    // One extra column and one extra row per component, holding its pad sample.
    let pad_cols: Vec<f32> = (0..raw_rows).flat_map(|_| pads.iter().copied()).collect();
    let pad_cols = g.const_float(&pad_cols, &[raw_rows as i64, k as i64], elem);
    let ext = g.node("Concat", &[&raw, &pad_cols], vec![attr_int("axis", 1)]);
    let pad_rows: Vec<f32> = pads.iter().flat_map(|&p| std::iter::repeat_n(p, raw_cols + k)).collect();
    let pad_rows = g.const_float(&pad_rows, &[k as i64, (raw_cols + k) as i64], elem);
    let ext = g.node("Concat", &[&ext, &pad_rows], vec![attr_int("axis", 0)]);
    // Per component, the samples of every output pixel's taps: [kh * dst_h, kw * dst_w].
    let (top, left) = (lb.top as usize, lb.left as usize);
    let (new_h, new_w) = (lb.new_h as usize, lb.new_w as usize);
    let mut planes = Vec::new();
    let mut row_gathers: Vec<(Vec<i64>, String)> = Vec::new();
    for c in 0..k {
        let row_index: Vec<i64> = (0..dst_h as usize)
            .flat_map(|y| {
                let line = (y >= top && y < top + new_h).then(|| rows.lines[y - top]);
                (0..rows.taps).map(move |t| match line {
                    Some(l) => row_of(c, l[t]) as i64,
                    None => (raw_rows + c) as i64,
                })
            })
            .collect();
        let col_index: Vec<i64> = (0..dst_w as usize)
            .flat_map(|x| {
                let line = (x >= left && x < left + new_w).then(|| cols.lines[x - left]);
                (0..cols.taps).map(move |t| match line {
                    Some(l) => col_of(c, l[t]) as i64,
                    None => (raw_cols + c) as i64,
                })
            })
            .collect();
        let by_rows = match row_gathers.iter().find(|(index, _)| *index == row_index) {
            Some((_, name)) => name.clone(),
            None => {
                let i = g.const_i64(&row_index, &[row_index.len() as i64]);
                let name = g.node("Gather", &[&ext, &i], vec![attr_int("axis", 0)]);
                row_gathers.push((row_index, name.clone()));
                name
            }
        };
        let i = g.const_i64(&col_index, &[col_index.len() as i64]);
        let plane = g.node("Gather", &[&by_rows, &i], vec![attr_int("axis", 1)]);
        planes.push(g.unsqueeze(&plane, 0));
    }
    let planes: Vec<&str> = planes.iter().map(String::as_str).collect();
    let stacked =
        if k > 1 { g.node("Concat", &planes, vec![attr_int("axis", 0)]) } else { planes[0].to_string() };
    let samples = g.unsqueeze(&stacked, 0);
    let sampled = [1, k, rows.taps * dst_h as usize, cols.taps * dst_w as usize];
    g.shape(&samples, elem, &sampled);

    g.stage = "dla/";
    let mut x = samples;
    if yuv {
        // Scale (a constant BatchNormalization is TensorRT's Scale layer): luma - 16; then the
        // black clamp max(luma - 16, 0) as a ReLU (chroma is 0..=255, so ReLU leaves it).
        let ones = g.const_float(&[1.0; 3], &[3], elem);
        let zeros = g.const_float(&[0.0; 3], &[3], elem);
        let shift = g.const_float(&[-16.0, 0.0, 0.0], &[3], elem);
        let eps = pb::AttributeProto {
            name: "epsilon".into(),
            r#type: pb::attribute_proto::AttributeType::Float as i32,
            f: 0.0,
            ..Default::default()
        };
        x = g.node("BatchNormalization", &[&x, &ones, &shift, &zeros, &ones], vec![eps]);
        g.shape(&x, elem, &sampled);
        x = g.node("Relu", &[&x], vec![]);
        g.shape(&x, elem, &sampled);
    }
    // Colour matrix (rows R, G, B), in 8-bit levels.
    let matrix: Vec<[f32; 3]> = match format {
        _ if yuv => vec![[f(cy), 0.0, f(crv)], [f(cy), -f(cgu), -f(cgv)], [f(cy), f(cbu), 0.0]],
        PixelFormat::Grey => vec![[1.0, 0.0, 0.0]; 3],
        _ => vec![[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    };
    let (kh, kw) = (rows.taps, cols.taps);
    let output_shape = [1, 3, dst_h as usize, dst_w as usize];
    let conv_attrs = |k: (usize, usize), groups: usize| {
        let mut a = vec![
            attr_ints("kernel_shape", &[k.0 as i64, k.1 as i64]),
            attr_ints("strides", &[k.0 as i64, k.1 as i64]),
        ];
        if groups > 1 {
            a.push(attr_int("group", groups as i64));
        }
        a
    };
    if yuv {
        // YUV -> RGB per source sample (a 1x1 convolution), clamped to the RGB cube there, as
        // the CPU path clamps each pixel before it resizes: a colour outside the cube (chroma
        // shared across an edge) clamped after the resize would move the result by up to 16
        // levels (measured on the test frames). Then the resize, a depthwise convolution.
        let mut weights = Vec::with_capacity(9);
        let mut bias = Vec::with_capacity(3);
        for m in &matrix {
            weights.extend(m.iter().map(|c| c / 255.0));
            bias.push(-(m[1] + m[2]) * 128.0 / 255.0);
        }
        let weights = g.const_float(&weights, &[3, 3, 1, 1], elem);
        let bias = g.const_float(&bias, &[3], elem);
        x = g.node("Conv", &[&x, &weights, &bias], conv_attrs((1, 1), 1));
        g.shape(&x, elem, &sampled);
        let (lo, hi) = (g.const_float(&[0.0], &[], elem), g.const_float(&[1.0], &[], elem));
        x = g.node("Clip", &[&x, &lo, &hi], vec![]);
        g.shape(&x, elem, &sampled);
        if kh * kw > 1 {
            let mut weights = Vec::with_capacity(3 * kh * kw);
            for _ in 0..3 {
                for wy in &rows.weights[..kh] {
                    weights.extend(cols.weights[..kw].iter().map(|wx| wy * wx));
                }
            }
            let weights = g.const_float(&weights, &[3, 1, kh as i64, kw as i64], elem);
            x = g.node("Conv", &[&x, &weights], conv_attrs((kh, kw), 3));
            g.shape(&x, elem, &output_shape);
        }
    } else {
        // RGB and GREY need no clamp (a weighted mean of 0..=255 stays there): one convolution
        // resizes, orders the channels (GREY into three) and normalises.
        let mut weights = Vec::with_capacity(3 * k * kh * kw);
        for m in &matrix {
            for &mc in &m[..k] {
                for wy in &rows.weights[..kh] {
                    weights.extend(cols.weights[..kw].iter().map(|wx| mc * wy * wx / 255.0));
                }
            }
        }
        let weights = g.const_float(&weights, &[3, k as i64, kh as i64, kw as i64], elem);
        x = g.node("Conv", &[&x, &weights], conv_attrs((kh, kw), 1));
        g.shape(&x, elem, &output_shape);
    }
    // The last layer writes the graph's output: itself in FP32, or (FP16) through a Cast that
    // TensorRT turns into the engine's output reformat.
    let last = g.nodes.last_mut().expect("the DLA form has layers");
    match precision {
        Precision::Float => {
            last.output[0] = OUTPUT.into();
            g.value_info.retain(|v| v.name != x);
        }
        Precision::Half => {
            let mut cast = node("Cast", &[&x], &[OUTPUT], vec![attr_int("to", DataType::Float as i64)]);
            cast.name = format!("output/{}", cast.name);
            g.nodes.push(cast);
        }
    }
    let description = format!(
        "jetdetect preprocessing, DLA form ({precision:?}): {width}x{height} {format} -> letterbox {}x{} at \
         ({}, {}) in {dst_w}x{dst_h}, RGB NCHW /255, pad {PAD_VALUE}; GPU: cast and gather; DLA: {}",
        lb.new_w,
        lb.new_h,
        lb.left,
        lb.top,
        if yuv {
            format!("scale, relu, conv 1x1, clip, depthwise conv {kh}x{kw} stride {kh}x{kw}")
        } else {
            format!("conv {kh}x{kw} stride {kh}x{kw}")
        }
    );
    let model = g.finish(&shape, output_shape, description);
    Ok(PreprocessGraph { onnx: model.encode_to_vec(), input_shape: shape, output_shape, letterbox: lb })
}

/// One axis of the resize: OpenCV's taps and the source lines (rows or
/// columns) they read.
struct Axis {
    taps: Vec<cpu::Tap>,
    /// Same size in and out: the CPU path copies, and so does the graph.
    identity: bool,
    /// Source lines read, ascending (every line when `identity`).
    lines: Vec<i64>,
    /// Source lines in all.
    src: usize,
}

impl Axis {
    fn new(src: u32, dst: u32) -> Axis {
        let mut taps = Vec::new();
        cpu::taps(src, dst, &mut taps);
        let identity = src == dst;
        let mut lines: Vec<i64> = if identity {
            (0..src as i64).collect()
        } else {
            taps.iter().flat_map(|t| [t.index as i64, (t.index + usize::from(t.w1 != 0)) as i64]).collect()
        };
        lines.sort_unstable();
        lines.dedup();
        Axis { taps, identity, lines, src: src as usize }
    }

    /// The lines to gather before converting, when that is fewer than all.
    fn selection(&self) -> Option<Vec<i64>> {
        (self.lines.len() < self.src).then(|| self.lines.clone())
    }

    /// First and second tap of each output line, as positions in `lines`.
    fn local(&self) -> (Vec<i64>, Vec<i64>) {
        let at = |i: usize| self.lines.binary_search(&(i as i64)).expect("every tap is in lines") as i64;
        self.taps.iter().map(|t| (at(t.index), at(t.index + usize::from(t.w1 != 0)))).unzip()
    }
}

/// Graph under construction: nodes and constants, with generated names.
#[derive(Default)]
struct Graph {
    nodes: Vec<pb::NodeProto>,
    initializers: Vec<pb::TensorProto>,
    /// Shapes of intermediate values, written into the model (the DLA table reads them).
    value_info: Vec<pb::ValueInfoProto>,
    next: usize,
    /// Prefix of the node names added now (`unpack/`, `dla/`).
    stage: &'static str,
}

fn node(op: &str, inputs: &[&str], outputs: &[&str], attribute: Vec<pb::AttributeProto>) -> pb::NodeProto {
    pb::NodeProto {
        op_type: op.into(),
        name: format!("{}_{}", op, outputs[0]),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute,
        ..Default::default()
    }
}

fn attr_int(name: &str, i: i64) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::Int as i32,
        i,
        ..Default::default()
    }
}

fn attr_ints(name: &str, ints: &[i64]) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::Ints as i32,
        ints: ints.to_vec(),
        ..Default::default()
    }
}

fn value_info(name: &str, elem: pb::tensor_proto::DataType, dims: &[usize]) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{dimension::Value, Dimension};
    let dim =
        dims.iter().map(|&d| Dimension { value: Some(Value::DimValue(d as i64)), ..Default::default() });
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: elem as i32,
                shape: Some(pb::TensorShapeProto { dim: dim.collect() }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Graph {
    fn name(&mut self, what: &str) -> String {
        self.next += 1;
        format!("{what}{}", self.next)
    }

    /// Adds a node with one output and returns the output's name.
    fn node(&mut self, op: &str, inputs: &[&str], attribute: Vec<pb::AttributeProto>) -> String {
        let out = self.name(&op.to_lowercase());
        let mut n = node(op, inputs, &[&out], attribute);
        n.name = format!("{}{}", self.stage, n.name);
        self.nodes.push(n);
        out
    }

    /// Records the shape of `value` in the model.
    fn shape(&mut self, value: &str, elem: pb::tensor_proto::DataType, dims: &[usize]) {
        self.value_info.push(value_info(value, elem, dims));
    }

    /// A constant of `elem` type (FLOAT or FLOAT16) holding `values`.
    fn const_float(&mut self, values: &[f32], dims: &[i64], elem: pb::tensor_proto::DataType) -> String {
        use pb::tensor_proto::DataType;
        if elem == DataType::Float {
            return self.const_f32(values, dims);
        }
        let name = self.name("c");
        let raw = values
            .iter()
            .flat_map(|&v| tract_onnx::prelude::f16::from_f32(v).to_bits().to_le_bytes())
            .collect();
        self.initializers.push(pb::TensorProto {
            name: name.clone(),
            dims: dims.to_vec(),
            data_type: DataType::Float16 as i32,
            raw_data: raw,
            ..Default::default()
        });
        name
    }

    fn const_i64(&mut self, values: &[i64], dims: &[i64]) -> String {
        let name = self.name("c");
        self.initializers.push(pb::TensorProto {
            name: name.clone(),
            dims: dims.to_vec(),
            data_type: pb::tensor_proto::DataType::Int64 as i32,
            int64_data: values.to_vec(),
            ..Default::default()
        });
        name
    }

    fn const_f32(&mut self, values: &[f32], dims: &[i64]) -> String {
        let name = self.name("c");
        self.initializers.push(pb::TensorProto {
            name: name.clone(),
            dims: dims.to_vec(),
            data_type: pb::tensor_proto::DataType::Float as i32,
            float_data: values.to_vec(),
            ..Default::default()
        });
        name
    }

    fn reshape(&mut self, x: &str, shape: &[i64]) -> String {
        let s = self.const_i64(shape, &[shape.len() as i64]);
        self.node("Reshape", &[x, &s], vec![])
    }

    fn unsqueeze(&mut self, x: &str, axis: i64) -> String {
        let a = self.const_i64(&[axis], &[1]);
        self.node("Unsqueeze", &[x, &a], vec![])
    }

    /// `x[start..end]` along `axis`.
    fn slice(&mut self, x: &str, start: i64, end: i64, axis: i64) -> String {
        let s = self.const_i64(&[start], &[1]);
        let e = self.const_i64(&[end], &[1]);
        let a = self.const_i64(&[axis], &[1]);
        self.node("Slice", &[x, &s, &e, &a], vec![])
    }

    fn binary(&mut self, op: &str, a: &str, b: &str) -> String {
        self.node(op, &[a, b], vec![])
    }

    /// `x * k` for a scalar constant.
    fn scale(&mut self, x: &str, k: f32) -> String {
        let c = self.const_f32(&[k], &[]);
        self.binary("Mul", x, &c)
    }

    /// `x + k` for a scalar constant.
    fn offset(&mut self, x: &str, k: f32) -> String {
        let c = self.const_f32(&[k], &[]);
        self.binary("Add", x, &c)
    }

    fn floor(&mut self, x: &str) -> String {
        self.node("Floor", &[x], vec![])
    }

    fn clip(&mut self, x: &str, lo: f32, hi: f32) -> String {
        let (l, h) = (self.const_f32(&[lo], &[]), self.const_f32(&[hi], &[]));
        self.node("Clip", &[x, &l, &h], vec![])
    }

    /// BT.601 limited range, as [`super::colour::yuv_to_rgb`]: the same 20-bit
    /// coefficients (exact in `f32`), rounded half up and saturated to 0..=255.
    fn yuv_to_rgb(&mut self, y: &str, u: &str, v: &str) -> String {
        const ONE: f32 = (1 << 20) as f32;
        let (cy, crv, cgu, cgv, cbu) = super::colour::COEFFICIENTS;
        let luma = self.offset(y, -16.0);
        let zero = self.const_f32(&[0.0], &[]);
        let luma = self.binary("Max", &luma, &zero);
        let c = self.scale(&luma, cy as f32 / ONE);
        let c = self.offset(&c, 0.5);
        let d = self.offset(u, -128.0);
        let e = self.offset(v, -128.0);
        let re = self.scale(&e, crv as f32 / ONE);
        let r = self.binary("Add", &c, &re);
        let gd = self.scale(&d, cgu as f32 / ONE);
        let ge = self.scale(&e, cgv as f32 / ONE);
        let g = self.binary("Sub", &c, &gd);
        let g = self.binary("Sub", &g, &ge);
        let bd = self.scale(&d, cbu as f32 / ONE);
        let b = self.binary("Add", &c, &bd);
        let rgb = self.node("Concat", &[&r, &g, &b], vec![attr_int("axis", 2)]);
        let rgb = self.floor(&rgb);
        self.clip(&rgb, 0.0, 255.0)
    }

    /// `x` restricted to the indices `sel` along `axis`, or `x` when there is no selection.
    fn select(&mut self, x: &str, sel: Option<&str>, axis: i64) -> String {
        match sel {
            Some(sel) => self.node("Gather", &[x, sel], vec![attr_int("axis", axis)]),
            None => x.to_string(),
        }
    }

    /// OpenCV `INTER_LINEAR` of integer pixels `[rows.lines, cols.lines, C]` to
    /// `[new_h, new_w, C]`, as [`super::cpu`] does it: horizontal taps in 11-bit
    /// weights, then the vertical pass `((h0 >> 4) * w0 >> 16) + ((h1 >> 4) * w1 >> 16) + 2 >> 2`.
    fn resize(&mut self, pixels: &str, rows: &Axis, cols: &Axis) -> String {
        const ONE: f32 = cpu::WEIGHT_ONE as f32;
        let (new_w, new_h) = (cols.taps.len() as i64, rows.taps.len() as i64);
        // Horizontal: h = p[i0] * w0 + p[i1] * w1, in units of 1/2048 (exact in f32).
        let horizontal = if cols.identity {
            pixels.to_string()
        } else {
            let (i0, i1) = cols.local();
            let w0: Vec<f32> = cols.taps.iter().map(|t| t.w0 as f32 / ONE).collect();
            let w1: Vec<f32> = cols.taps.iter().map(|t| t.w1 as f32 / ONE).collect();
            let (i0, i1) = (self.const_i64(&i0, &[new_w]), self.const_i64(&i1, &[new_w]));
            let (w0, w1) = (self.const_f32(&w0, &[1, new_w, 1]), self.const_f32(&w1, &[1, new_w, 1]));
            let a = self.node("Gather", &[pixels, &i0], vec![attr_int("axis", 1)]);
            let b = self.node("Gather", &[pixels, &i1], vec![attr_int("axis", 1)]);
            let a = self.binary("Mul", &a, &w0);
            let b = self.binary("Mul", &b, &w1);
            self.binary("Add", &a, &b)
        };
        // h >> 4 in OpenCV's units (2048 * h / 16 = 128 h).
        let scaled = self.scale(&horizontal, 128.0);
        let p = self.floor(&scaled);
        let vertical = if rows.identity {
            // Weights 2048 and 0: (p * 2048) >> 16.
            let t = self.scale(&p, ONE / 65536.0);
            self.floor(&t)
        } else {
            let (i0, i1) = rows.local();
            let w0: Vec<f32> = rows.taps.iter().map(|t| t.w0 as f32 / 65536.0).collect();
            let w1: Vec<f32> = rows.taps.iter().map(|t| t.w1 as f32 / 65536.0).collect();
            let (i0, i1) = (self.const_i64(&i0, &[new_h]), self.const_i64(&i1, &[new_h]));
            let (w0, w1) = (self.const_f32(&w0, &[new_h, 1, 1]), self.const_f32(&w1, &[new_h, 1, 1]));
            let a = self.node("Gather", &[&p, &i0], vec![attr_int("axis", 0)]);
            let b = self.node("Gather", &[&p, &i1], vec![attr_int("axis", 0)]);
            let a = self.binary("Mul", &a, &w0);
            let b = self.binary("Mul", &b, &w1);
            let (a, b) = (self.floor(&a), self.floor(&b));
            self.binary("Add", &a, &b)
        };
        let v = self.offset(&vertical, 2.0);
        let v = self.scale(&v, 0.25);
        let v = self.floor(&v);
        self.clip(&v, 0.0, 255.0)
    }

    fn finish(self, input: &[usize], output: [usize; 4], doc: String) -> pb::ModelProto {
        use pb::tensor_proto::DataType;
        pb::ModelProto {
            ir_version: 7,
            opset_import: vec![pb::OperatorSetIdProto { domain: String::new(), version: OPSET }],
            producer_name: "jetdetect".into(),
            producer_version: env!("CARGO_PKG_VERSION").into(),
            doc_string: doc,
            graph: Some(pb::GraphProto {
                name: "preprocess".into(),
                node: self.nodes,
                initializer: self.initializers,
                value_info: self.value_info,
                input: vec![value_info(INPUT, DataType::Uint8, input)],
                output: vec![value_info(OUTPUT, DataType::Float, &output)],
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{encode_rgb, Frame};
    use crate::preprocess::{CpuPreprocessor, Preprocessor};
    use tract_onnx::prelude::*;

    /// Runs the graph with tract (no ONNX Runtime needed) on `frame`.
    fn run_graph(g: &PreprocessGraph, frame: &Frame) -> Vec<f32> {
        let model = tract_onnx::onnx()
            .model_for_read(&mut g.onnx.as_slice())
            .expect("graph parses")
            .into_optimized()
            .expect("graph optimises")
            .into_runnable()
            .expect("graph plans");
        let input = tract_ndarray::ArrayD::from_shape_vec(g.input_shape.clone(), frame.data.clone()).unwrap();
        let out = model.run(tvec!(Tensor::from(input).into_tvalue())).expect("graph runs");
        assert_eq!(out[0].shape(), &g.output_shape);
        out[0].try_as_plain_ram().unwrap().as_slice::<f32>().unwrap().to_vec()
    }

    /// A frame with smooth gradients and hard edges, in `format`.
    fn frame(format: PixelFormat, w: u32, h: u32, seed: u32) -> Frame {
        let mut rgb = Vec::with_capacity((w * h * 3) as usize);
        let mut s = seed.wrapping_mul(2_654_435_761).max(1);
        for y in 0..h {
            for x in 0..w {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                let noise = s % 40;
                let edge = if (x / 7 + y / 5) % 2 == 0 { 90 } else { 0 };
                rgb.push(((x * 255 / w.max(1)) + noise).min(255) as u8);
                rgb.push(((y * 255 / h.max(1)) + edge).min(255) as u8);
                rgb.push(((s >> 8) % 256) as u8);
            }
        }
        let mut f = Frame::empty();
        encode_rgb(&rgb, w, h, format, &mut f.data);
        f.width = w;
        f.height = h;
        f.format = format;
        f.label = format!("{w}x{h} {format}");
        f
    }

    /// Largest difference between the graph and the CPU path, in levels, and how many values differ.
    fn compare(format: PixelFormat, w: u32, h: u32, fit: Fit, dw: u32, dh: u32) -> (f32, usize) {
        let f = frame(format, w, h, w * 31 + h);
        let g = build(format, w, h, fit, dw, dh).unwrap();
        let got = run_graph(&g, &f);
        let mut want = vec![0.0; 3 * (dw * dh) as usize];
        let lb = CpuPreprocessor::new().run(&f, fit, dw, dh, &mut want).unwrap();
        assert_eq!(lb, g.letterbox);
        let mut worst = 0f32;
        let mut differ = 0;
        for (a, b) in got.iter().zip(&want) {
            let d = (a - b).abs() * 255.0;
            worst = worst.max(d);
            differ += usize::from(d > 1e-3);
        }
        (worst, differ)
    }

    #[test]
    fn every_format_matches_the_cpu_path() {
        for format in PixelFormat::ALL {
            // Downscale with letterbox rows, upscale, and odd sizes in the destination.
            for (w, h, dw, dh) in
                [(64, 48, 32, 32), (40, 30, 96, 80), (48, 36, 48, 48), (50, 24, 37, 29), (640, 480, 256, 256)]
            {
                // Stretched too (RT-DETR's fit), whose two axes scale apart.
                for fit in [Fit::Letterbox, Fit::Stretch] {
                    let (worst, differ) = compare(format, w, h, fit, dw, dh);
                    assert!(
                        worst <= 1.0 + 1e-3,
                        "{format} {w}x{h}->{dw}x{dh} {fit:?}: off by {worst} levels"
                    );
                    assert!(
                        differ * 1000 <= (3 * dw * dh) as usize,
                        "{format} {fit:?}: {differ} values differ"
                    );
                }
            }
        }
    }

    #[test]
    fn geometry_the_format_cannot_have_is_refused() {
        let e = build(PixelFormat::Nv12, 63, 48, Fit::Letterbox, 32, 32).unwrap_err().to_string();
        assert!(e.contains("even width"), "{e}");
        assert!(build(PixelFormat::Rgb24, 64, 48, Fit::Letterbox, 0, 32).is_err());
    }

    /// The DLA form against the CPU path: (largest difference in levels, share of values
    /// more than one level off).
    fn compare_dla(format: PixelFormat, w: u32, h: u32, dw: u32, dh: u32, p: Precision) -> (f32, f64) {
        let f = frame(format, w, h, w * 17 + h);
        let g = build_dla(format, w, h, Fit::Letterbox, dw, dh, p).unwrap();
        let got = run_graph(&g, &f);
        let mut want = vec![0.0; 3 * (dw * dh) as usize];
        let lb = CpuPreprocessor::new().run(&f, Fit::Letterbox, dw, dh, &mut want).unwrap();
        assert_eq!(lb, g.letterbox);
        let mut worst = 0f32;
        let mut off = 0;
        for (a, b) in got.iter().zip(&want) {
            let d = (a - b).abs() * 255.0;
            worst = worst.max(d);
            off += usize::from(d > 1.0);
        }
        (worst, off as f64 / got.len() as f64)
    }

    /// Sizes the DLA form takes: the same size, and shrinking by 2, 3 and 4, with letterbox
    /// borders on either axis.
    const DLA_SIZES: [(u32, u32, u32, u32); 5] =
        [(48, 36, 48, 48), (64, 48, 32, 32), (96, 72, 32, 32), (128, 96, 32, 32), (48, 96, 32, 32)];

    #[test]
    fn dla_form_stays_within_a_level_of_the_cpu_path() {
        // Measured: at most 0.93 levels in FP32 and 0.90 in FP16 over these sizes and every
        // format (the CPU path rounds each converted pixel and each result to 8 bits; the DLA
        // form does not). The DLA form converts and clamps per source sample as the CPU path
        // does; clamping after the resize instead was 16 levels off on YUV edges.
        for p in [Precision::Float, Precision::Half] {
            for format in PixelFormat::ALL {
                for (w, h, dw, dh) in DLA_SIZES {
                    let (worst, off) = compare_dla(format, w, h, dw, dh, p);
                    assert!(
                        worst <= 1.0 && off == 0.0,
                        "{format} {w}x{h}->{dw}x{dh} {p:?}: off by up to {worst:.2} levels, {:.2}% by more than one",
                        off * 100.0
                    );
                }
            }
        }
    }

    #[test]
    fn dla_form_refuses_a_resize_no_fixed_convolution_does() {
        // 50x24 into 37x29: 37x18, weights change from column to column.
        let e = build_dla(PixelFormat::Yuyv, 50, 24, Fit::Letterbox, 37, 29, Precision::Half)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no fixed DLA convolution") && e.contains("device = \"gpu\""), "{e}");
        assert!(e.contains("74x36"), "names a size that works: {e}");
        // Growing does not take one weight pair either.
        assert!(build_dla(PixelFormat::Rgb24, 16, 12, Fit::Letterbox, 32, 32, Precision::Half).is_err());
        assert!(build_dla(PixelFormat::Nv12, 63, 48, Fit::Letterbox, 32, 32, Precision::Half)
            .unwrap_err()
            .to_string()
            .contains("even width"));
    }

    #[test]
    fn every_layer_of_the_dla_form_is_a_dla_layer_and_the_gpu_only_moves_data() {
        use crate::engine::dla::{place, Placement, Soc, TensorRt};
        for format in PixelFormat::ALL {
            // Layers on the DLA for YUV: scale, relu, conv, clip, and the resize where it averages.
            for (w, h, dw, dh, yuv_layers) in
                [(1280, 720, 640, 640, 5), (1920, 1080, 640, 640, 4), (640, 480, 640, 640, 4)]
            {
                let g = build_dla(format, w, h, Fit::Letterbox, dw, dh, Precision::Half).unwrap();
                let model = pb::ModelProto::decode(g.onnx.as_slice()).unwrap();
                for trt in TensorRt::TABLES {
                    for soc in [Soc::Xavier, Soc::Orin] {
                        let placed = place(&model, trt, soc);
                        let mut on_dla = 0;
                        for n in &placed {
                            if n.name.starts_with("dla/") {
                                assert_eq!(
                                    n.placement,
                                    Placement::Dla,
                                    "{format} {w}x{h} TensorRT {trt}: {}",
                                    n.name
                                );
                                on_dla += 1;
                            } else {
                                assert!(
                                    ["Cast", "Reshape", "Concat", "Gather", "Unsqueeze"]
                                        .contains(&n.op.as_str()),
                                    "{format}: {} ({}) does arithmetic on the GPU",
                                    n.name,
                                    n.op
                                );
                                assert!(matches!(n.placement, Placement::Gpu(_)), "{}", n.name);
                            }
                        }
                        let yuv = matches!(format, PixelFormat::Yuyv | PixelFormat::Uyvy | PixelFormat::Nv12);
                        assert_eq!(on_dla, if yuv { yuv_layers } else { 1 }, "{format} {w}x{h}");
                    }
                }
                // TensorRT releases without a DLA place nothing there.
                let none = place(&model, TensorRt::parse("10.13").unwrap(), Soc::Orin);
                assert!(none.iter().all(|n| n.placement != Placement::Dla));
            }
        }
    }

    #[test]
    fn the_gpu_form_is_not_a_dla_graph() {
        use crate::engine::dla::{place, Placement, Soc, TensorRt};
        let g = build(PixelFormat::Yuyv, 1280, 720, Fit::Letterbox, 640, 640).unwrap();
        let model = pb::ModelProto::decode(g.onnx.as_slice()).unwrap();
        let placed = place(&model, TensorRt::parse("8.5.2").unwrap(), Soc::Orin);
        assert!(placed.iter().all(|n| n.placement != Placement::Dla), "{placed:?}");
        let why = |op: &str| match &placed.iter().find(|n| n.op == op).unwrap().placement {
            Placement::Gpu(why) => why.clone(),
            Placement::Dla => unreachable!(),
        };
        assert!(why("Cast").contains("Cast is not a DLA layer"), "{}", why("Cast"));
        assert!(why("Gather").contains("Gather is not a DLA layer"), "{}", why("Gather"));
    }

    #[test]
    fn interface_shapes() {
        let g = build(PixelFormat::Yuyv, 640, 480, Fit::Letterbox, 256, 256).unwrap();
        assert_eq!(g.input_shape, vec![480, 1280]);
        assert_eq!(g.output_shape, [1, 3, 256, 256]);
        assert_eq!(input_shape(PixelFormat::Nv12, 640, 480), vec![720, 640]);
        let model = pb::ModelProto::decode(g.onnx.as_slice()).unwrap();
        assert_eq!(model.opset_import[0].version, OPSET);
        let graph = model.graph.unwrap();
        assert_eq!(graph.input[0].name, INPUT);
        assert_eq!(graph.output[0].name, OUTPUT);
    }
}
