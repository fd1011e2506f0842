//! The GStreamer Data Protocol 1.0: how `gdppay` frames what a `gst-launch-1.0` child writes
//! to jetdetect's pipe.
//!
//! Raw frames on a pipe have no boundaries, no timestamps and no caps; `gdppay` gives each
//! buffer a 62-byte header (payload type and length, PTS, duration, offsets, flags, DTS and two
//! CRCs) and sends the caps as a packet of their own whenever they change. The layout is
//! GStreamer's `gst/gdp/dataprotocol.c` (all integers big-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 0, 1 | version major, minor (1, 0) |
//! | 2 | flags: 1 = header CRC, 2 = payload CRC |
//! | 4..6 | payload type: 1 buffer, 2 caps, 64 + `GstEventType` an event |
//! | 6..10 | payload length |
//! | 10..18 | PTS in nanoseconds of running time (`u64::MAX`: none) |
//! | 18..26, 26..34, 34..42 | duration, offset, offset end |
//! | 42..44 | buffer flags |
//! | 44..52 | DTS |
//! | 58..60, 60..62 | CRC-16 (CCITT, init 0xffff, final xor 0xffff) of bytes 0..58 and of the payload |

use std::io::{ErrorKind, Read};

use crate::frame::PixelFormat;

/// Bytes in a packet header.
pub const HEADER_LEN: usize = 62;

/// The payload type of a buffer.
const PAYLOAD_BUFFER: u16 = 1;
/// The payload type of caps.
const PAYLOAD_CAPS: u16 = 2;
/// Payload types from this one up are events.
const PAYLOAD_EVENT: u16 = 64;

/// The largest payload accepted (a 8K RGB frame is 100 MB; anything bigger is a broken stream).
pub const MAX_PAYLOAD: usize = 256 << 20;

/// What is wrong with the stream.
#[derive(Debug, thiserror::Error)]
pub enum GdpError {
    /// Reading the pipe failed.
    #[error("reading the pipeline's output: {0}")]
    Io(#[from] std::io::Error),
    /// The stream is not GDP 1.0 or is corrupt.
    #[error("the pipeline's output is not GStreamer Data Protocol 1.0 ({0}); is the pipeline's tail `gdppay ! fdsink`?")]
    Corrupt(String),
}

/// One packet's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Payload type (see the module docs).
    pub kind: u16,
    /// Payload bytes that follow the header.
    pub len: usize,
    /// Presentation time in nanoseconds of the pipeline's running time, when the buffer has one.
    pub pts: Option<u64>,
    /// The buffer's offset, when it has one.
    pub offset: Option<u64>,
    /// The CRC of the payload, when the sender wrote one.
    payload_crc: Option<u16>,
}

impl Header {
    /// Parses and checks a header.
    pub fn parse(h: &[u8; HEADER_LEN]) -> Result<Header, GdpError> {
        if h[0] != 1 || h[1] != 0 {
            return Err(GdpError::Corrupt(format!("version {}.{}", h[0], h[1])));
        }
        let be16 = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
        let flags = h[2];
        if flags & 1 != 0 && crc16(&h[..58]) != be16(58) {
            return Err(GdpError::Corrupt("header CRC mismatch".into()));
        }
        let len = u32::from_be_bytes([h[6], h[7], h[8], h[9]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(GdpError::Corrupt(format!("payload of {len} bytes")));
        }
        let be64 = |i: usize| u64::from_be_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        let (pts, offset) = (be64(10), be64(26));
        Ok(Header {
            kind: be16(4),
            len,
            pts: (pts != u64::MAX).then_some(pts),
            offset: (offset != u64::MAX).then_some(offset),
            payload_crc: (flags & 2 != 0 && len > 0).then(|| be16(60)),
        })
    }
}

/// CRC-16/CCITT as GDP computes it (polynomial 0x1021, initial 0xffff, final xor 0xffff).
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0xffff;
    for &b in bytes {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc ^ 0xffff
}

/// What a packet carried.
#[derive(Clone, Debug, PartialEq)]
pub enum Packet {
    /// New caps for the buffers that follow.
    Caps(String),
    /// A buffer, its bytes in the payload vector given to [`GdpReader::next`].
    Buffer {
        /// Presentation time in nanoseconds of running time.
        pts: Option<u64>,
        /// The buffer's offset (for raw video from most sources, its frame number).
        offset: Option<u64>,
    },
    /// An event (stream start, segment, end of stream...), by its `GstEventType` number.
    Event(u16),
}

/// `GstEventType` of end-of-stream: `GST_EVENT_MAKE_TYPE (28, DOWNSTREAM | SERIALIZED)`, the
/// number shifted by 8 over the flags (downstream 2, serialized 4).
pub const EVENT_EOS: u16 = (28 << 8) | 2 | 4;

/// Reads packets from a GDP stream.
pub struct GdpReader<R> {
    inner: R,
}

impl<R: Read> GdpReader<R> {
    /// Reads from `inner`.
    pub fn new(inner: R) -> GdpReader<R> {
        GdpReader { inner }
    }

