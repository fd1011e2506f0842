//! The ONNX Runtime library the tests load: `ORT_DYLIB_PATH`, or the wheel `.ci/run` unpacks
//! under `target/ort` (the same two places build.rs looks before it sets `jetdetect_has_ort`).

use std::path::PathBuf;

/// The library, where there is one (build.rs includes this file to decide the same way).
pub fn find() -> Option<PathBuf> {
    let from_env = std::env::var_os("ORT_DYLIB_PATH").map(PathBuf::from).filter(|p| p.is_file());
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ort/onnxruntime/capi");
    from_env.or_else(|| {
        std::fs::read_dir(&local).ok()?.filter_map(|e| e.ok().map(|e| e.path())).find(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libonnxruntime.so."))
        })
    })
}

/// The library. A test that asks for it runs only where build.rs found one or
/// `JETDETECT_REQUIRE_ORT` is set, so its absence here is a failure that says what to do.
pub fn library() -> PathBuf {
    find().unwrap_or_else(|| {
        panic!(
            "no ONNX Runtime library: set ORT_DYLIB_PATH to a libonnxruntime.so.1.x \
             (pip install onnxruntime; docs/reliability.md)"
        )
    })
}
