//! MJPEG frames (how many USB cameras deliver 720p/1080p at full rate) decoded
//! to RGB24 with zune-jpeg, a maintained pure-Rust decoder. UVC cameras often
//! omit the Huffman tables (DHT) from each frame; the decoder then uses the
//! standard tables, as MJPEG requires.

use zune_jpeg::errors::DecodeErrors;

use crate::frame::{Frame, PixelFormat};

/// Why an MJPEG frame could not be decoded. Later frames may be fine.
#[derive(Debug, thiserror::Error)]
pub enum MjpegError {
    /// The data does not start with a JPEG start-of-image marker.
    #[error("not a JPEG frame ({len} bytes, no SOI marker)")]
    NotJpeg {
        /// Bytes received.
        len: usize,
    },
    /// The decoder refused the headers or the scan.
    #[error("bad MJPEG frame: {0}")]
    Decode(#[source] DecodeErrors),
    /// The headers give no size.
    #[error("bad MJPEG frame: no dimensions")]
    NoDimensions,
    /// The header's size is not the negotiated one.
    #[error("bad MJPEG frame: its header says {}x{}, the camera negotiated {}x{}", got.0, got.1, expect.0, expect.1)]
    Size {
        /// `(width, height)` in the header.
        got: (usize, usize),
        /// `(width, height)` negotiated.
        expect: (u32, u32),
    },
    /// The decoded size does not fit in memory's address range.
    #[error("bad MJPEG frame: size overflow")]
    Overflow,
}

/// Decodes one JPEG frame into `frame` as RGB24.
///
/// `expect` is the size the camera negotiated: a frame whose header says
/// otherwise (a corrupt or hostile header can claim 65535x65535, 12 GiB of
/// RGB) is refused before anything is allocated for it.
pub fn decode(data: &[u8], frame: &mut Frame, expect: (u32, u32)) -> Result<(), MjpegError> {
    use zune_jpeg::zune_core::colorspace::ColorSpace;
    use zune_jpeg::zune_core::options::DecoderOptions;
    if data.len() < 4 || data[0] != 0xFF || data[1] != 0xD8 {
        return Err(MjpegError::NotJpeg { len: data.len() });
    }
    let options = DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::RGB);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(std::io::Cursor::new(data), options);
    decoder.decode_headers().map_err(MjpegError::Decode)?;
    let (w, h) = decoder.dimensions().ok_or(MjpegError::NoDimensions)?;
    if (w as u32, h as u32) != expect {
        return Err(MjpegError::Size { got: (w, h), expect });
    }
    let len = decoder.output_buffer_size().ok_or(MjpegError::Overflow)?;
    frame.data.resize(len, 0);
    decoder.decode_into(&mut frame.data).map_err(MjpegError::Decode)?;
    frame.width = w as u32;
    frame.height = h as u32;
    frame.format = PixelFormat::Rgb24;
    frame.data.truncate(w * h * 3);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_jpeg_frame_and_rejects_garbage() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/images/scene_800x600.jpg");
        let bytes = std::fs::read(path).unwrap();
        let mut f = Frame::empty();
        decode(&bytes, &mut f, (800, 600)).unwrap();
        assert_eq!((f.width, f.height, f.format), (800, 600, PixelFormat::Rgb24));
        f.check_len().unwrap();
        // Same pixels as the image crate's decoder (also zune-jpeg) within a level.
        let reference = image::load_from_memory(&bytes).unwrap().into_rgb8();
        let worst = f.data.iter().zip(reference.as_raw()).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
        assert!(worst <= 1, "{worst}");
        assert!(decode(b"\x00\x01garbage", &mut f, (800, 600)).unwrap_err().to_string().contains("no SOI"));
        let e = decode(&bytes, &mut f, (640, 480)).unwrap_err().to_string();
        assert!(e.contains("says 800x600, the camera negotiated 640x480"), "{e}");
        let e = decode(&bytes[..bytes.len() / 5], &mut f, (800, 600));
        assert!(e.is_err() || f.check_len().is_ok(), "a truncated frame is an error or still well-formed");
    }
}
