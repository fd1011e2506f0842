//! MJPEG frames as a camera might send them, corrupt or hostile: an error, or
//! a whole RGB frame of the negotiated size. Never a panic, and never an
//! allocation sized by the frame's own header.
#![no_main]

use jetdetect::frame::Frame;
use jetdetect::source::mjpeg;
use libfuzzer_sys::fuzz_target;

#[path = "../../tests/common/checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    // The negotiated size: 800x600 (the seed corpus's JPEG) or one from the input.
    let (head, jpeg) = data.split_at(4);
    let expect = if head[0] & 1 == 0 {
        (800, 600)
    } else {
        (
            1 + u16::from_le_bytes([head[0], head[1]]) as u32 % 2048,
            1 + u16::from_le_bytes([head[2], head[3]]) as u32 % 2048,
        )
    };
    let mut frame = Frame::empty();
    if mjpeg::decode(jpeg, &mut frame, expect).is_ok() {
        if let Err(e) = checks::mjpeg_frame(&frame, expect) {
            panic!("{e}");
        }
    }
});
