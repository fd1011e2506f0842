//! `[output.ros2]` in the daemon: a run with the ROS 2 node on publishes every frame and stops
//! cleanly; bad values are config errors naming file, line and key. The independent check (Cyclone
//! DDS decoding `Detection2DArray` field by field) is tests/ros2/check.py, run by
//! tests/ros2/run.sh in CI.

#[cfg(feature = "ros2")]
use std::time::Duration;

use crate::common::repo;
#[cfg(feature = "ros2")]
use crate::common::Daemon;

fn write_config(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let p = dir.join("jd.toml");
    std::fs::write(
        &p,
        format!(
            "[source]\nuri = \"synthetic://?width=320&height=240&fps=20&seed=2&objects=3&frames=40\"\n\
             [model]\npath = \"{}\"\nnames = \"{}\"\n[output]\nsocket = \"d.sock\"\n{extra}",
            repo().join("models/obstacles-v8.onnx").display(),
            repo().join("models/obstacles.names").display()
        ),
    )
    .unwrap();
    p
}

#[cfg(feature = "ros2")]
#[test]
fn a_run_with_the_ros2_node_publishes_every_frame_and_stops_cleanly() {
    let dir = crate::common::fresh_dir("ros2", "run");
    let domain = 150 + std::process::id() % 50;
    let p = write_config(
        &dir,
        &format!(
            "[output.ros2]\ndomain_id = {domain}\ninterfaces = [\"127.0.0.1\"]\n[hazards]\nenabled = true\n"
        ),
    );
    let d = Daemon::start(&p, &[]);
    let (code, err) = d.wait(Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(&format!("ROS 2: node /jetdetect in domain {domain}")), "{err}");
    assert!(err.contains("std_msgs/String (hazards JSON) on hazard_zones"), "{err}");
    // A Detection2DArray and a zone summary per published frame, none failed.
    // The run's summary line: "... 40 captured, 6 processed (78.4 fps), 34 dropped, 6 published, ...".
    let line = err.lines().find(|l| l.starts_with("jetdetect: stopped")).unwrap_or_else(|| panic!("{err}"));
    let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let count = |what: &str| -> u64 {
        let n = words.windows(2).find(|w| w[1] == what).and_then(|w| w[0].parse().ok());
        n.unwrap_or_else(|| panic!("no {what:?} in {line}"))
    };
    let (published, frames) = (count("published"), count("processed"));
    assert!(frames >= 5, "{err}");
    assert_eq!(published, frames, "{line}");
    assert!(err.contains(&format!("ROS 2: {} messages published, 0 failed", 2 * published)), "{err}");
    // RustDDS's own messages stay out of the log (its warnings and its errors at a clean stop).
    assert!(!err.contains(" rustdds"), "{err}");
}

#[test]
fn bad_ros2_values_are_config_errors_naming_the_key() {
    let dir = crate::common::fresh_dir("ros2", "config");
    for (section, want) in [
        (
            "[output.ros2]\nnamespace = \"robot1\"\n",
            "jd.toml:9: [output.ros2] namespace: \"robot1\" is not a ROS 2 namespace",
        ),
        (
            "[output.ros2]\ndetections_topic = \"my-dets\"\n",
            "jd.toml:9: [output.ros2] detections_topic: \"my-dets\" is not a ROS 2 topic name",
        ),
        (
            "[output.ros2]\nreliability = \"sometimes\"\n",
            "unknown variant `sometimes`, expected `best_effort` or `reliable`",
        ),
        (
            "[output.ros2]\ninterfaces = [\"eth0\"]\n",
            "[output.ros2] interfaces: \"eth0\" is not an IP address",
        ),
        (
            "[output.ros2]\ndomain_id = 300\n",
            "[output.ros2] domain_id: 300 is out of range: allowed 0 to 232",
        ),
    ] {
        let p = write_config(&dir, section);
        let (code, err) = crate::common::check_config(&p);
        assert_eq!(code, Some(1), "{section}: {err}");
        assert!(err.contains(want), "{section}: {err}");
    }
}
