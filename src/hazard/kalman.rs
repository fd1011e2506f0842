//! A constant-velocity Kalman filter on a box, as ByteTrack (and DeepSORT before it) runs one.
//!
//! State `[cx, cy, a, h, vx, vy, va, vh]`: centre, aspect ratio `w / h`, height and their rates;
//! the measurement is the first four. Noise scales with the box height (a near box moves more
//! pixels than a far one), with DeepSORT's weights. Unlike those trackers, time is real: `dt` is
//! the capture interval in units of [`FRAME_S`] (1/30 s), so a dropped frame or a slower camera
//! predicts as far as the object really moved, and the process noise grows with the gap.
//!
//! Written here rather than taken from nalgebra: 8x8 and 4x4 fixed arrays on the stack, no
//! allocation per frame (the daemon makes none; `tests/alloc.rs`).

// Matrix arithmetic reads best with the indices of the formulas.
#![allow(clippy::needless_range_loop)]

/// The time unit of the filter's rates: one frame at 30 fps.
pub const FRAME_S: f64 = 1.0 / 30.0;

const STD_POSITION: f64 = 1.0 / 20.0;
const STD_VELOCITY: f64 = 1.0 / 160.0;

type M8 = [[f64; 8]; 8];
type M4 = [[f64; 4]; 4];

/// The filter's state for one track.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoxKalman {
    /// `[cx, cy, a, h, vx, vy, va, vh]`; rates per [`FRAME_S`].
    pub x: [f64; 8],
    /// Its covariance.
    pub p: M8,
}

/// `[cx, cy, a, h]` of a box given by its corners.
pub fn measure(x1: f32, y1: f32, x2: f32, y2: f32) -> [f64; 4] {
    let (w, h) = (((x2 - x1) as f64).max(1e-3), ((y2 - y1) as f64).max(1e-3));
    [(x1 as f64 + x2 as f64) / 2.0, (y1 as f64 + y2 as f64) / 2.0, w / h, h]
}

impl BoxKalman {
    /// A new track at measurement `z`, rates unknown.
    pub fn new(z: [f64; 4]) -> BoxKalman {
        let h = z[3];
        let std = [
            2.0 * STD_POSITION * h,
            2.0 * STD_POSITION * h,
            1e-2,
            2.0 * STD_POSITION * h,
            10.0 * STD_VELOCITY * h,
            10.0 * STD_VELOCITY * h,
            1e-5,
            10.0 * STD_VELOCITY * h,
        ];
        let mut p = [[0.0; 8]; 8];
        for i in 0..8 {
            p[i][i] = std[i] * std[i];
        }
        BoxKalman { x: [z[0], z[1], z[2], z[3], 0.0, 0.0, 0.0, 0.0], p }
    }

    /// Moves the state `dt` frame units (1/30 s each) ahead.
    pub fn predict(&mut self, dt: f64) {
        let dt = dt.clamp(0.0, 300.0);
        for i in 0..4 {
            self.x[i] += dt * self.x[i + 4];
        }
        // P = F P F^T with F = [[I, dt I], [0, I]], done in place.
        let p = &mut self.p;
        for r in 0..8 {
            for c in 0..4 {
                p[r][c] += dt * p[r][c + 4];
            }
        }
        for r in 0..4 {
            for c in 0..8 {
                p[r][c] += dt * p[r + 4][c];
            }
        }
        let h = self.x[3].abs().max(1.0);
        let q = [
            STD_POSITION * h,
            STD_POSITION * h,
            1e-2,
            STD_POSITION * h,
            STD_VELOCITY * h,
            STD_VELOCITY * h,
            1e-5,
            STD_VELOCITY * h,
        ];
        for i in 0..8 {
            p[i][i] += q[i] * q[i] * dt;
        }
    }

    /// The state's box `(x1, y1, x2, y2)`.
    pub fn corners(&self) -> [f32; 4] {
        let (cx, cy, a, h) = (self.x[0], self.x[1], self.x[2].max(1e-3), self.x[3].max(1e-3));
        let w = a * h;
        [(cx - w / 2.0) as f32, (cy - h / 2.0) as f32, (cx + w / 2.0) as f32, (cy + h / 2.0) as f32]
    }

