//! Writes synthetic scenes as a YOLO training set (`jetdetect dataset`).
//!
//! The shipped obstacle model was trained on exactly these pictures (see
//! `models/README.md`), drawn by the same code as the `synthetic://` source, so
//! what the tests measure on that source is what the model learned.
//! Layout (the one ultralytics reads): `images/{train,val}/*.png`,
//! `labels/{train,val}/*.txt` with `class cx cy w h` normalised per line, and
//! `data.yaml`.
//!
//! Two kinds of scene are mixed: objects bouncing inside the picture (`synthetic://`'s
//! default), and objects that come and go (`synthetic://?leave=1&approach=N`, the scenes
//! `jetdetect eval --hazards` scores): entering and leaving at the edges, cut by them, and
//! closing in on the camera up to twice their size. A detector that has only seen the first
//! kind boxes an object entering at an edge short of that edge and a large object near contact
//! loosely, which is what time to contact is read from.
//!
//! A third, optional kind (`--crowded SHARE`) is crowded moments: six objects, and of eight
//! moments of the scene the one where the most pairs of objects of one class overlap. Two
//! overlapping objects of one class are where a detector trained on sparse scenes draws one box
//! for both, or a box on part of one, and the tracker then swaps their numbers.

use std::io::Write;
use std::path::Path;

use jetdetect::frame::GroundTruth;
use jetdetect::geometry::iou;
use jetdetect::source::synthetic::{Rng, Scene, CLASS_NAMES};
use jetdetect::Error;

/// Objects less visible than this are left out of the labels.
pub const MIN_VISIBLE: f32 = 0.35;

/// Frame sizes the training set mixes, so the model sees several aspect ratios.
const SIZES: [(u32, u32); 5] = [(640, 480), (640, 360), (480, 480), (800, 600), (320, 240)];

/// At most this many of a come-and-go scene's objects close in on the camera.
const MAX_APPROACHING: usize = 3;

/// Objects in a crowded image's scene (the most any image has).
const CROWDED_OBJECTS: usize = 6;

/// Moments of a crowded image's scene drawn to pick the most crowded one from.
const CROWDED_MOMENTS: usize = 8;

/// Two labelled objects of one class whose boxes overlap at least this much make a crowded pair.
const CROWDED_IOU: f32 = 0.1;

/// What kinds of scene a training set mixes, as shares of its images (each 0 to 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recipe {
    /// Share of images from scenes whose objects come and go (the rest bounce inside the picture).
    pub come_and_go: f32,
    /// Share of images (of either kind) made crowded: six objects, at the moment of eight drawn
    /// where the most pairs of one class overlap. At 0 no extra random number is drawn, so a
    /// recipe without crowded images makes the same images as before this option existed.
    pub crowded: f32,
}

impl Default for Recipe {
    /// The shipped model's recipe: half come-and-go scenes, no crowded images.
    fn default() -> Recipe {
        Recipe { come_and_go: 0.5, crowded: 0.0 }
    }
}

/// Pairs of labelled objects (at least [`MIN_VISIBLE`] visible) of one class whose boxes overlap
/// by IoU of at least [`CROWDED_IOU`].
pub fn crowded_pairs(truth: &[GroundTruth]) -> usize {
    let labelled: Vec<&GroundTruth> = truth.iter().filter(|g| g.visible >= MIN_VISIBLE).collect();
    let mut pairs = 0;
    for (i, a) in labelled.iter().enumerate() {
        for b in &labelled[i + 1..] {
            if a.class_id == b.class_id && iou(a.corners(), b.corners()) >= CROWDED_IOU {
                pairs += 1;
            }
        }
    }
    pairs
}

