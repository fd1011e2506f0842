//! `synthetic://` — moving obstacle shapes with exact ground truth.
//!
//! Every frame is a pure function of the scene seed and the frame index, so a
//! test can ask for frame 1000 without rendering frames 0..999, and the model's
//! training set (`jetdetect dataset`) is drawn from exactly the pictures the
//! source shows. Three obstacle classes are drawn: 0 `box` (a cardboard box with
//! a tape stripe), 1 `ball` (a shaded blue ball) and 2 `cone` (a red traffic cone
//! with a white band), over a two-tone background with grey clutter and sensor
//! noise. Objects bounce off the frame edges and may occlude each other; the
//! ground truth says how much of each is visible. With `speed=M/S` the camera moves instead,
//! through a field of obstacles standing on the ground ([`drive`]).

pub mod drive;

use std::time::{Duration, Instant};

use super::uri::SourceUri;
use super::{FrameSource, Pacer, SourceError};
pub use crate::frame::GroundTruth;
use crate::frame::{encode_rgb, wall_clock_ns, Attitude, Course, Frame, PixelFormat};
use drive::{Drive, DriveConfig};

/// Class names of the synthetic obstacles, in class-id order (`models/obstacles.names`).
pub const CLASS_NAMES: [&str; 3] = ["box", "ball", "cone"];

/// A small, fast, reproducible random number generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    /// Uniform integer in `[0, n)`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

#[derive(Clone, Debug)]
struct SceneObject {
    class_id: usize,
    half_w: f32,
    half_h: f32,
    x0: f32,
    y0: f32,
    vx: f32,
    vy: f32,
    colour: [u8; 3],
    /// Closing in: its time to contact at the start of each approach, in frames.
    approach: Option<f32>,
}

/// One pass of an object in a scene whose objects leave ([`Scene::leaving`]).
#[derive(Clone, Copy, Debug)]
struct Pass {
    /// Centre at the start.
    x: f32,
    y: f32,
    /// Pixels per frame.
    vx: f32,
    vy: f32,
    /// Frames in the picture.
    length: f32,
    /// Time to contact at the start, in frames, for an object closing in.
    approach: Option<f32>,
}

/// A synthetic scene: a static background and objects in linear, bouncing motion.
#[derive(Clone, Debug)]
pub struct Scene {
    width: u32,
    height: u32,
    noise: u8,
    seed: u64,
    background: Vec<u8>,
    objects: Vec<SceneObject>,
    /// Objects leave the picture instead of bouncing ([`Scene::leaving`]).
    leave: bool,
    /// The camera drives through a field of obstacles ([`Scene::driving`]).
    drive: Option<Drive>,
}

/// Where an object is in one frame, and what the truth says of it.
#[derive(Clone, Copy, Debug, Default)]
struct Placement {
    cx: f32,
    cy: f32,
    half_w: f32,
    half_h: f32,
    ttc_frames: Option<f32>,
    object: usize,
    /// Distance from the camera, for drawing far objects first (0 in scenes without depth).
    depth: f32,
    course: Option<Course>,
}

/// Area of an object's shape with half sizes `hw` x `hh`: a box, a ball (ellipse) or a cone
/// (a triangle, its width growing from the tip at the top).
fn shape_area(class_id: usize, hw: f32, hh: f32) -> f32 {
    match class_id {
        1 => std::f32::consts::PI * hw * hh,
        2 => 2.0 * hw * hh,
        _ => 4.0 * hw * hh,
    }
}

fn hsv(h: f32, s: f32, v: f32) -> [u8; 3] {
    let h = h.rem_euclid(360.0) / 60.0;
    let c = v * s;
    let x = c * (1.0 - (h % 2.0 - 1.0).abs());
    let (r, g, b) = match h as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = v - c;
    [r + m, g + m, b + m].map(|f| (f * 255.0).round().clamp(0.0, 255.0) as u8)
}

fn shade(c: [u8; 3], k: f32) -> [u8; 3] {
    c.map(|v| (v as f32 * k).round().clamp(0.0, 255.0) as u8)
}

/// Position along one axis after `t` frames of motion at `v` px/frame starting at
/// `p0`, reflecting off `lo` and `hi`.
fn bounce(p0: f32, v: f32, t: u64, lo: f32, hi: f32) -> f32 {
    let span = (hi - lo) as f64;
    if span <= 0.0 {
        return lo;
    }
    let p = (p0 - lo) as f64 + v as f64 * t as f64;
    let m = p.rem_euclid(2.0 * span);
    let folded = if m > span { 2.0 * span - m } else { m };
    lo + folded as f32
}

impl Scene {
    /// Builds the scene for `seed` at `width` x `height` with `objects` obstacles
    /// (at most 255: more are ignored).
    pub fn new(width: u32, height: u32, objects: usize, seed: u64, noise: u8) -> Scene {
        Scene::with_approach(width, height, objects, 0, seed, noise)
    }

