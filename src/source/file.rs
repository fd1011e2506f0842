//! `file://` — still images (PNG, JPEG), folders of them, and raw frame files.
//!
//! * `file://photo.jpg`, `file://dir/` — decoded to RGB24, one frame per image,
//!   in file-name order.
//! * `file://clip.yuv?width=640&height=480&format=yuyv` — back-to-back raw frames
//!   of one geometry and [`PixelFormat`].
//!
//! Common keys: `fps` (pace delivery; 0, the default, is as fast as asked) and
//! `loop` (start again at the end instead of ending the stream).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::uri::SourceUri;
use super::{FrameSource, Pacer, SourceError};
use crate::frame::{wall_clock_ns, Frame, PixelFormat};

/// File extensions read as images.
pub const IMAGE_EXTENSIONS: [&str; 3] = ["png", "jpg", "jpeg"];

/// Query keys `file://` accepts.
pub const KEYS: [&str; 5] = ["width", "height", "format", "fps", "loop"];

fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Decodes an image file into an RGB24 frame (reusing `frame`'s buffer).
pub fn load_image(path: &Path, frame: &mut Frame) -> Result<(), SourceError> {
    let bytes = std::fs::read(path)
        .map_err(|e| SourceError::Io(format!("{}: cannot read image: {e}", path.display())))?;
    let img = image::load_from_memory(&bytes).map_err(|e| {
        SourceError::Decode(format!(
            "{}: not an image this build can decode (PNG or JPEG expected): {e}",
            path.display()
        ))
    })?;
    let rgb = img.into_rgb8();
    frame.width = rgb.width();
    frame.height = rgb.height();
    frame.format = PixelFormat::Rgb24;
    frame.data.clear();
    frame.data.extend_from_slice(rgb.as_raw());
    frame.label = path.display().to_string();
    frame.truth.clear();
    frame.captured = Instant::now();
    frame.captured_wall_ns = wall_clock_ns();
    Ok(())
}

enum Content {
    Images { paths: Vec<PathBuf>, next: usize },
    Raw { path: PathBuf, file: File, width: u32, height: u32, format: PixelFormat, frame_len: usize },
}

/// The `file://` source.
pub struct FileSource {
    content: Content,
    looping: bool,
    pacer: Pacer,
    seq: u64,
    text: String,
}

impl FileSource {
    /// Opens a `file://` URI; see the module docs for the forms.
    pub fn open(uri: &SourceUri) -> Result<FileSource, SourceError> {
        let bad = SourceError::Config;
        uri.check_keys(&KEYS)?;
        if uri.location.is_empty() {
            return Err(bad(format!("{}: no path: write file://PATH", uri.text)));
        }
        let path = PathBuf::from(&uri.location);
        let fps = uri.get_in("fps", 0.0f64, 0.0, 1000.0)?;
        let looping = uri.get("loop", false)?;
        let meta = std::fs::metadata(&path)
            .map_err(|e| SourceError::Io(format!("{}: cannot open '{}': {e}", uri.text, path.display())))?;
        let raw_keys = ["width", "height", "format"];
        let content = if meta.is_dir() || is_image(&path) {
            if let Some(k) = raw_keys.iter().find(|k| uri.has(k)) {
                return Err(bad(format!(
                    "{}: '{k}' applies to raw frame files only; images carry their own geometry",
                    uri.text
                )));
            }
            let paths = if meta.is_dir() {
                let mut paths: Vec<PathBuf> = std::fs::read_dir(&path)
                    .map_err(|e| SourceError::Io(format!("{}: cannot list: {e}", path.display())))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file() && is_image(p))
                    .collect();
                paths.sort();
                if paths.is_empty() {
                    return Err(SourceError::Config(format!(
                        "{}: no PNG or JPEG images in '{}'",
                        uri.text,
                        path.display()
                    )));
                }
                paths
            } else {
                vec![path]
            };
            Content::Images { paths, next: 0 }
        } else {
            if let Some(k) = raw_keys.iter().find(|k| !uri.has(k)) {
                return Err(bad(format!(
                    "{}: '{}' is read as raw frames, which need width, height and format \
                     (missing '{k}'), e.g. file://{}?width=640&height=480&format=yuyv; \
                     images must end in .png, .jpg or .jpeg",
                    uri.text,
                    path.display(),
                    path.display()
                )));
            }
            let width = uri.get_in("width", 0u32, 2, 16384)?;
            let height = uri.get_in("height", 0u32, 2, 16384)?;
            let format: PixelFormat = uri.get("format", PixelFormat::Yuyv)?;
            let frame_len = format.frame_len(width, height).ok_or_else(|| {
                bad(format!(
                    "{}: {width}x{height} is not a valid size for {format} (4:2:2 needs an even width, 4:2:0 even width and height)",
                    uri.text
                ))
            })?;
            let len = meta.len() as usize;
            if len < frame_len {
                return Err(SourceError::Decode(format!(
                    "{}: the file has {len} bytes, less than one {width}x{height} {format} frame ({frame_len} bytes): check width, height and format",
                    path.display()
                )));
            }
            if !len.is_multiple_of(frame_len) {
                log::warn!(
                    "{}: {} whole {width}x{height} {format} frames and {} trailing bytes, which are ignored: check the geometry if this is unexpected",
                    path.display(),
                    len / frame_len,
                    len % frame_len
                );
            }
            let file = File::open(&path)
                .map_err(|e| SourceError::Io(format!("{}: cannot open: {e}", path.display())))?;
            Content::Raw { path, file, width, height, format, frame_len }
        };
        Ok(FileSource { content, looping, pacer: Pacer::new(fps), seq: 0, text: uri.text.clone() })
    }
}

