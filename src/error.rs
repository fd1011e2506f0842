//! The crate-wide error: every stage's error, each already worded for the user.

use std::path::PathBuf;

use crate::config::error::ConfigError;
use crate::engine::EngineError;
use crate::power::PowerError;
use crate::preprocess::PreprocessError;
use crate::source::SourceError;

/// Any error jetdetect reports. Each message names the file, key or device and
/// says what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration problem.
    #[error("config error: {0}")]
    Config(#[from] ConfigError),
    /// A frame source problem.
    #[error("source error: {0}")]
    Source(#[from] SourceError),
    /// A problem with one of several cameras (`[[source]]`), named.
    #[error("source error: camera '{camera}': {source}")]
    Camera {
        /// The camera's `name`.
        camera: String,
        /// What went wrong (boxed: it is the rare case, and `Error` stays small).
        source: Box<SourceError>,
    },
    /// `[hazards.classes]` names a class the model does not have.
    #[error("config error: {0}")]
    Hazards(#[from] crate::hazard::UnknownClass),
    /// `probe-camera` found no camera to list.
    #[error("{0}")]
    Probe(#[from] crate::source::v4l2::ProbeError),
    /// A model or engine problem.
    #[error("model error: {0}")]
    Engine(#[from] EngineError),
    /// A frame that could not be preprocessed.
    #[error("preprocess error: {0}")]
    Preprocess(#[from] PreprocessError),
    /// A model whose output is not a YOLO detection output.
    #[error("model error: {model}: {source}")]
    Layout {
        /// The model, as the engine describes it.
        model: String,
        /// What its output shape is not.
        source: crate::yolo::LayoutError,
    },
    /// A class names file whose length is not the model's class count.
    #[error(
        "model error: {names} lists {listed} class names but the model ({model}, {layout}) predicts {predicts} classes: \
         use the names file that belongs to this model"
    )]
    ClassCount {
        /// Where the names came from.
        names: String,
        /// How many it lists.
        listed: usize,
        /// The model, as the engine describes it.
        model: String,
        /// Its layout.
        layout: crate::yolo::Layout,
        /// How many classes the layout has.
        predicts: usize,
    },
    /// No preprocessing graph for the camera's frames on the accelerator.
    #[error("model error: {0}")]
    Graph(#[from] crate::preprocess::graph::GraphError),
    /// A class names file that cannot be used.
    #[error("model error: {0}")]
    Names(#[from] crate::yolo::names::NamesError),
    /// The clock profile could not be applied (`[power] on_failure = "exit"`), or put back.
    #[error("{}", in_section("[power]", .0))]
    Power(#[from] PowerError),
    /// An output (the socket, the HTTP server, ROS 2, MQTT, MAVLink) could not be set up; the
    /// message names its section. Boxed: the outputs' own error type is theirs (`output/`),
    /// and this one names none of them.
    #[error("{0}")]
    Output(Box<dyn std::error::Error + Send + Sync>),
    /// `jetdetect clocks` could not read, write or restore a clock.
    #[error("{0}")]
    Clocks(#[source] PowerError),
    /// A pipeline thread panicked; the clocks were restored before this was returned.
    #[error(
        "{message}; clocks were restored; exiting with an error so that the service manager restarts jetdetect"
    )]
    Panicked {
        /// Which thread, and its panic message.
        message: String,
    },
    /// `jetdetect eval` on a source without ground truth.
    #[error("{uri}: the source has no ground truth to score against")]
    NoGroundTruth {
        /// The source.
        uri: String,
    },
    /// `jetdetect eval --tracks`: a MOTChallenge file that cannot be read.
    #[error(transparent)]
    Mot(#[from] crate::eval::mot::MotError),
    /// `jetdetect eval --hazards` on a source whose truth has no object closing in.
    #[error(
        "{uri}: no object of the source's ground truth closes in, so there is no time to contact to score: \
         use a source with approach=N (e.g. synthetic://?fps=0&approach=3&leave=1)"
    )]
    NothingClosingIn {
        /// The source.
        uri: String,
    },
    /// The daemon's socket did not answer (`jetdetect watch`).
    #[error(
        "{}: cannot connect: {source} (is the daemon running? `systemctl status jetdetect`, or give --socket / --config)",
        path.display()
    )]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A system call failed: `context` says what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. `cannot start the capture thread`.
        context: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A command's request that cannot be carried out, found by jetdetect's own checks (no
    /// model given, a source that delivered no frames, an option out of range); nothing failed
    /// underneath, so there is no source to keep.
    #[error("{0}")]
    Command(String),
}

/// `message` under `section` (`[power]: ...`), unless it already names it.
fn in_section(section: &str, message: &impl std::fmt::Display) -> String {
    let m = message.to_string();
    match m.starts_with(section) {
        true => m,
        false => format!("{section}: {m}"),
    }
}

impl Error {
    /// An [`Error::Io`] for `source`, while doing `context`.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }
}

/// Shorthand for results with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;
    use std::io::ErrorKind;

    #[test]
    fn errors_keep_their_sources_and_their_words() {
        let missing = std::path::Path::new("/nonexistent-jd/detections.sock");
        let e =
            crate::client::watch(missing, crate::client::Format::Json, Some(1), &mut Vec::new()).unwrap_err();
        let io = e.source().and_then(|s| s.downcast_ref::<std::io::Error>()).expect("the io::Error is kept");
        assert_eq!(io.kind(), ErrorKind::NotFound);
        let m = e.to_string();
        assert!(m.starts_with("/nonexistent-jd/detections.sock: cannot connect: "), "{m}");
        assert!(
            m.ends_with("(is the daemon running? `systemctl status jetdetect`, or give --socket / --config)"),
            "{m}"
        );
        let e = Error::io("cannot start the capture thread", std::io::Error::from(ErrorKind::OutOfMemory));
        assert!(e.to_string().starts_with("cannot start the capture thread: "), "{e}");
        assert!(e.source().is_some());
        let e = Error::from(PowerError("a clock file refused".into()));
        assert_eq!(e.to_string(), "[power]: a clock file refused");

        // A model that cannot be read keeps the io::Error; one that is not ONNX keeps tract's.
        let options = crate::engine::EngineOptions::default();
        let missing = std::path::Path::new("/nonexistent-jd/model.onnx");
        let e = Error::from(crate::engine::tract::TractEngine::load(missing, &options).err().unwrap());
        let m = e.to_string();
        assert!(m.starts_with("model error: /nonexistent-jd/model.onnx: cannot read the model: "), "{m}");
        let io = e.source().and_then(|s| s.source()).and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(io.map(|e| e.kind()), Some(ErrorKind::NotFound), "{e:?}");
        let junk = std::env::temp_dir().join(format!("jd-error-{}.onnx", std::process::id()));
        std::fs::write(&junk, b"not a model").unwrap();
        let e = crate::engine::tract::TractEngine::load(&junk, &options).err().unwrap();
        std::fs::remove_file(&junk).unwrap();
        assert!(matches!(e, crate::engine::EngineError::Tract { .. }), "{e:?}");
        assert!(e.to_string().contains("not a valid ONNX model"), "{e}");
        assert!(e.source().is_some());

        // Words that name nothing are typed, and read as before.
        let e = "tensorrtt".parse::<crate::engine::Provider>().unwrap_err();
        assert_eq!(e.word, "tensorrtt");
        assert_eq!(
            e.to_string(),
            "[engine] providers: 'tensorrtt' is not a provider: use tensorrt, cuda, cpu"
        );
        let e = crate::source::SourceUri::parse("synthetic://?width=%zz").unwrap_err();
        assert!(e.source().is_some(), "the escape error is kept");
        assert_eq!(e.to_string(), "'synthetic://?width=%zz': bad percent escape at byte 0 in '%zz'");
    }
}
