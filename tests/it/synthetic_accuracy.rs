//! The shipped model on the synthetic source: recall and precision at IoU 0.5
//! against the source's exact ground truth, on scenes it was not trained on.

use jetdetect::config::Config;
use jetdetect::eval::{match_frame, Counts};
use jetdetect::frame::Frame;
use jetdetect::source;

fn score(uri: &str, frames: u64) -> Counts {
    let mut config = Config::default();
    config.engine.kind = jetdetect::engine::EngineKind::Tract;
    config.model.path = concat!(env!("CARGO_MANIFEST_DIR"), "/models/obstacles-v8.onnx").into();
    let mut detector = jetdetect::daemon::detector(&config).unwrap();
    let mut src = source::open(uri).unwrap();
    let mut frame = Frame::empty();
    let mut counts = Counts::default();
    for _ in 0..frames {
        assert!(src.next_frame(&mut frame).unwrap());
        let dets = detector.detect(&frame).unwrap();
        counts.add(match_frame(dets, &frame.truth, 0.5, 0.5));
    }
    counts
}

#[test]
fn recall_and_precision_are_at_least_0_9_on_unseen_scenes() {
    let mut total = Counts::default();
    // Seeds the training set (`jetdetect dataset`) does not draw from, two formats.
    for (seed, format) in [(1, "yuyv"), (2, "nv12"), (3, "yuyv"), (4, "rgb24")] {
        let uri = format!(
            "synthetic://?width=640&height=480&fps=0&format={format}&seed={seed}&objects=5&frames=40"
        );
        let c = score(&uri, 40);
        eprintln!("{uri}: {c:?} precision {:.3} recall {:.3}", c.precision(), c.recall());
        total.add(c);
    }
    eprintln!("total: {total:?} precision {:.3} recall {:.3}", total.precision(), total.recall());
    assert!(total.tp >= 400, "too few objects scored: {total:?}");
    assert!(total.recall() >= 0.9, "recall {:.3} < 0.9: {total:?}", total.recall());
    assert!(total.precision() >= 0.9, "precision {:.3} < 0.9: {total:?}", total.precision());
}
