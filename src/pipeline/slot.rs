//! The "newest frame wins" handoff between the cameras' capture threads and inference.
//!
//! Each camera has a lane holding at most one item. Capture [`put`](LatestSlots::put)s every
//! frame into its lane; if inference has not taken the previous one yet, that older frame is
//! displaced (counted as dropped, per lane) and handed back to the producer to reuse its
//! buffer. Inference [`take_next`](LatestSlots::take_next)s the newest frame of the next lane
//! that has one, round-robin, so a fast camera cannot starve a slow one, and later
//! [`recycle`](LatestSlots::recycle)s it to its lane. Frames are never queued, so a slow
//! consumer always sees each camera's freshest picture, and buffers circulate: nothing is
//! allocated in steady state. One lock and one condition variable serve all lanes: inference
//! sleeps until any camera has a frame.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Spare items a lane keeps for its producer.
const SPARES: usize = 4;

struct Lane<T> {
    value: Option<T>,
    spare: Vec<T>,
    closed: bool,
    dropped: u64,
}

struct State<T> {
    lanes: Vec<Lane<T>>,
}

impl<T> State<T> {
    /// The first lane after `after` (wrapping) that holds an item.
    fn next_ready(&self, after: usize) -> Option<usize> {
        let n = self.lanes.len();
        (1..=n).map(|k| (after + k) % n).find(|&i| self.lanes[i].value.is_some())
    }

    fn all_closed(&self) -> bool {
        self.lanes.iter().all(|l| l.closed)
    }
}

/// What [`LatestSlots::take_next`] found.
#[derive(Debug)]
pub enum Taken<T> {
    /// The newest item of a lane, with the lane's index.
    Item(usize, T),
    /// Nothing arrived within the timeout.
    Timeout,
    /// Every producer closed its lane and all lanes are empty.
    Closed,
}

/// One single-item mailbox per producer, where a new item replaces an unread one.
pub struct LatestSlots<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

