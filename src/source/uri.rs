//! Source URIs: `scheme://location?key=value&key=value`.
//!
//! Parsing is strict: a key that the scheme does not know is an error that
//! lists the keys it does know, so a typo never silently falls back to a default.

use std::collections::BTreeMap;
use std::str::FromStr;

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
    pub fn parse(text: &str) -> Result<SourceUri, String> {
        let (scheme, rest) = text.split_once("://").ok_or_else(|| {
            format!(
                "'{text}' is not a source URI: write scheme://location, e.g. synthetic://, \
                 file://images/, file://clip.yuv?width=640&height=480&format=yuyv or v4l2:///dev/video0"
            )
        })?;
        if scheme.is_empty() || !scheme.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(format!("'{text}': '{scheme}' is not a valid URI scheme"));
        }
        let (location, query) = match rest.split_once('?') {
            Some((l, q)) => (l, Some(q)),
            None => (rest, None),
        };
        let mut params = BTreeMap::new();
        for pair in query.into_iter().flat_map(|q| q.split('&')).filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("'{text}': query item '{pair}' has no value: write key=value"))?;
            let k = percent_decode(k).map_err(|e| format!("'{text}': {e}"))?;
            let v = percent_decode(v).map_err(|e| format!("'{text}': {e}"))?;
            if params.insert(k.to_ascii_lowercase(), v).is_some() {
                return Err(format!("'{text}': key '{k}' is given twice"));
            }
        }
        Ok(SourceUri {
            text: text.to_string(),
            scheme: scheme.to_ascii_lowercase(),
            location: percent_decode(location).map_err(|e| format!("'{text}': {e}"))?,
            params,
        })
    }

    /// Fails if any query key is not in `allowed`, naming the offender and the allowed keys.
    pub fn check_keys(&self, allowed: &[&str]) -> Result<(), String> {
        for k in self.params.keys() {
            if !allowed.contains(&k.as_str()) {
                return Err(format!(
                    "{}: unknown key '{k}' for {}:// sources; allowed keys: {}",
                    self.text,
                    self.scheme,
                    allowed.join(", ")
                ));
            }
        }
        Ok(())
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
    pub fn get<T: FromStr>(&self, key: &str, default: T) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        match self.params.get(key) {
            None => Ok(default),
            Some(v) => v.parse::<T>().map_err(|e| format!("{}: bad value '{v}' for '{key}': {e}", self.text)),
        }
    }

    /// Like [`SourceUri::get`], then checks `lo <= value <= hi`.
    pub fn get_in<T>(&self, key: &str, default: T, lo: T, hi: T) -> Result<T, String>
    where
        T: FromStr + PartialOrd + std::fmt::Display + Copy,
        T::Err: std::fmt::Display,
    {
        let v = self.get(key, default)?;
        if v < lo || v > hi {
            return Err(format!("{}: '{key}' = {v} is out of range: allowed {lo} to {hi}", self.text));
        }
        Ok(v)
    }
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape at byte {i} in '{s}'"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("'{s}' does not decode to UTF-8"))
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
        assert!(SourceUri::parse("/dev/video0").unwrap_err().contains("scheme://"));
        assert!(SourceUri::parse("a://x?w").unwrap_err().contains("no value"));
        assert!(SourceUri::parse("a://x?w=1&w=2").unwrap_err().contains("twice"));
        assert!(SourceUri::parse("a://x%zz").unwrap_err().contains("percent"));
        let u = SourceUri::parse("synthetic://?widht=3").unwrap();
        let e = u.check_keys(&["width", "height"]).unwrap_err();
        assert!(e.contains("unknown key 'widht'") && e.contains("width, height"), "{e}");
        let u = SourceUri::parse("synthetic://?width=-3").unwrap();
        assert!(u.get("width", 0u32).unwrap_err().contains("bad value '-3' for 'width'"));
        let u = SourceUri::parse("synthetic://?width=99999").unwrap();
        assert!(u.get_in("width", 640u32, 16, 8192).unwrap_err().contains("out of range"));
    }
}
