//! Which libraries a shared library needs that the loader cannot find: on a Jetson, ONNX
//! Runtime or one of its GPU providers usually fails to load for exactly one missing library
//! (`libcudnn.so.9`, `libnvinfer.so.10`, `libcublasLt.so.12`), and the loader's message for the
//! provider names only the provider. This reads the library's `DT_NEEDED` entries from its ELF
//! dynamic section and asks the loader for each, so the message can name the missing ones.
//!
//! Written here rather than with an ELF crate: it needs two section headers and one table of an
//! ELF64 little-endian file (x86_64 and aarch64, the only targets that load ONNX Runtime), about
//! sixty lines, where a crate would add a dependency to every build for an error path.

use std::ffi::CStr;
use std::path::Path;

/// `SHT_DYNAMIC`.
const SHT_DYNAMIC: u32 = 6;
/// `DT_NEEDED`.
const DT_NEEDED: u64 = 1;

/// The `DT_NEEDED` names of the ELF64 little-endian shared library `bytes` (empty for anything
/// else, or a file too short or inconsistent to read).
pub fn needed(bytes: &[u8]) -> Vec<String> {
    // Offsets come from the file: a field past the end (or past usize) is `None`, never a panic.
    let field = |o: usize, n: usize| bytes.get(o..o.checked_add(n)?);
    let u16_at = |o: usize| field(o, 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| field(o, 4).map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()));
    let u64_at = |o: usize| field(o, 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
    // ELF magic, 64-bit (class 2), little-endian (data 1).
    if bytes.get(0..6) != Some(b"\x7fELF\x02\x01") {
        return Vec::new();
    }
    let (Some(shoff), Some(shentsize), Some(shnum)) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c)) else {
        return Vec::new();
    };
    let section = |i: usize| {
        let at = (shoff as usize).checked_add(i.checked_mul(shentsize as usize)?)?;
        // sh_type, sh_offset, sh_size, sh_link.
        let at_plus = |n: usize| at.checked_add(n);
        Some((
            u32_at(at_plus(4)?)?,
            u64_at(at_plus(0x18)?)? as usize,
            u64_at(at_plus(0x20)?)? as usize,
            u32_at(at_plus(0x28)?)?,
        ))
    };
    let mut out = Vec::new();
    for i in 0..shnum as usize {
        let Some((kind, offset, size, link)) = section(i) else { break };
        if kind != SHT_DYNAMIC {
            continue;
        }
        let Some((_, str_offset, str_size, _)) = section(link as usize) else { break };
        let Some(strings) = bytes.get(str_offset..str_offset.saturating_add(str_size)) else { break };
        for entry in (offset..offset.saturating_add(size)).step_by(16) {
            let (Some(tag), Some(value)) = (u64_at(entry), entry.checked_add(8).and_then(u64_at)) else {
                break;
            };
            if tag == 0 {
                break;
            }
            if tag == DT_NEEDED {
                let name = strings.get(value as usize..).and_then(|s| CStr::from_bytes_until_nul(s).ok());
                if let Some(name) = name.and_then(|n| n.to_str().ok()) {
                    out.push(name.to_string());
                }
            }
        }
    }
    out
}

/// The libraries `library` needs that the loader cannot load, each with the loader's words
/// (which name a library missing further down). A library beside `library` counts as found
/// (ONNX Runtime's providers find each other through `$ORIGIN`).
pub fn missing(library: &Path) -> Vec<String> {
    let Ok(bytes) = std::fs::read(library) else { return Vec::new() };
    let beside = library.parent();
    needed(&bytes)
        .into_iter()
        .filter(|name| !beside.is_some_and(|d| d.join(name).exists()))
        .filter_map(|name| super::ffi::loader_refuses(&name).map(|why| format!("{name} ({why})")))
        .collect()
}

/// `libonnxruntime_providers_<name>.so` beside `library`, for the GPU providers.
pub fn provider_library(library: &Path, provider: &str) -> Option<std::path::PathBuf> {
    let p = library.parent()?.join(format!("libonnxruntime_providers_{provider}.so"));
    p.exists().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_needed_libraries_of_this_test_binary_are_read_and_found() {
        if cfg!(target_feature = "crt-static") {
            return; // a static binary needs nothing
        }
        let me = std::env::current_exe().unwrap();
        let names = needed(&std::fs::read(&me).unwrap());
        assert!(names.iter().any(|n| n.starts_with("libc.so")), "{names:?}");
        assert_eq!(missing(&me), Vec::<String>::new());
    }

    #[test]
    fn a_missing_library_is_named_with_the_loaders_words() {
        let why = super::super::ffi::loader_refuses("libjetdetect-not-there.so.7").unwrap();
        assert!(why.contains("libjetdetect-not-there.so.7") && why.contains("No such file"), "{why}");
        assert_eq!(needed(b"not an ELF file"), Vec::<String>::new());
        assert_eq!(needed(b"\x7fELF\x02\x01\x01"), Vec::<String>::new());
        // Section headers at the very end of the address space: nothing read, no overflow.
        let mut elf = b"\x7fELF\x02\x01".to_vec();
        elf.resize(0x40, 0);
        elf[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        elf[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3c..0x3e].copy_from_slice(&4u16.to_le_bytes());
        assert_eq!(needed(&elf), Vec::<String>::new());
    }
}
