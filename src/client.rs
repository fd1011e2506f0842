//! The client side of the detections socket: what `jetdetect watch` and
//! `jetdetect run --echo` print for humans.

use serde_json::Value;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// One line for a human, or `None` for messages of unknown type.
pub fn format_human(msg: &Value) -> Option<String> {
    match msg["type"].as_str()? {
        "hello" => {
            let classes: Vec<&str> = msg["classes"].as_array()?.iter().filter_map(|c| c.as_str()).collect();
            Some(format!(
                "connected to jetdetect {} (schema {}): {} | {} | classes: {}",
                msg["version"].as_str().unwrap_or("?"),
                msg["schema"],
                msg["source"].as_str().unwrap_or("?"),
                msg["engine"].as_str().unwrap_or("?"),
                classes.join(", ")
            ))
        }
        "detections" => {
            let dets = msg["detections"].as_array()?;
            let list: Vec<String> = dets
                .iter()
                .map(|d| {
                    format!(
                        "{} {:.2} ({:.0},{:.0})-({:.0},{:.0})",
                        d["class"].as_str().unwrap_or("?"),
                        f(&d["score"]),
                        f(&d["x1"]),
                        f(&d["y1"]),
                        f(&d["x2"]),
                        f(&d["y2"])
                    )
                })
                .collect();
            Some(format!(
                "#{:<6} e2e {:>6.1} ms (age {:>5.1}, infer {:>5.1})  {} object{}{}{}",
                msg["seq"],
                f(&msg["latency_ms"]["end_to_end"]),
                f(&msg["frame_age_ms"]),
                f(&msg["latency_ms"]["inference"]),
                dets.len(),
                if dets.len() == 1 { "" } else { "s" },
                if list.is_empty() { "" } else { ": " },
                list.join(", ")
            ))
        }
        "stats" => {
            let e = &msg["latency_ms"]["end_to_end"];
            Some(format!(
                "stats: {:.1} fps processed ({:.1} captured), end-to-end p50 {:.1} p90 {:.1} p99 {:.1} max {:.1} ms, \
                 dropped {}, clients {}",
                f(&msg["fps"]["processed"]),
                f(&msg["fps"]["capture"]),
                f(&e["p50"]),
                f(&e["p90"]),
                f(&e["p99"]),
                f(&e["max"]),
                msg["frames"]["dropped"],
                msg["clients"]
            ))
        }
        "bye" => Some(format!("jetdetect stopped ({})", msg["reason"].as_str().unwrap_or("?"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_each_message_type() {
        let d: Value = serde_json::from_str(
            r#"{"type":"detections","seq":5,"frame_age_ms":1.5,"latency_ms":{"end_to_end":30.25,"inference":20.0},
                "detections":[{"class":"cone","score":0.913,"x1":1,"y1":2,"x2":30,"y2":40}]}"#,
        )
        .unwrap();
        let line = format_human(&d).unwrap();
        assert!(
            line.contains("#5") && line.contains("30.2 ms") && line.contains("cone 0.91 (1,2)-(30,40)"),
            "{line}"
        );
        let b: Value = serde_json::from_str(r#"{"type":"bye","reason":"signal"}"#).unwrap();
        assert_eq!(format_human(&b).unwrap(), "jetdetect stopped (signal)");
        assert!(format_human(&serde_json::json!({"type": "future"})).is_none());
    }
}
