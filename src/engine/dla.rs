//! TensorRT's DLA layer table, per TensorRT version, applied to an ONNX graph.
//!
//! TensorRT places a layer on a DLA core only if the DLA can run it; with GPU
//! fallback (which ONNX Runtime's TensorRT provider always sets) every other
//! layer silently runs on the GPU. [`place`] answers, for each node of a graph,
//! where TensorRT would put it, so that a graph meant for the DLA can be checked
//! here, without a board, and so that a start on a board can say what it
//! expected next to what TensorRT reports.
//!
//! The table is TensorRT's own, read from the `NvInfer.h` of each release (the
//! "If executing this layer on DLA" notes of each layer; the developer guide's
//! "DLA Supported Layers and Restrictions" says the same) and from the ONNX
//! parser's importers, which decide the TensorRT layer each ONNX operator
//! becomes (`BatchNormalization` with constant inputs is a Scale layer; `Add`
//! and `Mul` are ElementWise layers; `Clip` is an Activation of type `kCLIP`):
//!
//! | TensorRT (JetPack) | what changes for the DLA |
//! |---|---|
//! | 8.2 (4.6) | Resize: nearest only; no Slice, Unary, Softmax or PReLU |
//! | 8.4-8.6 (5.0-6.0) | Resize also bilinear (half-pixel, scales 1-4); Slice, Unary `abs`, PReLU, Softmax (not on Xavier) |
//! | 10.0-10.7 (6.1, 6.2) | as 8.6 |
//! | 10.8 and later (7.x) | no DLA |
//!
//! What no version runs on the DLA: `uint8` tensors (network I/O only),
//! Gather, Cast, Floor, Pad, Expand, Reshape/Transpose (Shuffle), Div. FP16 or
//! INT8 only; every tensor 4-D (N, C, H, W) with C, H, W at most 8192.

use std::collections::HashMap;
use std::fmt;

use tract_onnx::pb;

/// A TensorRT release, `major.minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TensorRt {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl TensorRt {
    /// Parses `8.5.2`, `10.3.0.30` or `10.7`.
    pub fn parse(version: &str) -> Option<TensorRt> {
        let mut parts = version.trim().split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next().unwrap_or("0").parse().ok()?;
        Some(TensorRt { major, minor })
    }

    const fn at(major: u32, minor: u32) -> TensorRt {
        TensorRt { major, minor }
    }

    /// Whether this release can build for a DLA at all (8.2 to 10.7).
    pub fn has_dla(self) -> bool {
        self >= TensorRt::at(8, 2) && self <= TensorRt::at(10, 7)
    }

    /// The releases jetdetect's table distinguishes, one of each, for tests and docs.
    pub const TABLES: [TensorRt; 3] = [TensorRt::at(8, 2), TensorRt::at(8, 5), TensorRt::at(10, 3)];
}

impl fmt::Display for TensorRt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Where TensorRT would run a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On the DLA core.
    Dla,
    /// On the GPU (fallback), and why the DLA cannot run it.
    Gpu(String),
}

/// One node's placement.
#[derive(Clone, Debug)]
pub struct NodePlacement {
    /// Node name.
    pub name: String,
    /// ONNX operator.
    pub op: String,
    /// Where it runs.
    pub placement: Placement,
}

/// The SoC generation, where the table differs (Softmax runs on Orin's DLA only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Soc {
    /// Xavier (AGX, NX): DLA 1.0.
    Xavier,
    /// Orin (AGX, NX): DLA 2.0.
    Orin,
}

/// Largest C, H or W a DLA tensor may have.
pub const MAX_DIM: i64 = 8192;

