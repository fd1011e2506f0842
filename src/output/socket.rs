//! The UNIX socket that clients read detections from.
//!
//! SOCK_STREAM, one JSON object per line (`docs/protocol.md`). The server is
//! driven by the publisher thread and never blocks it: clients are
//! non-blocking, each has a bounded buffer of unsent bytes, and a client that
//! stops reading is dropped (and logged) when its buffer would overflow, so it
//! can neither slow the pipeline nor grow memory. Any number of clients may
//! connect and leave at any time.

use std::io::{ErrorKind, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::output::{Health, Interval, Output, OutputError, Started};
use crate::report::FrameReport;
use crate::yolo::ClassNames;

use super::protocol;

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SocketError(pub String);

struct Client {
    id: u64,
    stream: UnixStream,
    pending: Vec<u8>,
    sent: usize,
    since: Instant,
}

impl Client {
    fn unsent(&self) -> usize {
        self.pending.len() - self.sent
    }

    /// Writes as much as the kernel takes. `Err` means the client is gone.
    fn flush(&mut self) -> std::io::Result<()> {
        while self.sent < self.pending.len() {
            match self.stream.write(&self.pending[self.sent..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.sent == self.pending.len() {
            self.pending.clear();
            self.sent = 0;
        } else if self.sent > self.pending.len() / 2 {
            self.pending.drain(..self.sent);
            self.sent = 0;
        }
        Ok(())
    }
}

/// Counters of the socket's life, for statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketCounters {
    /// Clients accepted.
    pub accepted: u64,
    /// Clients that left or failed.
    pub left: u64,
    /// Clients dropped because they stopped reading.
    pub dropped_slow: u64,
}

/// The listening socket and its clients.
pub struct SocketServer {
    listener: UnixListener,
    path: PathBuf,
    clients: Vec<Client>,
    max_unsent: usize,
    next_id: u64,
    counters: SocketCounters,
    log: ClientLog,
}

/// Lines about single clients (connected, left, dropped) logged per window, at most.
const CLIENT_LOG_BURST: u32 = 20;
/// The window over which [`CLIENT_LOG_BURST`] applies.
const CLIENT_LOG_WINDOW: Duration = Duration::from_secs(10);

/// Rate limit for per-client log lines: a client reconnecting in a loop must not
/// flood the journal, nor stall the publisher on a full stderr pipe (measured:
/// 1 000 reconnects blocked publishing for over 20 s on an unread pipe). What is
/// left out is counted and summarised once the window ends.
struct ClientLog {
    window: Instant,
    lines: u32,
    suppressed: u64,
}

impl ClientLog {
    fn new() -> ClientLog {
        ClientLog { window: Instant::now(), lines: 0, suppressed: 0 }
    }

    /// Ends the window when it is over (or `now`), summarising what it left out.
    fn roll_if(&mut self, now: bool) {
        let age = self.window.elapsed();
        if age < CLIENT_LOG_WINDOW && !now {
            return;
        }
        if self.suppressed > 0 {
            log::warn!(
                "{} more client connect/leave/drop messages in the last {:.0} s were not logged \
                 (at most {CLIENT_LOG_BURST} per {} s)",
                self.suppressed,
                age.as_secs_f64(),
                CLIENT_LOG_WINDOW.as_secs()
            );
        }
        (self.window, self.lines, self.suppressed) = (Instant::now(), 0, 0);
    }

    fn roll(&mut self) {
        self.roll_if(false);
    }

    /// Whether one more per-client line may be logged now.
    fn allow(&mut self) -> bool {
        self.roll();
        if self.lines < CLIENT_LOG_BURST {
            self.lines += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }
}

/// Resolves a group name (or numeric id) to a gid.
fn group_id(name: &str) -> Result<u32, String> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(name) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        Ok(None) => Err(format!("group '{name}' does not exist (create it or fix [output] socket_group)")),
        Err(e) => Err(format!("cannot look up group '{name}': {e}")),
    }
}

fn set_send_buffer(stream: &UnixStream, bytes: usize) {
    use std::os::fd::AsRawFd;
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: a valid socket fd and a pointer to a c_int of the stated size.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        log::debug!("SO_SNDBUF: {}", std::io::Error::last_os_error());
    }
}

impl SocketServer {
    /// Creates the socket at `path` with mode 0660 (and `group`, if given).
    ///
    /// A socket file left by a crash is replaced only when nothing listens on
    /// it; a live one is an error, as is a path that is not a socket.
    pub fn bind(path: &Path, group: Option<&str>, max_unsent: usize) -> Result<SocketServer, SocketError> {
        let err = |m: String| SocketError(format!("{}: {m}", path.display()));
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_socket() => match UnixStream::connect(path) {
                Ok(_) => {
                    return Err(err(
                        "another process is listening on this socket (is jetdetect already running?): \
                         stop it or set another [output] socket"
                            .into(),
                    ))
                }
                Err(_) => {
                    log::warn!("{}: removing a stale socket left by an earlier run", path.display());
                    std::fs::remove_file(path)
                        .map_err(|e| err(format!("cannot remove the stale socket: {e}")))?;
                }
            },
            Ok(_) => {
                return Err(
                    err("exists and is not a socket: remove it or set another [output] socket".into()),
                )
            }
            Err(_) => {}
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| err(format!("cannot create the folder {}: {e}", dir.display())))?;
        }
        let gid = group.map(group_id).transpose().map_err(err)?;
        // Bound owner-only (umask 0177 for the moment of the bind), then opened up to 0660 below:
        // with a permissive umask, another user could otherwise connect before the chmod and keep
        // reading. The umask is process-wide; a file another thread creates meanwhile only gets a
        // stricter mode.
        use nix::sys::stat::{umask, Mode};
        let old = umask(Mode::from_bits_truncate(0o177));
        let bound = UnixListener::bind(path);
        umask(old);
        let listener = bound.map_err(|e| err(format!("cannot listen: {e}")))?;
        let server = SocketServer {
            listener,
            path: path.to_path_buf(),
            clients: Vec::new(),
            max_unsent,
            next_id: 1,
            counters: SocketCounters::default(),
            log: ClientLog::new(),
        };
        // From here on, dropping `server` removes the file.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
            .map_err(|e| err(format!("cannot set mode 0660: {e}")))?;
        if let Some(gid) = gid {
            nix::unistd::chown(path, None, Some(nix::unistd::Gid::from_raw(gid)))
                .map_err(|e| err(format!("cannot give the socket to group {}: {e}", group.unwrap_or(""))))?;
        }
        server.listener.set_nonblocking(true).map_err(|e| err(format!("cannot set non-blocking: {e}")))?;
        Ok(server)
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Connected clients.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// Lifetime counters.
    pub fn counters(&self) -> SocketCounters {
        self.counters
    }

    /// Accepts every waiting client and queues `hello` for each.
    pub fn accept(&mut self, hello: &[u8]) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if let Err(e) = stream.set_nonblocking(true) {
                        log::warn!("client rejected: cannot set non-blocking: {e}");
                        continue;
                    }
                    // Keep the kernel's share of a slow client's backlog as bounded as ours,
                    // so a client that stops reading is noticed in seconds, not minutes.
                    set_send_buffer(&stream, self.max_unsent);
                    let id = self.next_id;
                    self.next_id += 1;
                    self.counters.accepted += 1;
                    if self.log.allow() {
                        log::info!("client {id} connected ({} now)", self.clients.len() + 1);
                    }
                    let mut c = Client {
                        id,
                        stream,
                        pending: Vec::with_capacity(hello.len()),
                        sent: 0,
                        since: Instant::now(),
                    };
                    c.pending.extend_from_slice(hello);
                    self.clients.push(c);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    log::warn!("{}: accept failed: {e}", self.path.display());
                    break;
                }
            }
        }
    }

    /// Queues `line` for every client and writes what the kernel takes. A
    /// client whose unsent bytes would exceed the limit is dropped.
    pub fn broadcast(&mut self, line: &[u8]) {
        let limit = self.max_unsent;
        let mut slow = 0;
        let log = &mut self.log;
        self.clients.retain_mut(|c| {
            if c.unsent() + line.len() > limit {
                if log.allow() {
                    log::warn!(
                        "client {} stopped reading ({} KiB unsent after {:.1} s): dropped",
                        c.id,
                        c.unsent() / 1024,
                        c.since.elapsed().as_secs_f64()
                    );
                }
                slow += 1;
                return false;
            }
            c.pending.extend_from_slice(line);
            true
        });
        self.counters.dropped_slow += slow;
        self.counters.left += slow;
        self.flush();
    }

    /// Writes pending bytes to every client; clients that have gone are removed.
    pub fn flush(&mut self) {
        let mut left = 0;
        let log = &mut self.log;
        log.roll();
        self.clients.retain_mut(|c| match c.flush() {
            Ok(()) => true,
            Err(e) => {
                if log.allow() {
                    log::info!("client {} left ({e})", c.id);
                }
                left += 1;
                false
            }
        });
        self.counters.left += left;
    }

    /// Sends `bye` to every client (best effort, without blocking), then closes them and
    /// removes the socket file (no new client can connect to a server that has said bye).
    pub fn close(&mut self, bye: &[u8]) {
        self.broadcast(bye);
        self.clients.clear();
        self.log.roll_if(true);
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            if e.kind() != ErrorKind::NotFound {
                log::warn!("{}: cannot remove the socket: {e}", self.path.display());
            }
        }
    }
}

