//! The MQTT output's on-disk queue: every hazard, blind and stats message is appended here
//! before it is published, and stays until the broker acknowledges it (QoS 1). While the broker
//! is unreachable the queue grows, up to its size cap; past the cap the oldest messages are
//! dropped and counted. A daemon restart reopens the queue and sends what is left, in order.
//!
//! Written here rather than taken from a crate: the queue crates (`queue-file`, a port of
//! Tape's QueueFile) rewrite a header and `fsync` on every operation; at 30 hazard messages
//! a second per camera that is 60+ flushes a second to a Jetson's eMMC. This is a segment log:
//! appends are plain writes, `fdatasync` runs at most once a second ([`DiskQueue::sync`]), so a
//! power cut loses at most the last second while a process restart loses nothing (the page
//! cache keeps the writes); dropping the oldest messages is deleting a file.
//!
//! Layout of the folder:
//! * `NNNNNNNNNNNNNNNNNNNN.seg`: records numbered from the file name on; each is
//!   `len: u32 LE | crc32(body): u32 LE | body` with `body = kind: u8 | payload`. A torn record
//!   at the end (a crash mid-write) fails its length or CRC and is cut off on open.
//! * `acked`: 8 bytes, the number of the first record not yet acknowledged.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A record's header: its body's length and the body's CRC-32.
const HEADER: usize = 8;
/// The largest record accepted (a stats message with many cameras is a few KiB).
pub const MAX_RECORD: usize = 1 << 20;

/// One segment file: its first record's number and each record's offset.
struct Segment {
    first: u64,
    offsets: Vec<u32>,
    bytes: u64,
    path: PathBuf,
}

impl Segment {
    fn end(&self) -> u64 {
        self.first + self.offsets.len() as u64
    }
}

/// The queue: a folder of segments and the acknowledgement cursor.
pub struct DiskQueue {
    dir: PathBuf,
    segments: VecDeque<Segment>,
    /// The newest segment, open for appending.
    tail: Option<File>,
    /// A read handle and the segment (its first record) it belongs to.
    reader: Option<(u64, File)>,
    cursor: File,
    /// The first record not yet acknowledged.
    acked: u64,
    /// The number the next record gets.
    next: u64,
    cap_bytes: u64,
    segment_bytes: u64,
    total_bytes: u64,
    dropped: u64,
    dirty: bool,
    scratch: Vec<u8>,
}

/// Why the queue's folder cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("the MQTT queue {}: {what}: {source}", dir.display())]
pub struct QueueError {
    /// The folder.
    pub dir: PathBuf,
    /// What was being done.
    pub what: String,
    /// The system's error.
    #[source]
    pub source: io::Error,
}

/// CRC-32 (IEEE), bitwise: records are small and written a few dozen times a second.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

fn segment_name(first: u64) -> String {
    format!("{first:020}.seg")
}

