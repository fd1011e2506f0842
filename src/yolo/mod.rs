//! YOLO output decoding: layout detection, thresholds, class-aware NMS, and
//! mapping boxes back to source pixels.
//!
//! Three output layouts exist in the wild and all are read here:
//!
//! | family | output | per candidate |
//! |---|---|---|
//! | YOLOv5 (and v7) | `[1, N, 5 + C]` | `cx cy w h objectness class scores...` |
//! | YOLOv5u, v8, v9, v10, 11, 12, YOLO26 (default export) | `[1, 4 + C, N]` | `cx cy w h class scores...` (transposed, no objectness) |
//! | end-to-end: YOLOv10 / YOLO26 `nms=False`, any `nms=True` export | `[1, K, 6]` | `x1 y1 x2 y2 score class`, NMS (or top-k) done by the model |
//! | RT-DETR (ultralytics 8.4 and later) | `[1, K, 6]` | `cx cy w h score class`, the box normalised to the input, top-k done by the model; the input stretched, not letterboxed |
//! | RT-DETR (ultralytics before 8.4) | `[1, Q, 4 + C]` | `cx cy w h class scores...`, normalised, one row per query; the input stretched |
//!
//! Which one a model has is decided once, at load ([`Layout::decide`]): from the config where it
//! says, from the model's metadata ([`Metadata`]) where the exporter wrote it, and from the
//! output shape otherwise; a shape that fits more than one layout is refused, never guessed.
//!
//! Boxes are in model-input pixels; a [`Letterbox`](crate::preprocess::Letterbox)
//! maps them back to the frame.

pub mod decode;
pub mod metadata;
pub mod names;

pub use decode::{DecodeOptions, Decoder};
pub use metadata::Metadata;
pub use names::ClassNames;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::preprocess::Fit;

/// `[detect]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DetectConfig {
    /// Minimum score to report, exclusive, `0 < x < 1`.
    pub confidence: f32,
    /// NMS IoU threshold, `0 < x <= 1`.
    pub iou: f32,
    /// Most detections per frame, `1..=10000`.
    pub max_detections: usize,
}

impl Default for DetectConfig {
    fn default() -> Self {
        DetectConfig { confidence: 0.25, iou: 0.45, max_detections: 100 }
    }
}

impl DetectConfig {
    /// Checks the section's own values; `Err((key, message))` names the key (a dotted key is in
    /// a sub-table).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let d = self;
        if !(d.confidence > 0.0 && d.confidence < 1.0) {
            return Err((
                "confidence",
                format!("{} is out of range: allowed 0 < confidence < 1", d.confidence),
            ));
        }
        if !(d.iou > 0.0 && d.iou <= 1.0) {
            return Err(("iou", format!("{} is out of range: allowed 0 < iou <= 1", d.iou)));
        }
        if !(1..=10_000).contains(&d.max_detections) {
            return Err((
                "max_detections",
                format!("{} is out of range: allowed 1 to 10000", d.max_detections),
            ));
        }
        Ok(())
    }
}

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
    /// End-to-end: `[1, rows, 6]`, each row `x1 y1 x2 y2 score class` in model-input pixels,
    /// best first, already through the model's own NMS or top-k (rows past the detections are
    /// zero). The class count is not in the shape: it is the names' count where known.
    EndToEnd {
        /// Rows per image (the export's `max_det`).
        rows: usize,
        /// Number of classes, where the model's metadata names them.
        classes: Option<usize>,
    },
    /// RT-DETR as ultralytics exports it since 8.4: `[1, rows, 6]`, each row `cx cy w h score
    /// class` with the box normalised to the input (0..1), best first (the decoder head's top-k).
    /// Its input is stretched ([`Fit::Stretch`]), as ultralytics' RT-DETR predictor does.
    RtDetr {
        /// Rows per image (the export's `max_det`).
        rows: usize,
        /// Number of classes, where the model's metadata names them.
        classes: Option<usize>,
    },
    /// RT-DETR as ultralytics exported it before 8.4: `[1, queries, 4 + classes]`, each row
    /// `cx cy w h` normalised to the input and every class's score, in query order. Decoded as
    /// its `RTDETRPredictor.postprocess` did: the best class, above the threshold, in order, the
    /// box times the frame's size; the input stretched.
    RtDetrScores {
        /// Queries per image.
        queries: usize,
        /// Number of classes.
        classes: usize,
    },
}