/// Places every node of `model` as TensorRT `trt` would on `soc` with a DLA
/// core asked for and GPU fallback on.
pub fn place(model: &pb::ModelProto, trt: TensorRt, soc: Soc) -> Vec<NodePlacement> {
    let graph = model.graph.as_ref();
    let mut shapes: HashMap<&str, (i32, Vec<i64>)> = HashMap::new();
    let mut constants: HashMap<&str, &pb::TensorProto> = HashMap::new();
    if let Some(g) = graph {
        for vi in g.input.iter().chain(&g.value_info).chain(&g.output) {
            if let Some(s) = value_shape(vi) {
                shapes.insert(vi.name.as_str(), s);
            }
        }
        for t in &g.initializer {
            constants.insert(t.name.as_str(), t);
        }
    }
    let nodes = graph.map(|g| g.node.as_slice()).unwrap_or_default();
    nodes
        .iter()
        .map(|node| {
            let placement = if !trt.has_dla() {
                Placement::Gpu(format!("TensorRT {trt} has no DLA (8.2 to 10.7 have)"))
            } else {
                match check(node, trt, soc, &shapes, &constants) {
                    Ok(()) => Placement::Dla,
                    Err(why) => Placement::Gpu(why),
                }
            };
            NodePlacement { name: node.name.clone(), op: node.op_type.clone(), placement }
        })
        .collect()
}

fn value_shape(vi: &pb::ValueInfoProto) -> Option<(i32, Vec<i64>)> {
    use pb::tensor_shape_proto::dimension::Value;
    let Some(pb::type_proto::Value::TensorType(t)) = vi.r#type.as_ref()?.value.as_ref() else {
        return None;
    };
    let dims = t.shape.as_ref()?.dim.iter().map(|d| match d.value {
        Some(Value::DimValue(v)) => Some(v),
        _ => None,
    });
    Some((t.elem_type, dims.collect::<Option<Vec<i64>>>()?))
}

fn ints(node: &pb::NodeProto, name: &str) -> Option<Vec<i64>> {
    node.attribute.iter().find(|a| a.name == name).map(|a| a.ints.clone())
}

