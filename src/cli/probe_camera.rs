//! `jetdetect probe-camera`: V4L2 devices with their formats, sizes, rates and controls.

use std::path::PathBuf;

use jetdetect::Error;

/// `jetdetect probe-camera`.
#[derive(clap::Args)]
pub struct Args {
    /// One device (default: every /dev/video* node).
    device: Option<PathBuf>,
}

/// Prints what [`jetdetect::source::v4l2::probe`] finds.
pub fn run(args: Args) -> Result<bool, Error> {
    let text = jetdetect::source::v4l2::probe(args.device.as_deref())?;
    print!("{text}");
    Ok(true)
}
