//! Candidate extraction, class-aware non-maximum suppression, box mapping.
//!
//! Semantics follow the reference implementations so that results compare:
//! a candidate is kept when its score is strictly above the confidence
//! threshold (YOLOv5: objectness too, and score = objectness x class score);
//! candidates are sorted by score, at most `max_candidates` enter NMS, a box is
//! suppressed by a higher-scoring box of the same class with IoU strictly above
//! the IoU threshold, and at most `max_detections` survive.
//!
//! End-to-end outputs ([`Layout::EndToEnd`]) went through the model's own NMS or top-k: as
//! ultralytics' `non_max_suppression` reads them (`utils/nms.py`: `pred[pred[:, 4] >
//! conf_thres][:max_det]`), a row is kept when its score is above the threshold, in the
//! model's order, and the first `max_detections` are returned; there is no NMS here.

use super::{Detection, Layout};
use crate::geometry::iou;
use crate::preprocess::Letterbox;

/// Thresholds and limits for decoding.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecodeOptions {
    /// Minimum score (exclusive), `0..1`.
    pub confidence: f32,
    /// IoU above which a lower-scoring box of the same class is suppressed.
    pub iou: f32,
    /// Most detections returned per frame.
    pub max_detections: usize,
    /// Most candidates (best first) that enter NMS.
    pub max_candidates: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions { confidence: 0.25, iou: 0.45, max_detections: 100, max_candidates: 30_000 }
    }
}

/// A box `cx cy w h` as corners `[x1, y1, x2, y2]` (ultralytics' `xywh2xyxy`).
fn xyxy(cx: f32, cy: f32, w: f32, h: f32) -> [f32; 4] {
    [cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0]
}

/// The best of a candidate's class scores and its class: the first of equal scores, never NaN
/// (`(-inf, 0)` when every score is NaN).
fn best_class(scores: &[f32]) -> (f32, usize) {
    let mut best = (f32::NEG_INFINITY, 0);
    for (k, &s) in scores.iter().enumerate() {
        if s > best.0 {
            best = (s, k);
        }
    }
    best
}

#[derive(Clone, Copy, Debug)]
struct Candidate {
    score: f32,
    class_id: usize,
    index: usize,
    b: [f32; 4],
}

/// Decodes one model output at a time, reusing its buffers.
pub struct Decoder {
    layout: Layout,
    options: DecodeOptions,
    candidates: Vec<Candidate>,
    suppressed: Vec<bool>,
}

/// How an end-to-end row's four box values read.
#[derive(Clone, Copy)]
enum Corners {
    /// `x1 y1 x2 y2` in input pixels (YOLO end-to-end heads, `nms=True` exports).
    Pixels,
    /// `cx cy w h` as fractions of the input (RT-DETR): ultralytics' `RTDETRPredictor` turns them
    /// into corners (`xywh2xyxy`) and multiplies by the frame's size, which over a stretched input
    /// is the input's size mapped back.
    NormalisedCentre,
}

impl Decoder {
    /// A decoder for `layout`.
    pub fn new(layout: Layout, options: DecodeOptions) -> Decoder {
        // Room for every candidate up front, so no frame ever grows these buffers.
        let n = layout.anchors();
        Decoder { layout, options, candidates: Vec::with_capacity(n), suppressed: Vec::with_capacity(n) }
    }

    /// The layout this decoder reads.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The thresholds in use.
    pub fn options(&self) -> DecodeOptions {
        self.options
    }

