//! Where a key is in the config text: a plain line scan of `[section]` headers and
//! `key = value` lines (the forms this project's configs use), so that errors found after
//! parsing (a range, a rule across sections) still name `file:line`.

/// The 1-based line of the first `key = ...` in a table that `in_table` accepts; it is called
/// with each table header's name (`source` for `[source]` and `[[source]]`), in order.
fn find_key(text: &str, key: &str, mut in_table: impl FnMut(&str) -> bool) -> Option<usize> {
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            inside = in_table(table_name(t));
            continue;
        }
        if inside && t.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with('=')) {
            return Some(i + 1);
        }
    }
    None
}

/// The 1-based line of `key` in `[section]` of a TOML text, found by a plain scan
/// (the forms this project's configs use: `[section]` headers and `key = value`).
pub(super) fn locate(text: &str, section: &str, key: &str) -> Option<usize> {
    find_key(text, key, |name| name == section)
}

/// The 1-based line of `key` in the `index`-th `[[section]]` entry (or the `[section]` table),
/// or in its sub-table `[section.sub]`.
pub(super) fn locate_entry(
    text: &str,
    section: &str,
    index: usize,
    sub: Option<&str>,
    key: &str,
) -> Option<usize> {
    let mut entries = 0usize;
    find_key(text, key, |name| {
        if name == section {
            entries += 1;
            return entries == index + 1 && sub.is_none();
        }
        let inner = name.strip_prefix(section).and_then(|r| r.strip_prefix('.'));
        entries == index + 1 && inner.is_some() && inner == sub
    })
}

/// Where byte `offset` of a TOML text is: its table (`detect`, `hazards.tracking`, or
/// `[[source]] #2` for the second entry of an array of tables; empty at the top) and the key
/// whose `key = value` line holds it or, for a value over several lines, precedes it. `None`
/// for the key when the offset is on a table header.
pub(super) fn key_at(text: &str, offset: usize) -> (String, Option<String>) {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let this = text[line_start..].lines().next().unwrap_or("");
    let mut key = None;
    let mut header = None;
    for line in std::iter::once(this).chain(text[..line_start].lines().rev()) {
        let t = line.trim();
        if t.starts_with('[') {
            header = Some(t);
            break;
        }
        if key.is_none() {
            key = key_of(t);
        }
    }
    // On a header line itself there is no key.
    if this.trim().starts_with('[') {
        key = None;
    }
    let table = match header {
        None => String::new(),
        Some(h) if h.starts_with("[[") => {
            let name = table_name(h);
            let n = text[..line_start + this.len()]
                .lines()
                .filter(|l| l.trim().starts_with("[[") && table_name(l.trim()) == name)
                .count();
            format!("[[{name}]] #{n}")
        }
        Some(h) => table_name(h).to_string(),
    };
    (table, key)
}

/// The table a trimmed header line (`[name]` or `[[name]]`) opens.
fn table_name(header: &str) -> &str {
    header.trim_start_matches('[').trim_end_matches(']').trim()
}

/// The key of a `key = value` line (bare or quoted, possibly dotted).
fn key_of(line: &str) -> Option<String> {
    let (k, _) = line.split_once('=')?;
    let k = k.trim();
    let ok = !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '"' | '\'' | ' '));
    ok.then(|| k.replace(['"', '\''], ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_is_named_by_its_table_and_key() {
        let text = "top = 1\n[detect]\nconfidence = \"high\"\n[hazards.tracking]\nids = [\n  1,\n  -2,\n]\n\
                    [[source]]\nuri = \"a\"\n[[source]]\nuri = \"b\"\n";
        let at = |needle: &str| key_at(text, text.find(needle).unwrap());
        assert_eq!(at("1\n[detect]"), (String::new(), Some("top".into())));
        assert_eq!(at("\"high\""), ("detect".into(), Some("confidence".into())));
        assert_eq!(at("-2"), ("hazards.tracking".into(), Some("ids".into())));
        assert_eq!(at("[hazards"), ("hazards.tracking".into(), None));
        assert_eq!(at("\"b\""), ("[[source]] #2".into(), Some("uri".into())));
        assert_eq!(at("\"a\""), ("[[source]] #1".into(), Some("uri".into())));
    }
}
