//! YOLO output decoding: layout detection, thresholds, class-aware NMS, and
//! mapping boxes back to source pixels.
//!
//! Two output layouts exist in the wild and both are read here:
//!
//! | family | output | per candidate |
//! |---|---|---|
//! | YOLOv5 (and v7) | `[1, N, 5 + C]` | `cx cy w h objectness class scores...` |
//! | YOLOv8, YOLO11 | `[1, 4 + C, N]` | `cx cy w h class scores...` (transposed, no objectness) |
//!
//! Boxes are in model-input pixels; a [`Letterbox`](crate::preprocess::Letterbox)
//! maps them back to the frame.

pub mod decode;
pub mod names;

pub use decode::{DecodeOptions, Decoder};
pub use names::ClassNames;

use std::fmt;

/// How candidates are laid out in the model's output tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// YOLOv5: `[1, anchors, 5 + classes]`, with objectness.
    V5 {
        /// Number of candidate boxes.
        anchors: usize,
        /// Number of classes.
        classes: usize,
    },
    /// YOLOv8 / YOLO11: `[1, 4 + classes, anchors]`, no objectness.
    V8 {
        /// Number of candidate boxes.
        anchors: usize,
        /// Number of classes.
        classes: usize,
    },
}

/// Which layout to expect: `auto` infers it from the output shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayoutHint {
    /// Infer from the shape (the larger dimension holds the candidates).
    Auto,
    /// Force the YOLOv5 layout.
    V5,
    /// Force the YOLOv8/YOLO11 layout.
    V8,
}

impl Layout {
    /// Number of classes the model predicts.
    pub fn classes(&self) -> usize {
        match *self {
            Layout::V5 { classes, .. } | Layout::V8 { classes, .. } => classes,
        }
    }

    /// Number of candidate boxes per image.
    pub fn anchors(&self) -> usize {
        match *self {
            Layout::V5 { anchors, .. } | Layout::V8 { anchors, .. } => anchors,
        }
    }

    /// Works out the layout from an output shape (`[1, a, b]` or `[a, b]`).
    ///
    /// Candidates always outnumber the per-candidate values (thousands against
    /// 5 + C), so the longer axis holds the candidates: `[1, 4 + C, N]` is
    /// YOLOv8, `[1, N, 5 + C]` is YOLOv5. `hint` forces one reading.
    pub fn detect(shape: &[usize], hint: LayoutHint) -> Result<Layout, LayoutError> {
        let dims: Vec<usize> = match shape {
            [1, a, b] | [a, b] => vec![*a, *b],
            _ => return Err(LayoutError::Rank { shape: shape.to_vec() }),
        };
        let (a, b) = (dims[0], dims[1]);
        let v8 = || (a > 4).then(|| Layout::V8 { anchors: b, classes: a - 4 });
        let v5 = || (b > 5).then(|| Layout::V5 { anchors: a, classes: b - 5 });
        let found = match hint {
            LayoutHint::V8 => v8(),
            LayoutHint::V5 => v5(),
            LayoutHint::Auto if b > a => v8(),
            LayoutHint::Auto => v5(),
        };
        found.ok_or_else(|| LayoutError::NoClasses { shape: shape.to_vec(), hint })
    }
}

/// An output shape that is not a YOLO detection output.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// Not `[1, a, b]` or `[a, b]`.
    #[error(
        "output shape {shape:?} is not a YOLO detection output: expected [1, N, 5+C] (YOLOv5) \
         or [1, 4+C, N] (YOLOv8/YOLO11); segmentation, pose and end-to-end (NMS-included) \
         exports are not supported"
    )]
    Rank {
        /// The shape.
        shape: Vec<usize>,
    },
    /// The right rank, but no room for a class in the layout read (or forced).
    #[error(
        "output shape {shape:?} is not a YOLO detection output{}: expected [1, N, 5+C] (YOLOv5) \
         or [1, 4+C, N] (YOLOv8/YOLO11) with at least one class",
        match hint {
            LayoutHint::V5 => " in the YOLOv5 layout (forced by the config)",
            LayoutHint::V8 => " in the YOLOv8 layout (forced by the config)",
            LayoutHint::Auto => "",
        }
    )]
    NoClasses {
        /// The shape.
        shape: Vec<usize>,
        /// The layout asked for.
        hint: LayoutHint,
    },
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layout::V5 { anchors, classes } => write!(f, "YOLOv5 [1, {anchors}, {}]", 5 + classes),
            Layout::V8 { anchors, classes } => write!(f, "YOLOv8 [1, {}, {anchors}]", 4 + classes),
        }
    }
}

/// One detected object, in source-frame pixels. Reads from a `detections` message's entries.
#[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize)]
pub struct Detection {
    /// Class index (see [`ClassNames`]).
    pub class_id: usize,
    /// Confidence in `0..=1` (class score, times objectness for YOLOv5).
    pub score: f32,
    /// Left edge.
    pub x1: f32,
    /// Top edge.
    pub y1: f32,
    /// Right edge.
    pub x2: f32,
    /// Bottom edge.
    pub y2: f32,
}

impl Detection {
    /// The box as `[x1, y1, x2, y2]`, as [`iou`] takes it.
    pub fn corners(&self) -> [f32; 4] {
        [self.x1, self.y1, self.x2, self.y2]
    }

    /// Area in square pixels (0 for degenerate boxes).
    pub fn area(&self) -> f32 {
        (self.x2 - self.x1).max(0.0) * (self.y2 - self.y1).max(0.0)
    }
}

/// The area two boxes `[x1, y1, x2, y2]` share.
pub fn intersection(a: [f32; 4], b: [f32; 4]) -> f32 {
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    w * h
}

/// Intersection over union of two `[x1, y1, x2, y2]` boxes.
pub fn iou(a: [f32; 4], b: [f32; 4]) -> f32 {
    let inter = intersection(a, b);
    let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    if union <= 0.0 {
        0.0
    } else {
        inter / union
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_read_from_the_shape() {
        assert_eq!(
            Layout::detect(&[1, 84, 8400], LayoutHint::Auto).unwrap(),
            Layout::V8 { anchors: 8400, classes: 80 }
        );
        assert_eq!(
            Layout::detect(&[1, 25200, 85], LayoutHint::Auto).unwrap(),
            Layout::V5 { anchors: 25200, classes: 80 }
        );
        assert_eq!(
            Layout::detect(&[7, 1344], LayoutHint::Auto).unwrap(),
            Layout::V8 { anchors: 1344, classes: 3 }
        );
        assert_eq!(
            Layout::detect(&[1, 84, 8400], LayoutHint::V5).unwrap(),
            Layout::V5 { anchors: 84, classes: 8395 }
        );
    }

    #[test]
    fn non_yolo_shapes_are_rejected_with_the_expected_forms() {
        for shape in [&[1usize, 1000][..], &[1, 3, 80, 80], &[2, 84, 8400], &[1, 4, 10]] {
            let e = Layout::detect(shape, LayoutHint::Auto).unwrap_err().to_string();
            assert!(e.contains("[1, 4+C, N]"), "{shape:?}: {e}");
        }
        assert!(Layout::detect(&[1, 300, 6], LayoutHint::Auto).is_ok(), "v5 with one class");
    }

    #[test]
    fn iou_of_known_boxes() {
        assert_eq!(iou([0.0, 0.0, 2.0, 2.0], [1.0, 1.0, 3.0, 3.0]), 1.0 / 7.0);
        assert_eq!(iou([0.0, 0.0, 1.0, 1.0], [2.0, 2.0, 3.0, 3.0]), 0.0);
        assert_eq!(iou([0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]), 0.0);
    }
}
