//! MOTChallenge text files: the format tracking benchmarks, CVAT ("MOT 1.1") and most trackers
//! read and write, one box per line:
//!
//! ```text
//! frame, id, bb_left, bb_top, bb_width, bb_height, conf, x, y, z          (MOT15)
//! frame, id, bb_left, bb_top, bb_width, bb_height, flag, class, visibility (MOT16 on, CVAT)
//! ```
//!
//! Frames count from 1; boxes are in pixels, top-left corner and size. Fields are separated by
//! commas (or blanks, which py-motmetrics' reader also takes); lines after the sixth field may
//! be cut short. What the seventh field means depends on the file:
//! - in **detections** it is the detector's score, taken as is from 0 to 1; `-1` (the format's
//!   "not given", as in a tracker's results) counts as 1. The id is ignored: a tracker's
//!   results read as detections are its boxes without their identities.
//! - in **truth** it is the "consider" flag: a line with 0 is left out, as the MOTChallenge
//!   evaluation and py-motmetrics' `eval_motchallenge` (`min_confidence=1`) leave it out. The
//!   class and visibility fields are not read: every line counts, as in py-motmetrics'
//!   `compare_to_groundtruth`.
//!
//! Errors name the file and the line, and say what the line should hold.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use crate::frame::GroundTruth;
use crate::yolo::Detection;

/// What a file holds, which decides what its seventh field means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A detector's boxes (or a tracker's, whose ids are then dropped): field 7 is a score.
    Detections,
    /// The truth: field 7 is the "consider" flag, ids are the objects' identities.
    Truth,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Detections => "detections",
            Kind::Truth => "truth",
        }
    }
}

/// One line of a file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    /// Frame number, from 1.
    pub frame: u64,
    /// Identity (truth); ignored in detections.
    pub id: u64,
    /// Box: left, top, width, height, pixels.
    pub left: f32,
    /// Top edge.
    pub top: f32,
    /// Width.
    pub width: f32,
    /// Height.
    pub height: f32,
    /// Detections: the score, 0 to 1. Truth: 1.
    pub score: f32,
}

impl Row {
    /// The box's corners, `[x1, y1, x2, y2]`.
    pub fn corners(&self) -> [f32; 4] {
        [self.left, self.top, self.left + self.width, self.top + self.height]
    }
}

/// A file read whole, its lines sorted by frame (the order within a frame kept).
#[derive(Clone, Debug)]
pub struct MotFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its lines (truth lines flagged 0 left out).
    pub rows: Vec<Row>,
}

/// A file that cannot be read, or a line that is not a box.
#[derive(Debug, thiserror::Error)]
pub enum MotError {
    /// The file cannot be opened or read.
    #[error("{kind} file {path}: {source}")]
    Io {
        /// Detections or truth.
        kind: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A line is not a box.
    #[error("{kind} file {path}, line {line}: {message}")]
    Line {
        /// Detections or truth.
        kind: &'static str,
        /// The file.
        path: PathBuf,
        /// From 1.
        line: usize,
        /// What is wrong and what it should be.
        message: String,
    },
    /// No line holds a box.
    #[error(
        "{kind} file {path}: no boxes in it (MOTChallenge lines: frame,id,left,top,width,height,conf,...)"
    )]
    Empty {
        /// Detections or truth.
        kind: &'static str,
        /// The file.
        path: PathBuf,
    },
}