impl<T> LatestSlots<T> {
    /// `lanes` empty, open lanes (at least one).
    pub fn new(lanes: usize) -> LatestSlots<T> {
        let lane = || Lane { value: None, spare: Vec::new(), closed: false, dropped: 0 };
        LatestSlots {
            state: Mutex::new(State { lanes: (0..lanes.max(1)).map(|_| lane()).collect() }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic elsewhere must not take the pipeline down with a poisoned lock.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The number of lanes.
    pub fn lanes(&self) -> usize {
        self.lock().lanes.len()
    }

    /// Publishes `item` in `lane`. Returns the item it displaced (unread, now dropped) or a
    /// recycled spare of that lane, for the producer to fill next; `None` when neither exists.
    pub fn put(&self, lane: usize, item: T) -> Option<T> {
        let mut s = self.lock();
        let l = &mut s.lanes[lane];
        let displaced = l.value.replace(item);
        if displaced.is_some() {
            l.dropped += 1;
        }
        let next = displaced.or_else(|| l.spare.pop());
        drop(s);
        self.ready.notify_one();
        next
    }

    /// Waits up to `timeout` for any lane to hold an item and takes the item of the first such
    /// lane after `after` (round-robin: pass the lane served last).
    pub fn take_next(&self, after: usize, timeout: Duration) -> Taken<T> {
        let mut s = self.lock();
        if s.next_ready(after).is_none() && !s.all_closed() {
            s = self
                .ready
                .wait_timeout_while(s, timeout, |s| s.next_ready(after).is_none() && !s.all_closed())
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        match s.next_ready(after) {
            Some(i) => match s.lanes[i].value.take() {
                Some(v) => Taken::Item(i, v),
                None => Taken::Timeout,
            },
            None if s.all_closed() => Taken::Closed,
            None => Taken::Timeout,
        }
    }

    /// Returns a consumed item to `lane` so its producer can reuse it.
    pub fn recycle(&self, lane: usize, item: T) {
        let mut s = self.lock();
        let l = &mut s.lanes[lane];
        if l.spare.len() < SPARES {
            l.spare.push(item);
        }
    }

    /// Takes a spare item of `lane`, if one was recycled.
    pub fn spare(&self, lane: usize) -> Option<T> {
        self.lock().lanes[lane].spare.pop()
    }

    /// Marks the end of `lane`'s stream; once every lane is closed and empty, a waiting
    /// consumer wakes up to [`Taken::Closed`].
    pub fn close(&self, lane: usize) {
        self.lock().lanes[lane].closed = true;
        self.ready.notify_all();
    }

    /// Closes every lane (a stage panicked: the pipeline stops).
    pub fn close_all(&self) {
        for l in &mut self.lock().lanes {
            l.closed = true;
        }
        self.ready.notify_all();
    }

    /// Items of `lane` displaced before they were taken.
    pub fn dropped(&self, lane: usize) -> u64 {
        self.lock().lanes[lane].dropped
    }

    /// Items displaced before they were taken, all lanes.
    pub fn dropped_total(&self) -> u64 {
        self.lock().lanes.iter().map(|l| l.dropped).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn newest_wins_and_displaced_items_come_back() {
        let slot = LatestSlots::new(1);
        assert!(slot.put(0, 1).is_none());
        assert_eq!(slot.put(0, 2), Some(1), "the unread item is handed back");
        assert_eq!(slot.put(0, 3), Some(2));
        assert_eq!(slot.dropped(0), 2);
        assert!(matches!(slot.take_next(0, Duration::ZERO), Taken::Item(0, 3)));
        assert!(matches!(slot.take_next(0, Duration::from_millis(1)), Taken::Timeout));
        slot.recycle(0, 3);
        assert_eq!(slot.put(0, 4), Some(3), "a recycled spare is handed back");
        slot.close(0);
        assert!(
            matches!(slot.take_next(0, Duration::ZERO), Taken::Item(0, 4)),
            "items left at close are still taken"
        );
        assert!(matches!(slot.take_next(0, Duration::from_secs(5)), Taken::Closed));
    }

    #[test]
    fn a_waiting_consumer_wakes_on_put_and_on_close() {
        let slot = Arc::new(LatestSlots::new(2));
        let s = slot.clone();
        let t =
            std::thread::spawn(move || matches!(s.take_next(0, Duration::from_secs(10)), Taken::Item(1, 7)));
        std::thread::sleep(Duration::from_millis(20));
        slot.put(1, 7);
        assert!(t.join().unwrap());
        let s = slot.clone();
        let t = std::thread::spawn(move || matches!(s.take_next(0, Duration::from_secs(10)), Taken::Closed));
        std::thread::sleep(Duration::from_millis(20));
        slot.close(0);
        std::thread::sleep(Duration::from_millis(20));
        assert!(!t.is_finished(), "one lane still open: the consumer keeps waiting");
        slot.close(1);
        assert!(t.join().unwrap());
    }

    #[test]
    fn lanes_are_served_in_turn_so_a_fast_producer_cannot_starve_a_slow_one() {
        let slot = LatestSlots::new(3);
        let mut served = Vec::new();
        let mut last = 0;
        for round in 0..6 {
            // Lane 0 always has a new frame; lane 2 has one every other round; lane 1 none.
            slot.put(0, round * 10);
            if round % 2 == 0 {
                slot.put(2, round * 10 + 2);
            }
            match slot.take_next(last, Duration::ZERO) {
                Taken::Item(lane, v) => {
                    served.push(v);
                    last = lane;
                }
                other => panic!("round {round}: {other:?}"),
            }
        }
        // Round 0: lane 2 comes after lane 0 (the one served "last" at the start); round 1:
        // lane 0 (lane 2 is empty); round 2: lane 2 again, and so on. Lane 0's unread frames
        // were displaced by newer ones, never queued.
        assert_eq!(served, vec![2, 10, 22, 30, 42, 50]);
        assert_eq!(slot.dropped(0), 3, "lane 0's frames 0, 20 and 40 were displaced while lane 2 was served");
        assert_eq!((slot.dropped(1), slot.dropped(2)), (0, 0));
    }
}
