//! `jetdetect detect`: detections in images, folders of them and recorded frames, one JSON
//! line each ([`protocol::write_image`]).

use std::io::Write;
use std::path::Path;

use jetdetect::detector::Detector;
use jetdetect::frame::Frame;
use jetdetect::output::protocol;
use jetdetect::source::{self, file::load_image, file::IMAGE_EXTENSIONS};
use jetdetect::Error;

use super::ModelArgs;

/// `jetdetect detect`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Images (PNG/JPEG), folders of them, or source URIs such as
    /// file://clip.yuv?width=640&height=480&format=yuyv.
    #[arg(required = true)]
    images: Vec<String>,
}

/// Expands the `detect` arguments: folders into their images, URIs kept as they are.
fn expand_inputs(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for a in args {
        let p = Path::new(a);
        if !a.contains("://") && p.is_dir() {
            let mut found: Vec<String> = std::fs::read_dir(p)
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
                })
                .map(|p| p.display().to_string())
                .collect();
            found.sort();
            if found.is_empty() {
                out.push(a.clone()); // reported as an error when opened
            }
            out.extend(found);
        } else {
            out.push(a.clone());
        }
    }
    out
}

/// Prints one JSON line per image or frame; `Ok(false)` when an input could not be read.
pub fn run(args: Args) -> Result<bool, Error> {
    let config = args.model.resolve()?;
    let mut detector = Detector::from_config(&config)?;
    log::info!(
        "{}: {} ({} classes from {})",
        detector.engine().describe(),
        detector.layout(),
        detector.names().len(),
        detector.names().origin
    );
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut all_ok = true;
    let mut frame = Frame::empty();
    let mut line = Vec::new();
    for input in expand_inputs(&args.images) {
        let mut emit = |frame: &Frame, detector: &mut Detector| -> Result<(), Error> {
            let dets = detector.detect(frame)?.to_vec();
            line.clear();
            protocol::write_image(
                &mut line,
                &frame.label,
                frame.width,
                frame.height,
                &dets,
                detector.names(),
            );
            out.write_all(&line).map_err(|e| Error::io("stdout", e))
        };
        let result = if input.contains("://") {
            source::open(&input).map_err(Error::from).and_then(|mut src| {
                while src.next_frame(&mut frame)? {
                    emit(&frame, &mut detector)?;
                }
                Ok(())
            })
        } else {
            load_image(Path::new(&input), &mut frame)
                .map_err(Error::from)
                .and_then(|_| emit(&frame, &mut detector))
        };
        if let Err(e) = result {
            eprintln!("jetdetect: {input}: {e}");
            all_ok = false;
        }
    }
    Ok(all_ok)
}
