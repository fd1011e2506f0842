//! What exporters write into an ONNX model's `metadata_props`, read once at load.
//!
//! ultralytics writes every value as Python's `str()` of it (`exporter.py`, "Metadata"): `task`
//! (`detect`, `segment`, `pose`, ...), `head` (the head's class: `Detect`, `v10Detect`,
//! `RTDETRDecoder`, ...), `end2end` (`True` where the NMS-free head is exported), `names`
//! (`{0: 'person', ...}`), `imgsz` (`[640, 640]`), `batch`, `stride` and `args` (the export
//! arguments: `{'batch': 1, 'dynamic': False, 'nms': True, ...}`). ultralytics' own
//! `AutoBackend` decodes an export as end-to-end when `end2end` or `args['nms']` is true
//! (`nn/backends/base.py`, `apply_metadata`); so does jetdetect. The YOLOv5 repository writes
//! only `stride` and `names`. Nothing here is required: a key that is missing or unreadable is
//! `None`, and the layout is then read from the output shape.

use std::collections::BTreeMap;

use super::ClassNames;

/// The metadata keys jetdetect reads, typed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    /// `task`: what the model predicts (`detect` for every model jetdetect runs).
    pub task: Option<String>,
    /// `head`: the class of the model's head (`Detect`, `v10Detect`, `RTDETRDecoder`, ...).
    pub head: Option<String>,
    /// `end2end`: the NMS-free (one-to-one) head was exported.
    pub end2end: Option<bool>,
    /// `args['nms']`: NMS was exported inside the graph.
    pub nms: Option<bool>,
    /// `args['dynamic']`: the export has symbolic dimensions.
    pub dynamic: Option<bool>,
    /// `names`: the class names, in class-id order.
    pub names: Option<ClassNames>,
    /// `imgsz`: the input size it was exported at, `(height, width)`.
    pub imgsz: Option<(u32, u32)>,
    /// `batch`: the batch size it was exported with.
    pub batch: Option<usize>,
    /// `stride`: the largest stride of the head.
    pub stride: Option<u32>,
    /// `version` of the exporter (ultralytics' release).
    pub version: Option<String>,
    /// `description`: ultralytics writes `Ultralytics <model yaml's name> model trained on ...`.
    pub description: Option<String>,
}

impl Metadata {
    /// Reads the keys above from an engine's `metadata_props`.
    pub fn read(props: &BTreeMap<String, String>) -> Metadata {
        let get = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let args = get("args").unwrap_or("");
        Metadata {
            task: get("task").map(String::from),
            head: get("head").map(String::from),
            end2end: get("end2end").and_then(python_bool),
            nms: dict_value(args, "nms").and_then(python_bool),
            dynamic: dict_value(args, "dynamic").and_then(python_bool),
            names: get("names").and_then(ClassNames::from_metadata),
            imgsz: get("imgsz").and_then(imgsz),
            batch: get("batch").and_then(|v| v.parse().ok()),
            stride: get("stride").and_then(|v| v.parse().ok()),
            version: get("version").map(String::from),
            description: get("description").map(String::from),
        }
    }

    /// Whether the model decodes as end-to-end by its metadata, as ultralytics' `AutoBackend`
    /// decides it: `Some(true)` when `end2end` or `args['nms']` is true, `Some(false)` when
    /// `end2end` is written and false (and NMS is not inside), `None` when neither is written.
    pub fn end_to_end(&self) -> Option<bool> {
        match (self.end2end, self.nms) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), _) => Some(false),
            (None, _) => None,
        }
    }

    /// Whether the metadata says this is an RT-DETR model: `head = RTDETRDecoder` (ultralytics
    /// 8.4 and later), or, where no `head` is written (before 8.4), a description naming an
    /// RT-DETR model definition (`Ultralytics rtdetr-l model ...`, from the yaml's name).
    pub fn rt_detr(&self) -> bool {
        match (&self.head, &self.description) {
            (Some(head), _) => head == "RTDETRDecoder",
            (None, Some(d)) => {
                let d = d.to_ascii_lowercase();
                d.contains("rtdetr") || d.contains("rt-detr")
            }
            (None, None) => false,
        }
    }
}