    /// Like [`Scene::new`], with the first `approaching` objects closing in on the camera: each
    /// grows as an object coming straight at it at a steady speed (its size goes as
    /// `T / (T - t)`, `T` its time to contact at the start, 60 to 150 frames), from its size to
    /// twice it, and then starts over. The ground truth gives the true time to contact.
    pub fn with_approach(
        width: u32,
        height: u32,
        objects: usize,
        approaching: usize,
        seed: u64,
        noise: u8,
    ) -> Scene {
        let objects = objects.min(255);
        let mut rng = Rng::new(seed);
        let (w, h) = (width as usize, height as usize);
        let short = width.min(height) as f32;

        // Background: a vertical two-tone gradient ("wall" over "floor") of
        // low-saturation colours, with a horizon and grey clutter blocks.
        let top = hsv(rng.range(0.0, 360.0), rng.range(0.0, 0.15), rng.range(0.55, 0.9));
        let bottom = hsv(rng.range(0.0, 360.0), rng.range(0.0, 0.2), rng.range(0.25, 0.6));
        let horizon = rng.range(0.3, 0.7) * height as f32;
        let mut background = vec![0u8; w * h * 3];
        for y in 0..h {
            let t = ((y as f32 - horizon) / (0.15 * height as f32)).clamp(-1.0, 1.0) * 0.5 + 0.5;
            let row: [u8; 3] =
                std::array::from_fn(|i| (top[i] as f32 * (1.0 - t) + bottom[i] as f32 * t) as u8);
            for px in background[y * w * 3..(y + 1) * w * 3].chunks_exact_mut(3) {
                px.copy_from_slice(&row);
            }
        }
        for _ in 0..rng.below(6) {
            let grey = rng.range(40.0, 220.0) as u8;
            let cw = rng.range(0.05, 0.4) * width as f32;
            let ch = rng.range(0.02, 0.15) * height as f32;
            let cx = rng.range(0.0, width as f32 - cw);
            let cy = rng.range(0.0, height as f32 - ch);
            for y in cy as usize..(cy + ch) as usize {
                for x in cx as usize..(cx + cw) as usize {
                    background[(y * w + x) * 3..(y * w + x) * 3 + 3].fill(grey);
                }
            }
        }

        let speed_scale = width as f32 / 640.0;
        let objects = (0..objects)
            .map(|_| {
                let class_id = rng.below(CLASS_NAMES.len() as u64) as usize;
                let s = rng.range(0.12, 0.32) * short;
                let (half_w, half_h, colour) = match class_id {
                    0 => (
                        s * rng.range(0.4, 0.7),
                        s * rng.range(0.35, 0.55),
                        hsv(rng.range(22.0, 40.0), rng.range(0.45, 0.75), rng.range(0.5, 0.85)),
                    ),
                    1 => {
                        let r = s * rng.range(0.35, 0.5);
                        (r, r, hsv(rng.range(200.0, 235.0), rng.range(0.6, 0.9), rng.range(0.55, 0.95)))
                    }
                    _ => {
                        let hh = s * rng.range(0.5, 0.65);
                        (
                            hh * rng.range(0.55, 0.75),
                            hh,
                            hsv(rng.range(-8.0, 12.0), rng.range(0.75, 0.95), rng.range(0.7, 0.95)),
                        )
                    }
                };
                let angle = rng.range(0.0, std::f32::consts::TAU);
                let speed = rng.range(0.5, 4.0) * speed_scale;
                SceneObject {
                    class_id,
                    half_w,
                    half_h,
                    x0: rng.range(half_w, (width as f32 - half_w).max(half_w)),
                    y0: rng.range(half_h, (height as f32 - half_h).max(half_h)),
                    vx: speed * angle.cos(),
                    vy: speed * angle.sin(),
                    colour,
                    approach: None,
                }
            })
            .collect::<Vec<_>>();
        // Drawn from their own generator, so scenes without approaching objects are unchanged.
        let mut objects = objects;
        let mut looming = Rng::new(seed ^ 0x4c4f_4f4d);
        for o in objects.iter_mut().take(approaching) {
            o.approach = Some(looming.range(60.0, 150.0));
            // Slower across the picture: an obstacle coming at the camera.
            o.vx *= 0.25;
            o.vy *= 0.25;
        }
        Scene { width, height, noise, seed, background, objects, leave: false, drive: None }
    }

    /// The same scene with objects that come and go: an object crossing the picture enters at
    /// an edge, moves in a straight line and leaves at another (crossing and hiding others on
    /// its way), then after a pause a new one of its kind enters elsewhere; an object closing
    /// in disappears at the end of its approach (it was passed), and after a pause a new one
    /// starts closing in elsewhere (from 0.4 times its size to twice it, contact 3 to 8 s away
    /// at the start at 30 fps, 0.6 to 1.6 s at the end). Each such pass is a new object of the truth
    /// (`object = pass * 256 + index`), so a tracker must give it a new track. The truth's
    /// `visible` then also counts the part of the object outside the picture as not visible.
    pub fn leaving(mut self) -> Scene {
        self.leave = true;
        self
    }

    /// The same scene seen from a camera driving through it ([`drive`]): its objects are the
    /// obstacles (each keeps its class and colour from one appearance to the next), its
    /// background pans as the camera turns and shakes.
    pub fn driving(mut self, config: DriveConfig) -> Scene {
        self.drive = Some(Drive::new(config, self.seed, self.width));
        self
    }

    /// The camera's attitude in frame `t`, in a scene where it moves.
    pub fn attitude(&self, t: u64) -> Option<Attitude> {
        self.drive.as_ref().map(|d| d.view(t).attitude)
    }

