//! The least-squares line through `(t, y)` points, two passes (the means, then the sums about
//! them): the time to contact's rate of growth (`ttc`), an obstacle's sideways drift and the
//! vehicle's heading (`course`) are each one.

/// A fitted line: `y = mean_y + slope * (t - mean_t)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line {
    /// Points fitted.
    pub n: usize,
    /// dy/dt.
    pub slope: f64,
    /// The points' mean time.
    pub mean_t: f64,
    /// The points' mean value.
    pub mean_y: f64,
    /// The sum of squared time deviations, `Σ (t - mean_t)²` (for the slope's standard error).
    pub stt: f64,
}

impl Line {
    /// The line's value at `t`.
    pub fn at(&self, t: f64) -> f64 {
        self.mean_y + self.slope * (t - self.mean_t)
    }
}

/// The line through `points`; `None` for fewer than 3, or all at one time.
pub fn fit(points: impl Iterator<Item = (f64, f64)> + Clone) -> Option<Line> {
    let (mut n, mut st, mut sy) = (0usize, 0.0, 0.0);
    for (t, y) in points.clone() {
        n += 1;
        st += t;
        sy += y;
    }
    if n < 3 {
        return None;
    }
    let (mean_t, mean_y) = (st / n as f64, sy / n as f64);
    let (mut stt, mut sty) = (0.0, 0.0);
    for (t, y) in points {
        stt += (t - mean_t) * (t - mean_t);
        sty += (t - mean_t) * (y - mean_y);
    }
    if stt <= 0.0 {
        return None;
    }
    Some(Line { n, slope: sty / stt, mean_t, mean_y, stt })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_through_points_on_a_line_is_that_line() {
        let l = fit([(1.0, 3.0), (2.0, 5.0), (4.0, 9.0)].into_iter()).unwrap();
        assert!((l.slope - 2.0).abs() < 1e-12 && (l.at(0.0) - 1.0).abs() < 1e-12, "{l:?}");
        assert_eq!(l.n, 3);
        assert!(fit([(1.0, 3.0), (2.0, 5.0)].into_iter()).is_none(), "two points fit any line");
        assert!(fit([(1.0, 3.0), (1.0, 5.0), (1.0, 4.0)].into_iter()).is_none(), "all at one time");
    }
}
