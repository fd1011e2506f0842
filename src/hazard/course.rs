//! Collision course: whether an obstacle that is getting closer will be hit, or passed.
//!
//! Scale expansion gives the time `τ` to reach an obstacle's depth, not whether the vehicle
//! hits it: driving forward, a parked car two metres to the side grows as fast as the wall
//! ahead. What tells them apart is where the obstacle will be, sideways, when the vehicle gets
//! there.
//!
//! Geometry, in the vehicle's level frame (x right, z ahead, the vehicle moving along z): an
//! obstacle of width `W` at `(x, z)` spans the tangents `(x ± W/2) / z`, so from its box's left
//! and right edges (`tl`, `tr`, tangents of their azimuths) come, whatever its distance,
//!
//! ```text
//! r = (tl + tr) / 2 / (tr - tl) = x / W      its offset, in its own widths
//! ζ = 1 / (tr - tl)             = z / W      its depth, in its own widths
//! ```
//!
//! Over the track's last `ttc_window_s` seconds, `r` is fitted by a line: `r` now and `ṙ`. A
//! vehicle turning at yaw rate `ω` (right positive) sees a static point move by `ẋ = -ω z`; the
//! rest of `ṙ` is the obstacle's own motion. Its offset when the vehicle reaches it, `τ` from
//! now, with `z` falling steadily to 0 meanwhile:
//!
//! ```text
//! r_c = r + (ṙ + ω ζ̄) τ - ω ζ τ / 2       (ζ̄ the window's mean depth)
//! ```
//!
//! It is a **hit** when the obstacle then overlaps the vehicle's corridor: `|r_c| W - W/2 <
//! width_m / 2` (`miss_m`, the gap between its near edge and the path's centre line, is under
//! half the vehicle). That needs `W` in metres: from `[hazards.classes]` (its `width_m`, or
//! `height_m` times the box's aspect). For a class without a size, the gap is compared as an
//! angle instead, seen from where the vehicle is now: `(|r_c| - 1/2) / ζ < tan(corridor_deg /
//! 2)`. That is exact at the distance where the corridor's half width subtends half of
//! `corridor_deg`, and says "hit" more often farther away, less often nearer.
//!
//! The level frame comes from the camera's attitude where the flight controller sends it
//! (MAVLink ATTITUDE, [`AttitudeTrack`]): each box edge's ray is turned by the roll and pitch,
//! and by the yaw's difference from the vehicle's heading (the yaw's least-squares line over
//! [`HEADING_WINDOW_S`], so that a drone's 5-30 Hz shake is taken out and a steady turn is not
//! lagged); `ω` is that line's slope. Fast shake alone does little harm even without the
//! attitude (the line through `r` averages it out); what the attitude buys is the turn, and
//! slow swings of the camera. Without an attitude the estimate assumes the camera does
//! not rotate: the vehicle drives straight along the camera's mounting, a turn reads as the
//! obstacles sliding sideways (extrapolated on a line: twice the turn's true lateral drift),
//! and shake as noise in `r`. In both cases it assumes the vehicle moves along its heading (no
//! sideways slip: a ground robot, or a drone flying forward), the obstacle moves steadily, and
//! the speed does not change before contact.

use std::sync::Mutex;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::camera::Camera;
use super::line;
use super::ring::Ring;
use crate::frame::Attitude;

/// How long a window the heading is fitted over, seconds: 5 periods of the slowest vibration
/// (5 Hz) a drone's camera mount passes on. Over 0.5 s the line through 12 Hz shake sampled at
/// 120 Hz still wobbled enough to put a 1.5 m offset 0.15 m off, 4 s from contact (over 1 s,
/// 0.03 m: `course::tests`); the price is that the start and end of a turn are seen up to a
/// second late.
pub const HEADING_WINDOW_S: f64 = 1.0;

/// An attitude older than this (seconds) at a frame's time is not used: the link is down.
pub const ATTITUDE_STALE_S: f64 = 0.5;

/// Observations a track keeps for its course (a second at 30 fps).
const HISTORY: usize = 32;

/// Attitude samples kept (a second at 128 Hz).
const ATTITUDES: usize = 128;

