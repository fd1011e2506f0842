//! The crate-wide error: every stage's error, each already worded for the user.

use crate::config::ConfigError;
use crate::engine::EngineError;
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
    /// Anything else, with its context.
    #[error("{0}")]
    Other(String),
}

/// Shorthand for results with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
