//! Box geometry on `[x1, y1, x2, y2]` corners, shared by decoding (NMS), tracking, the
//! evaluation and the synthetic source's ground truth: the ground floor, importing nothing.

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
    fn iou_of_known_boxes() {
        assert_eq!(iou([0.0, 0.0, 2.0, 2.0], [1.0, 1.0, 3.0, 3.0]), 1.0 / 7.0);
        assert_eq!(iou([0.0, 0.0, 1.0, 1.0], [2.0, 2.0, 3.0, 3.0]), 0.0);
        assert_eq!(iou([0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]), 0.0);
    }
}
