//! Request heads as a careless or hostile client sends them, in pieces of any size: the bounded
//! reader (`output::http::wire::read_head`, httparse parsing) gives a head or an error with its
//! answer. Never a panic, never more than the head's limit read, and a head that it gives back
//! came whole from the input.
#![no_main]

use std::io::Read;
use std::time::{Duration, Instant};

use jetdetect::output::http::wire::{self, HeadError};
use libfuzzer_sys::fuzz_target;

/// The input in pieces whose sizes come from its first byte.
struct Pieces<'a> {
    data: &'a [u8],
    step: usize,
    given: usize,
    /// At the end: the connection closes (EOF), or stays open and silent.
    closes: bool,
}

impl Read for Pieces<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.data.is_empty() {
            // A client that closes, or one that stops sending (the deadline ends the wait).
            return if self.closes { Ok(0) } else { Err(std::io::ErrorKind::WouldBlock.into()) };
        }
        let n = self.step.min(out.len()).min(self.data.len());
        out[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        self.given += n;
        Ok(n)
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let mut r = Pieces { data: rest, step: 1 + (first >> 1) as usize * 37, given: 0, closes: first & 1 == 1 };
    match wire::read_head(&mut r, Instant::now() + Duration::from_millis(1)) {
        Ok(head) => {
            assert!(rest.len() >= head.method.len() + head.target.len());
            assert!(head.headers.len() <= wire::MAX_HEADERS);
        }
        Err(HeadError::Io(e)) => panic!("a reader that never fails failed: {e}"),
        Err(e) => {
            if let Some((status, text)) = e.answer() {
                assert!(matches!(status, 400 | 408 | 414 | 431) && !text.is_empty());
            }
        }
    }
    assert!(r.given <= wire::MAX_HEAD + 1 + r.step, "read {} bytes past the head's limit", r.given);
});