named_enum! {
    /// `[model] layout` and `--layout`: which layout to expect; `auto` decides from the
    /// model's metadata and output shape ([`Layout::decide`]).
    pub enum LayoutHint {
        /// From the metadata where it says, else from the shape; refused when ambiguous.
        Auto = "auto",
        /// YOLOv5: `[1, N, 5 + C]`.
        V5 = "v5",
        /// YOLOv8 and later, default export: `[1, 4 + C, N]`.
        V8 = "v8",
        /// End-to-end: `[1, K, 6]`, `x1 y1 x2 y2 score class`.
        EndToEnd = "end2end",
        /// RT-DETR: `[1, K, 6]`, `cx cy w h score class` normalised, on a stretched input.
        RtDetr = "rtdetr",
    }
}

impl std::str::FromStr for LayoutHint {
    type Err = crate::named::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| {
            crate::named::UnknownName::new("[model] layout: ", s, " is not a layout", Self::names(", "))
        })
    }
}

/// A layout and why it was chosen, for the log and `jetdetect check`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The layout.
    pub layout: Layout,
    /// Why: `[model] layout = "v8"`, `metadata end2end = True`, `output shape ...`.
    pub why: String,
}

/// What [`Layout::decide`] knows of the model's classes, when anything: how many its metadata
/// names, and where that came from (for messages).
#[derive(Clone, Copy, Debug)]
pub struct KnownClasses<'a> {
    /// How many classes.
    pub count: usize,
    /// Where the count came from, for messages.
    pub origin: &'a str,
}

impl Layout {
    /// Number of classes the model predicts, where the layout tells it.
    pub fn classes(&self) -> Option<usize> {
        match *self {
            Layout::V5 { classes, .. } | Layout::V8 { classes, .. } => Some(classes),
            Layout::EndToEnd { classes, .. } | Layout::RtDetr { classes, .. } => classes,
            Layout::RtDetrScores { classes, .. } => Some(classes),
        }
    }

    /// Number of candidate boxes (end-to-end: rows) per image.
    pub fn anchors(&self) -> usize {
        match *self {
            Layout::V5 { anchors, .. } | Layout::V8 { anchors, .. } => anchors,
            Layout::EndToEnd { rows, .. } | Layout::RtDetr { rows, .. } => rows,
            Layout::RtDetrScores { queries, .. } => queries,
        }
    }

    /// Whether the model did its own NMS or top-k (the decoder only thresholds).
    pub fn end_to_end(&self) -> bool {
        matches!(self, Layout::EndToEnd { .. } | Layout::RtDetr { .. } | Layout::RtDetrScores { .. })
    }

    /// How frames are fitted into the input for this layout: as the model's authors fit them
    /// (ultralytics: letterbox for YOLO, stretched for RT-DETR, `RTDETRPredictor.scale_fill`).
    pub fn fit(&self) -> Fit {
        match self {
            Layout::RtDetr { .. } | Layout::RtDetrScores { .. } => Fit::Stretch,
            _ => Fit::Letterbox,
        }
    }

    /// Works out the layout from an output shape (`[1, a, b]` or `[a, b]`) alone.
    ///
    /// Candidates always outnumber the per-candidate values (thousands against
    /// 5 + C), so the longer axis holds the candidates: `[1, 4 + C, N]` is
    /// YOLOv8, `[1, N, 5 + C]` is YOLOv5. `hint` forces one reading. A shape that fits two
    /// layouts (`[1, 300, 6]`: end-to-end, or YOLOv5 with one class) is refused; with the
    /// model's metadata and names, [`Layout::decide`] can tell them apart.
    pub fn detect(shape: &[usize], hint: LayoutHint) -> Result<Layout, LayoutError> {
        Layout::decide(shape, hint, &Metadata::default(), None).map(|d| d.layout)
    }

