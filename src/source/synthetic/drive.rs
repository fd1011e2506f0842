//! Ego-motion scenes (`synthetic://?speed=2`): the camera rides on a vehicle driving through a
//! field of static obstacles, with exact truth of where each obstacle is and whether the vehicle
//! will hit it.
//!
//! The world is flat ground seen from a camera [`CAMERA_HEIGHT_M`] up, looking along the
//! vehicle's heading. The vehicle drives at a steady speed along straight stretches and, with
//! `turn=DEG_S`, turns at that yaw rate (left or right) in every other stretch of 3 to 6 s. Each
//! obstacle is an upright shape of the source's classes with a real size ([`REAL_SIZE_M`]),
//! standing on the ground beside the vehicle's *future* path: it is placed, when it appears
//! 5 to 9 s ahead, at a lateral offset from the point the vehicle will be at then. A share of
//! them (`on_course`, 0.3 by default) are within the vehicle's corridor (their offset under
//! `(vehicle_m + object width) / 2`, so the vehicle would hit them), the rest pass 0.25 to 4 m
//! clear of it. An obstacle is gone once the vehicle has reached it, and another appears ahead
//! after a pause. The truth says of each: its time to contact (to the moment the vehicle reaches
//! its station along the path), its offset from the path then, and whether that is a hit
//! ([`crate::frame::Course`]).
//!
//! What a real camera adds, as options: `shake=DEG`, a drone's vibration, the camera pitching
//! and yawing by up to that angle at three frequencies from 5 to 30 Hz (roll is not drawn: the
//! shapes stay upright); `blur=MS`, motion blur over an exposure of that many milliseconds (the
//! picture smeared along the image motion the rotation causes); `exposure=1`, the exposure
//! stepping by a factor of 0.5 to 1.6 every 2 to 5 s. Each frame's camera attitude (pitch and
//! yaw, heading included, as a flight controller's ATTITUDE would report it) goes with the
//! frame ([`crate::frame::Attitude`]), for the hazard layer to take the rotation out.
//!
//! Time is the frame number at [`SCENE_FPS`]. Every frame is a function of the seed and its
//! number, as in every synthetic scene.

use super::Rng;
use crate::frame::{Attitude, Course};

/// Frames per second of the scene's clock: frame `n` is at `n / 30` seconds.
pub const SCENE_FPS: f64 = 30.0;

/// The camera's height above the ground, metres (a small ground robot's).
pub const CAMERA_HEIGHT_M: f64 = 0.5;

/// Real width and height of each class, metres: a cardboard box, a ball, a traffic cone
/// (each obstacle 0.9 to 1.1 times that). The shapes keep the proportions the detector was
/// trained on.
pub const REAL_SIZE_M: [(f64, f64); 3] = [(0.6, 0.45), (0.4, 0.4), (0.3, 0.5)];

/// Nearer than this (metres, along the camera's axis) an obstacle is not drawn.
const NEAR_M: f64 = 0.3;

/// How long the path is laid out for, seconds (4 hours: beyond it the vehicle drives straight).
const PATH_S: f64 = 4.0 * 3600.0;

/// The options of an ego-motion scene.
#[derive(Clone, Debug, PartialEq)]
pub struct DriveConfig {
    /// Metres per second, above 0.
    pub speed_mps: f64,
    /// Yaw rate of the turning stretches, degrees per second (0: a straight drive).
    pub turn_deg_s: f64,
    /// Vibration amplitude, degrees of pitch and of yaw (0: none).
    pub shake_deg: f64,
    /// Exposure time for motion blur, milliseconds (0: none).
    pub blur_ms: f64,
    /// Whether the exposure steps.
    pub exposure_steps: bool,
    /// The vehicle's width, metres, for the truth's hit or pass.
    pub vehicle_m: f64,
    /// The camera's horizontal field of view, degrees.
    pub hfov_deg: f64,
    /// The share of obstacles on course.
    pub on_course: f64,
}

impl Default for DriveConfig {
    fn default() -> Self {
        DriveConfig {
            speed_mps: 2.0,
            turn_deg_s: 0.0,
            shake_deg: 0.0,
            blur_ms: 0.0,
            exposure_steps: false,
            vehicle_m: 0.6,
            hfov_deg: 62.2,
            on_course: 0.3,
        }
    }
}

/// The vehicle on the ground: position (x right, z ahead at the start, metres) and heading
/// (radians, clockwise from +z: turning right makes it grow, as a compass's).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pose {
    /// Metres.
    pub x: f64,
    /// Metres.
    pub z: f64,
    /// Radians.
    pub heading: f64,
}

impl Pose {
    fn forward(&self) -> (f64, f64) {
        (self.heading.sin(), self.heading.cos())
    }

