//! Source URIs: `SourceUri::parse` on arbitrary text, and `source::open` on the
//! ones naming the synthetic source (others would touch files and devices). A
//! source that opens gives well-formed frames.
#![no_main]

use jetdetect::frame::Frame;
use jetdetect::source::{self, SourceUri};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(uri) = SourceUri::parse(text) else { return };
    assert!(uri.scheme.chars().all(|c| c.is_ascii_alphanumeric()), "{text}");
    let _ = uri.get::<u32>("width", 0);
    let _ = uri.get_in("fps", 0.0f64, 0.0, 1000.0);
    if uri.scheme != "synthetic" {
        return;
    }
    if let Ok(mut src) = source::open(text) {
        // A paced source sleeps a frame period per frame: take frames only from unpaced ones.
        if src.nominal_fps().is_some_and(|f| f > 0.0) {
            return;
        }
        let mut frame = Frame::empty();
        for _ in 0..2 {
            match src.next_frame(&mut frame) {
                Ok(true) => assert!(frame.check_len().is_ok(), "{text}"),
                _ => break,
            }
        }
    }
});