    /// Decides the layout, in this order:
    /// 1. `hint` (`[model] layout`), when not `auto`: that layout, if the shape has room for it;
    /// 2. the metadata: a `task` other than `detect` is refused; ultralytics' `end2end` or
    ///    `args['nms']` make it end-to-end (and `end2end = False` rules that out), as
    ///    ultralytics' `AutoBackend` decides it; an RT-DETR model ([`Metadata::rt_detr`]: its
    ///    head, or before ultralytics 8.4 its description) is RT-DETR, as choosing ultralytics'
    ///    `RTDETR` class decides it;
    /// 3. the shape, with the class count where `classes` gives it (`[1, 4 + C, N]`,
    ///    `[1, N, 5 + C]`), else the longer axis holding the candidates; `[1, K, 6]` may be
    ///    end-to-end.
    ///
    /// Exactly one layout must remain: none is [`LayoutError::NoClasses`] or
    /// [`LayoutError::Rank`], several is [`LayoutError::Ambiguous`] (naming `[model] layout`).
    pub fn decide(
        shape: &[usize],
        hint: LayoutHint,
        meta: &Metadata,
        classes: Option<KnownClasses<'_>>,
    ) -> Result<Decision, LayoutError> {
        let (a, b) = match shape {
            [1, a, b] | [a, b] => (*a, *b),
            _ => return Err(LayoutError::Rank { shape: shape.to_vec() }),
        };
        let v8 = Layout::V8 { anchors: b, classes: a.saturating_sub(4) };
        let v5 = Layout::V5 { anchors: a, classes: b.saturating_sub(5) };
        let e2e = Layout::EndToEnd { rows: a, classes: classes.map(|c| c.count) };
        let rt_detr = Layout::RtDetr { rows: a, classes: classes.map(|c| c.count) };
        let rt_detr_scores = Layout::RtDetrScores { queries: a, classes: b.saturating_sub(4) };
        let forced = match hint {
            LayoutHint::Auto => None,
            LayoutHint::V8 => Some((a > 4).then_some(v8)),
            LayoutHint::V5 => Some((b > 5).then_some(v5)),
            LayoutHint::EndToEnd => Some((b == 6).then_some(e2e)),
            LayoutHint::RtDetr if b == 6 => Some(Some(rt_detr)),
            LayoutHint::RtDetr => Some((b > 4).then_some(rt_detr_scores)),
        };
        if let Some(found) = forced {
            let layout = found.ok_or_else(|| LayoutError::NoClasses { shape: shape.to_vec(), hint })?;
            return Ok(Decision { layout, why: format!("[model] layout = \"{hint}\"") });
        }
        if let Some(task) = meta.task.as_deref().filter(|t| *t != "detect") {
            return Err(LayoutError::Task { task: task.to_string() });
        }
        if meta.rt_detr() {
            // 8.4 writes the head and exports the top-k rows; before, no head, every class's score.
            let fits = |c: usize| classes.is_none_or(|k| k.count == c);
            return match (meta.head.is_some(), b) {
                (true, 6) => Ok(Decision { layout: rt_detr, why: format!("metadata head = RTDETRDecoder, output {shape:?}") }),
                (false, b) if b > 4 && fits(b - 4) => Ok(Decision {
                    layout: rt_detr_scores,
                    why: format!("metadata description names RT-DETR, no head (before ultralytics 8.4), output {shape:?}"),
                }),
                _ => Err(LayoutError::RtDetr { shape: shape.to_vec() }),
            };
        }
        let end2end = meta.end_to_end();
        let said = match (meta.end2end, meta.nms) {
            (Some(true), _) => "metadata end2end = True",
            (_, Some(true)) => "metadata args nms = True",
            _ => "metadata end2end = False",
        };
        if end2end == Some(true) {
            return match b == 6 {
                true => Ok(Decision { layout: e2e, why: format!("{said}, output {shape:?}") }),
                false => Err(LayoutError::NotEndToEnd { shape: shape.to_vec(), said }),
            };
        }
        // What the shape allows, with the class count where it is known.
        let mut fits: Vec<(Layout, String)> = Vec::new();
        match classes {
            Some(c) => {
                let n = c.count;
                if a == 4 + n {
                    fits.push((v8, format!("output {shape:?} = [1, 4 + {n} classes ({}), N]", c.origin)));
                }
                if b == 5 + n {
                    fits.push((v5, format!("output {shape:?} = [1, N, 5 + {n} classes ({})]", c.origin)));
                }
            }
            None => {
                let longer = "the longer axis holds the candidates";
                if a > 4 && b > a {
                    fits.push((v8, format!("output {shape:?}: {longer}")));
                }
                if b > 5 && a > b {
                    fits.push((v5, format!("output {shape:?}: {longer}")));
                }
            }
        }
        if b == 6 && end2end.is_none() {
            fits.push((e2e, format!("output {shape:?}: rows of x1 y1 x2 y2 score class")));
        }
        match fits.len() {
            1 => {
                let (layout, mut why) = fits.remove(0);
                if end2end == Some(false) {
                    why = format!("{why}; {said}");
                }
                Ok(Decision { layout, why })
            }
            0 => Err(LayoutError::NoClasses { shape: shape.to_vec(), hint }),
            _ => Err(LayoutError::Ambiguous {
                shape: shape.to_vec(),
                candidates: fits.iter().map(|(l, _)| *l).collect(),
            }),
        }
    }
}

