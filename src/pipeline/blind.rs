//! Why a camera is blind: its own error, inference falling behind, or nothing coming at all.

use std::time::Duration;

use crate::power::telemetry::Telemetry;
use crate::report::{Blind, BlindReason, SourceState};

/// Why `camera` is blind, `age` after its newest frame (or the start): the camera's error,
/// frames captured since its newest published one (inference behind), or nothing at all.
pub(super) fn diagnose(
    camera: &str,
    age: Duration,
    source: &SourceState,
    captured_since: u64,
    telemetry: &Telemetry,
) -> Blind {
    let ms = age.as_secs_f64() * 1e3;
    let (reason, detail) = match (&source.error, captured_since) {
        (Some(e), _) => (BlindReason::Camera, e.clone()),
        (None, n) if n > 0 => (
            BlindReason::Inference,
            format!("{n} frames captured in {ms:.0} ms but none got through inference"),
        ),
        (None, _) => (BlindReason::NoFrames, format!("the source delivered no frame for {ms:.0} ms")),
    };
    Blind {
        camera: camera.to_string(),
        reason,
        detail,
        for_ms: (ms * 10.0).round() / 10.0,
        throttling: telemetry.throttling,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blindness_is_put_down_to_the_camera_to_inference_or_to_nothing_coming() {
        let streaming = SourceState { state: "streaming", error: None, faults: 0 };
        let gone = SourceState {
            state: "unavailable",
            error: Some("/dev/video0: cannot open: No such device".into()),
            faults: 1,
        };
        let mut t = Telemetry::default();
        let age = Duration::from_millis(750);
        let b = diagnose("cam0", age, &gone, 0, &t);
        assert_eq!(
            (b.reason, b.detail.as_str(), b.for_ms),
            (BlindReason::Camera, "/dev/video0: cannot open: No such device", 750.0)
        );
        let b = diagnose("cam0", age, &streaming, 12, &t);
        assert_eq!(b.reason, BlindReason::Inference);
        assert!(
            b.detail.contains("12 frames captured in 750 ms but none got through inference"),
            "{}",
            b.detail
        );
        t.throttling = true;
        let b = diagnose("cam0", age, &streaming, 0, &t);
        assert_eq!((b.reason, b.throttling), (BlindReason::NoFrames, true));
        assert!(b.detail.contains("no frame for 750 ms"), "{}", b.detail);
    }
}