    /// Object `k`'s place in frame `t`, `None` while it is away.
    fn place(&self, k: usize, o: &SceneObject, t: u64) -> Option<Placement> {
        let (w, h) = (self.width as f32, self.height as f32);
        if let Some(d) = &self.drive {
            let s = d.seen(k, o.class_id, t, &d.view(t), self.width, self.height)?;
            return Some(Placement {
                cx: s.cx,
                cy: s.cy,
                half_w: s.half_w,
                half_h: s.half_h,
                ttc_frames: Some((s.ttc_s * drive::SCENE_FPS) as f32),
                object: s.object,
                depth: s.depth,
                course: Some(s.course),
            });
        }
        if !self.leave {
            // Closing in: the size grows as T / (T - tau), tau the frames into this approach.
            let (grow, ttc_frames) = match o.approach {
                Some(big_t) => {
                    let tau = (t as f32).rem_euclid(big_t / 2.0);
                    (big_t / (big_t - tau), Some(big_t - tau))
                }
                None => (1.0, None),
            };
            let (half_w, half_h) = (o.half_w * grow, o.half_h * grow);
            let cx = bounce(o.x0, o.vx, t, half_w, w - half_w);
            let cy = bounce(o.y0, o.vy, t, half_h, h - half_h);
            return Some(Placement { cx, cy, half_w, half_h, ttc_frames, object: k, ..Default::default() });
        }
        // Passes follow each other: find the one frame `t` falls in. Objects start part-way
        // into their first pass, so that not all of them enter at frame 0.
        let offset = self.pass_rng(k, u64::MAX).below(self.pass(k, o, 0).1);
        let mut into = t + offset;
        let mut p = 0u64;
        loop {
            let (pass, duration) = self.pass(k, o, p);
            if into < duration {
                let tau = into as f32;
                if tau >= pass.length {
                    return None; // the pause after it
                }
                let object = (p as usize).wrapping_mul(256) + k;
                return Some(match pass.approach {
                    Some(big_t) => {
                        let grow = 0.4 * big_t / (big_t - tau);
                        let (half_w, half_h) = (o.half_w * grow, o.half_h * grow);
                        let cx = bounce(pass.x, pass.vx, into, half_w, w - half_w);
                        let cy = bounce(pass.y, pass.vy, into, half_h, h - half_h);
                        Placement {
                            cx,
                            cy,
                            half_w,
                            half_h,
                            ttc_frames: Some(big_t - tau),
                            object,
                            ..Default::default()
                        }
                    }
                    None => Placement {
                        cx: pass.x + pass.vx * tau,
                        cy: pass.y + pass.vy * tau,
                        half_w: o.half_w,
                        half_h: o.half_h,
                        ttc_frames: None,
                        object,
                        ..Default::default()
                    },
                });
            }
            into -= duration;
            p += 1;
        }
    }

    /// The generator of object `k`'s pass `p`.
    fn pass_rng(&self, k: usize, p: u64) -> Rng {
        let mut r = Rng::new(self.seed ^ 0x4c45_4156_4500_0000 ^ (k as u64).rotate_left(40));
        let mut r2 = Rng::new(r.next_u64() ^ p);
        r2.next_u64();
        r2
    }

    /// Object `k`'s pass `p` and its frames, the pause after it included.
    fn pass(&self, k: usize, o: &SceneObject, p: u64) -> (Pass, u64) {
        let (w, h) = (self.width as f32, self.height as f32);
        let mut rng = self.pass_rng(k, p);
        let speed_scale = w / 640.0;
        if o.approach.is_some() {
            // From 0.4 times its size to twice it (a time to contact of T down to T / 5, T of 3
            // to 8 s at 30 fps), a new T each pass; then 10 to 50 frames away.
            let big_t = rng.range(90.0, 240.0);
            let length = (big_t * 0.8).floor();
            let (mw, mh) = (2.0 * o.half_w, 2.0 * o.half_h);
            let x = if w > 2.0 * mw { rng.range(mw, w - mw) } else { w / 2.0 };
            let y = if h > 2.0 * mh { rng.range(mh, h - mh) } else { h / 2.0 };
            let (vx, vy) = (rng.range(-0.5, 0.5) * speed_scale, rng.range(-0.5, 0.5) * speed_scale);
            let pause = 10 + rng.below(40);
            let pass = Pass { x, y, vx, vy, length, approach: Some(big_t) };
            return (pass, length as u64 + pause);
        }
        // In at one edge (just outside), towards a point in the middle of the picture, out at
        // another; then 0 to 45 frames before the next enters.
        let (hw, hh) = (o.half_w, o.half_h);
        let along = rng.range(0.1, 0.9);
        let (x, y) = match rng.below(4) {
            0 => (-hw, along * h),
            1 => (w + hw, along * h),
            2 => (along * w, -hh),
            _ => (along * w, h + hh),
        };
        let (tx, ty) = (rng.range(0.25, 0.75) * w, rng.range(0.25, 0.75) * h);
        let speed = rng.range(1.0, 4.0) * speed_scale;
        let norm = ((tx - x).powi(2) + (ty - y).powi(2)).sqrt().max(1e-3);
        let (vx, vy) = ((tx - x) / norm * speed, (ty - y) / norm * speed);
        // Leaves when its centre is half its size past an edge.
        let exit = |p: f32, v: f32, lo: f32, hi: f32| match v {
            v if v > 0.0 => (hi - p) / v,
            v if v < 0.0 => (lo - p) / v,
            _ => f32::INFINITY,
        };
        let length = exit(x, vx, -hw, w + hw).min(exit(y, vy, -hh, h + hh)).ceil().max(1.0);
        let pause = rng.below(46);
        (Pass { x, y, vx, vy, length, approach: None }, length as u64 + pause)
    }