    /// Decodes `output` into `detections` (cleared first), in source pixels.
    ///
    /// `output` must hold exactly one image's tensor for this decoder's layout.
    pub fn decode(&mut self, output: &[f32], letterbox: &Letterbox, detections: &mut Vec<Detection>) {
        detections.clear();
        match self.layout {
            Layout::V8 { anchors, classes } => {
                debug_assert_eq!(output.len(), anchors * (4 + classes));
                self.v8_candidates(output, anchors, classes);
                self.nms(letterbox, detections);
            }
            Layout::V5 { anchors, classes } => {
                debug_assert_eq!(output.len(), anchors * (5 + classes));
                self.v5_candidates(output, classes);
                self.nms(letterbox, detections);
            }
            Layout::EndToEnd { rows, classes } => {
                debug_assert_eq!(output.len(), rows * 6);
                self.end_to_end(output, classes, Corners::Pixels, letterbox, detections);
            }
            Layout::RtDetr { rows, classes } => {
                debug_assert_eq!(output.len(), rows * 6);
                self.end_to_end(output, classes, Corners::NormalisedCentre, letterbox, detections);
            }
            Layout::RtDetrScores { queries, classes } => {
                debug_assert_eq!(output.len(), queries * (4 + classes));
                self.rt_detr_scores(output, classes, letterbox, detections);
            }
        }
    }

    /// YOLOv8's `[4 + classes, anchors]` into candidates: the best class above the threshold.
    fn v8_candidates(&mut self, output: &[f32], anchors: usize, classes: usize) {
        self.candidates.clear();
        let conf = self.options.confidence;
        let row = |k: usize| &output[k * anchors..(k + 1) * anchors];
        for i in 0..anchors {
            let mut best = (f32::NEG_INFINITY, 0);
            for c in 0..classes {
                let s = output[(4 + c) * anchors + i];
                if s > best.0 {
                    best = (s, c);
                }
            }
            if best.0 > conf {
                self.candidates.push(Candidate {
                    score: best.0,
                    class_id: best.1,
                    index: i,
                    b: xyxy(row(0)[i], row(1)[i], row(2)[i], row(3)[i]),
                });
            }
        }
    }

    /// YOLOv5's `[anchors, 5 + classes]` into candidates: objectness above the threshold, then
    /// objectness x the best class score above it.
    fn v5_candidates(&mut self, output: &[f32], classes: usize) {
        self.candidates.clear();
        let conf = self.options.confidence;
        for (i, c) in output.chunks_exact(5 + classes).enumerate() {
            let obj = c[4];
            if obj <= conf {
                continue;
            }
            let best = best_class(&c[5..]);
            let score = obj * best.0;
            if score > conf {
                self.candidates.push(Candidate {
                    score,
                    class_id: best.1,
                    index: i,
                    b: xyxy(c[0], c[1], c[2], c[3]),
                });
            }
        }
    }

    /// The candidates through class-aware NMS into `detections`.
    fn nms(&mut self, letterbox: &Letterbox, detections: &mut Vec<Detection>) {
        // An engine can overflow (FP16 on TensorRT) or emit NaN: such a candidate has no place to
        // be drawn, and JSON has no NaN or infinity (a client would get null for a number).
        self.candidates.retain(|c| c.score.is_finite() && c.b.iter().all(|v| v.is_finite()));
        // Best first; ties keep tensor order so results are deterministic.
        self.candidates.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
        self.candidates.truncate(self.options.max_candidates);
        self.suppressed.clear();
        self.suppressed.resize(self.candidates.len(), false);
        for i in 0..self.candidates.len() {
            if self.suppressed[i] {
                continue;
            }
            let keep = self.candidates[i];
            if self.emit(keep.class_id, keep.score, keep.b, letterbox, detections) {
                break;
            }
            for j in i + 1..self.candidates.len() {
                let other = &self.candidates[j];
                if !self.suppressed[j]
                    && other.class_id == keep.class_id
                    && iou(keep.b, other.b) > self.options.iou
                {
                    self.suppressed[j] = true;
                }
            }
        }
    }

    /// Adds a detection of box `b` (input pixels) mapped back to the frame; `true` once
    /// `max_detections` are there.
    fn emit(
        &self,
        class_id: usize,
        score: f32,
        b: [f32; 4],
        letterbox: &Letterbox,
        detections: &mut Vec<Detection>,
    ) -> bool {
        let (x1, y1) = letterbox.to_source(b[0], b[1]);
        let (x2, y2) = letterbox.to_source(b[2], b[3]);
        detections.push(Detection { class_id, score, x1, y1, x2, y2 });
        detections.len() >= self.options.max_detections
    }

