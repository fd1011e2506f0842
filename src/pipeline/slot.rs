//! The one-slot "newest frame wins" handoff between capture and inference.
//!
//! Capture [`put`](LatestSlot::put)s every frame; if inference has not taken
//! the previous one yet, that older frame is displaced (counted as dropped)
//! and handed back to the producer to reuse its buffer. Inference
//! [`take`](LatestSlot::take)s the newest frame and later
//! [`recycle`](LatestSlot::recycle)s it. Frames are never queued, so a slow
//! consumer always sees the freshest picture, and buffers circulate: nothing
//! is allocated in steady state.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

struct State<T> {
    value: Option<T>,
    spare: Vec<T>,
    closed: bool,
    dropped: u64,
}

/// What [`LatestSlot::take`] found.
#[derive(Debug)]
pub enum Taken<T> {
    /// The newest item.
    Item(T),
    /// Nothing arrived within the timeout.
    Timeout,
    /// The producer closed the slot and it is empty.
    Closed,
}

/// A single-item mailbox where a new item replaces an unread one.
pub struct LatestSlot<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

impl<T> Default for LatestSlot<T> {
    fn default() -> Self {
        LatestSlot::new()
    }
}

impl<T> LatestSlot<T> {
    /// An empty, open slot.
    pub fn new() -> LatestSlot<T> {
        LatestSlot {
            state: Mutex::new(State { value: None, spare: Vec::new(), closed: false, dropped: 0 }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic elsewhere must not take the pipeline down with a poisoned lock.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes `item`. Returns the item it displaced (unread, now dropped) or
    /// a recycled spare, for the producer to fill next; `None` when neither exists.
    pub fn put(&self, item: T) -> Option<T> {
        let mut s = self.lock();
        let displaced = s.value.replace(item);
        if displaced.is_some() {
            s.dropped += 1;
        }
        let next = displaced.or_else(|| s.spare.pop());
        drop(s);
        self.ready.notify_one();
        next
    }

    /// Waits up to `timeout` for an item and takes it.
    pub fn take(&self, timeout: Duration) -> Taken<T> {
        let mut s = self.lock();
        if s.value.is_none() && !s.closed {
            s = self
                .ready
                .wait_timeout_while(s, timeout, |s| s.value.is_none() && !s.closed)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        match s.value.take() {
            Some(v) => Taken::Item(v),
            None if s.closed => Taken::Closed,
            None => Taken::Timeout,
        }
    }

    /// Returns a consumed item so the producer can reuse it.
    pub fn recycle(&self, item: T) {
        let mut s = self.lock();
        if s.spare.len() < 4 {
            s.spare.push(item);
        }
    }

    /// Takes a spare item, if one was recycled.
    pub fn spare(&self) -> Option<T> {
        self.lock().spare.pop()
    }

    /// Marks the end of the stream; a waiting consumer wakes up.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Items displaced before they were taken.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn newest_wins_and_displaced_items_come_back() {
        let slot = LatestSlot::new();
        assert!(slot.put(1).is_none());
        assert_eq!(slot.put(2), Some(1), "the unread item is handed back");
        assert_eq!(slot.put(3), Some(2));
        assert_eq!(slot.dropped(), 2);
        assert!(matches!(slot.take(Duration::ZERO), Taken::Item(3)));
        assert!(matches!(slot.take(Duration::from_millis(1)), Taken::Timeout));
        slot.recycle(3);
        assert_eq!(slot.put(4), Some(3), "a recycled spare is handed back");
        slot.close();
        assert!(matches!(slot.take(Duration::ZERO), Taken::Item(4)), "items left at close are still taken");
        assert!(matches!(slot.take(Duration::from_secs(5)), Taken::Closed));
    }

    #[test]
    fn a_waiting_consumer_wakes_on_put_and_on_close() {
        let slot = Arc::new(LatestSlot::new());
        let s = slot.clone();
        let t = std::thread::spawn(move || matches!(s.take(Duration::from_secs(10)), Taken::Item(7)));
        std::thread::sleep(Duration::from_millis(20));
        slot.put(7);
        assert!(t.join().unwrap());
        let s = slot.clone();
        let t = std::thread::spawn(move || matches!(s.take(Duration::from_secs(10)), Taken::Closed));
        std::thread::sleep(Duration::from_millis(20));
        slot.close();
        assert!(t.join().unwrap());
    }
}
