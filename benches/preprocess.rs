//! Preprocessing on the CPU: each camera pixel format, 640x480 -> 640x640 f32
//! NCHW (letterbox, normalise), the issue-8 target (< 1.5 ms on one core); 640x480
//! and the daemon's default 1280x720 -> the shipped model's 256x256.
//!
//! `cargo bench --bench preprocess`; `cargo test --benches` runs each once.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jetdetect::frame::{Frame, PixelFormat};
use jetdetect::preprocess::{CpuPreprocessor, Fit, Preprocessor};
use jetdetect::source;

fn frame(format: PixelFormat, w: u32, h: u32) -> Frame {
    let uri = format!("synthetic://?width={w}&height={h}&fps=0&format={}&seed=3&objects=8", format.name());
    let mut src = source::open(&uri).expect("synthetic source");
    let mut frame = Frame::empty();
    assert!(src.next_frame(&mut frame).expect("a frame"));
    frame
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("preprocess 640x480 -> 640x640");
    g.throughput(Throughput::Elements(640 * 480));
    for format in PixelFormat::ALL {
        let f = frame(format, 640, 480);
        let mut pre = CpuPreprocessor::new();
        let mut out = vec![0f32; 3 * 640 * 640];
        g.bench_function(format.name(), |b| {
            b.iter(|| pre.run(&f, Fit::Letterbox, 640, 640, &mut out).unwrap())
        });
    }
    g.finish();

    // The shipped model's input: the resize path, the chain `benches/compare` measures.
    let mut g = c.benchmark_group("preprocess 640x480 -> 256x256");
    g.throughput(Throughput::Elements(640 * 480));
    for format in [PixelFormat::Yuyv, PixelFormat::Nv12, PixelFormat::Rgb24] {
        let f = frame(format, 640, 480);
        let mut pre = CpuPreprocessor::new();
        let mut out = vec![0f32; 3 * 256 * 256];
        g.bench_function(format.name(), |b| {
            b.iter(|| pre.run(&f, Fit::Letterbox, 256, 256, &mut out).unwrap())
        });
    }
    g.finish();

    let mut g = c.benchmark_group("preprocess 1280x720 -> 256x256");
    g.throughput(Throughput::Elements(1280 * 720));
    for format in [PixelFormat::Yuyv, PixelFormat::Nv12] {
        let f = frame(format, 1280, 720);
        let mut pre = CpuPreprocessor::new();
        let mut out = vec![0f32; 3 * 256 * 256];
        g.bench_function(format.name(), |b| {
            b.iter(|| pre.run(&f, Fit::Letterbox, 256, 256, &mut out).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