/// Python's `True` / `False`.
fn python_bool(v: &str) -> Option<bool> {
    match v.trim() {
        "True" | "true" => Some(true),
        "False" | "false" => Some(false),
        _ => None,
    }
}

/// The text of `key`'s value in a flat Python dict literal (`{'nms': True, 'opset': 17}`): up to
/// the next comma or the closing brace. Nested values are not read.
fn dict_value<'a>(dict: &'a str, key: &str) -> Option<&'a str> {
    let body = dict.trim().strip_prefix('{')?.strip_suffix('}')?;
    body.split(',').find_map(|item| {
        let (k, v) = item.split_once(':')?;
        (k.trim().trim_matches(|c| c == '\'' || c == '"') == key).then(|| v.trim())
    })
}

/// `[640, 640]` (height, width) or `640`.
fn imgsz(v: &str) -> Option<(u32, u32)> {
    let v = v.trim();
    match v.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        Some(list) => {
            let mut it = list.split(',').map(|d| d.trim().parse::<u32>());
            match (it.next(), it.next(), it.next()) {
                (Some(Ok(h)), Some(Ok(w)), None) => Some((h, w)),
                (Some(Ok(s)), None, None) => Some((s, s)),
                _ => None,
            }
        }
        None => v.parse().ok().map(|s| (s, s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn reads_what_ultralytics_writes() {
        // As ultralytics 8.4 writes an nms=True export (str() of each value).
        let m = Metadata::read(&props(&[
            ("task", "detect"),
            ("head", "Detect"),
            ("end2end", "False"),
            ("names", "{0: 'box', 1: 'ball'}"),
            ("imgsz", "[160, 320]"),
            ("batch", "1"),
            ("stride", "32"),
            ("args", "{'batch': 1, 'dynamic': False, 'half': False, 'nms': True, 'conf': 0.25}"),
        ]));
        assert_eq!(m.task.as_deref(), Some("detect"));
        assert_eq!((m.end2end, m.nms, m.dynamic), (Some(false), Some(true), Some(false)));
        assert_eq!(m.end_to_end(), Some(true), "args['nms'] makes it end-to-end, as AutoBackend reads it");
        assert_eq!((m.imgsz, m.batch, m.stride), (Some((160, 320)), Some(1), Some(32)));
        assert_eq!(m.names.as_ref().map(|n| n.len()), Some(2));
        assert!(!m.rt_detr());
    }

    #[test]
    fn missing_or_unreadable_keys_are_none() {
        // The YOLOv5 repository's export: stride and names only.
        let m = Metadata::read(&props(&[("stride", "32"), ("names", "{0: 'a'}"), ("end2end", "maybe")]));
        assert_eq!((m.task.as_deref(), m.end2end, m.nms, m.end_to_end()), (None, None, None, None));
        assert_eq!(Metadata::read(&props(&[("end2end", "True")])).end_to_end(), Some(true));
        assert_eq!(Metadata::read(&props(&[("end2end", "False")])).end_to_end(), Some(false));
        assert_eq!(imgsz("640"), Some((640, 640)));
        assert_eq!(imgsz("[1, 2, 3]"), None);
        assert_eq!(dict_value("{'nms': None}", "nms").and_then(python_bool), None);
        assert!(Metadata::read(&props(&[("head", "RTDETRDecoder")])).rt_detr());
        // Before 8.4 no head was written; the description names the model's yaml.
        let old = |d: &str| Metadata::read(&props(&[("description", d)])).rt_detr();
        assert!(old("Ultralytics rtdetr-l model trained on coco.yaml"));
        assert!(!old("Ultralytics YOLOv8n model trained on coco.yaml"));
        assert!(!Metadata::read(&props(&[("head", "Detect"), ("description", "rtdetr-l")])).rt_detr());
    }
}
