//! One shutdown value, handed down from whoever may stop the daemon (a signal, a frame count, a
//! stage that panicked) to every thread that must notice, as mini-redis hands down its
//! `Shutdown`: a stop is asked for once, and every holder sees it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Whether a stop was asked for; clones share it.
#[derive(Clone, Debug, Default)]
pub struct Shutdown(Arc<AtomicBool>);

impl Shutdown {
    /// Not asked for yet.
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Asks every holder to stop; true when this is the first request (the one to log).
    pub fn request(&self) -> bool {
        !self.0.swap(true, Ordering::Relaxed)
    }

    /// Whether a stop was asked for.
    pub fn is_requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_clone_sees_the_one_request_and_only_the_first_counts() {
        let a = Shutdown::new();
        let b = a.clone();
        assert!(!b.is_requested());
        assert!(a.request());
        assert!(b.is_requested());
        assert!(!b.request(), "a second request is not the first");
    }
}
