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
            inside = in_table(t.trim_start_matches('[').trim_end_matches(']').trim());
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