    fn right(&self) -> (f64, f64) {
        (self.heading.cos(), -self.heading.sin())
    }
}

/// A stretch of the path at one yaw rate.
#[derive(Clone, Copy, Debug)]
struct Stretch {
    t0: f64,
    start: Pose,
    /// Radians per second.
    yaw_rate: f64,
}

/// One appearance of an obstacle.
#[derive(Clone, Copy, Debug)]
struct Life {
    /// When it appears and when the vehicle reaches it, seconds.
    from: f64,
    contact: f64,
    /// Its centre on the ground (x, z).
    at: (f64, f64),
    /// Real half width and height.
    half_w: f64,
    half_h: f64,
    /// Lateral offset from the path at contact, metres (positive: right).
    offset_m: f64,
    hit: bool,
}

/// Where an obstacle is drawn in one frame.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    /// Centre and half sizes, pixels.
    pub cx: f32,
    /// Centre y.
    pub cy: f32,
    /// Half width.
    pub half_w: f32,
    /// Half height.
    pub half_h: f32,
    /// Distance along the camera's axis, metres (the far ones are drawn first).
    pub depth: f32,
    /// Seconds to contact.
    pub ttc_s: f64,
    /// The truth's object number: `life * 256 + slot`.
    pub object: usize,
    /// Offset at contact and hit or pass.
    pub course: Course,
}

/// The camera's motion in one frame: how far the background pans and the blur's smear.
#[derive(Clone, Copy, Debug, Default)]
pub struct View {
    /// Pixels the picture of distant things moves right and down.
    pub pan: (f32, f32),
    /// The smear over the exposure, pixels (x, y).
    pub smear: (f32, f32),
    /// Exposure gain.
    pub gain: f32,
    /// The attitude.
    pub attitude: Attitude,
}

/// An ego-motion scene's motion and obstacles.
#[derive(Clone, Debug)]
pub struct Drive {
    config: DriveConfig,
    seed: u64,
    path: Vec<Stretch>,
    /// Vibration: (amplitude rad, frequency Hz, phase) for pitch and yaw, three each.
    shake: [[(f64, f64, f64); 3]; 2],
    /// Exposure steps: (from seconds, gain), in order.
    gains: Vec<(f64, f32)>,
    fx: f64,
}

impl Drive {
    /// The drive of `config` for `seed`, seen in frames `width` pixels wide.
    pub fn new(config: DriveConfig, seed: u64, width: u32) -> Drive {
        let mut rng = Rng::new(seed ^ 0x4452_4956_4500_0000);
        let v = config.speed_mps;
        let mut path = Vec::new();
        let (mut t, mut pose, mut turning) = (0.0, Pose::default(), false);
        while t < PATH_S {
            let yaw_rate = if turning && config.turn_deg_s > 0.0 {
                let side = if rng.below(2) == 0 { -1.0 } else { 1.0 };
                side * config.turn_deg_s.to_radians()
            } else {
                0.0
            };
            let stretch = Stretch { t0: t, start: pose, yaw_rate };
            let length = rng.range(3.0, 6.0) as f64;
            pose = advance(&stretch, v, length);
            path.push(stretch);
            t += length;
            turning = !turning;
        }
        // Then straight on, for ever.
        path.push(Stretch { t0: t, start: pose, yaw_rate: 0.0 });
        let mut shake = [[(0.0, 0.0, 0.0); 3]; 2];
        for axis in shake.iter_mut() {
            for (i, wave) in axis.iter_mut().enumerate() {
                // Amplitudes 1, 1/2, 1/4 of the whole, frequencies 5-30 Hz.
                let amp = config.shake_deg.to_radians() / 1.75 / (1 << i) as f64;
                *wave = (amp, rng.range(5.0, 30.0) as f64, rng.range(0.0, std::f32::consts::TAU) as f64);
            }
        }
        let mut gains = vec![(0.0, 1.0)];
        if config.exposure_steps {
            let mut t = rng.range(2.0, 5.0) as f64;
            while t < PATH_S {
                gains.push((t, rng.range(0.5, 1.6)));
                t += rng.range(2.0, 5.0) as f64;
            }
        }
        let fx = (width as f64 / 2.0) / (config.hfov_deg.to_radians() / 2.0).tan();
        Drive { config, seed, path, shake, gains, fx }
    }

    /// The options.
    pub fn config(&self) -> &DriveConfig {
        &self.config
    }

    /// The stretch of the path the vehicle is on at `t` seconds.
    fn stretch(&self, t: f64) -> &Stretch {
        &self.path[self.path.partition_point(|s| s.t0 <= t).saturating_sub(1)]
    }

    /// The vehicle's pose at `t` seconds.
    pub fn pose(&self, t: f64) -> Pose {
        let s = self.stretch(t);
        advance(s, self.config.speed_mps, t - s.t0)
    }