    /// The next packet, its payload in `payload` (resized, its allocation reused); `None` when
    /// the stream ends between packets.
    pub fn next(&mut self, payload: &mut Vec<u8>) -> Result<Option<Packet>, GdpError> {
        let mut h = [0u8; HEADER_LEN];
        match self.inner.read_exact(&mut h[..1]) {
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(None),
            r => r?,
        }
        self.inner.read_exact(&mut h[1..])?;
        let header = Header::parse(&h)?;
        payload.resize(header.len, 0);
        self.inner.read_exact(payload)?;
        if let Some(crc) = header.payload_crc {
            if crc16(payload) != crc {
                return Err(GdpError::Corrupt("payload CRC mismatch".into()));
            }
        }
        Ok(Some(match header.kind {
            PAYLOAD_BUFFER => Packet::Buffer { pts: header.pts, offset: header.offset },
            PAYLOAD_CAPS => {
                let text = payload.strip_suffix(&[0]).unwrap_or(payload);
                Packet::Caps(String::from_utf8_lossy(text).into_owned())
            }
            k if k >= PAYLOAD_EVENT => Packet::Event(k - PAYLOAD_EVENT),
            k => return Err(GdpError::Corrupt(format!("payload type {k}"))),
        }))
    }
}

/// Raw video caps as jetdetect reads them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VideoCaps {
    /// Pixel format.
    pub format: PixelFormat,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Frame rate, when the caps give a non-zero one.
    pub fps: Option<f64>,
}