/// Writes `train` + `val` images with labels under `out`, the kinds of scene mixed as `recipe`
/// says. Returns the number of labelled objects.
pub fn write_dataset(
    out: &Path,
    train: usize,
    val: usize,
    seed: u64,
    recipe: Recipe,
) -> Result<usize, Error> {
    let io = |p: &Path, e: std::io::Error| Error::io(p.display().to_string(), e);
    let mut rng = Rng::new(seed);
    let mut labelled = 0;
    let (mut rgb, mut ids, mut truth) = (Vec::new(), Vec::new(), Vec::new());
    for (split, count) in [("train", train), ("val", val)] {
        let img_dir = out.join("images").join(split);
        let lbl_dir = out.join("labels").join(split);
        std::fs::create_dir_all(&img_dir).map_err(|e| io(&img_dir, e))?;
        std::fs::create_dir_all(&lbl_dir).map_err(|e| io(&lbl_dir, e))?;
        for i in 0..count {
            let (w, h) = SIZES[rng.below(SIZES.len() as u64) as usize];
            let mut objects = 1 + rng.below(6) as usize;
            let crowded = recipe.crowded > 0.0 && rng.range(0.0, 1.0) < recipe.crowded;
            if crowded {
                objects = CROWDED_OBJECTS;
            }
            let scene_seed = rng.next_u64();
            let (scene, t) = if rng.range(0.0, 1.0) < recipe.come_and_go {
                let approaching = rng.below(objects.min(MAX_APPROACHING) as u64 + 1) as usize;
                let scene = Scene::with_approach(w, h, objects, approaching, scene_seed, 6).leaving();
                // Objects near contact (the end of an approach, twice their size) are a small
                // share of a scene's frames but the ones time to contact matters most for: the
                // frame with the largest object of one to six drawn. (The first value of `best`
                // is always replaced; it stays drawn so the shipped training set's recipe still
                // makes the same images.)
                let mut best = (rng.below(100_000), -1.0f32);
                for _ in 0..rng.below(6) + 1 {
                    let t = rng.below(100_000);
                    scene.render(t, &mut rgb, &mut ids, &mut truth);
                    let largest = truth.iter().map(|g| (g.x2 - g.x1) * (g.y2 - g.y1)).fold(0.0, f32::max);
                    if largest > best.1 {
                        best = (t, largest);
                    }
                }
                (scene, best.0)
            } else {
                (Scene::new(w, h, objects, scene_seed, 6), rng.below(100_000))
            };
            let t = if crowded {
                let mut best = (t, crowded_pairs_at(&scene, t, &mut rgb, &mut ids, &mut truth));
                for _ in 1..CROWDED_MOMENTS {
                    let t = rng.below(100_000);
                    let pairs = crowded_pairs_at(&scene, t, &mut rgb, &mut ids, &mut truth);
                    if pairs > best.1 {
                        best = (t, pairs);
                    }
                }
                best.0
            } else {
                t
            };
            scene.render(t, &mut rgb, &mut ids, &mut truth);
            let name = format!("{split}_{i:05}");
            let img_path = img_dir.join(format!("{name}.png"));
            image::save_buffer(&img_path, &rgb, w, h, image::ExtendedColorType::Rgb8)
                .map_err(|e| io(&img_path, std::io::Error::other(e)))?;
            let lbl_path = lbl_dir.join(format!("{name}.txt"));
            let mut f = std::fs::File::create(&lbl_path).map_err(|e| io(&lbl_path, e))?;
            for g in truth.iter().filter(|g| g.visible >= MIN_VISIBLE) {
                let (cx, cy) = ((g.x1 + g.x2) / 2.0 / w as f32, (g.y1 + g.y2) / 2.0 / h as f32);
                let (bw, bh) = ((g.x2 - g.x1) / w as f32, (g.y2 - g.y1) / h as f32);
                writeln!(f, "{} {cx:.6} {cy:.6} {bw:.6} {bh:.6}", g.class_id)
                    .map_err(|e| io(&lbl_path, e))?;
                labelled += 1;
            }
        }
    }
    let yaml = out.join("data.yaml");
    let names: Vec<String> = CLASS_NAMES.iter().enumerate().map(|(i, n)| format!("  {i}: {n}")).collect();
    let abs = std::fs::canonicalize(out).map_err(|e| io(out, e))?;
    std::fs::write(
        &yaml,
        format!(
            "path: {}\ntrain: images/train\nval: images/val\nnames:\n{}\n",
            abs.display(),
            names.join("\n")
        ),
    )
    .map_err(|e| io(&yaml, e))?;
    Ok(labelled)
}

