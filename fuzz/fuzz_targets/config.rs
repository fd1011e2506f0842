//! `Config::parse` on arbitrary text: no panic, and every error names the file.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let path = Path::new("/etc/jetdetect/fuzzed.toml");
    if let Err(e) = jetdetect::config::Config::parse(text, path) {
        let message = e.to_string();
        assert!(message.starts_with("/etc/jetdetect/fuzzed.toml"), "{message}");
    }
});
