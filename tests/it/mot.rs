//! Tracking scored on real footage: `jetdetect eval --tracks` over MOTChallenge files, and its
//! scores against py-motmetrics' on the pedestrian sequences py-motmetrics ships (TUD-Campus and
//! TUD-Stadtmitte, 640 x 480 at 25 fps: the truth, and a tracker's results whose identities are
//! dropped to make detections).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use jetdetect::eval::mot::{self, Kind};
use jetdetect::eval::tracking::{TrackedBox, TrackingScorer};

use crate::common::{fresh_dir, motmetrics};

/// The sequences py-motmetrics ships, all 640 x 480 at 25 fps (MOT15's seqinfo.ini).
const SEQUENCES: [&str; 2] = ["TUD-Campus", "TUD-Stadtmitte"];

fn jetdetect(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jetdetect")).args(args).output().unwrap()
}

fn json_line(o: &Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The counts both sides report, by py-motmetrics' names.
const COUNTS: [&str; 7] = [
    "num_switches",
    "num_objects",
    "num_predictions",
    "num_matches",
    "num_misses",
    "num_false_positives",
    "idtp",
];

/// Asserts `ours` and `theirs` (py-motmetrics') agree: every count exactly, MOTA and IDF1 to
/// the third decimal.
fn assert_agree(what: &str, ours: &Value, theirs: &Value) {
    for k in COUNTS {
        assert_eq!(ours[k].as_f64(), theirs[k].as_f64(), "{what}: {k}: ours {ours}, motmetrics {theirs}");
    }
    for k in ["mota", "idf1"] {
        let (a, b) = (ours[k].as_f64().unwrap(), theirs[k].as_f64().unwrap());
        assert!((a - b).abs() < 5e-4, "{what}: {k} {a} vs motmetrics {b}");
    }
}

#[test]
#[cfg_attr(not(jetdetect_has_motmetrics), ignore = "needs py-motmetrics (docs/reliability.md)")]
fn the_scorer_gives_motmetrics_numbers_for_a_trackers_results() {
    // The tracker's results py-motmetrics ships, identities kept, scored by our scorer alone
    // and by py-motmetrics: the same events, so the same counts.
    for seq in SEQUENCES {
        let dir = motmetrics::data().join(seq);
        let (gt, ts) = (dir.join("gt.txt"), dir.join("test.txt"));
        let truth = mot::read(&gt, Kind::Truth).unwrap();
        let tracks = mot::read(&ts, Kind::Truth).unwrap();
        let mut scorer = TrackingScorer::new(0.5, 0.5);
        let (mut objects, mut boxes) = (Vec::new(), Vec::new());
        for f in 1..=truth.last_frame().max(tracks.last_frame()) {
            truth.truth(f, &mut objects);
            let tracked: Vec<TrackedBox> = {
                tracks.truth(f, &mut boxes);
                boxes.iter().map(|b| (b.object as u64, b.corners())).collect()
            };
            scorer.frame(&objects, &tracked);
        }
        let s = scorer.finish();
        let ours = serde_json::json!({
            "mota": s.mota(), "idf1": s.idf1(), "num_switches": s.id_switches, "num_objects": s.objects,
            "num_predictions": s.tracked, "num_matches": s.matches - s.id_switches, "num_misses": s.misses,
            "num_false_positives": s.false_positives, "idtp": s.idtp,
        });
        let theirs: Value = serde_json::from_str(&motmetrics::score(&[&gt, &ts])).unwrap();
        assert_agree(seq, &ours, &theirs);
    }
}

#[test]
#[cfg_attr(not(jetdetect_has_motmetrics), ignore = "needs py-motmetrics (docs/reliability.md)")]
fn eval_tracks_on_real_footage_agrees_with_motmetrics_and_the_docs() {
    // Our tracker over the boxes of the shipped results without their identities; its tracks
    // scored by `eval --tracks` and, from the file it saves, by py-motmetrics.
    let out = fresh_dir("mot", "tud");
    let docs = std::fs::read_to_string(crate::common::repo().join("docs/hazards.md")).unwrap();
    for seq in SEQUENCES {
        let dir = motmetrics::data().join(seq);
        let (gt, det, saved) = (dir.join("gt.txt"), dir.join("test.txt"), out.join(format!("{seq}.txt")));
        let ours = json_line(&jetdetect(&[
            "eval",
            "--tracks",
            "--det",
            det.to_str().unwrap(),
            "--gt",
            gt.to_str().unwrap(),
            "--size",
            "640x480",
            "--fps",
            "25",
            "--save-tracks",
            saved.to_str().unwrap(),
        ]));
        let theirs: Value = serde_json::from_str(&motmetrics::score(&[&gt, &saved])).unwrap();
        assert_agree(seq, &ours, &theirs);
        // docs/hazards.md reports these figures: they must be what the tracker does now.
        let row = format!(
            "| {seq} | {:.3} | {:.3} | {} | {:.3} | {:.3} | {} |",
            ours["mota"].as_f64().unwrap(),
            ours["idf1"].as_f64().unwrap(),
            ours["num_switches"],
            theirs["mota"].as_f64().unwrap(),
            theirs["idf1"].as_f64().unwrap(),
            theirs["num_switches"],
        );
        assert!(docs.contains(&row), "docs/hazards.md lacks the row {row}");
    }
}

/// Two pedestrians walking across a 320 x 240 picture at 10 fps, crossing paths, 40 frames.
fn walkers(f: u64) -> [(u64, [f32; 4]); 2] {
    let x = f as f32 * 5.0;
    [(1, [10.0 + x, 50.0, 40.0, 100.0]), (2, [250.0 - x, 60.0, 40.0, 100.0])]
}

/// A sequence folder as MOTChallenge lays it out: `seqinfo.ini`, `det/det.txt`, `gt/gt.txt`;
/// the detector misses walker 1 in `missed` frames.
fn sequence(dir: &Path, missed: &[u64]) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir.join("det")).unwrap();
    std::fs::create_dir_all(dir.join("gt")).unwrap();
    std::fs::write(
        dir.join("seqinfo.ini"),
        "[Sequence]\nname=walkers\nimDir=img1\nframeRate=10\nseqLength=40\nimWidth=320\nimHeight=240\nimExt=.jpg\n",
    )
    .unwrap();
    let (mut det, mut gt) = (String::new(), String::new());
    for f in 1..=40 {
        for (id, [l, t, w, h]) in walkers(f) {
            gt += &format!("{f},{id},{l},{t},{w},{h},1,1,1.0\n");
            if !(id == 1 && missed.contains(&f)) {
                det += &format!("{f},-1,{l},{t},{w},{h},0.9,-1,-1,-1\n");
            }
        }
    }
    let (d, g) = (dir.join("det/det.txt"), dir.join("gt/gt.txt"));
    std::fs::write(&d, det).unwrap();
    std::fs::write(&g, gt).unwrap();
    (d, g)
}

