//! What happens when a pipeline thread panics: the others are told to stop, and the panic's
//! message is kept for the exit status.

use std::sync::Arc;

use super::slot::LatestSlots;
use crate::frame::Frame;
use crate::shutdown::Shutdown;

/// Held by each pipeline thread: if the thread panics, the others are told to stop
/// (the slot closes, a shutdown is requested), so the daemon exits instead of hanging
/// with one stage gone. The panic hook has already put the clocks back.
pub(super) struct PanicGuard {
    pub(super) stage: String,
    pub(super) slot: Arc<LatestSlots<Frame>>,
    pub(super) shutdown: Shutdown,
}

impl Drop for PanicGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            log::error!("the {} thread panicked: stopping the pipeline", self.stage);
            self.shutdown.request();
            self.slot.close_all();
        }
    }
}

/// The message of a thread's panic.
pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}