    /// Corrects the state with measurement `z`.
    pub fn update(&mut self, z: [f64; 4]) {
        let h = self.x[3].abs().max(1.0);
        let r = [STD_POSITION * h, STD_POSITION * h, 1e-1, STD_POSITION * h];
        // S = H P H^T + R: the top-left 4x4 of P.
        let mut s: M4 = [[0.0; 4]; 4];
        for i in 0..4 {
            for j in 0..4 {
                s[i][j] = self.p[i][j];
            }
            s[i][i] += r[i] * r[i];
        }
        let Some(s_inv) = invert4(&s) else { return };
        // K = P H^T S^-1: P's first four columns times S^-1.
        let mut k = [[0.0; 4]; 8];
        for (row, k_row) in k.iter_mut().enumerate() {
            for j in 0..4 {
                k_row[j] = (0..4).map(|m| self.p[row][m] * s_inv[m][j]).sum();
            }
        }
        let innovation: [f64; 4] = std::array::from_fn(|i| z[i] - self.x[i]);
        for (row, k_row) in k.iter().enumerate() {
            self.x[row] += (0..4).map(|j| k_row[j] * innovation[j]).sum::<f64>();
        }
        // P = (I - K H) P = P - K (H P), and H P is P's first four rows.
        let old = self.p;
        for (row, k_row) in k.iter().enumerate() {
            for c in 0..8 {
                self.p[row][c] = old[row][c] - (0..4).map(|j| k_row[j] * old[j][c]).sum::<f64>();
            }
        }
    }
}

/// The inverse of a symmetric positive-definite 4x4 matrix (Gauss-Jordan with pivoting).
fn invert4(m: &M4) -> Option<M4> {
    let mut a = *m;
    let mut inv: M4 = [[0.0; 4]; 4];
    for (i, row) in inv.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    for col in 0..4 {
        let pivot = (col..4).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        inv.swap(col, pivot);
        let d = a[col][col];
        for j in 0..4 {
            a[col][j] /= d;
            inv[col][j] /= d;
        }
        for r in 0..4 {
            if r != col {
                let f = a[r][col];
                for j in 0..4 {
                    a[r][j] -= f * a[col][j];
                    inv[r][j] -= f * inv[col][j];
                }
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_box_moving_at_constant_speed_is_followed_and_its_rates_found() {
        // 3 px right and 0.5 px taller per frame unit, observed every other unit (15 fps).
        let at = |t: f64| [100.0 + 3.0 * t, 200.0, 0.5, 80.0 + 0.5 * t];
        let mut k = BoxKalman::new(at(0.0));
        for step in 1..=40 {
            k.predict(2.0);
            k.update(at(2.0 * step as f64));
        }
        assert!((k.x[4] - 3.0).abs() < 0.05, "vx {}", k.x[4]);
        assert!((k.x[7] - 0.5).abs() < 0.05, "vh {}", k.x[7]);
        assert!(k.x[5].abs() < 0.05);
        // A gap: the prediction goes as far as the box went.
        k.predict(10.0);
        let want = at(90.0);
        assert!((k.x[0] - want[0]).abs() < 1.0 && (k.x[3] - want[3]).abs() < 1.0, "{:?}", k.x);
        let [x1, y1, x2, y2] = k.corners();
        assert!((((x2 - x1) / (y2 - y1)) as f64 - 0.5).abs() < 0.01);
    }

    #[test]
    fn the_inverse_is_an_inverse() {
        let m = [[4.0, 1.0, 0.0, 0.5], [1.0, 3.0, 0.2, 0.0], [0.0, 0.2, 2.0, 0.1], [0.5, 0.0, 0.1, 1.0]];
        let inv = invert4(&m).unwrap();
        for i in 0..4 {
            for j in 0..4 {
                let v: f64 = (0..4).map(|k| m[i][k] * inv[k][j]).sum();
                assert!((v - if i == j { 1.0 } else { 0.0 }).abs() < 1e-9);
            }
        }
        assert!(invert4(&[[0.0; 4]; 4]).is_none());
    }
}