/// An output shape that is not a YOLO detection output, or not one jetdetect can tell apart.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// Not `[1, a, b]` or `[a, b]`.
    #[error(
        "output shape {shape:?} is not a YOLO detection output: expected [1, N, 5+C] (YOLOv5), \
         [1, 4+C, N] (YOLOv8 and later) or [1, K, 6] (end-to-end); segmentation, pose and \
         classification models are not detection models"
    )]
    Rank {
        /// The shape.
        shape: Vec<usize>,
    },
    /// The right rank, but no room for a class in the layout read (or forced).
    #[error(
        "output shape {shape:?} is not a YOLO detection output{}: expected [1, N, 5+C] (YOLOv5), \
         [1, 4+C, N] (YOLOv8 and later) with C the model's classes, or [1, K, 6] (end-to-end)",
        match hint {
            LayoutHint::V5 => " in the YOLOv5 layout (forced by [model] layout)",
            LayoutHint::V8 => " in the YOLOv8 layout (forced by [model] layout)",
            LayoutHint::EndToEnd => " in the end-to-end layout (forced by [model] layout)",
            LayoutHint::RtDetr => " in the RT-DETR layout (forced by [model] layout)",
            LayoutHint::Auto => "",
        }
    )]
    NoClasses {
        /// The shape.
        shape: Vec<usize>,
        /// The layout asked for.
        hint: LayoutHint,
    },
    /// The shape fits several layouts and nothing in the model says which.
    #[error(
        "output shape {shape:?} fits {} and the model's metadata does not say which: set [model] \
         layout to {} (or re-export with ultralytics, whose metadata says)",
        candidates.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(" and "),
        candidates.iter().map(|l| format!("\"{}\"", l.hint())).collect::<Vec<_>>().join(" or ")
    )]
    Ambiguous {
        /// The shape.
        shape: Vec<usize>,
        /// The layouts it fits.
        candidates: Vec<Layout>,
    },
    /// The metadata says the model is not a detection model.
    #[error(
        "the model's metadata says task = {task}: jetdetect runs detection models (task = detect); \
         export a detection model (e.g. yolo11n.pt, not yolo11n-{task}.pt)"
    )]
    Task {
        /// The model's task.
        task: String,
    },
    /// The metadata says end-to-end, the shape does not have 6 values per row.
    #[error(
        "the model's {said} (end-to-end, rows of x1 y1 x2 y2 score class) but its output is \
         {shape:?}, not [1, K, 6]: a segmentation, pose or OBB export? jetdetect runs detection models"
    )]
    NotEndToEnd {
        /// The shape.
        shape: Vec<usize>,
        /// The metadata that said so.
        said: &'static str,
    },
    /// An RT-DETR output that is neither form ultralytics exports.
    #[error(
        "the model's metadata says it is RT-DETR but its output is {shape:?}: expected [1, K, 6] \
         (ultralytics 8.4 and later, which write head = RTDETRDecoder) or [1, Q, 4 + C] with C the \
         model's classes (before 8.4); re-export it (yolo export model=rtdetr-l.pt format=onnx)"
    )]
    RtDetr {
        /// The shape.
        shape: Vec<usize>,
    },
}

