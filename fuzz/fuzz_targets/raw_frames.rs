//! Raw frame files (`file://clip.yuv?width=&height=&format=`) of any content,
//! length and claimed geometry: opening fails with a message, or exactly
//! `len / frame_len` whole frames are read.
#![no_main]

use jetdetect::frame::{Frame, PixelFormat};
use jetdetect::source;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let (head, body) = data.split_at(3);
    let format = PixelFormat::ALL[head[0] as usize % PixelFormat::ALL.len()];
    let (width, height) = (head[1] as u32 % 80, head[2] as u32 % 80);
    let path =
        std::env::temp_dir().join(format!("jetdetect-fuzz-raw-{}.{}", std::process::id(), format.name()));
    std::fs::write(&path, body).unwrap();
    let uri = format!("file://{}?width={width}&height={height}&format={}", path.display(), format.name());
    match source::open(&uri) {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(mut src) => {
            let frame_len = format.frame_len(width, height).unwrap();
            let mut frame = Frame::empty();
            let mut n = 0;
            while let Ok(true) = src.next_frame(&mut frame) {
                assert!(frame.check_len().is_ok());
                n += 1;
                assert!(n <= body.len() / frame_len, "more frames than the file holds");
            }
            assert_eq!(n, body.len() / frame_len, "{uri}");
        }
    }
});
