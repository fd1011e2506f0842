//! The shape of the code, checked: no file of `src/` reaches itself through the paths it
//! names (`use crate::…`, `crate::a::b` in code, `super::…`), in the library or in the binary.
//! A circle of imports is how layers melt into one knot (docs/ARCHITECTURE.md draws the floors).
//!
//! The scan is textual: comments, strings and character literals are dropped, then every
//! `crate::` and `super::` path (braced groups expanded) is resolved to the longest module
//! prefix that is a file. A path into a file's own inline modules (`mod tests`) is that file.
//! A `mod.rs` naming its own submodules by relative path (`pub use cpu::CpuPreprocessor`) is
//! not followed: that is the module's inside, as the issue that set this rule defined it
//! ("a file that reaches itself through `use crate::` imports").

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::common::repo;

/// A module path (`["output", "http"]`), the crate root being empty.
type Module = Vec<String>;

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module a file under `src/` defines: `a/b.rs` and `a/b/mod.rs` are `a::b`.
fn module_of(rel: &Path) -> Module {
    let mut parts: Vec<String> =
        rel.with_extension("").iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib" || p == "main") {
        parts.pop();
    }
    parts
}

/// `text` without comments, string and character literals (their contents could hold paths
/// or braces).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            let mut depth = 0;
            while i < b.len() {
                if text[i..].starts_with("/*") {
                    depth += 1;
                    i += 2;
                } else if text[i..].starts_with("*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(rest) {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = i + 2 + hashes;
            i = body + text[body..].find(&close).map_or(text.len() - body, |e| e + close.len());
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && is_char_literal(&b[i..]) {
            // `'\''`, `'\n'`, `'\u{..}'`: the escaped character, then up to the closing quote.
            i += if b[i + 1] == b'\\' {
                4 + b[i + 3..].iter().position(|&c| c == b'\'').unwrap_or(0)
            } else {
                3
            };
            out.push_str("' '");
        } else {
            let ch = rest.chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The number of `#` of a raw string starting here (`r"`, `r#"`, `br##"`), if one does.
fn raw_string_start(s: &str) -> Option<usize> {
    let s = s.strip_prefix('b').unwrap_or(s);
    let s = s.strip_prefix('r')?;
    let hashes = s.bytes().take_while(|&c| c == b'#').count();
    (s.as_bytes().get(hashes) == Some(&b'"')).then_some(hashes)
}

/// Whether the quote at the start of `b` opens a character literal (not a lifetime).
fn is_char_literal(b: &[u8]) -> bool {
    match b.get(1) {
        Some(b'\\') => true,
        Some(_) => {
            // One character (UTF-8: up to 4 bytes), then the closing quote.
            (2..=5).any(|k| {
                b.get(k) == Some(&b'\'')
                    && std::str::from_utf8(&b[1..k]).is_ok_and(|c| c.chars().count() == 1)
            })
        }
        None => false,
    }
}

/// Every path `text` names from `crate::` or `super::`, with the inline modules open where it
/// is named (`mod tests { use super::*; }` names the file's own module). Braced groups are
/// expanded: `crate::{a, b::{c, d}}` gives `a`, `b::c`, `b::d`.
fn paths(code: &str) -> Vec<(Vec<String>, usize)> {
    let mut found = Vec::new();
    let b = code.as_bytes();
    let mut inline: Vec<usize> = Vec::new(); // brace depths at which inline modules opened
    let mut depth = 0usize;
    let mut i = 0;
    let ident_end = |from: usize| {
        from + code[from..].find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(code.len() - from)
    };
    while i < b.len() {
        let at_word = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b':');
        match b[i] {
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
            }
            _ if at_word && code[i..].starts_with("mod ") => {
                let name_at = i + 4;
                let end = ident_end(name_at);
                if code[end..].trim_start().starts_with('{') {
                    inline.push(depth);
                }
            }
            _ if at_word && (code[i..].starts_with("crate::") || code[i..].starts_with("super::")) => {
                let start = i;
                let (tree, len) = path_tree(&code[i..]);
                for p in tree {
                    found.push((p, inline.len()));
                }
                i = start + len;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The paths a `crate::…` / `super::…` expression names and its length in `s`.
fn path_tree(s: &str) -> (Vec<Vec<String>>, usize) {
    let mut i = 0;
    let mut prefix = Vec::new();
    let b = s.as_bytes();
    loop {
        let end = i + s[i..].find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len() - i);
        if end > i {
            prefix.push(s[i..end].to_string());
        }
        i = end;
        let ws = s[i..].len() - s[i..].trim_start().len();
        if s[i + ws..].starts_with("::") {
            i += ws + 2;
            let ws = s[i..].len() - s[i..].trim_start().len();
            i += ws;
            if b.get(i) == Some(&b'{') {
                // A group: split at top-level commas.
                let mut d = 0;
                let mut j = i;
                while j < b.len() {
                    match b[j] {
                        b'{' => d += 1,
                        b'}' => {
                            d -= 1;
                            if d == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                let inner = &s[i + 1..j];
                let mut out = Vec::new();
                let (mut d, mut from) = (0, 0);
                for (k, c) in inner.char_indices().chain(std::iter::once((inner.len(), ','))) {
                    match c {
                        '{' => d += 1,
                        '}' => d -= 1,
                        ',' if d == 0 => {
                            let item = inner[from..k].trim();
                            from = k + 1;
                            if item.is_empty() {
                                continue;
                            }
                            let (sub, _) = path_tree(item);
                            for p in sub {
                                let mut full = prefix.clone();
                                full.extend(p.into_iter().filter(|x| x != "self"));
                                out.push(full);
                            }
                        }
                        _ => {}
                    }
                }
                return (out, j + 1);
            }
            continue;
        }
        return (vec![prefix], i);
    }
}

/// The files of one crate (`root`: its root file's module path relative to `src/`) and the
/// files each names.
fn graph(files: &[(Module, PathBuf)]) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules: BTreeSet<&Module> = files.iter().map(|(m, _)| m).collect();
    let mut edges = BTreeMap::new();
    for (module, path) in files {
        let code = code_only(&std::fs::read_to_string(path).unwrap());
        let mut to = BTreeSet::new();
        for (p, inline_depth) in paths(&code) {
            let mut segments = p.into_iter();
            let mut at: Module = match segments.next().as_deref() {
                Some("crate") => Vec::new(),
                Some("super") => {
                    // `super` from inside the file's inline modules stays in the file.
                    let mut ups = 1usize;
                    let mut rest: Vec<String> = Vec::new();
                    for s in segments.by_ref() {
                        if s == "super" && rest.is_empty() {
                            ups += 1;
                        } else {
                            rest.push(s);
                        }
                    }
                    if ups <= inline_depth {
                        continue;
                    }
                    let ups = ups - inline_depth;
                    // `super` of `a/b.rs` and of `a/b/mod.rs` (both `a::b`) is `a`.
                    let mut base = module.clone();
                    for _ in 0..ups {
                        if base.pop().is_none() {
                            break;
                        }
                    }
                    base.extend(rest);
                    base
                }
                _ => continue,
            };
            at.extend(segments);
            let target = (0..=at.len()).rev().map(|k| at[..k].to_vec()).find(|m| modules.contains(m));
            if let Some(target) = target.filter(|t| t != module) {
                to.insert(target);
            }
        }
        edges.insert(module.clone(), to);
    }
    edges
}

/// A circle through `start`, if one exists: the files in order, `start` first.
fn circle(edges: &BTreeMap<Module, BTreeSet<Module>>, start: &Module) -> Option<Vec<Module>> {
    // Breadth first from `start`'s successors back to `start`: the shortest circle.
    let mut came_from: BTreeMap<Module, Module> = BTreeMap::new();
    let mut queue: std::collections::VecDeque<Module> = edges[start].iter().cloned().collect();
    for m in &queue {
        came_from.insert(m.clone(), start.clone());
    }
    while let Some(m) = queue.pop_front() {
        if &m == start {
            let mut path = vec![start.clone()];
            let mut at = came_from[start].clone();
            while &at != start {
                path.push(at.clone());
                at = came_from[&at].clone();
            }
            path[1..].reverse();
            return Some(path);
        }
        for n in edges.get(&m).into_iter().flatten() {
            if !came_from.contains_key(n) {
                came_from.insert(n.clone(), m.clone());
                queue.push_back(n.clone());
            }
        }
    }
    None
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "(crate root)".into()
    } else {
        m.join("::")
    }
}

/// The library's files and the binary's (`main.rs`, `cli/`), each crate apart.
fn crates() -> [Vec<(Module, PathBuf)>; 2] {
    let src = repo().join("src");
    let mut all = Vec::new();
    rust_files(&src, &mut all);
    let (mut lib, mut bin) = (Vec::new(), Vec::new());
    for p in all {
        let rel = p.strip_prefix(&src).unwrap().to_path_buf();
        let module = module_of(&rel);
        if rel == Path::new("main.rs") || rel.starts_with("cli") {
            bin.push((module, p));
        } else {
            lib.push((module, p));
        }
    }
    [lib, bin]
}

#[test]
fn no_file_of_src_reaches_itself_through_its_imports() {
    let mut circles = Vec::new();
    for files in crates() {
        let edges = graph(&files);
        let mut seen = BTreeSet::new();
        for (m, _) in &files {
            if let Some(c) = circle(&edges, m) {
                let key: BTreeSet<Module> = c.iter().cloned().collect();
                if seen.insert(key) {
                    circles.push(c.iter().map(name).collect::<Vec<_>>().join(" -> ") + " -> " + &name(m));
                }
            }
        }
    }
    assert!(circles.is_empty(), "import circles among src/ files:\n{}", circles.join("\n"));
}

#[test]
fn the_scan_sees_the_forms_of_import_it_must() {
    let code = code_only(
        "use crate::{a::{b, c as d}, e};\n// use crate::commented;\nlet s = \"crate::in_string\";\n\
         let c = '{';\nfn f<'a>(x: &'a str) { crate::g::h(x); }\nmod tests { use super::*; use super::super::up; }\n\
         use super::sibling::Thing;\nlet r = r#\"crate::raw\"#;",
    );
    let got: Vec<(String, usize)> = paths(&code).into_iter().map(|(p, d)| (p.join("::"), d)).collect();
    let want = [
        ("crate::a::b", 0),
        ("crate::a::c", 0),
        ("crate::e", 0),
        ("crate::g::h", 0),
        ("super", 1),
        ("super::super::up", 1),
        ("super::sibling::Thing", 0),
    ];
    assert_eq!(got, want.map(|(p, d)| (p.to_string(), d)), "from {code}");
}

#[test]
fn a_planted_circle_is_found() {
    // Two files naming each other, as `config.rs` and `output/mavlink` once did through four more.
    let dir = std::env::temp_dir().join(format!("jd-arch-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::x::Thing;\n").unwrap();
    std::fs::write(dir.join("b/mod.rs"), "pub mod x;\n").unwrap();
    std::fs::write(dir.join("b/x.rs"), "use super::super::a::Other;\n").unwrap();
    std::fs::write(dir.join("c.rs"), "use crate::a::Other;\nmod tests { use super::*; }\n").unwrap();
    let files: Vec<(Module, PathBuf)> = ["a.rs", "b/mod.rs", "b/x.rs", "c.rs"]
        .iter()
        .map(|f| (module_of(Path::new(f)), dir.join(f)))
        .collect();
    let edges = graph(&files);
    let m = |s: &str| s.split("::").map(String::from).collect::<Module>();
    assert_eq!(circle(&edges, &m("a")), Some(vec![m("a"), m("b::x")]));
    assert_eq!(circle(&edges, &m("c")), None, "a file's own tests are the file");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The functions of `text` longer than `max` lines, by name (a `fn` line to the closing brace at
/// its indentation, as rustfmt lays them out).
fn long_functions(text: &str, max: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let after_vis = trimmed
            .strip_prefix("pub ")
            .or_else(|| trimmed.strip_prefix("pub(").and_then(|r| r.split_once(") ").map(|(_, rest)| rest)));
        let Some(name) = after_vis.unwrap_or(trimmed).strip_prefix("fn ") else { continue };
        let name: String = name.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let indent = line.len() - trimmed.len();
        let close = " ".repeat(indent) + "}";
        if let Some(end) = lines[i..].iter().position(|l| l.trim_end() == close) {
            if end + 1 > max {
                long.push((name, end + 1));
            }
        }
    }
    long
}

#[test]
fn no_function_of_the_pipeline_is_longer_than_120_lines() {
    let mut files = Vec::new();
    rust_files(&repo().join("src/pipeline"), &mut files);
    let long: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            long_functions(&std::fs::read_to_string(f).unwrap(), 120)
                .into_iter()
                .map(move |(func, n)| format!("{name}: {func} is {n} lines"))
        })
        .collect();
    assert!(long.is_empty(), "split these into steps: {long:?}");
    // The measure itself: a 3-line function is 3 lines.
    assert_eq!(long_functions("fn a() {\n    x();\n}\n", 2), vec![("a".to_string(), 3)]);
}