    /// End-to-end rows `<box> score class`: thresholded, in the model's order, at most
    /// `max_detections`. A row whose class is not a whole number from 0 (below the class count,
    /// where it is known) or whose box is not finite is no detection: an engine that overflowed
    /// (FP16) or a model that is not end-to-end after all.
    fn end_to_end(
        &self,
        output: &[f32],
        classes: Option<usize>,
        corners: Corners,
        letterbox: &Letterbox,
        detections: &mut Vec<Detection>,
    ) {
        let (w, h) = (letterbox.dst_w as f32, letterbox.dst_h as f32);
        let limit = classes.unwrap_or(1 << 24);
        for row in output.chunks_exact(6) {
            let (score, class) = (row[4], row[5]);
            // `score > conf` is false for NaN too.
            let confident = score > self.options.confidence && score.is_finite();
            let class_id = class >= 0.0 && class.fract() == 0.0 && (class as usize) < limit;
            if !confident || !class_id {
                continue;
            }
            let b = match corners {
                Corners::Pixels => [row[0], row[1], row[2], row[3]],
                Corners::NormalisedCentre => xyxy(row[0] * w, row[1] * h, row[2] * w, row[3] * h),
            };
            // Checked after scaling: a finite value times the input size can overflow, and
            // infinity minus infinity is NaN, which no clipping makes a coordinate.
            if b.iter().all(|v| v.is_finite()) && self.emit(class as usize, score, b, letterbox, detections) {
                break;
            }
        }
    }

