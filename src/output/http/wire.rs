//! HTTP/1.1 on the wire, bounded: reading a request's head (httparse parses it) and writing a
//! response, one request per connection (`Connection: close`).
//!
//! Written here around httparse rather than served by an HTTP crate: tiny_http, used before,
//! read a request line and headers of any length (four requests with a 50 MB URL took the
//! daemon from 75 MB to 447 MB RSS; a 50 MB header on `/metrics` got 200) and, with `allow_remote`,
//! only then looked at the token; and it answered a keep-alive connection's requests in order
//! through shared workers, so requests queued behind long-polls went unanswered for seconds
//! (docs/security.md, docs/live-view.md). Every endpoint here is a GET with a small answer, so a
//! head bounded in length, line and count, read before anything else, is the whole request.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// The longest request line (method, target, version): longer is `414 URI Too Long`.
pub const MAX_REQUEST_LINE: usize = 4096;
/// The longest head (request line and headers): longer is `431 Request Header Fields Too Large`.
pub const MAX_HEAD: usize = 16 * 1024;
/// The most header fields: more is `431`.
pub const MAX_HEADERS: usize = 32;
/// How long a client may take to send its head: longer is `408 Request Timeout`.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// A request's head, as parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// The request target: path and query.
    pub target: String,
    /// HTTP/1.`minor`.
    pub minor: u8,
    /// The header fields, names as sent.
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Every value of header `name`.
    pub fn headers<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Why no head was read; each but [`HeadError::Closed`] and [`HeadError::Io`] is answered.
#[derive(Debug)]
pub enum HeadError {
    /// The request line is over [`MAX_REQUEST_LINE`].
    LineTooLong,
    /// The head is over [`MAX_HEAD`] or has more than [`MAX_HEADERS`] fields.
    HeadTooLarge,
    /// Not HTTP/1.x (httparse's words).
    Malformed(String),
    /// Not all of it within [`HEAD_TIMEOUT`].
    TimedOut,
    /// The client closed the connection first.
    Closed,
    /// The connection failed.
    Io(io::Error),
}

impl HeadError {
    /// The answer, when one is due: status and text.
    pub fn answer(&self) -> Option<(u16, String)> {
        Some(match self {
            HeadError::LineTooLong => (
                414,
                format!(
                    "the request line is over {MAX_REQUEST_LINE} bytes: nothing here takes one that long\n"
                ),
            ),
            HeadError::HeadTooLarge => {
                (431, format!("the request's head is over {MAX_HEAD} bytes or {MAX_HEADERS} header fields\n"))
            }
            HeadError::Malformed(why) => (400, format!("not an HTTP/1.x request ({why})\n")),
            HeadError::TimedOut => {
                (408, format!("the request's head did not arrive within {} s\n", HEAD_TIMEOUT.as_secs()))
            }
            HeadError::Closed | HeadError::Io(_) => return None,
        })
    }
}

/// Reads one request head from `r`, at most [`MAX_HEAD`] bytes, until `deadline`. `r` should
/// time out its reads (a socket's read timeout), so that the deadline is looked at. Bytes after
/// the head (a body, a pipelined request) are not read further than the buffer's last read.
pub fn read_head(r: &mut impl Read, deadline: Instant) -> Result<Head, HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(head) = parse(&buf)? {
            return Ok(head);
        }
        // A request line still unfinished past its limit is refused before the rest arrives.
        if !buf.windows(2).any(|w| w == b"\r\n") && buf.len() > MAX_REQUEST_LINE {
            return Err(HeadError::LineTooLong);
        }
        if buf.len() >= MAX_HEAD {
            return Err(HeadError::HeadTooLarge);
        }
        if Instant::now() >= deadline {
            return Err(HeadError::TimedOut);
        }
        let room = (MAX_HEAD + 1 - buf.len()).min(chunk.len());
        match r.read(&mut chunk[..room]) {
            Ok(0) if buf.is_empty() => return Err(HeadError::Closed),
            Ok(0) => return Err(HeadError::Malformed("the connection closed inside the head".into())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(HeadError::Io(e)),
        }
    }
}

/// The head in `buf`, once whole; `Ok(None)` while it is not.
fn parse(buf: &[u8]) -> Result<Option<Head>, HeadError> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n");
    if line_end.is_some_and(|n| n > MAX_REQUEST_LINE) {
        return Err(HeadError::LineTooLong);
    }
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(buf) {
        Ok(httparse::Status::Partial) => Ok(None),
        Ok(httparse::Status::Complete(_)) => Ok(Some(Head {
            method: req.method.unwrap_or_default().to_string(),
            target: req.path.unwrap_or_default().to_string(),
            minor: req.version.unwrap_or(1),
            headers: req
                .headers
                .iter()
                .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).trim().to_string()))
                .collect(),
        })),
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::HeadTooLarge),
        Err(e) => Err(HeadError::Malformed(e.to_string())),
    }
}