/// `[vehicle]`: the vehicle the camera rides on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VehicleConfig {
    /// Its width, metres. Given, obstacles getting closer are told apart as hit or passed,
    /// and only a hit is `danger`; absent, every obstacle whose time to contact is short
    /// enough is, as without this section.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub width_m: Option<f64>,
    /// The corridor's angular width, degrees, for obstacles of a class without a size in
    /// `[hazards.classes]` (whose offset cannot be told in metres).
    pub corridor_deg: f64,
}

impl Default for VehicleConfig {
    fn default() -> Self {
        VehicleConfig { width_m: None, corridor_deg: 10.0 }
    }
}

impl VehicleConfig {
    /// Checks the ranges; the error names the key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if let Some(w) = self.width_m.filter(|w| !(w.is_finite() && *w > 0.0 && *w <= 20.0)) {
            return Err((
                "width_m",
                format!("{w} is out of range: give the vehicle's width in metres, above 0 and up to 20"),
            ));
        }
        if !(self.corridor_deg > 0.0 && self.corridor_deg < 90.0) {
            return Err((
                "corridor_deg",
                format!("{} is out of range: allowed 0 < corridor_deg < 90", self.corridor_deg),
            ));
        }
        Ok(())
    }
}

/// The flight controller's attitude as its link receives it (MAVLink ATTITUDE), for the
/// hazard layers of every camera on the vehicle: the link's thread pushes, each layer copies
/// what is new before its frame. Fixed size; nothing is allocated after it is made.
#[derive(Debug, Default)]
pub struct AttitudeFeed {
    samples: Mutex<Ring<Option<(Instant, Attitude)>, ATTITUDES>>,
}

impl AttitudeFeed {
    /// Records the attitude received at `at`. The receive time stands for the time of the
    /// attitude: ATTITUDE's `time_boot_ms` is the flight controller's clock, which nothing here
    /// maps to ours; a serial or UDP link adds a few milliseconds.
    pub fn push(&self, at: Instant, attitude: Attitude) {
        self.samples.lock().unwrap_or_else(|p| p.into_inner()).push(Some((at, attitude)));
    }

    /// Calls `f` with each attitude received after `after` (all, for `None`), oldest first;
    /// gives the newest time seen, to pass as `after` next time.
    pub fn each_since(
        &self,
        after: Option<Instant>,
        mut f: impl FnMut(Instant, Attitude),
    ) -> Option<Instant> {
        let samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        let mut newest = after;
        for (at, a) in samples.iter().flatten() {
            if after.is_none_or(|t| at > t) {
                f(at, a);
                newest = Some(at);
            }
        }
        newest
    }
}

/// The camera's attitude over the last second, as the flight controller sends it.
#[derive(Clone, Debug, Default)]
pub struct AttitudeTrack {
    samples: Ring<(f64, Attitude), ATTITUDES>,
}

/// Where the camera points relative to the vehicle's level frame at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LevelFrame {
    /// Roll and pitch, radians.
    pub roll: f64,
    /// Pitch.
    pub pitch: f64,
    /// The yaw's difference from the heading (the shake), radians.
    pub yaw_off: f64,
    /// The heading's rate, radians per second (right positive).
    pub yaw_rate: f64,
}

impl AttitudeTrack {
    /// Records the attitude at `t` seconds (increasing; an older one is ignored).
    pub fn push(&mut self, t: f64, a: Attitude) {
        if self.samples.last().is_some_and(|(last, _)| t <= last) {
            return;
        }
        self.samples.push((t, a));
    }

    /// The camera against the level frame at `t`: the attitude at `t` (between the samples on
    /// either side, or the newest if `t` is after it, for at most [`ATTITUDE_STALE_S`]), its
    /// yaw against the heading line fitted over the window before. `None` without a recent one.
    pub fn level(&self, t: f64) -> Option<LevelFrame> {
        let newest = self.samples.last()?;
        if t - newest.0 > ATTITUDE_STALE_S {
            return None;
        }
        let samples = || self.samples.iter();
        let after = samples().position(|(s, _)| s >= t);
        let a = match after {
            Some(0) | None => samples().nth(after.unwrap_or(self.samples.len() - 1)).expect("in range").1,
            Some(i) => {
                let ((t0, a0), (t1, a1)) =
                    (samples().nth(i - 1).expect("i > 0"), samples().nth(i).expect("i < len"));
                let k = (t - t0) / (t1 - t0);
                let mix = |x: f64, y: f64| x + k * wrap(y - x);
                Attitude {
                    roll: mix(a0.roll, a1.roll),
                    pitch: mix(a0.pitch, a1.pitch),
                    yaw: mix(a0.yaw, a1.yaw),
                }
            }
        };
        // The heading: the yaw's least-squares line over the window up to t (unwrapped from
        // the attitude at t, in time from t), at t.
        let window = samples().filter(|(s, _)| *s <= t + 1e-9 && t - *s <= HEADING_WINDOW_S);
        let (heading_off, yaw_rate) = line::fit(window.map(|(s, b)| (s - t, wrap(b.yaw - a.yaw))))
            .map_or((0.0, 0.0), |l| (l.at(0.0), l.slope));
        Some(LevelFrame { roll: a.roll, pitch: a.pitch, yaw_off: -heading_off, yaw_rate })
    }
}