    /// RT-DETR before ultralytics 8.4: one row per query, `cx cy w h` normalised and every
    /// class's score, read as its `RTDETRPredictor.postprocess` read them (`xywh2xyxy`, the best
    /// class by `max`, kept above `conf`, in query order, times the frame's width and height):
    /// the first best class on a tie; at most `max_detections`.
    fn rt_detr_scores(
        &self,
        output: &[f32],
        classes: usize,
        letterbox: &Letterbox,
        detections: &mut Vec<Detection>,
    ) {
        let (w, h) = (letterbox.dst_w as f32, letterbox.dst_h as f32);
        for row in output.chunks_exact(4 + classes) {
            let (score, class_id) = best_class(&row[4..]);
            if !(score > self.options.confidence && score.is_finite()) {
                continue;
            }
            let b = xyxy(row[0] * w, row[1] * h, row[2] * w, row[3] * h);
            if b.iter().all(|v| v.is_finite()) && self.emit(class_id, score, b, letterbox, detections) {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a YOLOv8 tensor `[4 + C, N]` from `(cx, cy, w, h, scores)` rows.
    fn v8_tensor(cands: &[([f32; 4], Vec<f32>)]) -> Vec<f32> {
        let n = cands.len();
        let c = cands[0].1.len();
        let mut t = vec![0.0; (4 + c) * n];
        for (i, (b, s)) in cands.iter().enumerate() {
            for k in 0..4 {
                t[k * n + i] = b[k];
            }
            for (k, v) in s.iter().enumerate() {
                t[(4 + k) * n + i] = *v;
            }
        }
        t
    }

    fn identity() -> Letterbox {
        Letterbox::new(100, 100, 100, 100)
    }

    #[test]
    fn v8_best_class_is_the_first_of_equal_scores_and_nan_is_never_best() {
        let far = |x: f32| [x, 10.0, 4.0, 4.0];
        let t = v8_tensor(&[
            (far(10.0), vec![0.1, 0.7, 0.7, 0.2]), // tie: the first class wins
            (far(40.0), vec![f32::NAN, 0.3, 0.6, f32::NAN]), // NaN ignored
            (far(70.0), vec![f32::NAN; 4]),        // nothing but NaN: no candidate
        ]);
        let mut d = Decoder::new(Layout::V8 { anchors: 3, classes: 4 }, DecodeOptions::default());
        let mut out = Vec::new();
        d.decode(&t, &identity(), &mut out);
        let got: Vec<(usize, f32)> = out.iter().map(|x| (x.class_id, x.score)).collect();
        assert_eq!(got, vec![(1, 0.7), (2, 0.6)]);
    }

    #[test]
    fn non_finite_boxes_and_scores_are_dropped() {
        let at = |x: f32| [x, 10.0, 4.0, 4.0];
        let t = v8_tensor(&[
            (at(10.0), vec![0.9]),
            ([f32::NAN, 10.0, 4.0, 4.0], vec![0.9]),
            ([40.0, 10.0, f32::INFINITY, 4.0], vec![0.9]),
            (at(70.0), vec![f32::INFINITY]),
            ([f32::MAX, 10.0, f32::MAX, 4.0], vec![0.9]), // cx + w / 2 overflows to infinity
        ]);
        let mut d = Decoder::new(Layout::V8 { anchors: 5, classes: 1 }, DecodeOptions::default());
        let mut out = Vec::new();
        d.decode(&t, &identity(), &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].x1, out[0].x2), (8.0, 12.0));
    }

    #[test]
    fn nms_is_class_aware_and_keeps_the_best() {
        let t = v8_tensor(&[
            ([50.0, 50.0, 20.0, 20.0], vec![0.9, 0.0]),
            ([51.0, 50.0, 20.0, 20.0], vec![0.8, 0.0]), // same class, overlapping: suppressed
            ([50.0, 50.0, 20.0, 20.0], vec![0.0, 0.7]), // other class: kept
            ([10.0, 10.0, 8.0, 8.0], vec![0.6, 0.0]),   // elsewhere: kept
            ([80.0, 80.0, 8.0, 8.0], vec![0.25, 0.0]),  // exactly at the threshold: dropped
        ]);
        let mut d = Decoder::new(Layout::V8 { anchors: 5, classes: 2 }, DecodeOptions::default());
        let mut out = Vec::new();
        d.decode(&t, &identity(), &mut out);
        let got: Vec<(usize, f32)> = out.iter().map(|d| (d.class_id, d.score)).collect();
        assert_eq!(got, vec![(0, 0.9), (1, 0.7), (0, 0.6)]);
        assert_eq!((out[0].x1, out[0].y1, out[0].x2, out[0].y2), (40.0, 40.0, 60.0, 60.0));
    }

    #[test]
    fn nms_suppresses_only_above_the_iou_threshold_not_at_it() {
        // torchvision.ops.nms, which ultralytics' non_max_suppression calls, discards boxes with
        // IoU > iou_threshold. A 20x10 box and the 10x10 box inside it overlap at exactly 0.5
        // (100 / (200 + 100 - 100), exact in f32); a third box overlaps the first above 0.5.
        let t = v8_tensor(&[
            ([10.0, 5.0, 20.0, 10.0], vec![0.9]),
            ([5.0, 5.0, 10.0, 10.0], vec![0.8]), // IoU 0.5 with the first: kept
            ([11.0, 5.0, 20.0, 10.0], vec![0.7]), // IoU 190/210 with the first: suppressed
        ]);
        assert_eq!(iou([0.0, 0.0, 20.0, 10.0], [0.0, 0.0, 10.0, 10.0]), 0.5);
        let options = DecodeOptions { iou: 0.5, ..DecodeOptions::default() };
        let mut d = Decoder::new(Layout::V8 { anchors: 3, classes: 1 }, options);
        let mut out = Vec::new();
        d.decode(&t, &identity(), &mut out);
        let got: Vec<f32> = out.iter().map(|d| d.score).collect();
        assert_eq!(got, vec![0.9, 0.8]);
    }

    #[test]
    fn v5_scores_multiply_objectness() {
        // [N, 5 + C]: obj 0.9 x cls 0.5 = 0.45 kept; obj 0.2 (< conf) dropped even with cls 1.0.
        let t = vec![
            50.0, 50.0, 10.0, 10.0, 0.9, 0.1, 0.5, //
            20.0, 20.0, 10.0, 10.0, 0.2, 1.0, 0.0,
        ];
        let mut d = Decoder::new(Layout::V5 { anchors: 2, classes: 2 }, DecodeOptions::default());
        let mut out = Vec::new();
        d.decode(&t, &identity(), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].class_id, 1);
        assert!((out[0].score - 0.45).abs() < 1e-6);
    }

