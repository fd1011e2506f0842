//! A model's detections recorded by one `jetdetect eval --hazards` run and read back by the
//! next (`--save-detections FILE`, `--detections FILE`), so that the hazard layer can be tuned
//! on one model's boxes without running the model again: the model is most of a 10-minute
//! evaluation's 2.5 minutes on 2 cores, the synthetic source, the tracker and the scoring a
//! fraction of it.
//!
//! The file is JSON lines: a header naming the source and the model, then one line per frame,
//! `{"seq":N,"boxes":[[class,score,x1,y1,x2,y2],...]}`. Read back, the header must name the
//! source being scored and the config's model, and the frames must come in the source's order:
//! a file made from another scene or model is refused with what it was made from.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::yolo::Detection;
use crate::Error;

/// Where [`super::score_hazards`] takes each frame's detections from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Boxes {
    /// The model, run on every frame.
    #[default]
    Model,
    /// The model, with its detections also written to this file.
    Save(PathBuf),
    /// This file, written by an earlier [`Boxes::Save`] run on the same source and model.
    Replay(PathBuf),
}

/// The first line of a detections file.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    /// The file format's version.
    jetdetect_detections: u32,
    /// The source URI the detections were made on.
    source: String,
    /// The model file that made them.
    model: String,
}

/// One frame's line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrameLine {
    seq: u64,
    /// `[class, score, x1, y1, x2, y2]` per detection.
    boxes: Vec<(usize, f32, f32, f32, f32, f32)>,
}

const VERSION: u32 = 1;

/// Writes a detections file as the frames go by.
pub struct Writer {
    path: PathBuf,
    out: BufWriter<File>,
    line: FrameLine,
}

impl Writer {
    /// Creates `path` for detections made by `model` on `source`.
    pub fn create(path: &Path, source: &str, model: &Path) -> Result<Writer, Error> {
        let file =
            File::create(path).map_err(|e| Error::io(format!("{}: cannot create", path.display()), e))?;
        let mut w = Writer {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            line: FrameLine { seq: 0, boxes: Vec::new() },
        };
        let header = Header {
            jetdetect_detections: VERSION,
            source: source.to_string(),
            model: model.display().to_string(),
        };
        write_line(&mut w.out, &header).map_err(|e| w.failed(e))?;
        Ok(w)
    }

    /// Appends frame `seq`'s detections.
    pub fn frame(&mut self, seq: u64, detections: &[Detection]) -> Result<(), Error> {
        self.line.seq = seq;
        self.line.boxes.clear();
        self.line.boxes.extend(detections.iter().map(|d| (d.class_id, d.score, d.x1, d.y1, d.x2, d.y2)));
        write_line(&mut self.out, &self.line).map_err(|e| self.failed(e))
    }

    /// Flushes the file.
    pub fn finish(mut self) -> Result<(), Error> {
        self.out.flush().map_err(|e| self.failed(e))
    }

    fn failed(&self, e: std::io::Error) -> Error {
        Error::io(format!("{}: cannot write", self.path.display()), e)
    }
}

/// `value` as one line of JSON.
fn write_line(out: &mut impl Write, value: &impl Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}

/// Reads a detections file back, frame by frame.
pub struct Reader {
    path: PathBuf,
    lines: std::io::Lines<BufReader<File>>,
    line_no: usize,
    detections: Vec<Detection>,
}

impl Reader {
    /// Opens `path` and checks that it was made on `source` by `model`.
    pub fn open(path: &Path, source: &str, model: &Path) -> Result<Reader, Error> {
        let file = File::open(path).map_err(|e| Error::io(format!("{}: cannot open", path.display()), e))?;
        let mut r = Reader {
            path: path.to_path_buf(),
            lines: BufReader::new(file).lines(),
            line_no: 0,
            detections: Vec::new(),
        };
        let header: Header = r.next_json()?.ok_or_else(|| r.bad("the file is empty"))?;
        if header.jetdetect_detections != VERSION {
            return Err(r.bad(&format!(
                "format version {}, this jetdetect reads {VERSION}: record it again with --save-detections",
                header.jetdetect_detections
            )));
        }
        if header.source != source {
            return Err(r.bad(&format!(
                "recorded on --source '{}', not on '{source}': give that source, or record this one with --save-detections",
                header.source
            )));
        }
        // The same file, however the configs name it.
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        if canonical(Path::new(&header.model)) != canonical(model) {
            let model = model.display();
            return Err(r.bad(&format!(
                "recorded with the model {}, not {model}: give a config for that model, or record this one with --save-detections",
                header.model
            )));
        }
        Ok(r)
    }

