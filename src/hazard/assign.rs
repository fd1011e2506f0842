//! Minimum-cost matching of tracks to detections, with a cost limit (the Hungarian algorithm,
//! in its shortest-augmenting-path form, O(n^2 m)).
//!
//! ByteTrack matches with `lap.lapjv(cost, extend_cost=True, cost_limit=L)`: a row or column may
//! stay unmatched at `L / 2`. The same optimum comes from the rectangular problem with every cost
//! clamped to `L`, dropping the pairs at `L` afterwards: leaving a row unmatched then costs `L`
//! plus a column that costs nothing, which is the extended problem's `L / 2 + L / 2`. So no
//! extended matrix is built. All buffers are kept between frames: no allocation once grown.

/// A reusable solver.
#[derive(Clone, Debug, Default)]
pub struct Assignment {
    cost: Vec<f64>,
    u: Vec<f64>,
    v: Vec<f64>,
    p: Vec<usize>,
    way: Vec<usize>,
    minv: Vec<f64>,
    used: Vec<bool>,
    /// The pairs found by the last [`Assignment::solve`]: `(row, column)`.
    pub pairs: Vec<(usize, usize)>,
}

impl Assignment {
    /// A solver with room for `rows` x `cols` without growing.
    pub fn with_capacity(rows: usize, cols: usize) -> Assignment {
        let n = rows.max(cols) + 1;
        Assignment {
            cost: Vec::with_capacity(rows * cols),
            u: Vec::with_capacity(n),
            v: Vec::with_capacity(n),
            p: Vec::with_capacity(n),
            way: Vec::with_capacity(n),
            minv: Vec::with_capacity(n),
            used: Vec::with_capacity(n),
            pairs: Vec::with_capacity(n),
        }
    }

    /// Matches `rows` to `cols` at the least total cost `cost(r, c)`, keeping only pairs cheaper
    /// than `limit`; the result is in [`Assignment::pairs`], sorted by row.
    pub fn solve(&mut self, rows: usize, cols: usize, limit: f64, cost: impl Fn(usize, usize) -> f64) {
        self.pairs.clear();
        if rows == 0 || cols == 0 {
            return;
        }
        // The algorithm wants no more rows than columns: transpose when needed.
        let transposed = rows > cols;
        let (n, m) = if transposed { (cols, rows) } else { (rows, cols) };
        self.cost.clear();
        for i in 0..n {
            for j in 0..m {
                let c = if transposed { cost(j, i) } else { cost(i, j) };
                self.cost.push(if c.is_finite() { c.min(limit) } else { limit });
            }
        }
        let inf = f64::INFINITY;
        for (buf, len) in [(&mut self.u, n + 1), (&mut self.v, m + 1)] {
            buf.clear();
            buf.resize(len, 0.0);
        }
        self.p.clear();
        self.p.resize(m + 1, 0);
        self.way.clear();
        self.way.resize(m + 1, 0);
        for i in 1..=n {
            self.p[0] = i;
            let mut j0 = 0;
            self.minv.clear();
            self.minv.resize(m + 1, inf);
            self.used.clear();
            self.used.resize(m + 1, false);
            loop {
                self.used[j0] = true;
                let i0 = self.p[j0];
                let mut delta = inf;
                let mut j1 = 0;
                for j in 1..=m {
                    if !self.used[j] {
                        let cur = self.cost[(i0 - 1) * m + (j - 1)] - self.u[i0] - self.v[j];
                        if cur < self.minv[j] {
                            self.minv[j] = cur;
                            self.way[j] = j0;
                        }
                        if self.minv[j] < delta {
                            delta = self.minv[j];
                            j1 = j;
                        }
                    }
                }
                for j in 0..=m {
                    if self.used[j] {
                        self.u[self.p[j]] += delta;
                        self.v[j] -= delta;
                    } else {
                        self.minv[j] -= delta;
                    }
                }
                j0 = j1;
                if self.p[j0] == 0 {
                    break;
                }
            }
            loop {
                let j1 = self.way[j0];
                self.p[j0] = self.p[j1];
                j0 = j1;
                if j0 == 0 {
                    break;
                }
            }
        }
        for j in 1..=m {
            let i = self.p[j];
            if i == 0 || self.cost[(i - 1) * m + (j - 1)] >= limit {
                continue;
            }
            let (r, c) = if transposed { (j - 1, i - 1) } else { (i - 1, j - 1) };
            self.pairs.push((r, c));
        }
        self.pairs.sort_unstable();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every matching, by brute force: the least total cost with unmatched rows and columns at
    /// `limit / 2` each (ByteTrack's extended problem).
    fn brute(cost: &[Vec<f64>], limit: f64) -> f64 {
        fn go(r: usize, cost: &[Vec<f64>], used: &mut Vec<bool>, limit: f64) -> f64 {
            if r == cost.len() {
                return used.iter().filter(|u| !**u).count() as f64 * limit / 2.0;
            }
            let mut best = limit / 2.0 + go(r + 1, cost, used, limit);
            for c in 0..used.len() {
                if !used[c] && cost[r][c] < limit {
                    used[c] = true;
                    best = best.min(cost[r][c] + go(r + 1, cost, used, limit));
                    used[c] = false;
                }
            }
            best
        }
        go(0, cost, &mut vec![false; cost.first().map_or(0, Vec::len)], limit)
    }

    #[test]
    fn matches_the_brute_force_optimum_with_unmatched_rows_and_columns() {
        let mut a = Assignment::default();
        let mut seed = 7u64;
        let mut rnd = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as f64 / (1u64 << 31) as f64
        };
        for case in 0..300 {
            let (rows, cols) = (1 + case % 5, 1 + (case / 5) % 6);
            let cost: Vec<Vec<f64>> = (0..rows).map(|_| (0..cols).map(|_| rnd()).collect()).collect();
            let limit = 0.2 + 0.8 * rnd();
            a.solve(rows, cols, limit, |r, c| cost[r][c]);
            let matched: f64 = a.pairs.iter().map(|&(r, c)| cost[r][c]).sum();
            let unmatched = (rows - a.pairs.len()) + (cols - a.pairs.len());
            let total = matched + unmatched as f64 * limit / 2.0;
            assert!((total - brute(&cost, limit)).abs() < 1e-9, "case {case}: {cost:?} limit {limit}");
            assert!(a.pairs.iter().all(|&(r, c)| cost[r][c] < limit));
            let mut seen_c: Vec<usize> = a.pairs.iter().map(|p| p.1).collect();
            seen_c.sort_unstable();
            seen_c.dedup();
            assert_eq!(seen_c.len(), a.pairs.len(), "a column used twice");
        }
    }

    #[test]
    fn nothing_to_match_and_nothing_below_the_limit() {
        let mut a = Assignment::default();
        a.solve(0, 3, 1.0, |_, _| 0.0);
        assert!(a.pairs.is_empty());
        a.solve(2, 2, 0.5, |_, _| 0.9);
        assert!(a.pairs.is_empty());
        a.solve(3, 1, 0.5, |r, _| if r == 2 { 0.1 } else { f64::INFINITY });
        assert_eq!(a.pairs, vec![(2, 0)]);
    }
}