    /// Frame width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Frame height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// Renders frame `t` as packed RGB24 into `rgb` and its ground truth into
    /// `truth` (both reused). `ids` is scratch space (object index per pixel).
    pub fn render(&self, t: u64, rgb: &mut Vec<u8>, ids: &mut Vec<u8>, truth: &mut Vec<GroundTruth>) {
        let (w, h) = (self.width as usize, self.height as usize);
        let view = self.drive.as_ref().map(|d| d.view(t));
        rgb.clear();
        match view {
            // The background is far: it pans as the camera turns and pitches (around the
            // picture's width, clamped at the top and bottom rows).
            Some(v) => {
                let dx = (v.pan.0.round() as i64).rem_euclid(w as i64) as usize;
                let dy = v.pan.1.round() as i64;
                for y in 0..h {
                    let from = (y as i64 - dy).clamp(0, h as i64 - 1) as usize;
                    let row = &self.background[from * w * 3..(from + 1) * w * 3];
                    // Pixel x shows background x - dx.
                    let split = (w - dx) % w * 3;
                    rgb.extend_from_slice(&row[split..]);
                    rgb.extend_from_slice(&row[..split]);
                }
            }
            None => rgb.extend_from_slice(&self.background),
        }
        ids.clear();
        ids.resize(w * h, 0);
        truth.clear();
        // Per-object pixel counts; ids are u8, so at most 255 objects (the URI allows 32).
        let mut painted = [0u32; 256];

        // Which object each truth entry is (objects away are left out).
        let mut index = [0u8; 256];
        // Far ones first, so that near ones are drawn over them (all at depth 0 but in a
        // moving camera's scene: in order).
        let mut placed = [(0usize, Placement::default()); 256];
        let mut n = 0;
        for (k, o) in self.objects.iter().enumerate().take(256) {
            if let Some(at) = self.place(k, o, t) {
                placed[n] = (k, at);
                n += 1;
            }
        }
        placed[..n].sort_by(|a, b| b.1.depth.total_cmp(&a.1.depth));
        for &(k, at) in &placed[..n] {
            let o = &self.objects[k];
            let (cx, cy, ttc_frames) = (at.cx, at.cy, at.ttc_frames);
            let o = &SceneObject { half_w: at.half_w, half_h: at.half_h, ..o.clone() };
            let (x1, x2) = (cx - o.half_w, cx + o.half_w);
            let (y1, y2) = (cy - o.half_h, cy + o.half_h);
            let (mut bx1, mut by1, mut bx2, mut by2) = (usize::MAX, usize::MAX, 0usize, 0usize);
            let ys = (y1.floor().max(0.0) as usize)..(y2.ceil().min(h as f32) as usize);
            for y in ys {
                let fy = y as f32 + 0.5;
                if fy < y1 || fy >= y2 {
                    continue;
                }
                let v = (fy - y1) / (y2 - y1); // 0 at the top, 1 at the bottom
                let (lx, rx) = match o.class_id {
                    1 => {
                        let dy = (fy - cy) / o.half_h;
                        let half = o.half_w * (1.0 - dy * dy).max(0.0).sqrt();
                        (cx - half, cx + half)
                    }
                    2 => (cx - o.half_w * v, cx + o.half_w * v),
                    _ => (x1, x2),
                };
                let xs = (lx.floor().max(0.0) as usize)..(rx.ceil().min(w as f32) as usize);
                for x in xs {
                    let fx = x as f32 + 0.5;
                    if fx < lx || fx >= rx {
                        continue;
                    }
                    let colour = match o.class_id {
                        // Tape stripe across the box.
                        0 if (0.42..0.55).contains(&v) => shade(o.colour, 0.55),
                        // Shaded sphere, lit from the top left.
                        1 => {
                            let dx = (fx - cx) / o.half_w + 0.35;
                            let dy = (fy - cy) / o.half_h + 0.35;
                            shade(o.colour, (1.15 - 0.45 * (dx * dx + dy * dy)).clamp(0.45, 1.15))
                        }
                        // Reflective band on the cone.
                        2 if (0.45..0.62).contains(&v) => [235, 235, 235],
                        _ => o.colour,
                    };
                    let p = y * w + x;
                    rgb[p * 3..p * 3 + 3].copy_from_slice(&colour);
                    ids[p] = k as u8 + 1;
                    painted[k] += 1;
                    bx1 = bx1.min(x);
                    by1 = by1.min(y);
                    bx2 = bx2.max(x + 1);
                    by2 = by2.max(y + 1);
                }
            }
            truth.push(GroundTruth {
                class_id: o.class_id,
                x1: bx1.min(bx2) as f32,
                y1: by1.min(by2) as f32,
                x2: bx2 as f32,
                y2: by2 as f32,
                visible: 0.0,
                object: at.object,
                ttc_frames,
                shown: None,
                course: at.course,
            });
            index[truth.len() - 1] = k as u8;
        }

        // Pixels in view and their box, per object.
        let mut seen = [0u32; 256];
        let mut shown = [[u32::MAX, u32::MAX, 0u32, 0u32]; 256];
        for (y, row) in ids.chunks_exact(w).enumerate() {
            for (x, &id) in row.iter().enumerate().filter(|(_, &id)| id > 0) {
                let k = id as usize - 1;
                seen[k] += 1;
                let b = &mut shown[k];
                (b[0], b[1]) = (b[0].min(x as u32), b[1].min(y as u32));
                (b[2], b[3]) = (b[2].max(x as u32 + 1), b[3].max(y as u32 + 1));
            }
        }
        for (i, g) in truth.iter_mut().enumerate() {
            let k = index[i] as usize;
            let (s, p) = (seen[k] as f32, painted[k] as f32);
            // Objects that leave may be partly outside the picture: that part is not visible.
            // (Objects closing in are placed to stay whole in the picture.)
            let whole = match &self.objects[k] {
                o if self.leave && g.ttc_frames.is_none() || self.drive.is_some() => {
                    p.max(shape_area(o.class_id, o.half_w, o.half_h))
                }
                _ => p,
            };
            g.visible = if p == 0.0 { 0.0 } else { (s / whole).min(1.0) };
            let b = shown[k].map(|v| v as f32);
            g.shown = (seen[k] > 0 && b != g.corners()).then_some(b);
        }

        if let Some(v) = view {
            smear(rgb, w, h, v.smear);
            if v.gain != 1.0 {
                for b in rgb.iter_mut() {
                    *b = (*b as f32 * v.gain).round().min(255.0) as u8;
                }
            }
        }
        if self.noise > 0 {
            let amp = self.noise as i32;
            let mut rng = Rng::new(self.seed.wrapping_mul(31).wrapping_add(t));
            for chunk in rgb.chunks_mut(8) {
                let r = rng.next_u64();
                for (i, b) in chunk.iter_mut().enumerate() {
                    let n = ((r >> (i * 8)) & 0xFF) as i32 * (2 * amp + 1) / 256 - amp;
                    *b = (*b as i32 + n).clamp(0, 255) as u8;
                }
            }
        }
        // Objects too small to see (all pixels off-frame) are not ground truth.
        truth.retain(|g| g.x2 > g.x1 && g.y2 > g.y1);
    }
}