/// An angle brought within -π..π.
fn wrap(a: f64) -> f64 {
    (a + std::f64::consts::PI).rem_euclid(std::f64::consts::TAU) - std::f64::consts::PI
}

/// The tangent of the azimuth, in the level frame, of pixel `(u, v)`: its ray in the
/// vehicle's body (the camera's mounting applied), turned by `level`'s roll, pitch and yaw
/// off the heading (none: as it is). `None` for a ray not ahead.
pub fn level_tangent(camera: &Camera, u: f64, v: f64, level: Option<&LevelFrame>) -> Option<f64> {
    let [f, r, d] = camera.ray(u, v);
    let (f, r) = match level {
        None => (f, r),
        Some(l) => {
            let (sr, cr) = l.roll.sin_cos();
            let (r, d) = (r * cr - d * sr, r * sr + d * cr);
            let (sp, cp) = l.pitch.sin_cos();
            let f = f * cp + d * sp;
            let (sy, cy) = l.yaw_off.sin_cos();
            (f * cy - r * sy, f * sy + r * cy)
        }
    };
    (f > 1e-6).then(|| r / f)
}

/// One observation of a track's box for its course.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Sample {
    t: f64,
    /// Offset, in the obstacle's widths.
    r: f64,
    /// Depth, in its widths.
    zeta: f64,
}

/// A track's recent offsets and depths, in a fixed ring.
#[derive(Clone, Copy, Debug, Default)]
pub struct CourseHistory {
    samples: Ring<Sample, HISTORY>,
    /// The obstacle's width in metres, from its newest whole box, where its class has a size.
    width_m: Option<f64>,
}

/// The course of one obstacle.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Course {
    /// Its offset from the path when the vehicle reaches it, in its own widths (right
    /// positive).
    pub offset_widths: f64,
    /// The same in metres, where its size is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset_m: Option<f64>,
    /// The gap then between its near edge and the path's centre line, metres (negative: it
    /// straddles the line), where its size is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub miss_m: Option<f64>,
    /// Whether the vehicle hits it.
    pub hit: bool,
}

impl CourseHistory {
    /// Records the whole box whose edges have level-frame tangents `tl` < `tr`, at `t` seconds,
    /// of an obstacle `width_m` wide where that is known.
    pub fn push(&mut self, t: f64, tl: f64, tr: f64, width_m: Option<f64>) {
        let span = tr - tl;
        if span.is_nan() || span <= 1e-9 {
            return;
        }
        self.width_m = width_m;
        self.samples.push(Sample { t, r: (tl + tr) / 2.0 / span, zeta: 1.0 / span });
    }

