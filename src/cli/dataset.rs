//! `jetdetect dataset`: synthetic obstacle scenes as a YOLO training set.

mod write;

use std::path::PathBuf;

use jetdetect::Error;

/// `jetdetect dataset`.
#[derive(clap::Args)]
pub struct Args {
    /// Output directory.
    #[arg(long)]
    out: PathBuf,
    /// Training images.
    #[arg(long, default_value_t = 2000)]
    train: usize,
    /// Validation images.
    #[arg(long, default_value_t = 300)]
    val: usize,
    /// Random seed.
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    /// Share of images (0 to 1) from scenes whose objects enter and leave the picture and close
    /// in on the camera (`synthetic://?leave=1&approach=N`); the rest bounce inside it.
    #[arg(long, default_value_t = 0.5, value_parser = share)]
    come_and_go: f32,
    /// Share of images (0 to 1) made crowded: six objects, at the moment of eight drawn where
    /// the most pairs of objects of one class overlap (what the tracker's identity switches
    /// come from). The shipped model's recipe is 0.
    #[arg(long, default_value_t = 0.0, value_parser = share)]
    crowded: f32,
}

/// Parses a share between 0 and 1.
fn share(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not a share: give a number from 0 to 1, such as 0.5")),
    }
}

/// Writes the images, labels and `data.yaml`.
pub fn run(args: Args) -> Result<bool, Error> {
    let recipe = write::Recipe { come_and_go: args.come_and_go, crowded: args.crowded };
    let n = write::write_dataset(&args.out, args.train, args.val, args.seed, recipe)?;
    eprintln!(
        "wrote {} + {} images with {n} labelled objects to {}",
        args.train,
        args.val,
        args.out.display()
    );
    Ok(true)
}
