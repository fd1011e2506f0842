//! `jetdetect detect`: detections in images, folders of them and recorded frames, one JSON
//! line each ([`protocol::write_image`]); with `--draw DIR`, each also as a JPEG with its
//! boxes drawn ([`overlay`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use jetdetect::detector::Detector;
use jetdetect::frame::Frame;
use jetdetect::output::protocol;
use jetdetect::overlay;
use jetdetect::preprocess::colour;
use jetdetect::report::FrameReport;
use jetdetect::source::{self, file::load_image, file::IMAGE_EXTENSIONS};
use jetdetect::yolo::{ClassNames, Detection};
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
    /// Also write each image with its boxes drawn, as DIR/<name>.jpg (frames of a URI:
    /// DIR/<name>-<frame>.jpg).
    #[arg(long, value_name = "DIR")]
    draw: Option<PathBuf>,
}

/// Writes `frame` with `dets` drawn on it into `dir`, as a JPEG named after the frame.
fn draw(dir: &Path, frame: &Frame, dets: &[Detection], names: &ClassNames, uri: bool) -> Result<(), Error> {
    let mut rgb = Vec::new();
    colour::to_rgb(frame, &mut rgb);
    let mut report = FrameReport::new();
    report.width = frame.width;
    report.height = frame.height;
    report.seq = frame.seq;
    report.captured_wall_ns = frame.captured_wall_ns;
    report.detections.extend_from_slice(dets);
    report.camera = jetdetect::report::CameraId::new(0, "detect");
    overlay::draw(&mut rgb, &report, names);
    let stem = Path::new(&frame.label).file_stem().and_then(|s| s.to_str()).unwrap_or("frame");
    let stem: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    let name = match uri {
        true => format!("{stem}-{:06}.jpg", frame.seq),
        false => format!("{stem}.jpg"),
    };
    let path = dir.join(name);
    let jpeg = overlay::jpeg(&rgb, frame.width, frame.height, 90)
        .map_err(|e| Error::Command(format!("{}: cannot encode: {e}", path.display())))?;
    std::fs::write(&path, jpeg).map_err(|e| Error::io(path.display().to_string(), e))
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
    let mut detector = jetdetect::daemon::detector(&config)?;
    log::info!(
        "{}: {} ({}; {} classes from {})",
        detector.engine().describe(),
        detector.layout(),
        detector.layout_why(),
        detector.names().len(),
        detector.names().origin
    );
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut all_ok = true;
    let mut frame = Frame::empty();
    let mut line = Vec::new();
    if let Some(dir) = &args.draw {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("--draw {}", dir.display()), e))?;
    }
    for input in expand_inputs(&args.images) {
        let uri = input.contains("://");
        let mut emit = |frame: &Frame, detector: &mut Detector| -> Result<(), Error> {
            let dets = detector.detect(frame)?.to_vec();
            if let Some(dir) = &args.draw {
                draw(dir, frame, &dets, detector.names(), uri)?;
            }
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