impl FrameSource for FileSource {
    fn describe(&self) -> String {
        match &self.content {
            Content::Images { paths, .. } => format!("{} ({} image(s))", self.text, paths.len()),
            Content::Raw { width, height, format, .. } => {
                format!("{} ({width}x{height} {format} raw)", self.text)
            }
        }
    }

    fn next_frame(&mut self, frame: &mut Frame) -> Result<bool, SourceError> {
        self.pacer.wait();
        match &mut self.content {
            Content::Images { paths, next } => {
                if *next >= paths.len() {
                    if !self.looping {
                        return Ok(false);
                    }
                    *next = 0;
                }
                load_image(&paths[*next], frame)?;
                *next += 1;
            }
            Content::Raw { path, file, width, height, format, frame_len } => {
                frame.data.resize(*frame_len, 0);
                let mut got = read_full(file, &mut frame.data)
                    .map_err(|e| SourceError::Io(format!("{}: read failed: {e}", path.display())))?;
                if got < *frame_len && self.looping {
                    file.seek(SeekFrom::Start(0))
                        .map_err(|e| SourceError::Io(format!("{}: cannot rewind: {e}", path.display())))?;
                    got = read_full(file, &mut frame.data)
                        .map_err(|e| SourceError::Io(format!("{}: read failed: {e}", path.display())))?;
                }
                if got < *frame_len {
                    if got > 0 {
                        log::warn!(
                            "{}: last frame is truncated ({got} of {frame_len} bytes) and was skipped",
                            path.display()
                        );
                    }
                    return Ok(false);
                }
                frame.width = *width;
                frame.height = *height;
                frame.format = *format;
                frame.label = path.display().to_string();
                frame.truth.clear();
                frame.captured = Instant::now();
                frame.captured_wall_ns = wall_clock_ns();
            }
        }
        frame.seq = self.seq;
        self.seq += 1;
        Ok(true)
    }

    fn nominal_fps(&self) -> Option<f64> {
        self.pacer.fps()
    }

    fn geometry(&self) -> Option<(PixelFormat, u32, u32)> {
        match &self.content {
            Content::Raw { width, height, format, .. } => Some((*format, *width, *height)),
            Content::Images { .. } => None,
        }
    }
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("jetdetect-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn open(uri: &str) -> Result<FileSource, SourceError> {
        FileSource::open(&SourceUri::parse(uri).unwrap())
    }

    #[test]
    fn raw_frames_are_read_in_order_and_a_truncated_tail_ends_the_stream() {
        let d = tmpdir("raw");
        let p = d.join("clip.grey");
        let mut bytes: Vec<u8> = (0..3).flat_map(|i| vec![i as u8; 8 * 4]).collect();
        bytes.extend_from_slice(&[9; 5]);
        std::fs::write(&p, &bytes).unwrap();
        let mut src = open(&format!("file://{}?width=8&height=4&format=grey", p.display())).unwrap();
        let mut f = Frame::empty();
        for i in 0..3u8 {
            assert!(src.next_frame(&mut f).unwrap());
            assert_eq!(f.data, vec![i; 32]);
            assert_eq!((f.seq, f.format), (i as u64, PixelFormat::Grey));
        }
        assert!(!src.next_frame(&mut f).unwrap());
    }

    #[test]
    fn raw_files_need_geometry_and_enough_bytes() {
        let d = tmpdir("rawbad");
        let p = d.join("clip.yuv");
        std::fs::write(&p, [0u8; 100]).unwrap();
        let e = open(&format!("file://{}", p.display())).err().unwrap().to_string();
        assert!(e.contains("need width, height and format"), "{e}");
        let e = open(&format!("file://{}?width=640&height=480&format=yuyv", p.display()))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("less than one 640x480 yuyv frame"), "{e}");
        let e =
            open(&format!("file://{}?width=7&height=4&format=yuyv", p.display())).err().unwrap().to_string();
        assert!(e.contains("even width"), "{e}");
        let e = open("file:///nonexistent/x.png").err().unwrap().to_string();
        assert!(e.contains("cannot open"), "{e}");
    }

    #[test]
    fn folders_yield_images_in_name_order_and_bad_images_are_named() {
        let d = tmpdir("dir");
        for (name, shade) in [("b.png", 20u8), ("a.png", 10u8)] {
            image::RgbImage::from_pixel(4, 2, image::Rgb([shade, 0, 0])).save(d.join(name)).unwrap();
        }
        std::fs::write(d.join("notes.txt"), "not an image").unwrap();
        let mut src = open(&format!("file://{}", d.display())).unwrap();
        let mut f = Frame::empty();
        assert!(src.next_frame(&mut f).unwrap());
        assert!(f.label.ends_with("a.png") && f.data[0] == 10);
        assert!(src.next_frame(&mut f).unwrap());
        assert!(f.label.ends_with("b.png") && f.data[0] == 20);
        assert!(!src.next_frame(&mut f).unwrap());

        std::fs::write(d.join("broken.jpg"), "JFIF? no").unwrap();
        let e = load_image(&d.join("broken.jpg"), &mut f).err().unwrap().to_string();
        assert!(e.contains("broken.jpg") && e.contains("PNG or JPEG"), "{e}");
        let empty = tmpdir("empty");
        let e = open(&format!("file://{}", empty.display())).err().unwrap().to_string();
        assert!(e.contains("no PNG or JPEG images"), "{e}");
    }
}
