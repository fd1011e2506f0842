//! jetdetect: YOLO obstacle detection with low, steady latency for NVIDIA Jetson.
//!
//! Data flows one way, each stage in its own module:
//!
//! ```text
//! source (frame) -> preprocess (letterboxed tensor) -> engine (raw output) -> yolo (detections)
//!     -> hazard (tracks, time to contact, zones) -> pipeline::publish -> output (socket, metrics, ...)
//! ```
//!
//! with [`config`] on the side. [`detector::Detector`] chains preprocess, engine
//! and decoding for one frame; the binary's commands are thin layers over it.
//! `docs/ARCHITECTURE.md` maps the modules.

#![warn(missing_docs)]

#[macro_use]
mod named;

pub mod client;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod detector;
pub mod engine;
pub mod error;
pub mod eval;
#[cfg(debug_assertions)]
pub mod fault;
pub mod fleet;
#[cfg(not(debug_assertions))]
mod fault {
    //! In release builds (every build that ships: the packages, the static and JetPack
    //! binaries) the injection points compile to nothing and `JETDETECT_FAULT` is never read.

    /// No fault: the stage runs.
    #[inline(always)]
    pub fn stage(_stage: &str, _frame: u64) {}

    /// No fault: the write goes to the file.
    #[inline(always)]
    pub fn sysfs_write(_path: &std::path::Path) -> Option<std::io::Error> {
        None
    }
}
pub mod frame;
pub mod geometry;
pub mod hazard;
pub mod output;
pub mod overlay;
pub mod pipeline;
pub mod power;
pub mod preprocess;
pub mod report;
pub mod shutdown;
pub mod source;
pub mod stats;
pub mod yolo;

pub use error::{Error, Result};
pub use named::UnknownName;