fn int(node: &pb::NodeProto, name: &str) -> Option<i64> {
    node.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

fn string(node: &pb::NodeProto, name: &str) -> Option<String> {
    node.attribute.iter().find(|a| a.name == name).map(|a| String::from_utf8_lossy(&a.s).into_owned())
}

fn floats(t: &pb::TensorProto) -> Vec<f32> {
    if !t.float_data.is_empty() {
        return t.float_data.clone();
    }
    t.raw_data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

fn in_range(what: &str, values: &[i64], lo: i64, hi: i64) -> Result<(), String> {
    match values.iter().find(|&&v| v < lo || v > hi) {
        Some(v) => Err(format!("{what} {v} is outside the DLA's {lo}..={hi}")),
        None => Ok(()),
    }
}

fn check(
    node: &pb::NodeProto,
    trt: TensorRt,
    soc: Soc,
    shapes: &HashMap<&str, (i32, Vec<i64>)>,
    constants: &HashMap<&str, &pb::TensorProto>,
) -> Result<(), String> {
    use pb::tensor_proto::DataType;
    let op = node.op_type.as_str();
    let since_84 = trt >= TensorRt::at(8, 4);
    // The data tensors (not weights) the layer reads and writes.
    let data: Vec<&str> = node
        .input
        .iter()
        .chain(&node.output)
        .map(String::as_str)
        .filter(|n| !n.is_empty() && !constants.contains_key(n))
        .collect();
    let input_dims = |i: usize| node.input.get(i).and_then(|n| shapes.get(n.as_str())).map(|s| &s.1);
    // The layer's own limits first (an op that is no DLA layer says so), then its tensors'.
    let layer: Result<(), String> = match op {
        "Conv" | "ConvTranspose" => {
            let weights = node.input.get(1).and_then(|n| constants.get(n.as_str()));
            let w = weights.ok_or("the weights must be constants (build-time)")?;
            if w.dims.len() != 4 {
                return Err("only 2-D convolutions run on the DLA".into());
            }
            let kernel = &w.dims[2..];
            let strides = ints(node, "strides").unwrap_or_else(|| vec![1, 1]);
            let pads = ints(node, "pads").unwrap_or_else(|| vec![0; 4]);
            let dilations = ints(node, "dilations").unwrap_or_else(|| vec![1, 1]);
            let groups = int(node, "group").unwrap_or(1);
            let maps = if op == "Conv" { w.dims[0] } else { w.dims[1] * groups };
            in_range("output maps", &[maps], 1, 8192)?;
            if op == "Conv" {
                in_range("kernel size", kernel, 1, 32)?;
                in_range("stride", &strides, 1, 8)?;
                in_range("padding", &pads, 0, 31)?;
                in_range("dilation", &dilations, 1, 32)?;
                in_range("groups", &[groups], 1, 8192)?;
                if pads.iter().zip(kernel.iter().chain(kernel)).any(|(p, k)| p >= k) {
                    return Err("padding must be less than the kernel size".into());
                }
            } else {
                let long = |v: &[i64]| {
                    v.iter().all(|&k| (1..=32).contains(&k))
                        || (v.contains(&1) && v.iter().any(|k| [64, 96, 128].contains(k)))
                };
                if !long(kernel) || !long(&strides) {
                    return Err(format!(
                        "deconvolution kernel {kernel:?} / stride {strides:?}: the DLA takes 1..=32, or 64/96/128 by 1"
                    ));
                }
                if pads.iter().any(|&p| p != 0) {
                    return Err("deconvolution padding must be 0".into());
                }
                if groups != 1 || dilations.iter().any(|&d| d != 1) {
                    return Err("grouped or dilated deconvolution does not run on the DLA".into());
                }
            }
            Ok(())
        }
        // The ONNX parser folds constant BatchNormalization into a Scale layer (kCHANNEL).
        "BatchNormalization" => {
            if node.input[1..].iter().all(|n| constants.contains_key(n.as_str())) {
                Ok(())
            } else {
                Err("BatchNormalization with non-constant inputs is not a Scale layer".into())
            }
        }
        "Relu" | "Sigmoid" | "Tanh" => Ok(()),
        "Clip" => {
            let bound = |i: usize| match node.input.get(i).filter(|n| !n.is_empty()) {
                None => Ok(()),
                Some(n) if constants.contains_key(n.as_str()) => Ok(()),
                Some(n) => Err(format!("Clip bound {n} must be a constant")),
            };
            bound(1)?;
            bound(2)
        }
        "Add" | "Sub" | "Mul" | "Max" | "Min" => {
            // ElementWise: 2-D, kSUM/kSUB/kPROD/kMAX/kMIN, operands of one shape.
            let (a, b) = (input_dims(0), input_dims(1));
            match (a, b) {
                (Some(a), Some(b)) if a == b => Ok(()),
                _ => Err("ElementWise on the DLA needs two data operands of the same shape".into()),
            }
        }
        "Concat" => {
            let rank = input_dims(0).map(|d| d.len() as i64).unwrap_or(4);
            let axis = int(node, "axis").unwrap_or(0);
            if axis == 1 || axis == 1 - rank {
                Ok(())
            } else {
                Err(format!("Concat along axis {axis}: the DLA concatenates along channels (axis 1) only"))
            }
        }
        "MaxPool" | "AveragePool" => {
            in_range("window", &ints(node, "kernel_shape").unwrap_or_default(), 1, 8)?;
            in_range("padding", &ints(node, "pads").unwrap_or_default(), 0, 7)?;
            in_range("stride", &ints(node, "strides").unwrap_or_default(), 1, 16)
        }
        "Resize" => {
            let mode = string(node, "mode").unwrap_or_else(|| "nearest".into());
            let transform =
                string(node, "coordinate_transformation_mode").unwrap_or_else(|| "half_pixel".into());
            let scales = node.input.get(2).and_then(|n| constants.get(n.as_str())).map(|t| floats(t));
            let scales = scales.ok_or("Resize needs constant scales on the DLA (not output sizes)")?;
            let integral = |lo: f32, hi: f32| {
                scales.len() == 4
                    && scales[0] == 1.0
                    && scales[1] == 1.0
                    && scales[2..].iter().all(|s| s.fract() == 0.0 && (lo..=hi).contains(s))
            };
            match mode.as_str() {
                "nearest" if integral(1.0, 32.0) => {
                    if since_84 || transform == "asymmetric" {
                        Ok(())
                    } else {
                        Err(format!("TensorRT {trt}: nearest Resize on the DLA must be asymmetric"))
                    }
                }
                "linear" if since_84 && transform == "half_pixel" && integral(1.0, 4.0) => Ok(()),
                "linear" if !since_84 => Err(format!("TensorRT {trt} runs only nearest Resize on the DLA")),
                _ => Err(format!(
                    "Resize {mode} ({transform}) by {scales:?}: the DLA upsamples by whole factors only \
                     (1-32 nearest, 1-4 half-pixel linear)"
                )),
            }
        }
        "Slice" if since_84 => {
            let axes =
                node.input.get(3).and_then(|n| constants.get(n.as_str())).map(|t| t.int64_data.clone());
            let steps =
                node.input.get(4).and_then(|n| constants.get(n.as_str())).map(|t| t.int64_data.clone());
            if node.input[1..].iter().filter(|n| !n.is_empty()).any(|n| !constants.contains_key(n.as_str())) {
                Err("Slice bounds must be constants".into())
            } else if steps.is_some_and(|s| s.iter().any(|&v| v != 1)) {
                Err("Slice steps must be 1 on the DLA".into())
            } else if axes.is_none_or(|a| a.contains(&0) || a.contains(&-4)) {
                Err("Slice must not cut the first (batch) axis".into())
            } else {
                Ok(())
            }
        }
        "Abs" if since_84 => Ok(()),
        "PRelu" if since_84 => match node.input.get(1) {
            Some(n) if constants.contains_key(n.as_str()) => Ok(()),
            _ => Err("PReLU slopes must be a constant".into()),
        },
        "Softmax" if since_84 && soc == Soc::Orin => Ok(()),
        "Softmax" if since_84 => Err("Softmax runs on Orin's DLA, not Xavier's".into()),
        "LRN" => in_range("LRN size", &[int(node, "size").unwrap_or(0)], 3, 9),
        _ => Err(format!("{op} is not a DLA layer in TensorRT {trt}")),
    };
    layer?;
    for name in &data {
        let (elem, dims) = shapes.get(name).ok_or_else(|| format!("the shape of {name} is not known"))?;
        if *elem != DataType::Float16 as i32 && *elem != DataType::Float as i32 {
            let ty = DataType::try_from(*elem).map(|t| t.as_str_name()).unwrap_or("?");
            return Err(format!("{name} is {ty}: the DLA computes FP16 (or INT8) only"));
        }
        if dims.len() != 4 {
            return Err(format!(
                "{name} has {} dimensions: DLA layers take 4-D (N, C, H, W) tensors",
                dims.len()
            ));
        }
        in_range(&format!("{name}: a dimension of"), &dims[1..], 1, MAX_DIM)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(TensorRt::parse("8.5.2.2"), Some(TensorRt { major: 8, minor: 5 }));
        assert_eq!(TensorRt::parse("10"), Some(TensorRt { major: 10, minor: 0 }));
        assert!(TensorRt::parse("x").is_none());
        assert!(TensorRt::parse("8.2.1").unwrap().has_dla());
        assert!(TensorRt::parse("10.7.0").unwrap().has_dla());
        assert!(!TensorRt::parse("10.13.3").unwrap().has_dla());
        assert!(!TensorRt::parse("7.1.3").unwrap().has_dla());
    }
}
