//! The Prometheus text served at `GET /metrics` (`[metrics] listen`), rendered once per stats
//! interval.

use crate::output::Interval;
use crate::stats::{DeadlineMisses, Stage};

/// Renders the Prometheus text format for interval `iv`; `misses` are the deadline misses since
/// start.
pub fn render(iv: &Interval<'_>, misses: &DeadlineMisses) -> String {
    use std::fmt::Write as _;
    let (totals, fps, clients, interval, t) = (iv.totals, iv.fps, iv.clients, iv.latency, iv.telemetry);
    let mut s = String::with_capacity(2048);
    let _ = writeln!(s, "# HELP jetdetect_frames_total Frames by outcome since start.");
    let _ = writeln!(s, "# TYPE jetdetect_frames_total counter");
    for (kind, v) in [
        ("captured", totals.captured),
        ("processed", totals.processed),
        ("dropped", totals.dropped),
        ("published", totals.published),
        ("error", totals.errors),
    ] {
        let _ = writeln!(s, "jetdetect_frames_total{{outcome=\"{kind}\"}} {v}");
    }
    let _ = writeln!(s, "# HELP jetdetect_fps Frames processed per second over the last interval.");
    let _ = writeln!(s, "# TYPE jetdetect_fps gauge\njetdetect_fps {fps}");
    let _ = writeln!(s, "# HELP jetdetect_clients Clients connected to the detections socket.");
    let _ = writeln!(s, "# TYPE jetdetect_clients gauge\njetdetect_clients {clients}");
    let _ = writeln!(s, "# HELP jetdetect_latency_seconds Per-stage latency over the last interval.");
    let _ = writeln!(s, "# TYPE jetdetect_latency_seconds summary");
    for stage in Stage::ALL {
        let p = interval.stage(stage);
        for (q, v) in [("0.5", p.p50), ("0.9", p.p90), ("0.99", p.p99), ("1", p.max)] {
            let _ =
                writeln!(s, "jetdetect_latency_seconds{{stage=\"{stage}\",quantile=\"{q}\"}} {}", v / 1e3);
        }
    }
    if let Some([cur, _, _]) = t.gpu_mhz {
        let _ = writeln!(s, "# TYPE jetdetect_gpu_mhz gauge\njetdetect_gpu_mhz {cur}");
    }
    if !t.temp_c.is_empty() {
        let _ = writeln!(s, "# TYPE jetdetect_temperature_celsius gauge");
        for (zone, c) in &t.temp_c {
            let _ = writeln!(s, "jetdetect_temperature_celsius{{zone=\"{zone}\"}} {c}");
        }
    }
    if !t.power_mw.is_empty() {
        let _ = writeln!(s, "# TYPE jetdetect_power_watts gauge");
        for (rail, mw) in &t.power_mw {
            let _ = writeln!(s, "jetdetect_power_watts{{rail=\"{rail}\"}} {}", mw / 1e3);
        }
    }
    let _ = writeln!(s, "# TYPE jetdetect_throttling gauge\njetdetect_throttling {}", t.throttling as u8);
    let _ = writeln!(s, "# TYPE jetdetect_clocks_pinned gauge\njetdetect_clocks_pinned {}", t.pinned as u8);
    if iv.deadline_ms > 0.0 {
        let _ = writeln!(s, "# HELP jetdetect_deadline_seconds [latency] deadline_ms.");
        let _ = writeln!(
            s,
            "# TYPE jetdetect_deadline_seconds gauge\njetdetect_deadline_seconds {}",
            iv.deadline_ms / 1e3
        );
        let _ = writeln!(
            s,
            "# HELP jetdetect_deadline_misses_total Frames past the deadline since start, by the stage that took longest."
        );
        let _ = writeln!(s, "# TYPE jetdetect_deadline_misses_total counter");
        for stage in &Stage::ALL[..5] {
            let _ = writeln!(
                s,
                "jetdetect_deadline_misses_total{{stage=\"{stage}\"}} {}",
                misses.by_stage[*stage]
            );
        }
    }
    let _ =
        writeln!(s, "# HELP jetdetect_blind 1 while a camera had no fresh frame within its freshness bound.");
    let _ = writeln!(s, "# TYPE jetdetect_blind gauge\njetdetect_blind {}", iv.blind.is_some() as u8);
    if !iv.cameras.is_empty() {
        // Per camera: its own counters, rate, freshness and blindness. Camera names are
        // letters, digits, '_' and '-' (checked in the config): nothing to escape.
        let _ = writeln!(s, "# HELP jetdetect_camera_frames_total Frames per camera since start.");
        let _ = writeln!(s, "# TYPE jetdetect_camera_frames_total counter");
        for c in iv.cameras {
            let f = &c.frames;
            for (kind, v) in [
                ("captured", f.captured),
                ("processed", f.processed),
                ("dropped", f.dropped),
                ("error", f.errors),
            ] {
                let _ = writeln!(
                    s,
                    "jetdetect_camera_frames_total{{camera=\"{}\",outcome=\"{kind}\"}} {v}",
                    c.name
                );
            }
        }
        let _ = writeln!(
            s,
            "# HELP jetdetect_camera_fps Frames processed per second per camera over the last interval."
        );
        let _ = writeln!(s, "# TYPE jetdetect_camera_fps gauge");
        for c in iv.cameras {
            let _ = writeln!(s, "jetdetect_camera_fps{{camera=\"{}\"}} {}", c.name, c.fps.processed);
        }
        let _ = writeln!(
            s,
            "# HELP jetdetect_camera_frame_age_seconds Age of each camera's newest published frame."
        );
        let _ = writeln!(s, "# TYPE jetdetect_camera_frame_age_seconds gauge");
        for c in iv.cameras {
            if let Some(ms) = c.frame_age_ms {
                let _ =
                    writeln!(s, "jetdetect_camera_frame_age_seconds{{camera=\"{}\"}} {}", c.name, ms / 1e3);
            }
        }
        let _ = writeln!(
            s,
            "# HELP jetdetect_camera_blind 1 while the camera had no fresh frame within its bound."
        );
        let _ = writeln!(s, "# TYPE jetdetect_camera_blind gauge");
        for c in iv.cameras {
            let _ =
                writeln!(s, "jetdetect_camera_blind{{camera=\"{}\"}} {}", c.name, c.blind.is_some() as u8);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::power::telemetry::Telemetry;
    use crate::report::FrameCounters;
    use crate::stats::LatencyStats;

    #[test]
    fn renders_every_family() {
        let mut stats = LatencyStats::new();
        stats.record([1000, 2000, 3000, 100, 50, 6150]);
        let mut t = Telemetry::default();
        t.temp_c.insert("gpu-thermal".into(), 44.5);
        let mut misses = DeadlineMisses::default();
        misses.by_stage[Stage::Inference] = 3;
        let source = crate::report::SourceState::default();
        let blind = crate::report::Blind {
            camera: "rear".into(),
            reason: crate::report::BlindReason::Camera,
            detail: "gone".into(),
            for_ms: 1500.0,
            throttling: false,
        };
        let iv = Interval {
            uptime_s: 10.0,
            interval_s: 5.0,
            totals: FrameCounters { captured: 5, ..Default::default() },
            delta: FrameCounters::default(),
            fps: 29.5,
            clients: 2,
            source: &source,
            cameras: &[crate::report::CameraStats {
                name: "rear".into(),
                uri: "v4l2:///dev/video1".into(),
                source: source.clone(),
                frames: FrameCounters { captured: 5, ..Default::default() },
                fps: Default::default(),
                frame_age_ms: Some(1500.0),
                stale_ms: 1000.0,
                latency_ms: Default::default(),
                blind: Some(blind.clone()),
            }],
            latency: &stats,
            telemetry: &t,
            deadline_ms: 50.0,
            misses: &misses,
            blind: Some(&blind),
        };
        let body = render(&iv, &misses);
        assert!(body.contains("jetdetect_frames_total{outcome=\"captured\"} 5"), "{body}");
        assert!(
            body.contains("jetdetect_latency_seconds{stage=\"inference\",quantile=\"0.5\"} 0.003"),
            "{body}"
        );
        assert!(body.contains("jetdetect_temperature_celsius{zone=\"gpu-thermal\"} 44.5"), "{body}");
        assert!(body.contains("jetdetect_deadline_misses_total{stage=\"inference\"} 3"), "{body}");
        assert!(
            body.contains("jetdetect_deadline_seconds 0.05") && body.contains("jetdetect_blind 1"),
            "{body}"
        );
        assert!(
            body.contains("jetdetect_camera_frames_total{camera=\"rear\",outcome=\"captured\"} 5"),
            "{body}"
        );
        assert!(body.contains("jetdetect_camera_frame_age_seconds{camera=\"rear\"} 1.5"), "{body}");
        assert!(body.contains("jetdetect_camera_blind{camera=\"rear\"} 1"), "{body}");
    }
}