/// The detections socket as an [`Output`]: `hello` to each client as it connects, a
/// `detections` message per frame (and, with `[hazards]`, a `hazards` message after it), a
/// `stats` message per interval and at the end, then `bye`. While the daemon is blind, a
/// `hazards` message saying so goes out every `[latency] stale_ms`.
pub struct SocketOutput {
    path: PathBuf,
    group: Option<String>,
    max_unsent: usize,
    server: Option<SocketServer>,
    hello: Vec<u8>,
    names: Option<ClassNames>,
    line: Vec<u8>,
    hazards: bool,
}

impl SocketOutput {
    /// The socket at `path` (`[output] socket`, `socket_group`, `client_buffer_kib`), bound
    /// when the pipeline opens its outputs.
    pub fn new(path: &Path, group: Option<&str>, max_unsent: usize) -> SocketOutput {
        SocketOutput {
            path: path.to_path_buf(),
            group: group.map(str::to_string),
            max_unsent,
            server: None,
            hello: Vec::new(),
            names: None,
            line: Vec::with_capacity(64 * 1024),
            hazards: false,
        }
    }

    /// Also publishes `hazards` messages (`[hazards] enabled`).
    pub fn with_hazards(mut self, on: bool) -> SocketOutput {
        self.hazards = on;
        self
    }