impl VideoCaps {
    /// The GStreamer name of a format jetdetect reads.
    pub fn gst_format(format: PixelFormat) -> &'static str {
        match format {
            PixelFormat::Yuyv => "YUY2",
            PixelFormat::Uyvy => "UYVY",
            PixelFormat::Nv12 => "NV12",
            PixelFormat::Grey => "GRAY8",
            PixelFormat::Rgb24 => "RGB",
            PixelFormat::Bgr24 => "BGR",
        }
    }

    /// Reads `video/x-raw, format=(string)NV12, width=(int)640, height=(int)480,
    /// framerate=(fraction)30/1, ...` (what `gst_caps_to_string` writes).
    pub fn parse(caps: &str) -> Result<VideoCaps, String> {
        let mut fields = caps.split(", ");
        let media = fields.next().unwrap_or("");
        if media != "video/x-raw" {
            return Err(format!("caps '{caps}' are not raw video in system memory (video/x-raw)"));
        }
        let (mut format, mut width, mut height, mut fps) = (None, None, None, None);
        for field in fields {
            let Some((key, value)) = field.split_once('=') else { continue };
            // `(type)value`: drop the type.
            let value = value.split_once(')').map_or(value, |(_, v)| v);
            match key {
                "format" => {
                    format = PixelFormat::ALL.into_iter().find(|f| Self::gst_format(*f) == value);
                    if format.is_none() {
                        return Err(format!("caps '{caps}': format {value} is not one jetdetect reads"));
                    }
                }
                "width" => width = value.parse::<u32>().ok(),
                "height" => height = value.parse::<u32>().ok(),
                "framerate" => {
                    fps = value.split_once('/').and_then(|(n, d)| {
                        let (n, d) = (n.parse::<f64>().ok()?, d.parse::<f64>().ok()?);
                        (n > 0.0 && d > 0.0).then(|| n / d)
                    })
                }
                _ => {}
            }
        }
        match (format, width, height) {
            (Some(format), Some(width), Some(height)) if format.frame_len(width, height).is_some() => {
                Ok(VideoCaps { format, width, height, fps })
            }
            _ => Err(format!("caps '{caps}' lack a format, width or height jetdetect can read")),
        }
    }

    /// Bytes of one GStreamer buffer of these caps: rows padded to 4 bytes, as GStreamer's
    /// default video layout (`gst_video_info_set_format`) has them.
    pub fn buffer_len(&self) -> usize {
        let (w, h) = (self.width as usize, self.height as usize);
        match self.format {
            PixelFormat::Yuyv | PixelFormat::Uyvy => round4(w * 2) * h,
            PixelFormat::Nv12 => round4(w) * h + round4(w) * h.div_ceil(2),
            PixelFormat::Grey => round4(w) * h,
            PixelFormat::Rgb24 | PixelFormat::Bgr24 => round4(w * 3) * h,
        }
    }

    /// Copies a GStreamer buffer of these caps into `out`, tightly packed (jetdetect's layout).
    pub fn unpad(&self, buffer: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        if buffer.len() != self.buffer_len() {
            return Err(format!(
                "a {}x{} {} buffer of {} bytes, expected {}",
                self.width,
                self.height,
                Self::gst_format(self.format),
                buffer.len(),
                self.buffer_len()
            ));
        }
        let (w, h) = (self.width as usize, self.height as usize);
        // (bytes per row, rows) of each plane, tightly packed.
        let planes: &[(usize, usize)] = match self.format {
            PixelFormat::Yuyv | PixelFormat::Uyvy => &[(w * 2, h)],
            PixelFormat::Nv12 => &[(w, h), (w, h / 2)],
            PixelFormat::Grey => &[(w, h)],
            PixelFormat::Rgb24 | PixelFormat::Bgr24 => &[(w * 3, h)],
        };
        out.clear();
        let mut at = 0;
        for &(row, rows) in planes {
            let stride = round4(row);
            for r in 0..rows {
                out.extend_from_slice(&buffer[at + r * stride..at + r * stride + row]);
            }
            at += stride * rows;
        }
        Ok(())
    }
}