#[test]
fn eval_tracks_takes_size_and_rate_from_a_sequence_folder_and_scores_its_misses() {
    let dir = fresh_dir("mot", "walkers");
    let (det, gt) = sequence(&dir, &[]);
    let args = |det: &Path, gt: &Path| {
        ["eval", "--tracks", "--det", det.to_str().unwrap(), "--gt", gt.to_str().unwrap()].map(String::from)
    };
    let v = json_line(&Command::new(env!("CARGO_BIN_EXE_jetdetect")).args(args(&det, &gt)).output().unwrap());
    assert_eq!(
        (v["size"][0].as_u64(), v["size"][1].as_u64(), v["fps"].as_f64()),
        (Some(320), Some(240), Some(10.0))
    );
    assert_eq!((v["frames"].as_u64(), v["num_objects"].as_u64()), (Some(40), Some(80)));
    assert_eq!(
        (v["mota"].as_f64(), v["idf1"].as_f64(), v["num_switches"].as_u64()),
        (Some(1.0), Some(1.0), Some(0))
    );
    // Walker 1 missed in frames 20-21, as the two pass each other: two misses, and the track
    // that comes back must be the same one (no switch) for IDF1 to lose only those frames.
    let dir = fresh_dir("mot", "walkers-missed");
    let (det, gt) = sequence(&dir, &[20, 21]);
    let v = json_line(&Command::new(env!("CARGO_BIN_EXE_jetdetect")).args(args(&det, &gt)).output().unwrap());
    assert_eq!((v["num_misses"].as_u64(), v["num_switches"].as_u64()), (Some(2), Some(0)), "{v}");
    assert!((v["mota"].as_f64().unwrap() - 78.0 / 80.0).abs() < 1e-4, "{v}");
    assert!((v["idf1"].as_f64().unwrap() - 2.0 * 78.0 / 158.0).abs() < 1e-4, "{v}");
}

#[test]
fn eval_tracks_says_what_is_missing_or_wrong() {
    let dir = fresh_dir("mot", "bad");
    let (det, gt) = (dir.join("det.txt"), dir.join("gt.txt"));
    std::fs::write(&det, "1,-1,0,0,10,10,0.9\n").unwrap();
    std::fs::write(&gt, "1,1,0,0,10,10,1\n").unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec!["eval", "--tracks", "--det", det.to_str().unwrap(), "--gt", gt.to_str().unwrap()];
        a.extend_from_slice(extra);
        let o = jetdetect(&a);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!err.contains("panicked"), "{err}");
        err
    };
    let err = run(&[]);
    assert!(
        err.contains("--tracks needs the frames' size: give --size WIDTHxHEIGHT (no seqinfo.ini beside"),
        "{err}"
    );
    assert!(run(&["--size", "640"]).contains("'640' is not a frame size"));
    let err = run(&["--size", "640x480"]);
    assert!(err.contains("--tracks needs the frames' rate: give --fps"), "{err}");
    std::fs::write(&det, "1,-1,0,0,10,10,0.9\n2,-1,0,0,10,10,7\n").unwrap();
    let err = run(&["--size", "640x480", "--fps", "30"]);
    assert!(
        err.contains(&format!("detections file {}, line 2: score 7 is not from 0 to 1", det.display())),
        "{err}"
    );
    let o = jetdetect(&["eval", "--tracks", "--det", det.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--gt"), "clap asks for the truth");
}