impl Layout {
    /// The `[model] layout` value that chooses this layout.
    pub fn hint(&self) -> LayoutHint {
        match self {
            Layout::V5 { .. } => LayoutHint::V5,
            Layout::V8 { .. } => LayoutHint::V8,
            Layout::EndToEnd { .. } => LayoutHint::EndToEnd,
            Layout::RtDetr { .. } | Layout::RtDetrScores { .. } => LayoutHint::RtDetr,
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layout::V5 { anchors, classes } => write!(f, "YOLOv5 [1, {anchors}, {}]", 5 + classes),
            Layout::V8 { anchors, classes } => write!(f, "YOLOv8 [1, {}, {anchors}]", 4 + classes),
            Layout::EndToEnd { rows, .. } => write!(f, "end-to-end [1, {rows}, 6]"),
            Layout::RtDetr { rows, .. } => write!(f, "RT-DETR [1, {rows}, 6]"),
            Layout::RtDetrScores { queries, classes } => {
                write!(f, "RT-DETR before ultralytics 8.4 [1, {queries}, {}]", 4 + classes)
            }
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
    }

    fn meta(pairs: &[(&str, &str)]) -> Metadata {
        Metadata::read(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    fn names(count: usize) -> Option<KnownClasses<'static>> {
        Some(KnownClasses { count, origin: "model metadata" })
    }

    #[test]
    fn an_end_to_end_shape_without_metadata_is_refused_naming_the_candidates_and_the_key() {
        let e = Layout::detect(&[1, 300, 6], LayoutHint::Auto).unwrap_err();
        let candidates =
            vec![Layout::V5 { anchors: 300, classes: 1 }, Layout::EndToEnd { rows: 300, classes: None }];
        assert_eq!(e, LayoutError::Ambiguous { shape: vec![1, 300, 6], candidates });
        let text = e.to_string();
        assert!(text.contains("[model] layout") && text.contains("\"v5\" or \"end2end\""), "{text}");
        // Said by the config, either reading is taken.
        assert_eq!(
            Layout::detect(&[1, 300, 6], LayoutHint::EndToEnd).unwrap(),
            Layout::EndToEnd { rows: 300, classes: None }
        );
        assert_eq!(
            Layout::detect(&[1, 300, 6], LayoutHint::V5).unwrap(),
            Layout::V5 { anchors: 300, classes: 1 }
        );
        assert!(Layout::detect(&[1, 84, 8400], LayoutHint::EndToEnd).is_err(), "not 6 values a row");
    }

    #[test]
    fn the_metadata_decides_as_ultralytics_autobackend_does() {
        let e2e = |m: &Metadata, c| Layout::decide(&[1, 300, 6], LayoutHint::Auto, m, c);
        // end2end = True (YOLO26 / YOLOv10 nms=False), or args nms = True (an nms=True export).
        let d = e2e(&meta(&[("task", "detect"), ("end2end", "True")]), names(80)).unwrap();
        assert_eq!(d.layout, Layout::EndToEnd { rows: 300, classes: Some(80) });
        assert!(d.why.contains("end2end = True"), "{}", d.why);
        let d = e2e(&meta(&[("end2end", "False"), ("args", "{'nms': True}")]), None).unwrap();
        assert!(d.why.contains("nms = True"), "{}", d.why);
        // end2end = False with one class: a YOLOv5 layout, and the metadata said why.
        let d = e2e(&meta(&[("end2end", "False")]), names(1)).unwrap();
        assert_eq!(d.layout, Layout::V5 { anchors: 300, classes: 1 });
        // The names' count alone: 4 classes cannot be [1, 300, 5 + 4]: end-to-end.
        assert!(e2e(&Metadata::default(), names(4)).unwrap().layout.end_to_end());
        // End-to-end said, another shape: a segmentation export, say.
        let e = Layout::decide(&[1, 300, 38], LayoutHint::Auto, &meta(&[("end2end", "True")]), None);
        assert!(matches!(e, Err(LayoutError::NotEndToEnd { .. })), "{e:?}");
        // Not a detection model, or an RT-DETR.
        let e = Layout::decide(&[1, 56, 8400], LayoutHint::Auto, &meta(&[("task", "pose")]), None);
        assert!(e.unwrap_err().to_string().contains("task = pose"));
        let rt = meta(&[("head", "RTDETRDecoder"), ("end2end", "False")]);
        let d = Layout::decide(&[1, 300, 6], LayoutHint::Auto, &rt, names(80)).unwrap();
        assert_eq!(
            (d.layout, d.layout.fit()),
            (Layout::RtDetr { rows: 300, classes: Some(80) }, Fit::Stretch)
        );
        // An 8.4 head with another shape is no RT-DETR output jetdetect knows.
        let e = Layout::decide(&[1, 300, 84], LayoutHint::Auto, &rt, names(80));
        assert!(matches!(e, Err(LayoutError::RtDetr { .. })), "{e:?}");
        // Before ultralytics 8.4: no head, the description names rtdetr-l, every class's score.
        let old =
            meta(&[("task", "detect"), ("description", "Ultralytics rtdetr-l model trained on coco.yaml")]);
        let d = Layout::decide(&[1, 300, 84], LayoutHint::Auto, &old, names(80)).unwrap();
        assert_eq!(
            (d.layout, d.layout.fit()),
            (Layout::RtDetrScores { queries: 300, classes: 80 }, Fit::Stretch)
        );
        assert!(
            Layout::decide(&[1, 300, 84], LayoutHint::Auto, &old, names(3)).is_err(),
            "80 scores, 3 names"
        );
    }

    #[test]
    fn the_class_count_reads_small_exports_the_longer_axis_would_misread() {
        // 32 x 32 input: 16 + 4 + 1 = 21 candidates, fewer than 4 + 80 values each.
        assert_eq!(
            Layout::detect(&[1, 84, 21], LayoutHint::Auto).unwrap(),
            Layout::V5 { anchors: 84, classes: 16 }
        );
        let d = Layout::decide(&[1, 84, 21], LayoutHint::Auto, &Metadata::default(), names(80)).unwrap();
        assert_eq!(d.layout, Layout::V8 { anchors: 21, classes: 80 });
        assert!(d.why.contains("80 classes (model metadata)"), "{}", d.why);
        let d = Layout::decide(&[1, 25200, 85], LayoutHint::Auto, &Metadata::default(), names(80)).unwrap();
        assert_eq!(d.layout, Layout::V5 { anchors: 25200, classes: 80 });
        // A count that fits neither axis.
        let e = Layout::decide(&[1, 84, 8400], LayoutHint::Auto, &Metadata::default(), names(3));
        assert!(matches!(e, Err(LayoutError::NoClasses { .. })));
    }
}