    #[test]
    fn boxes_map_back_through_the_letterbox_and_clip() {
        // 200x100 frame in a 100x100 input: gain 0.5, 25 rows of padding on top.
        let lb = Letterbox::new(200, 100, 100, 100);
        let t = v8_tensor(&[([50.0, 50.0, 20.0, 10.0], vec![0.9]), ([2.0, 30.0, 10.0, 10.0], vec![0.8])]);
        let mut d = Decoder::new(Layout::V8 { anchors: 2, classes: 1 }, DecodeOptions::default());
        let mut out = Vec::new();
        d.decode(&t, &lb, &mut out);
        assert_eq!((out[0].x1, out[0].y1, out[0].x2, out[0].y2), (80.0, 40.0, 120.0, 60.0));
        assert_eq!((out[1].x1, out[1].x2), (0.0, 14.0), "clipped at the left edge");
    }

    #[test]
    fn an_end_to_end_row_is_read_as_corners_score_and_class() {
        // The reproduction: one row [8, 8, 40, 40, 0.9, 3] of a 64 x 64 model.
        let mut t = vec![0.0; 300 * 6];
        t[..6].copy_from_slice(&[8.0, 8.0, 40.0, 40.0, 0.9, 3.0]);
        let layout = Layout::detect(&[1, 300, 6], crate::yolo::LayoutHint::EndToEnd).unwrap();
        let mut d = Decoder::new(layout, DecodeOptions::default());
        let mut out = Vec::new();
        d.decode(&t, &Letterbox::new(64, 64, 64, 64), &mut out);
        assert_eq!(out, vec![Detection { class_id: 3, score: 0.9, x1: 8.0, y1: 8.0, x2: 40.0, y2: 40.0 }]);
        // Through a letterbox: a 128 x 64 frame in the 64 x 64 input (gain 0.5, 16 rows on top).
        d.decode(&t, &Letterbox::new(128, 64, 64, 64), &mut out);
        assert_eq!((out[0].x1, out[0].y1, out[0].x2, out[0].y2), (16.0, 0.0, 80.0, 48.0));
    }

