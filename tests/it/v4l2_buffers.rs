//! Conversion of buffers recorded from a real V4L2 driver (vivid's 75% colour
//! bars, captured in the test VM with `v4l2-ctl --stream-mmap`), read through
//! the same raw-frame path the V4L2 source hands on.

use jetdetect::frame::Frame;
use jetdetect::preprocess::colour::to_rgb;
use jetdetect::source;

/// vivid's bars from left to right at 75% intensity: white, yellow, cyan, green, magenta, red, blue, black.
const BARS: [[u8; 3]; 8] = [
    [191, 191, 191],
    [191, 191, 0],
    [0, 191, 191],
    [0, 191, 0],
    [191, 0, 191],
    [191, 0, 0],
    [0, 0, 191],
    [0, 0, 0],
];

fn check(file: &str, format: &str) {
    let uri = format!(
        "file://{}/tests/fixtures/vivid/{file}?width=320&height=180&format={format}",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut src = source::open(&uri).unwrap();
    let mut frame = Frame::empty();
    assert!(src.next_frame(&mut frame).unwrap());
    frame.check_len().unwrap();
    let mut rgb = Vec::new();
    to_rgb(&frame, &mut rgb);
    // Row 170 is below vivid's text overlay; sample the middle of each 40-pixel bar.
    for (k, want) in BARS.iter().enumerate() {
        let x = 20 + 40 * k;
        let p = (170 * 320 + x) * 3;
        let got = &rgb[p..p + 3];
        for c in 0..3 {
            assert!(got[c].abs_diff(want[c]) <= 4, "{format}: bar {k} at x={x}: {got:?}, expected {want:?}");
        }
    }
}

#[test]
fn vivid_yuyv_colour_bars_convert_to_the_right_colours() {
    check("vivid_320x180.yuyv", "yuyv");
}

#[test]
fn vivid_nv12_colour_bars_convert_to_the_right_colours() {
    check("vivid_320x180.nv12", "nv12");
}
