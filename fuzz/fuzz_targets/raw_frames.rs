//! Raw frame files (`file://clip.yuv?width=&height=&format=`) of any content,
//! length and claimed geometry: opening fails with a message, or exactly
//! `len / frame_len` whole frames are read.
#![no_main]

use jetdetect::frame::PixelFormat;
use libfuzzer_sys::fuzz_target;

#[path = "../../tests/common/checks.rs"]
mod checks;

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
    if let Err(e) = checks::raw_file(&path, body.len(), width, height, format) {
        panic!("{e}");
    }
});