    /// Frame `seq`'s detections: the file's next frame, which must be `seq`.
    pub fn frame(&mut self, seq: u64) -> Result<&[Detection], Error> {
        let line: FrameLine = self.next_json()?.ok_or_else(|| {
            self.bad(&format!("ends before frame {seq}: record at least as many --frames as are scored"))
        })?;
        if line.seq != seq {
            return Err(self.bad(&format!("holds frame {}, where the source is at frame {seq}", line.seq)));
        }
        self.detections.clear();
        self.detections.extend(line.boxes.iter().map(|&(class_id, score, x1, y1, x2, y2)| Detection {
            class_id,
            score,
            x1,
            y1,
            x2,
            y2,
        }));
        Ok(&self.detections)
    }

    fn next_json<T: for<'de> Deserialize<'de>>(&mut self) -> Result<Option<T>, Error> {
        let Some(line) = self.lines.next() else { return Ok(None) };
        self.line_no += 1;
        let line = line.map_err(|e| Error::io(format!("{}: cannot read", self.path.display()), e))?;
        serde_json::from_str(&line).map(Some).map_err(|e| self.bad(&format!("not a detections line: {e}")))
    }

    fn bad(&self, what: &str) -> Error {
        Error::Command(format!("{}:{}: {what}", self.path.display(), self.line_no))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(class_id: usize, x: f32) -> Detection {
        Detection { class_id, score: 0.75, x1: x, y1: 2.5, x2: x + 10.0, y2: 30.0 }
    }

    #[test]
    fn detections_come_back_as_written_and_a_file_from_elsewhere_is_refused() {
        let dir = std::env::temp_dir().join(format!("jd-recorded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dets.jsonl");
        let model = Path::new("models/obstacles-v8.onnx");
        let frames = [vec![det(0, 1.0), det(2, 50.25)], vec![], vec![det(1, 7.0)]];
        let mut w = Writer::create(&path, "synthetic://?seed=1", model).unwrap();
        for (seq, f) in frames.iter().enumerate() {
            w.frame(seq as u64, f).unwrap();
        }
        w.finish().unwrap();

        let mut r = Reader::open(&path, "synthetic://?seed=1", model).unwrap();
        for (seq, f) in frames.iter().enumerate() {
            assert_eq!(r.frame(seq as u64).unwrap(), &f[..]);
        }
        let e = r.frame(3).unwrap_err().to_string();
        assert!(
            e.ends_with("dets.jsonl:4: ends before frame 3: record at least as many --frames as are scored"),
            "{e}"
        );

        let e = Reader::open(&path, "synthetic://?seed=2", model).err().unwrap().to_string();
        assert!(
            e.contains(
                "dets.jsonl:1: recorded on --source 'synthetic://?seed=1', not on 'synthetic://?seed=2'"
            ),
            "{e}"
        );
        let e =
            Reader::open(&path, "synthetic://?seed=1", Path::new("other.onnx")).err().unwrap().to_string();
        assert!(e.contains("recorded with the model models/obstacles-v8.onnx, not other.onnx"), "{e}");
        let mut r = Reader::open(&path, "synthetic://?seed=1", model).unwrap();
        let e = r.frame(1).unwrap_err().to_string();
        assert!(e.ends_with("dets.jsonl:2: holds frame 0, where the source is at frame 1"), "{e}");

        std::fs::write(&path, "{\"seq\": 0}\n").unwrap();
        let e = Reader::open(&path, "synthetic://?seed=1", model).err().unwrap().to_string();
        assert!(e.contains("dets.jsonl:1: not a detections line: "), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