/// Motion blur: each pixel the mean of the picture along `by` (pixels, x and y), centred on it,
/// in up to 9 steps, as an exposure that lasts while the picture moves that far.
fn smear(rgb: &mut [u8], w: usize, h: usize, by: (f32, f32)) {
    let len = by.0.hypot(by.1);
    if len < 1.0 {
        return;
    }
    let taps = (len.ceil() as usize + 1).min(9);
    let src = rgb.to_vec();
    let offsets: Vec<(i64, i64)> = (0..taps)
        .map(|i| {
            let k = i as f32 / (taps - 1) as f32 - 0.5;
            ((by.0 * k).round() as i64, (by.1 * k).round() as i64)
        })
        .collect();
    for y in 0..h {
        for x in 0..w {
            let mut sum = [0u32; 3];
            for &(dx, dy) in &offsets {
                let sx = (x as i64 + dx).clamp(0, w as i64 - 1) as usize;
                let sy = (y as i64 + dy).clamp(0, h as i64 - 1) as usize;
                let p = (sy * w + sx) * 3;
                for c in 0..3 {
                    sum[c] += src[p + c] as u32;
                }
            }
            let p = (y * w + x) * 3;
            for c in 0..3 {
                rgb[p + c] = (sum[c] / taps as u32) as u8;
            }
        }
    }
}

/// The `synthetic://` frame source.
pub struct SyntheticSource {
    scene: Scene,
    format: PixelFormat,
    pacer: Pacer,
    max_frames: u64,
    next_index: u64,
    /// Before this frame, the camera goes silent for `stall.1` (once).
    stall: Option<(u64, Duration)>,
    rgb: Vec<u8>,
    ids: Vec<u8>,
    truth: Vec<GroundTruth>,
    text: String,
}

/// Query keys `synthetic://` accepts.
pub const KEYS: [&str; 20] = [
    "width",
    "height",
    "fps",
    "format",
    "seed",
    "objects",
    "frames",
    "approach",
    "leave",
    "stall",
    "stall_ms",
    "noise",
    "speed",
    "turn",
    "shake",
    "blur",
    "exposure",
    "vehicle_m",
    "hfov",
    "on_course",
];