    /// The vehicle's yaw rate at `t`, radians per second.
    pub fn yaw_rate(&self, t: f64) -> f64 {
        self.stretch(t).yaw_rate
    }

    /// The vibration's pitch and yaw at `t` (radians) and their rates (radians per second).
    fn shake(&self, t: f64) -> ([f64; 2], [f64; 2]) {
        let tau = std::f64::consts::TAU;
        let mut angle = [0.0; 2];
        let mut rate = [0.0; 2];
        for (axis, waves) in self.shake.iter().enumerate() {
            for &(a, f, p) in waves {
                angle[axis] += a * (tau * f * t + p).sin();
                rate[axis] += a * tau * f * (tau * f * t + p).cos();
            }
        }
        (angle, rate)
    }

    /// The camera's view in frame `frame`.
    pub fn view(&self, frame: u64) -> View {
        let t = frame as f64 / SCENE_FPS;
        let pose = self.pose(t);
        let ([pitch, yaw], [pitch_rate, yaw_rate]) = self.shake(t);
        let heading = pose.heading + yaw;
        let exposure = self.config.blur_ms / 1000.0;
        let turn = self.yaw_rate(t);
        let gain = self.gains[self.gains.partition_point(|g| g.0 <= t).saturating_sub(1)].1;
        View {
            // Distant things move left as the camera turns right, and down as it pitches up.
            pan: ((-self.fx * heading) as f32, (self.fx * pitch.tan()) as f32),
            smear: (
                (-self.fx * (yaw_rate + turn) * exposure) as f32,
                (self.fx * pitch_rate * exposure) as f32,
            ),
            gain,
            attitude: Attitude { roll: 0.0, pitch, yaw: heading },
        }
    }

    /// Obstacle `slot`'s appearances: the one at `t` seconds, if it is there.
    fn life_at(&self, slot: usize, class_id: usize, t: f64) -> Option<(u64, Life)> {
        let mut start =
            -Rng::new(self.seed ^ 0x534c_4f54 ^ (slot as u64).rotate_left(32)).range(0.0, 8.0) as f64;
        for p in 0u64.. {
            let mut rng = Rng::new(self.seed ^ 0x4c49_4645_0000_0000 ^ (slot as u64).rotate_left(40));
            let mut rng = Rng::new(rng.next_u64() ^ p);
            let lead = rng.range(5.0, 9.0) as f64;
            let pause = rng.range(0.3, 1.5) as f64;
            let contact = start + lead;
            if t < contact {
                return (t >= start).then(|| (p, self.life(&mut rng, class_id, start, contact)));
            }
            start = contact + pause;
            if start > t + 1e6 {
                break;
            }
        }
        None
    }

    fn life(&self, rng: &mut Rng, class_id: usize, from: f64, contact: f64) -> Life {
        let (w, h) = REAL_SIZE_M[class_id.min(2)];
        let scale = rng.range(0.9, 1.1) as f64;
        let (half_w, half_h) = (w * scale / 2.0, h * scale / 2.0);
        let corridor = (self.config.vehicle_m / 2.0) + half_w;
        let side = if rng.below(2) == 0 { -1.0 } else { 1.0 };
        let on = (rng.range(0.0, 1.0) as f64) < self.config.on_course;
        let offset_m = if on {
            rng.range(-0.8, 0.8) as f64 * corridor
        } else {
            side * (corridor + 0.25 + rng.range(0.0, 1.0) as f64 * 3.75)
        };
        let p = self.pose(contact);
        let (rx, rz) = p.right();
        Life {
            from,
            contact,
            at: (p.x + offset_m * rx, p.z + offset_m * rz),
            half_w,
            half_h,
            offset_m,
            hit: offset_m.abs() < corridor,
        }
    }

    /// Where obstacle `slot` (of class `class_id`) is in frame `frame` of a `width` x `height`
    /// picture, seen by the camera of `view`; `None` while it is away or behind the camera.
    pub fn seen(
        &self,
        slot: usize,
        class_id: usize,
        frame: u64,
        view: &View,
        width: u32,
        height: u32,
    ) -> Option<Seen> {
        let t = frame as f64 / SCENE_FPS;
        let (p, life) = self.life_at(slot, class_id, t)?;
        debug_assert!(t >= life.from);
        let pose = self.pose(t);
        let (dx, dz) = (life.at.0 - pose.x, life.at.1 - pose.z);
        let (fx, fz) = pose.forward();
        let (rx, rz) = pose.right();
        // In the vehicle's frame, then turned by the vibration's yaw and pitch.
        let (x, z) = (dx * rx + dz * rz, dx * fx + dz * fz);
        let yaw = view.attitude.yaw - pose.heading;
        let (sy, cy) = yaw.sin_cos();
        let (x, z) = (x * cy - z * sy, x * sy + z * cy);
        let up = life.half_h - CAMERA_HEIGHT_M;
        let (sp, cp) = view.attitude.pitch.sin_cos();
        let (up, z) = (up * cp - z * sp, up * sp + z * cp);
        if z < NEAR_M {
            return None;
        }
        let f = self.fx;
        Some(Seen {
            cx: (width as f64 / 2.0 + f * x / z) as f32,
            cy: (height as f64 / 2.0 - f * up / z) as f32,
            half_w: (f * life.half_w / z) as f32,
            half_h: (f * life.half_h / z) as f32,
            depth: z as f32,
            ttc_s: life.contact - t,
            object: (p as usize).wrapping_mul(256) + slot,
            course: Course { offset_m: life.offset_m as f32, hit: life.hit },
        })
    }
}

