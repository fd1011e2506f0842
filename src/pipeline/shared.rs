//! The counters the pipeline's threads share: per camera (captured, processed, errors, the
//! source's health) and inference's heartbeat.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::clock::mono_ns;
use crate::report::SourceState;

/// One camera's counters, shared by its capture thread, inference and the publisher.
#[derive(Default)]
pub(super) struct CameraShared {
    pub(super) captured: AtomicU64,
    pub(super) processed: AtomicU64,
    pub(super) errors: AtomicU64,
    pub(super) source_ended: AtomicBool,
    /// Set while the source is unavailable (camera gone, silent, busy): why.
    pub(super) source_fault: Mutex<Option<String>>,
    /// Times the source became unavailable.
    pub(super) source_faults: AtomicU64,
}

impl CameraShared {
    pub(super) fn source_state(&self) -> SourceState {
        let fault = self.source_fault.lock().map(|f| f.clone()).unwrap_or(None);
        SourceState {
            state: if fault.is_some() { "unavailable" } else { "streaming" },
            error: fault,
            faults: self.source_faults.load(Ordering::Relaxed),
        }
    }
}

/// Counters shared by the threads.
pub(super) struct Shared {
    /// `CLOCK_MONOTONIC` ns of inference's last sign of life.
    pub(super) heartbeat: AtomicU64,
    /// Per camera, in config order (the slots' lanes).
    pub(super) cameras: Vec<CameraShared>,
}

impl Shared {
    pub(super) fn new(cameras: usize) -> Shared {
        Shared {
            heartbeat: AtomicU64::new(mono_ns(Instant::now())),
            cameras: (0..cameras).map(|_| CameraShared::default()).collect(),
        }
    }

    pub(super) fn sum(&self, f: impl Fn(&CameraShared) -> &AtomicU64) -> u64 {
        self.cameras.iter().map(|c| f(c).load(Ordering::Relaxed)).sum()
    }
}