/// Reads `path` as a file of `kind`.
pub fn read(path: &Path, kind: Kind) -> Result<MotFile, MotError> {
    let io_error = |source| MotError::Io { kind: kind.name(), path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(io_error)?;
    parse(io::BufReader::new(file), path, kind)
}

/// Reads lines of `kind` from `reader`; `path` names them in errors.
pub fn parse(reader: impl BufRead, path: &Path, kind: Kind) -> Result<MotFile, MotError> {
    let line_error = |line: usize, message: String| MotError::Line {
        kind: kind.name(),
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut rows = Vec::new();
    let mut seen = HashSet::new();
    for (n, line) in reader.lines().enumerate() {
        let line =
            line.map_err(|source| MotError::Io { kind: kind.name(), path: path.to_path_buf(), source })?;
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> =
            text.split(|c: char| c == ',' || c.is_whitespace()).filter(|f| !f.is_empty()).collect();
        if fields.len() < 6 {
            return Err(line_error(
                n + 1,
                format!(
                    "{} fields, need at least 6: frame,id,left,top,width,height[,conf,...]",
                    fields.len()
                ),
            ));
        }
        let number = |i: usize, what: &str| -> Result<f64, MotError> {
            match fields[i].parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(v),
                _ => Err(line_error(
                    n + 1,
                    format!("field {} ({what}) is '{}', not a number", i + 1, fields[i]),
                )),
            }
        };
        let frame = number(0, "frame")?;
        if frame < 1.0 || frame.fract() != 0.0 || frame > u32::MAX as f64 {
            return Err(line_error(n + 1, format!("frame {frame} is not a frame number (whole, from 1)")));
        }
        let id = number(1, "id")?;
        let [left, top, width, height] =
            [(2, "bb_left"), (3, "bb_top"), (4, "bb_width"), (5, "bb_height")].map(|(i, w)| number(i, w));
        let (left, top, width, height) = (left?, top?, width?, height?);
        if width <= 0.0 || height <= 0.0 {
            return Err(line_error(
                n + 1,
                format!("box {width} x {height}: width and height must be above 0"),
            ));
        }
        let conf = if fields.len() > 6 { number(6, "conf")? } else { -1.0 };
        let score = match kind {
            Kind::Truth if conf == 0.0 => continue,
            Kind::Truth => 1.0,
            Kind::Detections if conf == -1.0 => 1.0,
            Kind::Detections if (0.0..=1.0).contains(&conf) => conf as f32,
            Kind::Detections => {
                return Err(line_error(
                    n + 1,
                    format!(
                        "score {conf} is not from 0 to 1: rescale the detector's scores to 0..1, \
                         or write -1 (not given, counted as 1)"
                    ),
                ))
            }
        };
        let id = match kind {
            Kind::Detections => 0,
            Kind::Truth if id >= 0.0 && id.fract() == 0.0 && id <= u32::MAX as f64 => id as u64,
            Kind::Truth => {
                return Err(line_error(
                    n + 1,
                    format!("id {id} is not an object's number (whole, 0 or more)"),
                ));
            }
        };
        if kind == Kind::Truth && !seen.insert((frame as u64, id)) {
            return Err(line_error(
                n + 1,
                format!("object {id} is in frame {frame} twice: each object has one box per frame"),
            ));
        }
        rows.push(Row {
            frame: frame as u64,
            id,
            left: left as f32,
            top: top as f32,
            width: width as f32,
            height: height as f32,
            score,
        });
    }
    if rows.is_empty() {
        return Err(MotError::Empty { kind: kind.name(), path: path.to_path_buf() });
    }
    rows.sort_by_key(|r| r.frame);
    Ok(MotFile { path: path.to_path_buf(), rows })
}

impl MotFile {
    /// The last frame number.
    pub fn last_frame(&self) -> u64 {
        self.rows.last().map_or(0, |r| r.frame)
    }

    /// The lines of frame `frame`.
    pub fn frame(&self, frame: u64) -> &[Row] {
        let start = self.rows.partition_point(|r| r.frame < frame);
        let end = self.rows.partition_point(|r| r.frame <= frame);
        &self.rows[start..end]
    }

    /// The lines of frame `frame` as detections, all of class 0 (a MOTChallenge file tracks
    /// one class).
    pub fn detections(&self, frame: u64, out: &mut Vec<Detection>) {
        out.clear();
        out.extend(self.frame(frame).iter().map(|r| {
            let [x1, y1, x2, y2] = r.corners();
            Detection { class_id: 0, score: r.score, x1, y1, x2, y2 }
        }));
    }

    /// The lines of frame `frame` as ground truth: each object by its id, wholly visible.
    pub fn truth(&self, frame: u64, out: &mut Vec<GroundTruth>) {
        out.clear();
        out.extend(self.frame(frame).iter().map(|r| {
            let [x1, y1, x2, y2] = r.corners();
            GroundTruth {
                class_id: 0,
                x1,
                y1,
                x2,
                y2,
                visible: 1.0,
                object: r.id as usize,
                ttc_frames: None,
                shown: None,
                course: None,
            }
        }));
    }
}

/// Writes a tracker's boxes in the format (`frame,id,left,top,width,height,-1,-1,-1,-1`, as
/// MOTChallenge asks of results), for py-motmetrics or any other scorer.
pub struct Writer<W: Write> {
    out: W,
    line: String,
}

impl<W: Write> Writer<W> {
    /// A writer to `out`.
    pub fn new(out: W) -> Writer<W> {
        Writer { out, line: String::with_capacity(64) }
    }

    /// Writes track `id`'s box `[x1, y1, x2, y2]` in frame `frame`.
    pub fn row(&mut self, frame: u64, id: u64, b: [f32; 4]) -> io::Result<()> {
        self.line.clear();
        let _ =
            writeln!(self.line, "{frame},{id},{},{},{},{},-1,-1,-1,-1", b[0], b[1], b[2] - b[0], b[3] - b[1]);
        self.out.write_all(self.line.as_bytes())
    }

    /// Flushes and gives the writer back.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A sequence's frame size and rate, from a MOTChallenge `seqinfo.ini`
/// (`imWidth`, `imHeight`, `frameRate` under `[Sequence]`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SeqInfo {
    /// Frame width and height, pixels.
    pub size: Option<(u32, u32)>,
    /// Frames per second.
    pub fps: Option<f64>,
}

impl SeqInfo {
    /// Reads `path`; fields that are missing or not numbers are left out (`None`).
    pub fn read(path: &Path) -> io::Result<SeqInfo> {
        Ok(SeqInfo::parse(&std::fs::read_to_string(path)?))
    }

    /// Parses the text of a `seqinfo.ini`.
    pub fn parse(text: &str) -> SeqInfo {
        let value = |key: &str| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim().eq_ignore_ascii_case(key)).then(|| v.trim().to_string())
            })
        };
        let int = |key: &str| value(key).and_then(|v| v.parse::<u32>().ok()).filter(|&v| v > 0);
        SeqInfo {
            size: int("imWidth").zip(int("imHeight")),
            fps: value("frameRate").and_then(|v| v.parse::<f64>().ok()).filter(|v| *v > 0.0 && v.is_finite()),
        }
    }

    /// Where a MOTChallenge sequence keeps it for truth at `gt`: `SEQ/seqinfo.ini` for
    /// `SEQ/gt/gt.txt`, else beside the file.
    pub fn beside(gt: &Path) -> Option<PathBuf> {
        let dir = gt.parent()?;
        [dir.parent().map(|p| p.join("seqinfo.ini")), Some(dir.join("seqinfo.ini"))]
            .into_iter()
            .flatten()
            .find(|p| p.is_file())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str, kind: Kind) -> Result<MotFile, MotError> {
        parse(text.as_bytes(), Path::new("seq/gt.txt"), kind)
    }

    #[test]
    fn truth_lines_become_objects_and_flagged_ones_are_left_out() {
        let f = parse_str(
            "2,7,10,20,30,40,1,1,0.8\n1,3,0,0,5,5,1,-1,-1,-1\n1,4,1,1,2,2,0,1,1\n\n2 8 5 5 10 10\n",
            Kind::Truth,
        )
        .unwrap();
        assert_eq!(f.rows.len(), 3, "the line flagged 0 is left out");
        assert_eq!(f.last_frame(), 2);
        let mut truth = Vec::new();
        f.truth(2, &mut truth);
        assert_eq!(truth.len(), 2);
        assert_eq!((truth[0].object, truth[0].corners()), (7, [10.0, 20.0, 40.0, 60.0]));
        assert_eq!(truth[1].object, 8, "blank-separated lines are read too");
        f.truth(3, &mut truth);
        assert!(truth.is_empty());
    }

    #[test]
    fn detection_scores_are_kept_and_not_given_is_one() {
        let f = parse_str("1,-1,0,0,10,10,0.25\n1,5,0,0,10,10,-1,-1,-1,-1\n1,-1,3,3,4,4\n", Kind::Detections)
            .unwrap();
        let mut dets = Vec::new();
        f.detections(1, &mut dets);
        assert_eq!(dets.iter().map(|d| d.score).collect::<Vec<_>>(), [0.25, 1.0, 1.0]);
        assert_eq!(dets[2].corners(), [3.0, 3.0, 7.0, 7.0]);
    }

    #[test]
    fn bad_lines_are_named_with_what_they_should_hold() {
        let e = |text: &str, kind| parse_str(text, kind).unwrap_err().to_string();
        assert_eq!(
            e("1,1,0,0,5\n", Kind::Truth),
            "truth file seq/gt.txt, line 1: 5 fields, need at least 6: frame,id,left,top,width,height[,conf,...]"
        );
        assert!(
            e("1,1,0,0,5,5\n0,1,0,0,5,5\n", Kind::Truth).contains("line 2: frame 0 is not a frame number")
        );
        assert!(e("1,1,x,0,5,5\n", Kind::Truth).contains("field 3 (bb_left) is 'x', not a number"));
        assert!(e("1,1,0,0,5,-5\n", Kind::Truth).contains("width and height must be above 0"));
        assert!(e("1,1,0,0,5,5\n1,1,2,2,5,5\n", Kind::Truth).contains("line 2: object 1 is in frame 1 twice"));
        assert!(e("1,-2,0,0,5,5\n", Kind::Truth).contains("id -2 is not an object's number"));
        assert!(e("1,-1,0,0,5,5,1.7\n", Kind::Detections).contains("score 1.7 is not from 0 to 1"));
        assert!(e("# nothing\n", Kind::Detections).starts_with("detections file seq/gt.txt: no boxes in it"));
        let missing = read(Path::new("/nonexistent/det.txt"), Kind::Detections).unwrap_err().to_string();
        assert!(missing.starts_with("detections file /nonexistent/det.txt: "), "{missing}");
    }

    #[test]
    fn written_tracks_read_back_as_the_same_boxes() {
        let mut w = Writer::new(Vec::new());
        w.row(3, 12, [113.84, 274.5, 171.147, 404.55]).unwrap();
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        assert!(text.starts_with("3,12,113.84,274.5,"), "{text}");
        let back = parse_str(&text, Kind::Truth).unwrap();
        let r = back.rows[0];
        assert_eq!((r.frame, r.id), (3, 12));
        for (a, b) in r.corners().iter().zip([113.84, 274.5, 171.147, 404.55]) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }

    #[test]
    fn seqinfo_gives_size_and_rate() {
        let s = SeqInfo::parse(
            "[Sequence]\nname=MOT17-02\nframeRate=30\nseqLength=600\nimWidth=1920\nimHeight=1080\n",
        );
        assert_eq!(s, SeqInfo { size: Some((1920, 1080)), fps: Some(30.0) });
        assert_eq!(SeqInfo::parse("imWidth=640\n"), SeqInfo::default());
    }
}