/// [`crowded_pairs`] of `scene` at frame `t` (renders it into the buffers given).
fn crowded_pairs_at(
    scene: &Scene,
    t: u64,
    rgb: &mut Vec<u8>,
    ids: &mut Vec<u8>,
    truth: &mut Vec<GroundTruth>,
) -> usize {
    scene.render(t, rgb, ids, truth);
    crowded_pairs(truth)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`labels_digest`] of `jetdetect dataset --train 12 --val 2 --seed 7` before `--crowded`.
    const DEFAULT_DIGEST: u64 = 0xd833_6b31_d16c_207f;

    /// FNV-1a digest of every label file under `dir/labels/train`, in name order.
    fn labels_digest(dir: &Path) -> u64 {
        let mut files: Vec<_> =
            std::fs::read_dir(dir.join("labels/train")).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for f in files {
            for b in std::fs::read(f).unwrap() {
                h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
            }
        }
        h
    }

    /// Crowded pairs summed over the images of `dir/labels/train` (boxes from the labels).
    fn crowded_pairs_in(dir: &Path) -> usize {
        let mut pairs = 0;
        for entry in std::fs::read_dir(dir.join("labels/train")).unwrap() {
            let truth: Vec<GroundTruth> = std::fs::read_to_string(entry.unwrap().path())
                .unwrap()
                .lines()
                .map(|line| {
                    let v: Vec<f32> = line.split(' ').map(|f| f.parse().unwrap()).collect();
                    GroundTruth {
                        class_id: v[0] as usize,
                        x1: v[1] - v[3] / 2.0,
                        y1: v[2] - v[4] / 2.0,
                        x2: v[1] + v[3] / 2.0,
                        y2: v[2] + v[4] / 2.0,
                        visible: 1.0,
                        object: 0,
                        ttc_frames: None,
                        shown: None,
                        course: None,
                    }
                })
                .collect();
            pairs += crowded_pairs(&truth);
        }
        pairs
    }

    #[test]
    fn the_default_recipe_still_makes_the_shipped_models_training_images() {
        // Digest of the labels `jetdetect dataset --train 12 --val 2 --seed 7` wrote before
        // `--crowded` existed: the shipped model's recipe must not change with the option.
        let dir = std::env::temp_dir().join(format!("jd-dataset-default-{}", std::process::id()));
        write_dataset(&dir, 12, 2, 7, Recipe::default()).unwrap();
        let digest = labels_digest(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(digest, DEFAULT_DIGEST, "{digest:#x}");
    }

    #[test]
    fn crowded_images_have_overlapping_objects_of_one_class() {
        let dir = std::env::temp_dir().join(format!("jd-dataset-crowded-{}", std::process::id()));
        let (sparse, crowded) = (dir.join("sparse"), dir.join("crowded"));
        write_dataset(&sparse, 40, 2, 11, Recipe { come_and_go: 0.5, crowded: 0.0 }).unwrap();
        write_dataset(&crowded, 40, 2, 11, Recipe { come_and_go: 0.5, crowded: 1.0 }).unwrap();
        let (few, many) = (crowded_pairs_in(&sparse), crowded_pairs_in(&crowded));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(many >= 4 * few.max(1), "{many} crowded pairs against {few}");
    }

    /// Label boxes (`cx cy w h`, normalised) of every image in `dir/labels/train`.
    fn labels(dir: &Path) -> Vec<[f32; 4]> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir.join("labels/train")).unwrap() {
            for line in std::fs::read_to_string(entry.unwrap().path()).unwrap().lines() {
                let v: Vec<f32> = line.split(' ').skip(1).map(|f| f.parse().unwrap()).collect();
                out.push([v[0], v[1], v[2], v[3]]);
            }
        }
        out
    }

    #[test]
    fn come_and_go_scenes_add_objects_cut_by_the_edge_and_closing_in() {
        let dir = std::env::temp_dir().join(format!("jd-dataset-{}", std::process::id()));
        let (inside, moving) = (dir.join("inside"), dir.join("moving"));
        let n_inside = write_dataset(&inside, 40, 2, 7, Recipe { come_and_go: 0.0, crowded: 0.0 }).unwrap();
        let n_moving = write_dataset(&moving, 40, 2, 7, Recipe { come_and_go: 1.0, crowded: 0.0 }).unwrap();
        assert!(n_inside > 40 && n_moving > 20, "{n_inside} {n_moving}");
        assert!(std::fs::read_to_string(moving.join("data.yaml")).unwrap().contains("2: cone"));
        // A box whose side lies on the picture's edge: an object entering or leaving (bouncing
        // objects touch it only in the frame they turn back).
        let at_edge = |b: &[f32; 4]| {
            let near = |v: f32| !(0.002..=0.998).contains(&v);
            near(b[0] - b[2] / 2.0)
                || near(b[0] + b[2] / 2.0)
                || near(b[1] - b[3] / 2.0)
                || near(b[1] + b[3] / 2.0)
        };
        let share = |l: &[[f32; 4]], f: &dyn Fn(&[f32; 4]) -> bool| {
            l.iter().filter(|b| f(b)).count() as f32 / l.len() as f32
        };
        let (li, lm) = (labels(&inside), labels(&moving));
        assert!(
            share(&lm, &at_edge) > 2.0 * share(&li, &at_edge) + 0.05,
            "{} vs {}",
            share(&lm, &at_edge),
            share(&li, &at_edge)
        );
        // Objects closing in grow to twice their size: boxes over half the picture's height.
        let big = |b: &[f32; 4]| b[3] > 0.5;
        assert!(share(&lm, &big) > share(&li, &big), "{} vs {}", share(&lm, &big), share(&li, &big));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
