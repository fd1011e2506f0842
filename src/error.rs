//! The crate-wide error: every stage's error, each already worded for the user.

use std::path::PathBuf;

use crate::config::ConfigError;
use crate::engine::EngineError;
use crate::output::metrics::MetricsError;
use crate::output::socket::SocketError;
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
    /// A model or engine problem.
    #[error("model error: {0}")]
    Engine(#[from] EngineError),
    /// A frame that could not be preprocessed.
    #[error("preprocess error: {0}")]
    Preprocess(#[from] PreprocessError),
    /// A model whose output or class names do not fit a YOLO detector.
    #[error("model error: {0}")]
    Model(String),
    /// A class names file that cannot be used.
    #[error("model error: {0}")]
    Names(#[from] crate::yolo::names::NamesError),
    /// The clock profile could not be applied (`[power] on_failure = "exit"`), or put back.
    #[error("[power]: {0}")]
    Power(#[from] PowerError),
    /// The detections socket could not be set up.
    #[error("[output] socket: {0}")]
    Socket(#[from] SocketError),
    /// The metrics endpoint could not be set up.
    #[error("{0}")]
    Metrics(#[from] MetricsError),
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
    /// Anything else, with its context.
    #[error("{0}")]
    Other(String),
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
    }
}