impl SyntheticSource {
    /// Opens `synthetic://?width=..&height=..&fps=..&format=..&seed=..&objects=..&frames=..&approach=..`.
    /// `fps=0` delivers frames as fast as they are asked for; `frames=0` never ends;
    /// `approach=N`: the first N objects close in on the camera ([`Scene::with_approach`]);
    /// `leave=1`: objects come and go, each pass a new object of the truth ([`Scene::leaving`]);
    /// `stall=N&stall_ms=M`: after N frames the camera delivers nothing for M ms (2000 by
    /// default), once, as a camera that freezes and recovers (the blind path, end to end);
    /// `noise=N`: sensor noise of up to N levels (6 by default).
    ///
    /// `speed=M/S` (above 0): the camera drives through a field of `objects` obstacles
    /// ([`drive`]), with `turn=DEG_S` (yaw rate of every other stretch), `shake=DEG`
    /// (vibration), `blur=MS` (exposure for motion blur), `exposure=1` (exposure steps),
    /// `vehicle_m=M` (the vehicle's width, 0.6 by default), `hfov=DEG` (62.2 by default) and
    /// `on_course=F` (the share of obstacles in the vehicle's way, 0.3 by default).
    pub fn open(uri: &SourceUri) -> Result<SyntheticSource, SourceError> {
        let bad = |m: String| SourceError::Config(m);
        uri.check_keys(&KEYS)?;
        if !uri.location.is_empty() {
            return Err(bad(format!(
                "{}: synthetic sources take no location, only parameters: synthetic://?width=640&height=480",
                uri.text
            )));
        }
        let width = uri.get_in("width", 640u32, 16, 8192)?;
        let height = uri.get_in("height", 480u32, 16, 8192)?;
        let fps = uri.get_in("fps", 30.0f64, 0.0, 1000.0)?;
        let format: PixelFormat = uri.get("format", PixelFormat::Yuyv)?;
        let seed = uri.get("seed", 1u64)?;
        let objects = uri.get_in("objects", 4usize, 0, 32)?;
        let max_frames = uri.get("frames", 0u64)?;
        let approaching = uri.get_in("approach", 0usize, 0, objects)?;
        let leave = uri.get_in("leave", 0u8, 0, 1)? == 1;
        let stall_at = uri.get("stall", 0u64)?;
        let stall_ms = uri.get_in("stall_ms", 2000u64, 1, 600_000)?;
        let noise = uri.get_in("noise", 6u8, 0, 64)?;
        let speed = uri.get_in("speed", 0.0f64, 0.0, 50.0)?;
        let defaults = DriveConfig::default();
        let drive = DriveConfig {
            speed_mps: speed,
            turn_deg_s: uri.get_in("turn", 0.0f64, 0.0, 180.0)?,
            shake_deg: uri.get_in("shake", 0.0f64, 0.0, 10.0)?,
            blur_ms: uri.get_in("blur", 0.0f64, 0.0, 100.0)?,
            exposure_steps: uri.get_in("exposure", 0u8, 0, 1)? == 1,
            vehicle_m: uri.get_in("vehicle_m", defaults.vehicle_m, 0.05, 10.0)?,
            hfov_deg: uri.get_in("hfov", defaults.hfov_deg, 10.0, 170.0)?,
            on_course: uri.get_in("on_course", defaults.on_course, 0.0, 1.0)?,
        };
        let driving = uri.has("turn") || uri.has("shake") || uri.has("blur") || uri.has("exposure");
        if speed == 0.0 && (driving || uri.has("vehicle_m") || uri.has("on_course") || uri.has("hfov")) {
            return Err(bad(format!(
                "{}: turn, shake, blur, exposure, vehicle_m, hfov and on_course are options of a moving camera: \
                 add speed=M/S (e.g. speed=2)",
                uri.text
            )));
        }
        if speed > 0.0 && (approaching > 0 || leave) {
            return Err(bad(format!(
                "{}: speed=M/S moves the camera through obstacles that stand still; approach and leave \
                 move the objects of a still camera's scene: give one or the other",
                uri.text
            )));
        }
        if format.frame_len(width, height).is_none() {
            return Err(bad(format!(
                "{}: {width}x{height} is not a valid size for {format} (4:2:2 needs an even width, 4:2:0 even width and height)",
                uri.text
            )));
        }
        Ok(SyntheticSource {
            scene: match Scene::with_approach(width, height, objects, approaching, seed, noise) {
                scene if speed > 0.0 => scene.driving(drive),
                scene if leave => scene.leaving(),
                scene => scene,
            },
            format,
            pacer: Pacer::new(fps),
            max_frames,
            next_index: 0,
            stall: (stall_at > 0).then(|| (stall_at, Duration::from_millis(stall_ms))),
            rgb: Vec::new(),
            ids: Vec::new(),
            truth: Vec::new(),
            text: uri.text.clone(),
        })
    }
}

impl FrameSource for SyntheticSource {
    fn describe(&self) -> String {
        format!("{} ({}x{} {})", self.text, self.scene.width(), self.scene.height(), self.format)
    }

    fn next_frame(&mut self, frame: &mut Frame) -> Result<bool, SourceError> {
        if self.max_frames > 0 && self.next_index >= self.max_frames {
            return Ok(false);
        }
        if let Some((at, pause)) = self.stall.filter(|(at, _)| *at == self.next_index) {
            log::info!("{}: stalling for {} ms before frame {at}, as asked", self.text, pause.as_millis());
            std::thread::sleep(pause);
            self.stall = None;
        }
        self.pacer.wait();
        let t = self.next_index;
        self.scene.render(t, &mut self.rgb, &mut self.ids, &mut self.truth);
        encode_rgb(&self.rgb, self.scene.width(), self.scene.height(), self.format, &mut frame.data);
        frame.width = self.scene.width();
        frame.height = self.scene.height();
        frame.format = self.format;
        frame.seq = t;
        frame.captured = Instant::now();
        frame.captured_wall_ns = wall_clock_ns();
        frame.truth.clone_from(&self.truth);
        frame.attitude = self.scene.attitude(t);
        if frame.label.is_empty() {
            frame.label = "synthetic".to_string();
        }
        self.next_index += 1;
        Ok(true)
    }

    fn nominal_fps(&self) -> Option<f64> {
        self.pacer.fps()
    }

