//! `jetdetect record`: raw frames from a source into a file, for replay with `file://` URIs.

use std::io::Write;
use std::path::PathBuf;

use jetdetect::frame::Frame;
use jetdetect::{source, Error};

/// `jetdetect record`.
#[derive(clap::Args)]
pub struct Args {
    /// Source URI, e.g. synthetic://?format=nv12 or v4l2:///dev/video0.
    #[arg(long)]
    source: String,
    /// Frames to record.
    #[arg(long, default_value_t = 30)]
    frames: u64,
    /// Output file (frames back to back, no header).
    #[arg(long)]
    out: PathBuf,
}

/// Writes `--frames` frames back to back and says how to replay them.
pub fn run(args: Args) -> Result<bool, Error> {
    let (uri, frames, out) = (args.source.as_str(), args.frames, args.out.as_path());
    let mut src = source::open(uri)?;
    let io = |e: std::io::Error| Error::io(out.display().to_string(), e);
    let mut file = std::io::BufWriter::new(std::fs::File::create(out).map_err(io)?);
    let mut frame = Frame::empty();
    let mut n = 0;
    let mut geometry = None;
    while n < frames && src.next_frame(&mut frame)? {
        let g = (frame.width, frame.height, frame.format);
        if *geometry.get_or_insert(g) != g {
            return Err(Error::Command(format!(
                "{uri}: frame {n} is {}x{} {}, unlike the first; a raw file holds one geometry",
                g.0, g.1, g.2
            )));
        }
        file.write_all(&frame.data).map_err(io)?;
        n += 1;
    }
    file.flush().map_err(io)?;
    match geometry {
        Some((w, h, f)) => {
            eprintln!(
                "wrote {n} frames; replay with file://{}?width={w}&height={h}&format={f}",
                out.display()
            );
            Ok(true)
        }
        None => Err(Error::Command(format!("{uri}: the source delivered no frames"))),
    }
}