/// The pose `dt` seconds into `stretch` at `v` metres per second.
fn advance(stretch: &Stretch, v: f64, dt: f64) -> Pose {
    let s = stretch.start;
    if stretch.yaw_rate == 0.0 {
        let (fx, fz) = s.forward();
        return Pose { x: s.x + v * dt * fx, z: s.z + v * dt * fz, heading: s.heading };
    }
    let r = v / stretch.yaw_rate;
    let heading = s.heading + stretch.yaw_rate * dt;
    Pose {
        x: s.x + r * (s.heading.cos() - heading.cos()),
        z: s.z + r * (heading.sin() - s.heading.sin()),
        heading,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_is_continuous_and_turns_at_the_yaw_rate() {
        let d = Drive::new(DriveConfig { turn_deg_s: 20.0, ..Default::default() }, 3, 640);
        let mut last = d.pose(0.0);
        let mut turned = 0.0f64;
        for i in 1..3000 {
            let p = d.pose(i as f64 / 30.0);
            let step = ((p.x - last.x).powi(2) + (p.z - last.z).powi(2)).sqrt();
            assert!((step - 2.0 / 30.0).abs() < 1e-3, "frame {i}: moved {step} m");
            turned = turned.max((p.heading - last.heading).abs() * 30.0);
            last = p;
        }
        assert!((turned - 20f64.to_radians()).abs() < 1e-6, "fastest turn {} deg/s", turned.to_degrees());
        // Into and past the end of the laid-out path, on a scene turning as the path ends: on
        // without a jump, then straight.
        let cfg = DriveConfig { turn_deg_s: 20.0, ..Default::default() };
        let d = (1..)
            .map(|seed| Drive::new(cfg.clone(), seed, 640))
            .find(|d| d.yaw_rate(PATH_S - 1e-3) != 0.0)
            .unwrap();
        let mut last = d.pose(PATH_S - 7.0);
        for i in 1..=420 {
            let p = d.pose(PATH_S - 7.0 + i as f64 / 30.0);
            let step = ((p.x - last.x).powi(2) + (p.z - last.z).powi(2)).sqrt();
            assert!(
                (step - 2.0 / 30.0).abs() < 1e-6,
                "frame {i} from 7 s before the path's end: moved {step} m"
            );
            last = p;
        }
        assert_eq!(d.yaw_rate(PATH_S + 7.0), 0.0);
    }

    #[test]
    fn an_obstacle_grows_as_its_time_to_contact_says_and_hits_are_within_the_corridor() {
        let d = Drive::new(DriveConfig::default(), 5, 640);
        let view = |f| d.view(f);
        let (mut hits, mut passes) = (0, 0);
        for slot in 0..8 {
            for f in (0..3000).step_by(15) {
                let (Some(a), Some(b)) = (
                    d.seen(slot, 0, f, &view(f), 640, 480),
                    d.seen(slot, 0, f + 15, &view(f + 15), 640, 480),
                ) else {
                    continue;
                };
                if a.object != b.object {
                    continue;
                }
                // On a straight drive the depth is the distance to contact: size goes as 1/TTC.
                let ratio = b.half_w / a.half_w;
                let want = a.ttc_s / b.ttc_s;
                assert!(
                    (ratio as f64 - want).abs() < 1e-3 * want,
                    "slot {slot} frame {f}: {ratio} vs {want}"
                );
                assert!(((a.ttc_s - b.ttc_s) - 0.5).abs() < 1e-9);
                let corridor = 0.3 + REAL_SIZE_M[0].0 * 1.1 / 2.0;
                if a.course.hit {
                    hits += 1;
                    assert!(a.course.offset_m.abs() < corridor as f32);
                } else {
                    passes += 1;
                    assert!(a.course.offset_m.abs() as f64 > 0.3 + REAL_SIZE_M[0].0 * 0.9 / 2.0);
                }
            }
        }
        assert!(hits > 0 && passes > hits, "{hits} hits, {passes} passes");
    }
}
