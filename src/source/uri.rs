//! Source URIs: `scheme://location?key=value&key=value`.
//!
//! Parsing is strict: a key that the scheme does not know is an error that
//! lists the keys it does know, so a typo never silently falls back to a default.

use std::collections::BTreeMap;
use std::str::FromStr;

/// What is wrong with a source URI or one of its parameters. Each message starts
/// with the URI as the user wrote it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UriError {
    /// No `://`.
    #[error(
        "'{text}' is not a source URI: write scheme://location, e.g. synthetic://, \
         file://images/, file://clip.yuv?width=640&height=480&format=yuyv or v4l2:///dev/video0"
    )]
    NotAUri {
        /// The text.
        text: String,
    },
    /// A scheme with characters other than letters and digits, or none.
    #[error("'{text}': '{scheme}' is not a valid URI scheme")]
    BadScheme {
        /// The URI.
        text: String,
        /// The scheme.
        scheme: String,
    },
    /// A query item without `=`.
    #[error("'{text}': query item '{item}' has no value: write key=value")]
    NoValue {
        /// The URI.
        text: String,
        /// The item.
        item: String,
    },
    /// A bad `%` escape, or bytes that are not UTF-8 once decoded.
    #[error("'{text}': {source}")]
    Escape {
        /// The URI.
        text: String,
        /// Which part, and why.
        source: EscapeError,
    },
    /// A key given twice.
    #[error("'{text}': key '{key}' is given twice")]
    Twice {
        /// The URI.
        text: String,
        /// The key.
        key: String,
    },
    /// A key the scheme does not know.
    #[error("{text}: unknown key '{key}' for {scheme}:// sources; allowed keys: {allowed}")]
    UnknownKey {
        /// The URI.
        text: String,
        /// The scheme.
        scheme: String,
        /// The key.
        key: String,
        /// The keys the scheme knows, comma-separated.
        allowed: String,
    },
    /// A value that does not parse as the key's type.
    #[error("{text}: bad value '{value}' for '{key}': {reason}")]
    BadValue {
        /// The URI.
        text: String,
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// The value type's own message.
        reason: String,
    },
    /// A value outside the key's range.
    #[error("{text}: '{key}' = {value} is out of range: allowed {lo} to {hi}")]
    OutOfRange {
        /// The URI.
        text: String,
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// The lowest allowed.
        lo: String,
        /// The highest allowed.
        hi: String,
    },
}

/// A part of a URI that does not percent-decode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EscapeError {
    /// `%` not followed by two hex digits.
    #[error("bad percent escape at byte {at} in '{part}'")]
    Percent {
        /// The part.
        part: String,
        /// Where the `%` is.
        at: usize,
    },
    /// Decoded bytes that are not UTF-8.
    #[error("'{part}' does not decode to UTF-8")]
    Utf8 {
        /// The part.
        part: String,
    },
}

/// A parsed source URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceUri {
    /// The text as the user wrote it, for messages.
    pub text: String,
    /// Lower-case scheme, e.g. `synthetic`, `file`, `v4l2`.
    pub scheme: String,
    /// Everything between `://` and `?`, percent-decoded (a path for `file` and `v4l2`).
    pub location: String,
    params: BTreeMap<String, String>,
}