    fn stats(&mut self, iv: &Interval<'_>) {
        let Some(server) = &mut self.server else { return };
        self.line.clear();
        protocol::write_stats(&mut self.line, iv);
        server.broadcast(&self.line);
    }
}

impl Output for SocketOutput {
    fn open(&mut self) -> Result<(), OutputError> {
        let server = SocketServer::bind(&self.path, self.group.as_deref(), self.max_unsent)?;
        log::info!("publishing on {}", server.path().display());
        self.server = Some(server);
        Ok(())
    }

    fn ready(&mut self, s: &Started) {
        self.names = Some(s.names.clone());
        self.hello.clear();
        protocol::write_hello(&mut self.hello, s);
    }

    fn frame(&mut self, report: &FrameReport, dropped: u64, now: Instant) {
        let (Some(names), Some(server)) = (&self.names, &mut self.server) else { return };
        self.line.clear();
        protocol::write_detections(&mut self.line, report, names, now, dropped);
        if self.hazards && !report.hazards.zones.is_empty() {
            protocol::write_hazards(&mut self.line, report, names, now);
        }
        server.broadcast(&self.line);
    }

    fn tick(&mut self, health: &Health) {
        let Some(server) = &mut self.server else { return };
        if !self.hello.is_empty() {
            server.accept(&self.hello);
        }
        if self.hazards && health.blind_notice {
            for b in health.blind {
                self.line.clear();
                protocol::write_blind(&mut self.line, b, Instant::now());
                server.broadcast(&self.line);
            }
        }
        server.flush();
    }

    fn interval(&mut self, iv: &Interval<'_>) {
        self.stats(iv);
    }

    fn finish(&mut self, run: &Interval<'_>, reason: &str) {
        self.stats(run);
        self.line.clear();
        protocol::write_bye(&mut self.line, reason);
        if let Some(server) = &mut self.server {
            server.close(&self.line);
        }
    }

