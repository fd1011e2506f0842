//! The config error: the file, the line where known, and the message.

use std::fmt;
use std::path::PathBuf;

/// A configuration problem, located as precisely as the file allows.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// The config file (or `<built-in>`).
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for ConfigError {}