/// A response: status, header fields and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Header fields (`Content-Length`, `Connection` are added when written).
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    /// `status` with a body of `content_type`, not to be cached or sniffed.
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status,
            headers: vec![
                ("Content-Type", content_type.to_string()),
                ("Cache-Control", "no-store".into()),
                ("X-Content-Type-Options", "nosniff".into()),
                ("Referrer-Policy", "no-referrer".into()),
            ],
            body: body.into(),
        }
    }

    /// With one more header field.
    pub fn with(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.headers.push((name, value.into()));
        self
    }

    /// Writes it to `w` (HTTP/1.1, `Connection: close`); the body only when `body`
    /// (not for HEAD).
    pub fn write(&self, w: &mut impl Write, body: bool) -> io::Result<()> {
        let mut out = Vec::with_capacity(256 + if body { self.body.len() } else { 0 });
        write!(out, "HTTP/1.1 {} {}\r\n", self.status, reason(self.status))?;
        for (n, v) in &self.headers {
            // Values are the server's own (constants, numbers, the token file's checked token).
            write!(out, "{n}: {v}\r\n")?;
        }
        write!(out, "Content-Length: {}\r\nConnection: close\r\n\r\n", self.body.len())?;
        if body {
            out.extend_from_slice(&self.body);
        }
        w.write_all(&out)?;
        w.flush()
    }
}

/// The reason phrase of the statuses this server sends.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader giving `data` in pieces of `step` bytes.
    struct Pieces<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Pieces<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(out.len()).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn read(data: &[u8], step: usize) -> Result<Head, HeadError> {
        read_head(&mut Pieces { data, step }, Instant::now() + Duration::from_secs(5))
    }

    #[test]
    fn a_head_in_any_pieces_is_read_whole() {
        let text = b"GET /metrics?x=1 HTTP/1.1\r\nHost: localhost\r\nCookie: a=b\r\nCookie: c=d\r\n\r\nbody";
        for step in [1, 3, 7, 100] {
            let h = read(text, step).unwrap();
            assert_eq!((h.method.as_str(), h.target.as_str(), h.minor), ("GET", "/metrics?x=1", 1));
            assert_eq!(h.header("host"), Some("localhost"));
            assert_eq!(h.headers("COOKIE").collect::<Vec<_>>(), ["a=b", "c=d"]);
        }
    }

    #[test]
    fn heads_over_the_limits_are_refused_with_their_status_before_the_rest_is_read() {
        // A 50 MB URL: refused once the request line passes its limit, having read no more than that.
        let mut long = b"GET /".to_vec();
        long.resize(50 << 20, b'a');
        let mut r = Pieces { data: &long, step: 2048 };
        let e = read_head(&mut r, Instant::now() + Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.answer().map(|a| a.0), Some(414));
        assert!(
            long.len() - r.data.len() <= MAX_REQUEST_LINE + 2048,
            "read {} bytes",
            long.len() - r.data.len()
        );
        // A 50 MB header.
        let mut big = b"GET /metrics HTTP/1.1\r\nX-Big: ".to_vec();
        big.resize(50 << 20, b'b');
        let mut r = Pieces { data: &big, step: 4096 };
        assert_eq!(
            read_head(&mut r, Instant::now() + Duration::from_secs(5)).unwrap_err().answer().map(|a| a.0),
            Some(431)
        );
        assert!(big.len() - r.data.len() <= MAX_HEAD + 4096);
        // Too many fields, each small.
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(MAX_HEADERS + 1));
        assert_eq!(read(many.as_bytes(), 64).unwrap_err().answer().map(|a| a.0), Some(431));
        // Not HTTP.
        assert_eq!(
            read(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\r\n\r\n", 64).unwrap_err().answer().map(|a| a.0),
            Some(400)
        );
        assert!(matches!(read(b"", 64), Err(HeadError::Closed)));
        assert_eq!(read(b"GET / HT", 64).unwrap_err().answer().map(|a| a.0), Some(400));
    }

    #[test]
    fn a_head_that_does_not_arrive_in_time_is_408() {
        struct Never;
        impl Read for Never {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                std::thread::sleep(Duration::from_millis(5));
                Err(io::ErrorKind::WouldBlock.into())
            }
        }
        let e = read_head(&mut Never, Instant::now() + Duration::from_millis(30)).unwrap_err();
        assert_eq!(e.answer().map(|a| a.0), Some(408));
    }

    #[test]
    fn a_reply_is_one_http_1_1_message_that_closes() {
        let r = Reply::new(200, "text/plain", "hi").with("X-A", "1");
        let mut out = Vec::new();
        r.write(&mut out, true).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"), "{text}");
        assert!(text.ends_with("X-A: 1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"), "{text}");
        let mut head_only = Vec::new();
        r.write(&mut head_only, false).unwrap();
        assert!(String::from_utf8(head_only)
            .unwrap()
            .ends_with("Content-Length: 2\r\nConnection: close\r\n\r\n"));
    }
}