    /// The course over the last `window_s` seconds, the vehicle reaching the obstacle in `ttc_s`
    /// while turning at `yaw_rate` (radians per second, right positive), for a vehicle
    /// `vehicle_m` wide: in metres where the obstacle's width is known, by an angular corridor
    /// of `corridor_deg` otherwise. `None` until the observations span half a window (at
    /// least 3).
    pub fn course(
        &self,
        window_s: f64,
        ttc_s: f64,
        yaw_rate: f64,
        vehicle_m: f64,
        corridor_deg: f64,
    ) -> Option<Course> {
        let last = self.samples.last()?;
        let points = self.samples.iter().filter(|s| last.t - s.t <= window_s);
        // Over less than half a window (of at most a second), a box's jitter passes for drift.
        if last.t - points.clone().next()?.t < 0.5 * window_s.min(1.0) {
            return None;
        }
        let r = line::fit(points.clone().map(|s| (s.t, s.r)))?;
        let mz = points.map(|s| s.zeta).sum::<f64>() / r.n as f64;
        let (slope, r_now) = (r.slope, r.at(last.t));
        let tau = ttc_s.max(0.0);
        let own = slope + yaw_rate * mz;
        let offset_widths = r_now + own * tau - yaw_rate * last.zeta * tau / 2.0;
        let (offset_m, miss_m, hit) = match self.width_m {
            Some(w) => {
                let miss = (offset_widths.abs() - 0.5) * w;
                (Some(offset_widths * w), Some(miss), miss < vehicle_m / 2.0)
            }
            None => {
                let gap = (offset_widths.abs() - 0.5) / last.zeta.max(1e-9);
                (None, None, gap < (corridor_deg.to_radians() / 2.0).tan())
            }
        };
        Some(Course { offset_widths, offset_m, miss_m, hit })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hazard::camera::CameraConfig;

    /// A camera 90 degrees wide, 640 x 480: fx = 320.
    fn camera() -> Camera {
        Camera::new(&CameraConfig { hfov_deg: 90.0, ..Default::default() }, 640, 480)
    }

    /// The box edges' tangents of an obstacle `w` wide at `(x, z)` in the vehicle's frame,
    /// seen by `camera()` turned by `yaw_off` (radians, right), through `level_tangent`.
    fn seen(x: f64, z: f64, w: f64, yaw_off: f64, level: Option<&LevelFrame>) -> (f64, f64) {
        let cam = camera();
        // Where the camera, turned right by yaw_off, sees the edges.
        let (s, c) = yaw_off.sin_cos();
        let px = |ex: f64| {
            let (xc, zc) = (ex * c - z * s, ex * s + z * c);
            cam.cx + cam.fx * xc / zc
        };
        let tl = level_tangent(&cam, px(x - w / 2.0), cam.cy, level).unwrap();
        let tr = level_tangent(&cam, px(x + w / 2.0), cam.cy, level).unwrap();
        (tl, tr)
    }

    /// Drives at `v` m/s towards an obstacle `w` wide at `(x0, z0)` in the vehicle's frame,
    /// for 1 s at 30 fps, turning at `omega` (rad/s), the camera shaking in yaw by `shake`
    /// (rad, at 12 Hz) with the attitude known (`known`) or not; the course at the end.
    #[allow(clippy::too_many_arguments)] // one scenario's eight numbers, named at each call's test
    fn drive(
        x0: f64,
        z0: f64,
        w: f64,
        v: f64,
        omega: f64,
        shake: f64,
        known: bool,
        size: Option<f64>,
    ) -> Course {
        let mut h = CourseHistory::default();
        let mut att = AttitudeTrack::default();
        let (mut x, mut z) = (x0, z0);
        let dt = 1.0 / 30.0;
        let mut t = 0.0;
        let wobble_at = |t: f64| shake * (std::f64::consts::TAU * 12.0 * t).sin();
        // The link has been up a while before the obstacle is seen.
        for k in (1..60).rev() {
            let ta = -(k as f64) * dt / 4.0;
            att.push(ta, Attitude { roll: 0.0, pitch: 0.0, yaw: omega * ta + wobble_at(ta) });
        }
        for _ in 0..30 {
            // The flight controller's ATTITUDE at 120 Hz, four per frame.
            for k in (0..4).rev() {
                let ta = t - k as f64 * dt / 4.0;
                att.push(ta, Attitude { roll: 0.0, pitch: 0.0, yaw: omega * ta + wobble_at(ta) });
            }
            let wobble = wobble_at(t);
            let level = att.level(t).filter(|_| known);
            let (tl, tr) = seen(x, z, w, wobble, level.as_ref());
            h.push(t, tl, tr, size);
            // The static point in the turning vehicle's frame.
            let (dx, dz) = (-omega * z, -v + omega * x);
            x += dx * dt;
            z += dz * dt;
            t += dt;
        }
        let t_now = t - dt;
        let omega_est = if known { att.level(t_now).unwrap().yaw_rate } else { 0.0 };
        let tau = z / v; // the truth's time to contact, as scale expansion would give it
        h.course(1.0, tau, omega_est, 0.6, 10.0).expect("a second of observations")
    }

    #[test]
    fn head_on_is_a_hit() {
        let c = drive(0.0, 10.0, 0.5, 2.0, 0.0, 0.0, true, Some(0.5));
        assert!(c.hit && c.offset_widths.abs() < 1e-6, "{c:?}");
        assert!((c.miss_m.unwrap() + 0.25).abs() < 1e-6, "straddles the line by half its width: {c:?}");
    }

    #[test]
    fn an_offset_pass_is_a_pass_and_its_offset_in_metres_is_exact() {
        let c = drive(1.5, 10.0, 0.5, 2.0, 0.0, 0.0, true, Some(0.5));
        assert!(!c.hit, "{c:?}");
        assert!((c.offset_m.unwrap() - 1.5).abs() < 1e-6 && (c.miss_m.unwrap() - 1.25).abs() < 1e-6, "{c:?}");
        // Just inside the corridor (0.3 + 0.25 m): a hit.
        assert!(drive(0.5, 10.0, 0.5, 2.0, 0.0, 0.0, true, Some(0.5)).hit);
        // Without a size, by the angle: 1.25 m at 8 m is 8.9 degrees, outside a 10-degree
        // corridor's 5; 0.2 m, inside.
        assert!(!drive(1.5, 10.0, 0.5, 2.0, 0.0, 0.0, true, None).hit);
        assert!(drive(0.45, 10.0, 0.5, 2.0, 0.0, 0.0, true, None).hit);
    }

    #[test]
    fn a_crossing_obstacle_is_a_hit_where_it_will_be() {
        // Starts 2 m to the right and walks left at 0.5 m/s: at contact (4.5 s later... the
        // history's last second predicts from where it is then) it is in the path.
        let mut h = CourseHistory::default();
        let (v, w) = (2.0, 0.5);
        let (mut x, mut z) = (2.0, 10.0);
        for i in 0..30 {
            let t = i as f64 / 30.0;
            h.push(t, (x - w / 2.0) / z, (x + w / 2.0) / z, Some(w));
            x -= 0.5 / 30.0;
            z -= v / 30.0;
        }
        let (x, z) = (x + 0.5 / 30.0, z + v / 30.0);
        let tau = z / v;
        let c = h.course(1.0, tau, 0.0, 0.6, 10.0).unwrap();
        let want = x - 0.5 * tau;
        assert!((c.offset_m.unwrap() - want).abs() < 1e-6, "{c:?} vs {want}");
        assert!(c.hit, "{c:?}");
        // The same obstacle standing still at 2 m passes.
        assert!(!drive(2.0, 10.0, 0.5, 2.0, 0.0, 0.0, true, Some(0.5)).hit);
    }

    #[test]
    fn a_turn_bends_the_path_and_the_attitude_accounts_for_it() {
        // Turning right at 15 deg/s at 2 m/s (a 7.64 m radius): an obstacle 1.8 m to the right
        // and 4.9 m ahead is on the bending path (40 degrees round it).
        let omega = 15f64.to_radians();
        let c = drive(1.8, 4.9, 0.5, 2.0, omega, 0.0, true, Some(0.5));
        // The truth: the static point in the turning frame, where the vehicle reaches its depth.
        let (mut x, mut z) = (1.8, 4.9);
        for _ in 0..30 {
            let (dx, dz) = (-omega * z, -2.0 + omega * x);
            x += dx / 30.0;
            z += dz / 30.0;
        }
        while z > 0.0 {
            let (dx, dz) = (-omega * z, -2.0 + omega * x);
            x += dx / 3000.0;
            z += dz / 3000.0;
        }
        assert!(x.abs() < 0.55, "the truth: it is hit, at {x}");
        assert!(c.hit, "{c:?}");
        assert!((c.offset_m.unwrap() - x).abs() < 0.2, "{c:?} vs {x}");
        // Going straight, the same obstacle is passed.
        assert!(!drive(1.8, 4.9, 0.5, 2.0, 0.0, 0.0, true, Some(0.5)).hit);
        // Turning without the attitude, the turn reads as the obstacle sliding left, extrapolated
        // on a line: it is predicted farther left than it will be.
        let blind = drive(1.8, 4.9, 0.5, 2.0, omega, 0.0, false, Some(0.5));
        assert!(blind.offset_m.unwrap() < x - 0.3, "{blind:?} vs {x}");
    }

    #[test]
    fn vibration_only_neither_looks_like_approach_nor_changes_hit_or_pass() {
        // 1 degree of yaw shake at 12 Hz, 4 s from contact: with the attitude, the offset is
        // the still camera's within 5 cm, and hit or pass is the same.
        let shake = 1f64.to_radians();
        for (x, hit) in [(1.5, false), (0.2, true)] {
            let still = drive(x, 10.0, 0.5, 2.0, 0.0, 0.0, true, Some(0.5));
            let shaken = drive(x, 10.0, 0.5, 2.0, 0.0, shake, true, Some(0.5));
            assert!(
                (shaken.offset_m.unwrap() - still.offset_m.unwrap()).abs() < 0.05,
                "{shaken:?} vs {still:?}"
            );
            assert_eq!((still.hit, shaken.hit), (hit, hit), "at {x} m");
        }
        // A camera that only shakes, going nowhere near the obstacle (10 m away, 3 m right,
        // the vehicle still): no approach is seen, so no time to contact to act on; the
        // course the history would give keeps it 3 m right.
        let mut h = CourseHistory::default();
        let cam = camera();
        for i in 0..30 {
            let t = i as f64 / 30.0;
            let yaw = shake * (std::f64::consts::TAU * 12.0 * t).sin();
            let level = LevelFrame { yaw_off: yaw, ..LevelFrame::default() };
            let (s, c) = yaw.sin_cos();
            let px = |ex: f64| cam.cx + cam.fx * (ex * c - 10.0 * s) / (ex * s + 10.0 * c);
            let tl = level_tangent(&cam, px(2.75), cam.cy, Some(&level)).unwrap();
            let tr = level_tangent(&cam, px(3.25), cam.cy, Some(&level)).unwrap();
            h.push(t, tl, tr, Some(0.5));
        }
        let c = h.course(1.0, 5.0, 0.0, 0.6, 10.0).unwrap();
        assert!((c.offset_m.unwrap() - 3.0).abs() < 1e-6 && !c.hit, "{c:?}");
    }

    #[test]
    fn the_heading_follows_a_turn_without_lag_and_ignores_the_shake() {
        let mut att = AttitudeTrack::default();
        let omega = 0.3;
        for i in 0..60 {
            let t = i as f64 / 50.0;
            let shake = 0.02 * (std::f64::consts::TAU * 20.0 * t).sin();
            att.push(t, Attitude { roll: 0.01, pitch: -0.02, yaw: 3.1 + omega * t + shake });
        }
        let t = 59.0 / 50.0;
        let l = att.level(t).unwrap();
        let shake = 0.02 * (std::f64::consts::TAU * 20.0 * t).sin();
        assert!((l.yaw_rate - omega).abs() < 0.02, "{l:?}");
        assert!((l.yaw_off - shake).abs() < 0.005, "{l:?} vs {shake}");
        assert_eq!((l.roll, l.pitch), (0.01, -0.02));
        assert!(att.level(t + 1.0).is_none(), "an attitude a second old is not used");
    }

    #[test]
    fn the_feed_hands_each_attitude_over_once_in_order() {
        let feed = AttitudeFeed::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let a = |yaw: f64| Attitude { yaw, ..Attitude::default() };
        for ms in 0..3 {
            feed.push(at(ms * 10), a(ms as f64));
        }
        let mut seen = Vec::new();
        let until = feed.each_since(None, |t, x| seen.push((t, x.yaw)));
        assert_eq!(seen, [(at(0), 0.0), (at(10), 1.0), (at(20), 2.0)]);
        feed.push(at(30), a(3.0));
        seen.clear();
        let until = feed.each_since(until, |t, x| seen.push((t, x.yaw)));
        assert_eq!((seen, until), (vec![(at(30), 3.0)], Some(at(30))));
        assert_eq!(feed.each_since(until, |_, _| panic!("nothing new")), until);
    }

    #[test]
    fn bad_vehicle_settings_are_named() {
        let bad = |c: VehicleConfig| c.validate().unwrap_err().0;
        assert_eq!(bad(VehicleConfig { width_m: Some(0.0), ..Default::default() }), "width_m");
        assert_eq!(bad(VehicleConfig { corridor_deg: 90.0, ..Default::default() }), "corridor_deg");
        VehicleConfig::default().validate().unwrap();
    }
}