fn round4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet as `gdppay` writes it, with both CRCs.
    pub(crate) fn packet(kind: u16, pts: u64, payload: &[u8]) -> Vec<u8> {
        let mut h = vec![1u8, 0, 3, 0];
        h.extend_from_slice(&kind.to_be_bytes());
        h.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        h.extend_from_slice(&pts.to_be_bytes());
        h.extend_from_slice(&u64::MAX.to_be_bytes()); // duration
        h.extend_from_slice(&pts.wrapping_div(33_333_333).to_be_bytes()); // offset: frame number
        h.resize(58, 0);
        h.extend_from_slice(&crc16(&h.clone()).to_be_bytes());
        h.extend_from_slice(&crc16(payload).to_be_bytes());
        h.extend_from_slice(payload);
        h
    }

    #[test]
    fn crc_is_gdps_ccitt_variant() {
        // CRC-16/GENIBUS (poly 0x1021, init 0xffff, xorout 0xffff) of "123456789" is 0xd64e.
        assert_eq!(crc16(b"123456789"), 0xd64e);
    }

    #[test]
    fn reads_caps_buffers_and_events_and_stops_at_the_end() {
        let caps =
            b"video/x-raw, format=(string)GRAY8, width=(int)6, height=(int)2, framerate=(fraction)30/1\0";
        let mut stream = packet(PAYLOAD_CAPS, 0, caps);
        stream.extend(packet(PAYLOAD_BUFFER, 33_333_333, &[7; 16]));
        stream.extend(packet(PAYLOAD_BUFFER, u64::MAX, &[]));
        stream.extend(packet(PAYLOAD_EVENT + EVENT_EOS, 0, &[]));
        let mut r = GdpReader::new(&stream[..]);
        let mut payload = Vec::new();
        let Some(Packet::Caps(c)) = r.next(&mut payload).unwrap() else { panic!() };
        let caps = VideoCaps::parse(&c).unwrap();
        assert_eq!(caps, VideoCaps { format: PixelFormat::Grey, width: 6, height: 2, fps: Some(30.0) });
        assert_eq!(
            r.next(&mut payload).unwrap(),
            Some(Packet::Buffer { pts: Some(33_333_333), offset: Some(1) })
        );
        assert_eq!(payload, [7; 16]);
        let mut tight = Vec::new();
        caps.unpad(&payload, &mut tight).unwrap();
        assert_eq!(tight, [7; 12], "rows of 6 padded to 8 bytes");
        assert_eq!(
            r.next(&mut payload).unwrap(),
            Some(Packet::Buffer { pts: None, offset: Some(u64::MAX / 33_333_333) })
        );
        assert_eq!(r.next(&mut payload).unwrap(), Some(Packet::Event(EVENT_EOS)));
        assert_eq!(r.next(&mut payload).unwrap(), None);
    }

    #[test]
    fn corrupt_or_cut_streams_are_errors_not_frames() {
        let good = packet(PAYLOAD_BUFFER, 1, &[1, 2, 3, 4]);
        let mut bad_header = good.clone();
        bad_header[12] ^= 1;
        let e = GdpReader::new(&bad_header[..]).next(&mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("header CRC") && e.contains("gdppay"), "{e}");
        let mut bad_payload = good.clone();
        bad_payload[HEADER_LEN] ^= 1;
        let e = GdpReader::new(&bad_payload[..]).next(&mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("payload CRC"), "{e}");
        let e = GdpReader::new(&b"P5\n640 480\n255\n"[..]).next(&mut Vec::new()).unwrap_err();
        assert!(matches!(e, GdpError::Io(_) | GdpError::Corrupt(_)), "{e:?}");
        let cut = &good[..HEADER_LEN + 2];
        assert!(matches!(GdpReader::new(cut).next(&mut Vec::new()), Err(GdpError::Io(_))));
    }

    #[test]
    fn gstreamer_row_padding_is_removed_per_plane() {
        let caps = VideoCaps { format: PixelFormat::Nv12, width: 6, height: 4, fps: None };
        // Y rows of 6 bytes padded to 8, then 2 UV rows of 6 padded to 8.
        assert_eq!(caps.buffer_len(), 8 * 4 + 8 * 2);
        let buffer: Vec<u8> = (0..48).map(|i| if i % 8 < 6 { (i / 8) as u8 } else { 0xee }).collect();
        let mut out = Vec::new();
        caps.unpad(&buffer, &mut out).unwrap();
        assert_eq!(out.len(), PixelFormat::Nv12.frame_len(6, 4).unwrap());
        assert!(!out.contains(&0xee));
        assert_eq!(&out[30..], &[5; 6]);
        let rgb = VideoCaps { format: PixelFormat::Rgb24, width: 640, height: 480, fps: None };
        assert_eq!(rgb.buffer_len(), 640 * 480 * 3, "no padding when rows are a multiple of 4");
        assert!(caps.unpad(&buffer[..40], &mut out).unwrap_err().contains("expected 48"));
    }

    #[test]
    fn caps_jetdetect_cannot_read_are_named() {
        let e = VideoCaps::parse(
            "video/x-raw(memory:NVMM), format=(string)NV12, width=(int)1920, height=(int)1080",
        )
        .unwrap_err();
        assert!(e.contains("system memory"), "{e}");
        let e =
            VideoCaps::parse("video/x-raw, format=(string)I420, width=(int)64, height=(int)48").unwrap_err();
        assert!(e.contains("I420 is not one"), "{e}");
        let e =
            VideoCaps::parse("video/x-raw, format=(string)NV12, width=(int)63, height=(int)48").unwrap_err();
        assert!(e.contains("lack"), "{e}");
    }
}