    fn clients(&self) -> usize {
        self.server.as_ref().map_or(0, SocketServer::clients)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("jd-sock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d.join("sub").join("s.sock")
    }

    #[test]
    fn clients_receive_lines_and_the_file_is_0660_and_removed() {
        let p = tmp("basic");
        let mut s = SocketServer::bind(&p, None, 1 << 16).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        let c = UnixStream::connect(&p).unwrap();
        s.accept(b"hello\n");
        s.broadcast(b"one\n");
        let mut r = BufReader::new(c);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert_eq!(line, "hello\n");
        line.clear();
        r.read_line(&mut line).unwrap();
        assert_eq!(line, "one\n");
        s.close(b"bye\n");
        assert!(!p.exists());
    }

    #[test]
    fn a_client_that_never_reads_is_dropped_and_others_keep_receiving() {
        let p = tmp("slow");
        let mut s = SocketServer::bind(&p, None, 64 * 1024).unwrap();
        let _stalled = UnixStream::connect(&p).unwrap();
        let reader = UnixStream::connect(&p).unwrap();
        reader.set_nonblocking(true).unwrap();
        s.accept(b"");
        let line = vec![b'x'; 1023].into_iter().chain([b'\n']).collect::<Vec<u8>>();
        let mut got = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        for _ in 0..2000 {
            s.broadcast(&line);
            loop {
                match std::io::Read::read(&mut &reader, &mut buf) {
                    Ok(n) if n > 0 => got += n,
                    _ => break,
                }
            }
        }
        assert_eq!(s.clients(), 1, "the stalled client was dropped");
        assert_eq!(s.counters().dropped_slow, 1);
        assert!(got >= 1900 * 1024, "the reading client kept receiving: {got}");
    }

    #[test]
    fn stale_sockets_are_replaced_but_live_ones_and_files_are_not() {
        let p = tmp("stale");
        let first = SocketServer::bind(&p, None, 1024).unwrap();
        let e = SocketServer::bind(&p, None, 1024).err().unwrap().to_string();
        assert!(e.contains("another process is listening"), "{e}");
        drop(first);
        assert!(!p.exists(), "removed on drop");
        // A crash leaves the file behind with nothing listening.
        drop(UnixListener::bind(&p).unwrap());
        assert!(p.exists());
        let second = SocketServer::bind(&p, None, 1024);
        assert!(second.is_ok(), "a stale socket is replaced");
        drop(second);
        std::fs::write(&p, "not a socket").unwrap();
        let e = SocketServer::bind(&p, None, 1024).err().unwrap().to_string();
        assert!(e.contains("is not a socket"), "{e}");
        let e = SocketServer::bind(&tmp("grp"), Some("no-such-group-jd"), 1024).err().unwrap().to_string();
        assert!(e.contains("group 'no-such-group-jd' does not exist"), "{e}");
    }

    /// `[output] socket_group`: the socket belongs to that group with mode 0660; a member
    /// of the group can connect, another unprivileged user cannot. The connect checks run
    /// as root only (setpriv switches to nobody), which CI is.
    #[test]
    fn the_socket_group_lets_its_members_in_and_no_one_else() {
        use std::os::unix::fs::MetadataExt as _;
        let is_root = unsafe { libc::geteuid() } == 0;
        let group = "daemon"; // gid 1 on Debian, Ubuntu and L4T
        let Ok(gid) = group_id(group) else { return };
        let p = tmp("group");
        let s = SocketServer::bind(&p, Some(group), 1024);
        if !is_root {
            // Not root and not in the group: chown is refused, and said so.
            if let Err(e) = s {
                assert!(e.to_string().contains("cannot give the socket to group daemon"), "{e}");
            }
            return;
        }
        let s = s.unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!((meta.gid(), meta.mode() & 0o777), (gid, 0o660));
        // Traversable parents, so only the socket's own mode decides.
        for d in [p.parent().unwrap(), p.parent().unwrap().parent().unwrap()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // A child drops to nobody (with or without the group) and connects: only raw,
        // async-signal-safe system calls between fork and _exit.
        let path = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let connect_as = |groups: &[libc::gid_t]| -> i32 {
            let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
            addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (d, s) in addr.sun_path.iter_mut().zip(path.as_bytes()) {
                *d = *s as libc::c_char;
            }
            // SAFETY: the child only makes system calls and exits.
            unsafe {
                match libc::fork() {
                    0 => {
                        let ok = libc::setgroups(groups.len(), groups.as_ptr()) == 0
                            && libc::setgid(65534) == 0
                            && libc::setuid(65534) == 0;
                        if !ok {
                            libc::_exit(100);
                        }
                        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                        let r = libc::connect(
                            fd,
                            &addr as *const libc::sockaddr_un as *const libc::sockaddr,
                            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
                        );
                        libc::_exit(if r == 0 { 0 } else { *libc::__errno_location() });
                    }
                    pid => {
                        let mut status = 0;
                        libc::waitpid(pid, &mut status, 0);
                        libc::WEXITSTATUS(status)
                    }
                }
            }
        };
        assert_eq!(connect_as(&[gid]), 0, "a member of the group connects");
        assert_eq!(connect_as(&[]), libc::EACCES, "anyone else is refused");
        drop(s);
    }
}