    #[test]
    fn end_to_end_rows_keep_the_models_order_without_nms_and_stop_at_max_detections() {
        let rows: &[[f32; 6]] = &[
            [10.0, 10.0, 30.0, 30.0, 0.9, 0.0],
            [11.0, 10.0, 31.0, 30.0, 0.8, 0.0], // overlaps the first, same class: kept (no NMS here)
            [50.0, 50.0, 60.0, 60.0, 0.25, 1.0], // at the threshold: dropped
            [50.0, 50.0, 60.0, 60.0, 0.7, 2.5], // not a class id
            [50.0, 50.0, 60.0, 60.0, 0.7, 7.0], // past the 4 classes
            [f32::NAN, 50.0, 60.0, 60.0, 0.7, 1.0],
            [50.0, 50.0, 60.0, 60.0, f32::NAN, 1.0],
            [70.0, 70.0, 80.0, 80.0, 0.6, 3.0],
            [70.0, 70.0, 80.0, 80.0, 0.95, 1.0], // out of score order: the model's order is kept
            [0.0; 6],                            // padding
        ];
        let t: Vec<f32> = rows.iter().flatten().copied().collect();
        let layout = Layout::EndToEnd { rows: rows.len(), classes: Some(4) };
        let mut d = Decoder::new(layout, DecodeOptions::default());
        let mut out = Vec::new();
        d.decode(&t, &identity(), &mut out);
        let got: Vec<(usize, f32)> = out.iter().map(|x| (x.class_id, x.score)).collect();
        assert_eq!(got, vec![(0, 0.9), (0, 0.8), (3, 0.6), (1, 0.95)]);
        let mut d = Decoder::new(layout, DecodeOptions { max_detections: 2, ..DecodeOptions::default() });
        d.decode(&t, &identity(), &mut out);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn rt_detr_rows_are_normalised_centres_mapped_through_the_stretch() {
        // A 640x320 frame stretched over a 160x160 input: a box at the input's centre, half its
        // width and a quarter of its height, is (160, 120)-(480, 200) in the frame.
        let t = [[0.5, 0.5, 0.5, 0.25, 0.8, 2.0], [0.1, 0.1, 0.1, 0.1, 0.2, 1.0]].concat();
        let mut d = Decoder::new(Layout::RtDetr { rows: 2, classes: Some(4) }, DecodeOptions::default());
        let mut out = Vec::new();
        d.decode(&t, &Letterbox::stretched(640, 320, 160, 160), &mut out);
        assert_eq!(
            out,
            vec![Detection { class_id: 2, score: 0.8, x1: 160.0, y1: 120.0, x2: 480.0, y2: 200.0 }]
        );
    }

    #[test]
    fn rt_detr_boxes_that_overflow_when_scaled_are_dropped() {
        // Found by the fuzzer: a finite centre times the input size is infinite, and the corners
        // (infinity minus infinity) NaN, which clipping leaves NaN.
        let t = [[1e37, 1e37, 1e37, 1e37, 0.9, 0.0], [0.5, 0.5, 0.1, 0.1, 0.8, 1.0]].concat();
        let mut d = Decoder::new(Layout::RtDetr { rows: 2, classes: Some(2) }, DecodeOptions::default());
        let mut out = Vec::new();
        d.decode(&t, &Letterbox::stretched(640, 320, 160, 160), &mut out);
        assert_eq!(out.iter().map(|x| x.class_id).collect::<Vec<_>>(), vec![1], "{out:?}");
        let t = [[1e37, 1e37, 1e37, 1e37, 0.9, 0.3, 0.2], [0.5, 0.5, 0.1, 0.1, 0.1, 0.8, 0.2]].concat();
        let mut d = Decoder::new(Layout::RtDetrScores { queries: 2, classes: 3 }, DecodeOptions::default());
        d.decode(&t, &Letterbox::stretched(640, 320, 160, 160), &mut out);
        assert_eq!(out.iter().map(|x| x.class_id).collect::<Vec<_>>(), vec![1], "{out:?}");
    }

    #[test]
    fn rt_detr_before_8_4_takes_the_best_class_of_each_query_in_order() {
        // Two queries, three classes: the first's best is class 2 (0.7); the second's 0.2 is too low.
        let t = [[0.5, 0.5, 0.5, 0.25, 0.1, 0.3, 0.7], [0.1, 0.1, 0.1, 0.1, 0.2, 0.1, 0.0]].concat();
        let mut d = Decoder::new(Layout::RtDetrScores { queries: 2, classes: 3 }, DecodeOptions::default());
        let mut out = Vec::new();
        d.decode(&t, &Letterbox::stretched(640, 320, 160, 160), &mut out);
        assert_eq!(
            out,
            vec![Detection { class_id: 2, score: 0.7, x1: 160.0, y1: 120.0, x2: 480.0, y2: 200.0 }]
        );
    }

    #[test]
    fn max_detections_caps_the_output() {
        let cands: Vec<_> =
            (0..50).map(|i| ([i as f32 * 2.0, 5.0, 1.0, 1.0], vec![0.5 + i as f32 / 200.0])).collect();
        let opts = DecodeOptions { max_detections: 7, ..DecodeOptions::default() };
        let mut d = Decoder::new(Layout::V8 { anchors: 50, classes: 1 }, opts);
        let mut out = Vec::new();
        d.decode(&v8_tensor(&cands), &identity(), &mut out);
        assert_eq!(out.len(), 7);
        assert!(out.windows(2).all(|w| w[0].score >= w[1].score));
    }
}