impl SourceUri {
    /// Parses `text`. Errors say what a URI must look like.
    pub fn parse(text: &str) -> Result<SourceUri, UriError> {
        let (scheme, rest) = text.split_once("://").ok_or_else(|| UriError::NotAUri { text: text.into() })?;
        if scheme.is_empty() || !scheme.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(UriError::BadScheme { text: text.into(), scheme: scheme.into() });
        }
        let (location, query) = match rest.split_once('?') {
            Some((l, q)) => (l, Some(q)),
            None => (rest, None),
        };
        let decode = |part: &str| {
            percent_decode(part).map_err(|source| UriError::Escape { text: text.into(), source })
        };
        let mut params = BTreeMap::new();
        for pair in query.into_iter().flat_map(|q| q.split('&')).filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| UriError::NoValue { text: text.into(), item: pair.into() })?;
            let k = decode(k)?;
            let v = decode(v)?;
            if params.insert(k.to_ascii_lowercase(), v).is_some() {
                return Err(UriError::Twice { text: text.into(), key: k });
            }
        }
        Ok(SourceUri {
            text: text.to_string(),
            scheme: scheme.to_ascii_lowercase(),
            location: decode(location)?,
            params,
        })
    }

    /// Fails if any query key is not in `allowed`, naming the offender and the allowed keys.
    pub fn check_keys(&self, allowed: &[&str]) -> Result<(), UriError> {
        match self.params.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(UriError::UnknownKey {
                text: self.text.clone(),
                scheme: self.scheme.clone(),
                key: k.clone(),
                allowed: allowed.join(", "),
            }),
            None => Ok(()),
        }
    }

    /// True when the query has `key`.
    pub fn has(&self, key: &str) -> bool {
        self.params.contains_key(key)
    }

    /// The raw value of `key`, if given.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// Parses `key` as `T`, or returns `default` when absent; a bad value names the key.
    pub fn get<T: FromStr>(&self, key: &str, default: T) -> Result<T, UriError>
    where
        T::Err: std::fmt::Display,
    {
        match self.params.get(key) {
            None => Ok(default),
            Some(v) => v.parse::<T>().map_err(|e| UriError::BadValue {
                text: self.text.clone(),
                key: key.into(),
                value: v.clone(),
                reason: e.to_string(),
            }),
        }
    }

    /// Like [`SourceUri::get`], then checks `lo <= value <= hi`.
    pub fn get_in<T>(&self, key: &str, default: T, lo: T, hi: T) -> Result<T, UriError>
    where
        T: FromStr + PartialOrd + std::fmt::Display + Copy,
        T::Err: std::fmt::Display,
    {
        let v = self.get(key, default)?;
        if v < lo || v > hi {
            return Err(UriError::OutOfRange {
                text: self.text.clone(),
                key: key.into(),
                value: v.to_string(),
                lo: lo.to_string(),
                hi: hi.to_string(),
            });
        }
        Ok(v)
    }
}

/// Decodes `%XX` escapes (the URI's and the HTTP server's query values).
pub(crate) fn percent_decode(s: &str) -> Result<String, EscapeError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| EscapeError::Percent { part: s.into(), at: i })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| EscapeError::Utf8 { part: s.into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scheme_location_and_query() {
        let u = SourceUri::parse("file://my%20clips/a.yuv?width=640&height=480&format=yuyv").unwrap();
        assert_eq!(u.scheme, "file");
        assert_eq!(u.location, "my clips/a.yuv");
        assert_eq!(u.get("width", 0u32).unwrap(), 640);
        assert_eq!(u.get_str("format"), Some("yuyv"));
        let v = SourceUri::parse("v4l2:///dev/video0").unwrap();
        assert_eq!(v.location, "/dev/video0");
        let s = SourceUri::parse("synthetic://").unwrap();
        assert_eq!((s.scheme.as_str(), s.location.as_str()), ("synthetic", ""));
    }

    #[test]
    fn rejects_bad_uris_with_reasons() {
        assert!(SourceUri::parse("/dev/video0").unwrap_err().to_string().contains("scheme://"));
        assert!(SourceUri::parse("a://x?w").unwrap_err().to_string().contains("no value"));
        assert!(SourceUri::parse("a://x?w=1&w=2").unwrap_err().to_string().contains("twice"));
        assert!(SourceUri::parse("a://x%zz").unwrap_err().to_string().contains("percent"));
        let u = SourceUri::parse("synthetic://?widht=3").unwrap();
        let e = u.check_keys(&["width", "height"]).unwrap_err().to_string();
        assert!(e.contains("unknown key 'widht'") && e.contains("width, height"), "{e}");
        let u = SourceUri::parse("synthetic://?width=-3").unwrap();
        assert!(u.get("width", 0u32).unwrap_err().to_string().contains("bad value '-3' for 'width'"));
        let u = SourceUri::parse("synthetic://?width=99999").unwrap();
        assert!(u.get_in("width", 640u32, 16, 8192).unwrap_err().to_string().contains("out of range"));
    }
}