impl DiskQueue {
    /// Opens (creating it if needed) the queue in `dir`, at most `cap_bytes` on disk. Records
    /// left by an earlier run are kept; a torn last record is cut off.
    pub fn open(dir: &Path, cap_bytes: u64) -> Result<DiskQueue, QueueError> {
        let err =
            |what: &str, source: io::Error| QueueError { dir: dir.to_path_buf(), what: what.into(), source };
        fs::create_dir_all(dir).map_err(|e| err("cannot create the folder", e))?;
        let mut cursor = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("acked"))
            .map_err(|e| err("cannot open its cursor file 'acked'", e))?;
        let mut raw = Vec::new();
        cursor.read_to_end(&mut raw).map_err(|e| err("cannot read 'acked'", e))?;
        let acked = raw.get(..8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).unwrap_or(0);
        let mut firsts: Vec<u64> = fs::read_dir(dir)
            .map_err(|e| err("cannot list the folder", e))?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name();
                let stem = name.to_str()?.strip_suffix(".seg")?;
                stem.parse().ok()
            })
            .collect();
        firsts.sort_unstable();
        // A segment's size on disk (at least 64 KiB; 16 of them fill the cap).
        let segment_bytes = (cap_bytes / 16).clamp(64 << 10, 8 << 20);
        let mut q = DiskQueue {
            dir: dir.to_path_buf(),
            segments: VecDeque::new(),
            tail: None,
            reader: None,
            cursor,
            acked,
            next: acked,
            cap_bytes,
            segment_bytes,
            total_bytes: 0,
            dropped: 0,
            dirty: false,
            scratch: Vec::new(),
        };
        for &first in &firsts {
            let path = dir.join(segment_name(first));
            let seg = q.scan(first, &path).map_err(|e| err(&format!("cannot read {}", path.display()), e))?;
            // A segment wholly acknowledged, or one that does not follow on (an older run's
            // leftovers after its cursor was lost), is removed.
            let stale = seg.end() <= acked || (!q.segments.is_empty() && first != q.next);
            if stale || seg.offsets.is_empty() {
                let _ = fs::remove_file(&path);
                continue;
            }
            if q.segments.is_empty() && first > q.acked {
                q.acked = first;
            }
            q.next = seg.end();
            q.total_bytes += seg.bytes;
            q.segments.push_back(seg);
        }
        if q.segments.is_empty() {
            q.next = q.acked;
        }
        q.acked = q.acked.max(q.segments.front().map_or(q.next, |s| s.first));
        Ok(q)
    }

    /// Reads a segment's records, cutting the file at the first one that is torn.
    fn scan(&mut self, first: u64, path: &Path) -> io::Result<Segment> {
        let mut data = Vec::new();
        File::open(path)?.read_to_end(&mut data)?;
        let mut offsets = Vec::new();
        let mut at = 0usize;
        while at + HEADER <= data.len() {
            let len = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
            let crc = u32::from_le_bytes(data[at + 4..at + 8].try_into().unwrap());
            let body = at + HEADER;
            if len == 0
                || len > MAX_RECORD + 1
                || body + len > data.len()
                || crc32(&data[body..body + len]) != crc
            {
                break;
            }
            offsets.push(at as u32);
            at = body + len;
        }
        if at < data.len() {
            log::warn!(
                "MQTT queue: {} ends in a torn record ({} bytes cut off: the daemon stopped mid-write)",
                path.display(),
                data.len() - at
            );
            OpenOptions::new().write(true).open(path)?.set_len(at as u64)?;
        }
        Ok(Segment { first, offsets, bytes: at as u64, path: path.to_path_buf() })
    }

    /// Appends a record of `kind` (not 0) with `payload`; returns its number. Past the size
    /// cap the oldest segment is dropped first (its unacknowledged records counted in
    /// [`DiskQueue::dropped`]).
    pub fn push(&mut self, kind: u8, payload: &[u8]) -> io::Result<u64> {
        if payload.len() > MAX_RECORD {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "message larger than 1 MiB"));
        }
        let size = (HEADER + 1 + payload.len()) as u64;
        while self.total_bytes + size > self.cap_bytes && self.segments.len() > 1 {
            self.drop_oldest();
        }
        let roll =
            self.segments.back().is_none_or(|s| s.bytes + size > self.segment_bytes && !s.offsets.is_empty());
        if roll || self.tail.is_none() {
            if roll {
                let path = self.dir.join(segment_name(self.next));
                let file = OpenOptions::new().create(true).append(true).open(&path)?;
                // The previous tail is complete: make it durable before moving on.
                if let Some(old) = self.tail.take() {
                    let _ = old.sync_data();
                }
                self.tail = Some(file);
                self.segments.push_back(Segment { first: self.next, offsets: Vec::new(), bytes: 0, path });
            } else {
                let seg = self.segments.back().expect("a segment");
                self.tail = Some(OpenOptions::new().append(true).open(&seg.path)?);
            }
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(&((1 + payload.len()) as u32).to_le_bytes());
        self.scratch.extend_from_slice(&[0; 4]);
        self.scratch.push(kind);
        self.scratch.extend_from_slice(payload);
        let crc = crc32(&self.scratch[HEADER..]);
        self.scratch[4..8].copy_from_slice(&crc.to_le_bytes());
        let seg = self.segments.back_mut().expect("a segment");
        let tail = self.tail.as_mut().expect("an open tail");
        if let Err(e) = tail.write_all(&self.scratch) {
            // Whatever part was written is cut off again, so the file stays whole.
            let _ = tail.set_len(seg.bytes);
            self.tail = None;
            return Err(e);
        }
        seg.offsets.push(seg.bytes as u32);
        seg.bytes += size;
        self.total_bytes += size;
        self.dirty = true;
        let n = self.next;
        self.next += 1;
        Ok(n)
    }

    fn drop_oldest(&mut self) {
        let Some(seg) = self.segments.pop_front() else { return };
        if seg.end() > self.acked {
            self.dropped += seg.end() - self.acked.max(seg.first);
        }
        self.acked = self.acked.max(seg.end());
        self.total_bytes -= seg.bytes;
        if self.reader.as_ref().is_some_and(|(f, _)| *f == seg.first) {
            self.reader = None;
        }
        let _ = fs::remove_file(&seg.path);
        self.write_cursor();
    }

    /// Reads record `seq` into `out` (cleared first); returns its kind, or `None` when it is
    /// no longer (or not yet) in the queue.
    pub fn read(&mut self, seq: u64, out: &mut Vec<u8>) -> io::Result<Option<u8>> {
        if seq < self.acked || seq >= self.next {
            return Ok(None);
        }
        let Some(seg) = self.segments.iter().find(|s| seq >= s.first && seq < s.end()) else {
            return Ok(None);
        };
        let i = (seq - seg.first) as usize;
        let start = seg.offsets[i] as u64;
        let end = seg.offsets.get(i + 1).map_or(seg.bytes, |&o| o as u64);
        if self.reader.as_ref().is_none_or(|(f, _)| *f != seg.first) {
            self.reader = Some((seg.first, File::open(&seg.path)?));
        }
        let file = &self.reader.as_ref().expect("a reader").1;
        out.clear();
        out.resize((end - start) as usize, 0);
        file.read_exact_at(out, start)?;
        let kind = out[HEADER];
        out.drain(..HEADER + 1);
        Ok(Some(kind))
    }

    /// Marks every record before `seq` acknowledged; wholly acknowledged segments are deleted.
    pub fn ack_until(&mut self, seq: u64) {
        let seq = seq.min(self.next);
        if seq <= self.acked {
            return;
        }
        self.acked = seq;
        while self.segments.len() > 1 && self.segments.front().is_some_and(|s| s.end() <= self.acked) {
            let seg = self.segments.pop_front().expect("a segment");
            self.total_bytes -= seg.bytes;
            if self.reader.as_ref().is_some_and(|(f, _)| *f == seg.first) {
                self.reader = None;
            }
            let _ = fs::remove_file(&seg.path);
        }
        self.write_cursor();
    }

    fn write_cursor(&mut self) {
        // Eight bytes at offset 0: one page, written whole. A lost update only repeats
        // messages (QoS 1 allows duplicates), it never skips one.
        let _ = self.cursor.write_all_at(&self.acked.to_le_bytes(), 0);
        self.dirty = true;
    }

    /// Makes what was written durable (`fdatasync` of the tail and the cursor), if anything was.
    pub fn sync(&mut self) -> io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        self.dirty = false;
        if let Some(t) = &self.tail {
            t.sync_data()?;
        }
        self.cursor.sync_data()
    }

    /// The first record not yet acknowledged.
    pub fn first(&self) -> u64 {
        self.acked
    }

    /// The number the next record will get (one past the newest).
    pub fn end(&self) -> u64 {
        self.next
    }

    /// Records waiting for acknowledgement.
    pub fn len(&self) -> u64 {
        self.next - self.acked
    }

    /// Whether every record is acknowledged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes on disk.
    pub fn bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Records dropped unsent because the queue was full, since it was opened.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("jetdetect-queue-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn all(q: &mut DiskQueue) -> Vec<(u64, u8, String)> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for s in q.first()..q.end() {
            let kind = q.read(s, &mut buf).unwrap().unwrap();
            out.push((s, kind, String::from_utf8(buf.clone()).unwrap()));
        }
        out
    }

    #[test]
    fn the_crc_is_the_ieee_one() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn records_come_back_in_order_and_survive_a_reopen() {
        let d = dir("reopen");
        let mut q = DiskQueue::open(&d, 1 << 20).unwrap();
        for i in 0..10 {
            assert_eq!(q.push(1 + (i % 2) as u8, format!("message {i}").as_bytes()).unwrap(), i);
        }
        q.ack_until(4);
        drop(q);
        let mut q = DiskQueue::open(&d, 1 << 20).unwrap();
        assert_eq!((q.first(), q.end(), q.len()), (4, 10, 6));
        let got = all(&mut q);
        assert_eq!(got[0], (4, 1, "message 4".into()));
        assert_eq!(got[5], (9, 2, "message 9".into()));
        // Numbering goes on after a reopen.
        assert_eq!(q.push(1, b"after").unwrap(), 10);
        q.ack_until(11);
        assert!(q.is_empty());
        drop(q);
        let q = DiskQueue::open(&d, 1 << 20).unwrap();
        assert!(q.is_empty(), "everything acknowledged stays acknowledged");
        assert_eq!(q.end(), 11);
    }

    #[test]
    fn a_torn_last_record_is_cut_off_and_the_rest_kept() {
        let d = dir("torn");
        let mut q = DiskQueue::open(&d, 1 << 20).unwrap();
        for i in 0..3 {
            q.push(1, format!("m{i}").as_bytes()).unwrap();
        }
        drop(q);
        let seg = d.join(segment_name(0));
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        // Half a record: a length and part of its body.
        f.write_all(&40u32.to_le_bytes()).unwrap();
        f.write_all(&[1, 2, 3, 4, 1, b'x']).unwrap();
        drop(f);
        let mut q = DiskQueue::open(&d, 1 << 20).unwrap();
        assert_eq!(all(&mut q).iter().map(|r| r.2.as_str()).collect::<Vec<_>>(), ["m0", "m1", "m2"]);
        assert_eq!(q.push(1, b"m3").unwrap(), 3);
        drop(q);
        let mut q = DiskQueue::open(&d, 1 << 20).unwrap();
        assert_eq!(all(&mut q).last().unwrap().2, "m3");
        // A flipped bit in a record's body fails its CRC: it and what follows are cut.
        drop(q);
        let mut data = fs::read(&seg).unwrap();
        let n = data.len();
        data[n - 1] ^= 0x20;
        fs::write(&seg, data).unwrap();
        let mut q = DiskQueue::open(&d, 1 << 20).unwrap();
        assert_eq!(all(&mut q).len(), 3);
    }

    #[test]
    fn past_the_cap_the_oldest_are_dropped_and_counted() {
        let d = dir("cap");
        // 64 KiB segments (the smallest), 256 KiB cap: about 4 segments.
        let mut q = DiskQueue::open(&d, 256 << 10).unwrap();
        let payload = vec![b'x'; 1000];
        for _ in 0..1000 {
            q.push(1, &payload).unwrap();
        }
        assert!(q.bytes() <= 256 << 10, "{} bytes on disk", q.bytes());
        assert!(q.dropped() > 0);
        assert_eq!(q.dropped() + q.len(), 1000, "every record is either kept or counted as dropped");
        assert_eq!(q.end(), 1000);
        // What is kept is the newest, in order.
        let got = all(&mut q);
        assert_eq!(got.last().unwrap().0, 999);
        assert!(got.windows(2).all(|w| w[1].0 == w[0].0 + 1));
        let files = fs::read_dir(&d).unwrap().count();
        assert!(files <= 6, "{files} files: dropped segments are deleted");
        drop(q);
        let q = DiskQueue::open(&d, 256 << 10).unwrap();
        assert_eq!(q.first(), 1000 - got.len() as u64, "the cursor moved past what was dropped");
    }

    #[test]
    fn acknowledged_segments_are_deleted() {
        let d = dir("acked");
        let mut q = DiskQueue::open(&d, 1 << 20).unwrap();
        let payload = vec![b'y'; 4000];
        for _ in 0..100 {
            q.push(2, &payload).unwrap();
        }
        let before = fs::read_dir(&d).unwrap().count();
        assert!(before > 3, "{before} files");
        q.ack_until(100);
        q.sync().unwrap();
        assert_eq!(fs::read_dir(&d).unwrap().count(), 2, "the tail segment and the cursor remain");
        let mut buf = Vec::new();
        assert_eq!(q.read(50, &mut buf).unwrap(), None);
    }
}
