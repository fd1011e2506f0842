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
    #[arg(long, default_value_t = 1500)]
    train: usize,
    /// Validation images.
    #[arg(long, default_value_t = 300)]
    val: usize,
    /// Random seed.
    #[arg(long, default_value_t = 2026)]
    seed: u64,
}

/// Writes the images, labels and `data.yaml`.
pub fn run(args: Args) -> Result<bool, Error> {
    let n = write::write_dataset(&args.out, args.train, args.val, args.seed)?;
    eprintln!(
        "wrote {} + {} images with {n} labelled objects to {}",
        args.train,
        args.val,
        args.out.display()
    );
    Ok(true)
}