    fn geometry(&self) -> Option<(PixelFormat, u32, u32)> {
        Some((self.format, self.scene.width(), self.scene.height()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn approaching_objects_grow_as_their_time_to_contact_says_and_others_are_unchanged() {
        let (mut rgb, mut ids, mut truth) = (Vec::new(), Vec::new(), Vec::new());
        let plain = Scene::new(640, 480, 4, 9, 0);
        let with = Scene::with_approach(640, 480, 4, 1, 9, 0);
        let mut plain_truth = Vec::new();
        plain.render(5, &mut rgb, &mut ids, &mut plain_truth);
        with.render(5, &mut rgb, &mut ids, &mut truth);
        // Objects 1..3 do not approach: the same as without the option.
        let others = |t: &[GroundTruth]| t.iter().filter(|g| g.object != 0).copied().collect::<Vec<_>>();
        assert_eq!(others(&truth), others(&plain_truth));
        assert!(truth.iter().filter(|g| g.object != 0).all(|g| g.ttc_frames.is_none()));
        // Object 0: size ratio between frames 10 and 20 is (T - 10) / (T - 20), T its time to
        // contact at frame 0 (an exact pinhole approach at a steady speed).
        let at = |t: u64, rgb: &mut Vec<u8>, ids: &mut Vec<u8>, truth: &mut Vec<GroundTruth>| {
            with.render(t, rgb, ids, truth);
            *truth.iter().find(|g| g.object == 0).unwrap()
        };
        let (a, b) = (at(10, &mut rgb, &mut ids, &mut truth), at(20, &mut rgb, &mut ids, &mut truth));
        let big_t = a.ttc_frames.unwrap() + 10.0;
        assert!((b.ttc_frames.unwrap() - (big_t - 20.0)).abs() < 1e-3);
        let size = |g: &GroundTruth| ((g.x2 - g.x1) * (g.y2 - g.y1)).sqrt();
        let want = (big_t - 10.0) / (big_t - 20.0);
        assert!((size(&b) / size(&a) - want).abs() < 0.03, "{} vs {want}", size(&b) / size(&a));
    }

    #[test]
    fn leaving_objects_enter_cross_and_leave_and_each_pass_is_a_new_object() {
        let (w, h) = (320u32, 240u32);
        let scene = Scene::with_approach(w, h, 4, 1, 5, 0).leaving();
        let (mut rgb, mut ids, mut truth) = (Vec::new(), Vec::new(), Vec::new());
        // Per object of the truth: its frames, first and last box, and its times to contact.
        let mut seen: BTreeMap<usize, Vec<(u64, GroundTruth)>> = BTreeMap::new();
        for t in 0..3000 {
            scene.render(t, &mut rgb, &mut ids, &mut truth);
            for g in &truth {
                seen.entry(g.object).or_default().push((t, *g));
            }
        }
        let passes = |k: usize| seen.keys().filter(|&&o| o % 256 == k).count();
        for k in 0..4 {
            assert!(passes(k) >= 5, "object {k} came back as new objects: {} passes", passes(k));
        }
        let mut crossings = 0;
        for (&object, frames) in &seen {
            // One unbroken run of frames: an object that left never comes back as itself.
            let (first, last) = (frames[0].0, frames[frames.len() - 1].0);
            assert_eq!(last - first + 1, frames.len() as u64, "object {object} came back");
            let edge = |g: &GroundTruth| g.x1 == 0.0 || g.y1 == 0.0 || g.x2 == w as f32 || g.y2 == h as f32;
            if object % 256 == 0 {
                // Closing in: the time to contact falls a frame per frame, whole in the picture.
                assert!(frames.windows(2).all(|p| (p[0].1.ttc_frames.unwrap()
                    - p[1].1.ttc_frames.unwrap()
                    - 1.0)
                    .abs()
                    < 1e-3));
                // From 3 to 8 s away to a fifth of that: its size grows fivefold.
                if first > 0 && last < 2999 {
                    let (a, b) =
                        (frames[0].1.ttc_frames.unwrap(), frames[frames.len() - 1].1.ttc_frames.unwrap());
                    assert!((90.0..=240.0).contains(&a) && (4.5..=5.0).contains(&(a / b)), "{a} -> {b}");
                }
            } else if first > 0 && last < 2999 {
                // Crossing: in at an edge, out at an edge, partly outside on the way (less visible).
                crossings += 1;
                assert!(edge(&frames[0].1) && edge(&frames[frames.len() - 1].1), "object {object}");
                assert!(frames[0].1.visible < 0.5, "{:?}", frames[0].1);
                assert!(frames.iter().all(|(_, g)| g.ttc_frames.is_none()));
            }
        }
        assert!(crossings >= 15, "{crossings} crossings");
        // Frames are a pure function of their number, as without leave=1.
        let (mut a, mut ta) = (Vec::new(), Vec::new());
        scene.render(1234, &mut a, &mut ids, &mut ta);
        scene.render(1234, &mut rgb, &mut ids, &mut truth);
        assert_eq!((a, ta), (rgb, truth));
    }

    #[test]
    fn frames_are_reproducible_and_move() {
        let s = Scene::new(320, 240, 4, 7, 6);
        let (mut a, mut b, mut ids) = (Vec::new(), Vec::new(), Vec::new());
        let (mut ta, mut tb) = (Vec::new(), Vec::new());
        s.render(10, &mut a, &mut ids, &mut ta);
        s.render(10, &mut b, &mut ids, &mut tb);
        assert_eq!(a, b);
        assert_eq!(ta, tb);
        s.render(11, &mut b, &mut ids, &mut tb);
        assert_ne!(ta, tb, "objects move between frames");
    }

    #[test]
    fn ground_truth_boxes_stay_in_frame_and_cover_their_pixels() {
        let mut part_hidden = 0;
        for seed in 0..20 {
            let s = Scene::new(200, 150, 5, seed, 0);
            let (mut rgb, mut ids, mut truth) = (Vec::new(), Vec::new(), Vec::new());
            for t in [0, 1, 57, 1000, 123_456] {
                s.render(t, &mut rgb, &mut ids, &mut truth);
                for g in &truth {
                    assert!(g.x1 >= 0.0 && g.y1 >= 0.0 && g.x2 <= 200.0 && g.y2 <= 150.0, "{g:?}");
                    assert!(g.x2 - g.x1 >= 4.0 && g.y2 - g.y1 >= 4.0, "{g:?}");
                    assert!((0.0..=1.0).contains(&g.visible));
                }
                // Every object pixel lies inside some ground-truth box of its object, and
                // inside the box of its part in view, which those pixels fill edge to edge.
                let mut tight = vec![[f32::MAX, f32::MAX, 0.0f32, 0.0f32]; truth.len()];
                for (p, &id) in ids.iter().enumerate() {
                    if id > 0 {
                        let g = truth[id as usize - 1];
                        let (x, y) = ((p % 200) as f32, (p / 200) as f32);
                        assert!(x >= g.x1 && x < g.x2 && y >= g.y1 && y < g.y2);
                        let t = &mut tight[id as usize - 1];
                        *t = [t[0].min(x), t[1].min(y), t[2].max(x + 1.0), t[3].max(y + 1.0)];
                    }
                }
                for (g, t) in truth.iter().zip(&tight) {
                    match g.shown {
                        Some(b) => {
                            part_hidden += 1;
                            assert_eq!(&b, t, "{g:?}");
                            assert!(
                                g.visible < 1.0,
                                "a box in view smaller than the whole is hidden in part: {g:?}"
                            );
                        }
                        None => assert!(g.visible == 0.0 || *t == g.corners(), "{g:?} {t:?}"),
                    }
                }
            }
        }
        assert!(part_hidden > 0, "the scenes have objects hidden in part");
    }

    #[test]
    fn bounce_reflects_off_both_walls() {
        assert_eq!(bounce(5.0, 1.0, 3, 0.0, 10.0), 8.0);
        assert_eq!(bounce(5.0, 1.0, 7, 0.0, 10.0), 8.0); // 12 -> reflected to 8
        assert_eq!(bounce(5.0, -1.0, 7, 0.0, 10.0), 2.0); // -2 -> 2
        assert_eq!(bounce(3.0, 2.0, 0, 3.0, 3.0), 3.0);
    }

    #[test]
    fn source_checks_its_parameters() {
        let open = |s: &str| SyntheticSource::open(&SourceUri::parse(s).unwrap());
        assert!(open("synthetic://?width=641&format=yuyv").err().unwrap().to_string().contains("even width"));
        assert!(open("synthetic://?fps=abc").err().unwrap().to_string().contains("'fps'"));
        assert!(open("synthetic://?colour=red").err().unwrap().to_string().contains("unknown key 'colour'"));
        let mut src = open("synthetic://?width=64&height=48&fps=0&frames=2&format=nv12").unwrap();
        let mut f = Frame::empty();
        assert!(src.next_frame(&mut f).unwrap());
        assert_eq!((f.width, f.height, f.format, f.seq), (64, 48, PixelFormat::Nv12, 0));
        f.check_len().unwrap();
        assert!(src.next_frame(&mut f).unwrap());
        assert_eq!(f.seq, 1);
        assert!(!src.next_frame(&mut f).unwrap(), "frames=2 ends the stream");
        assert!(f.attitude.is_none(), "a still camera has no attitude to tell");
    }

    #[test]
    fn a_moving_camera_tells_its_attitude_and_its_obstacles_course() {
        let open = |s: &str| SyntheticSource::open(&SourceUri::parse(s).unwrap());
        let e = open("synthetic://?turn=10").err().unwrap().to_string();
        assert!(e.contains("options of a moving camera: add speed=M/S"), "{e}");
        let e = open("synthetic://?speed=2&approach=1").err().unwrap().to_string();
        assert!(e.contains("give one or the other"), "{e}");
        assert!(open("synthetic://?speed=2&on_course=2").err().unwrap().to_string().contains("'on_course'"));
        let mut src = open("synthetic://?fps=0&speed=3&turn=20&shake=1&objects=8&seed=2").unwrap();
        let mut f = Frame::empty();
        let (mut headings, mut courses) = (Vec::new(), 0);
        for _ in 0..300 {
            assert!(src.next_frame(&mut f).unwrap());
            headings.push(f.attitude.expect("a moving camera's attitude").yaw);
            for g in &f.truth {
                assert!(g.course.is_some() && g.ttc_frames.is_some(), "{g:?}");
                courses += 1;
            }
        }
        assert!(courses > 300, "obstacles in view: {courses}");
        // 10 s of driving, half of it turning at 20 deg/s either way: the heading moves.
        let (lo, hi) = headings.iter().fold((f64::MAX, f64::MIN), |(a, b), &h| (a.min(h), b.max(h)));
        assert!((hi - lo).to_degrees() > 30.0, "heading from {lo} to {hi}");
    }

    #[test]
    fn a_stall_holds_back_one_frame_once() {
        let mut src = SyntheticSource::open(
            &SourceUri::parse("synthetic://?width=32&height=32&fps=0&stall=2&stall_ms=300").unwrap(),
        )
        .unwrap();
        let mut f = Frame::empty();
        let mut gaps = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            assert!(src.next_frame(&mut f).unwrap());
            gaps.push((f.seq, t.elapsed()));
        }
        // Frame 2 comes after the stall (a lower bound only: a loaded machine may be slower).
        let stalled: Vec<u64> =
            gaps.iter().filter(|g| g.1 >= Duration::from_millis(300)).map(|g| g.0).collect();
        assert!(stalled.contains(&2), "{gaps:?}");
        assert!(gaps[3].1 < gaps[2].1 && gaps[4].1 < gaps[2].1, "once: {gaps:?}");
        assert!(SyntheticSource::open(&SourceUri::parse("synthetic://?stall=3&stall_ms=0").unwrap())
            .err()
            .unwrap()
            .to_string()
            .contains("stall_ms"));
    }
}
