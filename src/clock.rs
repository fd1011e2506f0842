//! Timestamps that mean the same thing in every process: `CLOCK_MONOTONIC`
//! nanoseconds (what V4L2 stamps buffers with and what a client can read with
//! `clock_gettime(CLOCK_MONOTONIC)` or Python's `time.monotonic_ns()`), plus
//! wall-clock time for humans.
//!
//! Inside the process times are [`Instant`]s (on Linux also `CLOCK_MONOTONIC`);
//! [`mono_ns`] converts one to nanoseconds through a base pair taken once.

use std::sync::OnceLock;
use std::time::Instant;

fn clock_monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn base() -> (Instant, u64) {
    static BASE: OnceLock<(Instant, u64)> = OnceLock::new();
    *BASE.get_or_init(|| (Instant::now(), clock_monotonic_ns()))
}

/// `CLOCK_MONOTONIC` nanoseconds of an `Instant`.
pub fn mono_ns(t: Instant) -> u64 {
    let (i0, n0) = base();
    if t >= i0 {
        n0 + (t - i0).as_nanos() as u64
    } else {
        n0.saturating_sub((i0 - t).as_nanos() as u64)
    }
}

/// The `Instant` of a `CLOCK_MONOTONIC` timestamp (e.g. a V4L2 buffer's).
pub fn instant_from_mono_ns(ns: u64) -> Instant {
    let (i0, n0) = base();
    if ns >= n0 {
        i0 + std::time::Duration::from_nanos(ns - n0)
    } else {
        i0.checked_sub(std::time::Duration::from_nanos(n0 - ns)).unwrap_or(i0)
    }
}

/// Milliseconds between two instants (0 when `later` is earlier).
pub fn ms_between(earlier: Instant, later: Instant) -> f64 {
    later.saturating_duration_since(earlier).as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_nanoseconds_track_the_system_clock() {
        let now = Instant::now();
        let a = mono_ns(now);
        let b = clock_monotonic_ns();
        assert!(b >= a && b - a < 50_000_000, "{a} {b}");
        let back = instant_from_mono_ns(a);
        let diff = if back > now { back - now } else { now - back };
        assert!(diff.as_micros() < 5, "{diff:?}");
    }
}
