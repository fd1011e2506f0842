//! The "newest frame wins" handoff between the cameras' capture threads and inference.
//!
//! Each camera has a lane holding at most one item. Capture [`put`](LatestSlots::put)s every
//! frame into its lane; if inference has not taken the previous one yet, that older frame is
//! displaced (counted as dropped, per lane) and handed back to the producer to reuse its
//! buffer. Inference [`take_ready`](LatestSlots::take_ready)s the newest frame of the next
//! lanes that have one (one, or one per camera for a batched run), round-robin, so a fast
//! camera cannot starve a slow one, and later [`recycle`](LatestSlots::recycle)s each to its lane. Frames are never queued, so a slow
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

    /// Waits up to `timeout` for any lane to hold an item, then takes the items of up to `max`
    /// lanes that hold one, in turn from the lane after `after`, into `out` (cleared first):
    /// the newest frame of each ready camera, for one batched run. Nothing waits for a camera
    /// that has no frame yet. Returns how many were taken (0: timeout, or closed: see
    /// [`LatestSlots::closed`]).
    pub fn take_ready(
        &self,
        after: usize,
        max: usize,
        timeout: Duration,
        out: &mut Vec<(usize, T)>,
    ) -> usize {
        out.clear();
        let mut s = self.lock();
        if s.next_ready(after).is_none() && !s.all_closed() {
            s = self
                .ready
                .wait_timeout_while(s, timeout, |s| s.next_ready(after).is_none() && !s.all_closed())
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let n = s.lanes.len();
        for i in (1..=n).map(|k| (after + k) % n) {
            if out.len() == max {
                break;
            }
            if let Some(v) = s.lanes[i].value.take() {
                out.push((i, v));
            }
        }
        out.len()
    }

    /// Every lane is closed and empty: nothing more will come.
    pub fn closed(&self) -> bool {
        let s = self.lock();
        s.all_closed() && s.lanes.iter().all(|l| l.value.is_none())
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
    /// consumer wakes up and [`LatestSlots::closed`] says so.
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

    /// One item, round-robin after `after`, as inference takes them for a model of batch 1.
    fn next<T>(slot: &LatestSlots<T>, after: usize, timeout: Duration) -> Option<(usize, T)> {
        let mut out = Vec::with_capacity(1);
        slot.take_ready(after, 1, timeout, &mut out);
        out.pop()
    }

    #[test]
    fn newest_wins_and_displaced_items_come_back() {
        let slot = LatestSlots::new(1);
        assert!(slot.put(0, 1).is_none());
        assert_eq!(slot.put(0, 2), Some(1), "the unread item is handed back");
        assert_eq!(slot.put(0, 3), Some(2));
        assert_eq!(slot.dropped(0), 2);
        assert_eq!(next(&slot, 0, Duration::ZERO), Some((0, 3)));
        assert_eq!(next(&slot, 0, Duration::from_millis(1)), None);
        slot.recycle(0, 3);
        assert_eq!(slot.put(0, 4), Some(3), "a recycled spare is handed back");
        slot.close(0);
        assert!(!slot.closed(), "an item left at close is still to be taken");
        assert_eq!(next(&slot, 0, Duration::ZERO), Some((0, 4)));
        assert_eq!(next(&slot, 0, Duration::from_secs(5)), None);
        assert!(slot.closed());
    }

    #[test]
    fn a_waiting_consumer_wakes_on_put_and_on_close() {
        let slot = Arc::new(LatestSlots::new(2));
        let s = slot.clone();
        let t = std::thread::spawn(move || next(&s, 0, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(20));
        slot.put(1, 7);
        assert_eq!(t.join().unwrap(), Some((1, 7)));
        let s = slot.clone();
        let t = std::thread::spawn(move || (next(&s, 0, Duration::from_secs(10)), s.closed()));
        std::thread::sleep(Duration::from_millis(20));
        slot.close(0);
        std::thread::sleep(Duration::from_millis(20));
        assert!(!t.is_finished(), "one lane still open: the consumer keeps waiting");
        slot.close(1);
        assert_eq!(t.join().unwrap(), (None, true));
    }

    #[test]
    fn a_batch_takes_the_newest_item_of_every_ready_lane_in_turn_up_to_the_limit() {
        let slot = LatestSlots::new(4);
        let mut out = Vec::with_capacity(4);
        for (lane, v) in [(0, 1), (0, 2), (1, 10), (3, 30)] {
            slot.put(lane, v);
        }
        assert_eq!(slot.take_ready(0, 4, Duration::ZERO, &mut out), 3);
        assert_eq!(out, vec![(1, 10), (3, 30), (0, 2)], "after lane 0, in turn; lane 0's newest only");
        for lane in 0..4 {
            slot.put(lane, lane * 100);
        }
        assert_eq!(slot.take_ready(1, 2, Duration::ZERO, &mut out), 2);
        assert_eq!(out, vec![(2, 200), (3, 300)], "at most two, starting after lane 1");
        assert_eq!(slot.take_ready(3, 2, Duration::ZERO, &mut out), 2);
        assert_eq!(out, vec![(0, 0), (1, 100)], "the rest next time");
        assert_eq!(slot.take_ready(1, 4, Duration::from_millis(1), &mut out), 0);
        assert!(!slot.closed());
        for lane in 0..4 {
            slot.close(lane);
        }
        assert!(slot.closed());
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
            let (lane, v) = next(&slot, last, Duration::ZERO).unwrap_or_else(|| panic!("round {round}"));
            served.push(v);
            last = lane;
        }
        // Round 0: lane 2 comes after lane 0 (the one served "last" at the start); round 1:
        // lane 0 (lane 2 is empty); round 2: lane 2 again, and so on. Lane 0's unread frames
        // were displaced by newer ones, never queued.
        assert_eq!(served, vec![2, 10, 22, 30, 42, 50]);
        assert_eq!(slot.dropped(0), 3, "lane 0's frames 0, 20 and 40 were displaced while lane 2 was served");
        assert_eq!((slot.dropped(1), slot.dropped(2)), (0, 0));
    }
}
