//! Writes synthetic scenes as a YOLO training set (`jetdetect dataset`).
//!
//! The shipped obstacle model was trained on exactly these pictures (see
//! `models/README.md`), drawn by the same code as the `synthetic://` source, so
//! what the tests measure on that source is what the model learned.
//! Layout (the one ultralytics reads): `images/{train,val}/*.png`,
//! `labels/{train,val}/*.txt` with `class cx cy w h` normalised per line, and
//! `data.yaml`.

use std::io::Write;
use std::path::Path;

use jetdetect::source::synthetic::{Rng, Scene, CLASS_NAMES};
use jetdetect::Error;

/// Objects less visible than this are left out of the labels.
pub const MIN_VISIBLE: f32 = 0.35;

/// Frame sizes the training set mixes, so the model sees several aspect ratios.
const SIZES: [(u32, u32); 5] = [(640, 480), (640, 360), (480, 480), (800, 600), (320, 240)];

/// Writes `train` + `val` images with labels under `out`. Returns the number of labelled objects.
pub fn write_dataset(out: &Path, train: usize, val: usize, seed: u64) -> Result<usize, Error> {
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
            let objects = 1 + rng.below(6) as usize;
            let scene = Scene::new(w, h, objects, rng.next_u64(), 6);
            scene.render(rng.below(100_000), &mut rgb, &mut ids, &mut truth);
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
