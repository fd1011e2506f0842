//! Finding and loading ONNX Runtime's library: where JetPack, pip wheels and source builds put
//! it, the version floor of the `ort` binding, and the TensorRT and CUDA versions beside it.

use super::*;

/// Where ONNX Runtime's library is installed, in order of preference, under the root standing for `/`:
/// source builds and jetson-containers (`--build_shared_lib`, installed to `/usr/local/lib`), distribution
/// packages, `/opt`, and the `onnxruntime/capi/` folder of a pip wheel (NVIDIA's and the Jetson Zoo's
/// `onnxruntime-gpu`, PyPI's `onnxruntime`) in a versioned Python's `dist-packages` or `site-packages`.
/// A `*` stands for any `python3.N`; each folder is searched for `libonnxruntime.so` and
/// `libonnxruntime.so.1.N.M` (wheels ship only the versioned name), the highest version first.
pub const SEARCH: [&str; 9] = [
    "usr/local/lib",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib/x86_64-linux-gnu",
    "usr/lib",
    "opt/onnxruntime/lib",
    "usr/local/lib/python3*/dist-packages/onnxruntime/capi",
    "usr/lib/python3/dist-packages/onnxruntime/capi",
    "usr/local/lib/python3*/site-packages/onnxruntime/capi",
    "usr/lib/python3*/site-packages/onnxruntime/capi",
];

/// The oldest ONNX Runtime jetdetect loads: its binding (`ort` 2.0) needs C API level 17.
pub const ORT_FLOOR: &str = "1.17";

/// How to get a usable ONNX Runtime, per JetPack (docs/accelerators.md has the table).
pub(super) const ORT_WAY: &str =
    "JetPack 6/7: jetson-containers' onnxruntime (1.17 and newer, TensorRT provider) or \
    NVIDIA's onnxruntime-gpu wheel for your JetPack; JetPack 5.1: an onnxruntime-gpu 1.17 or 1.18 wheel \
    built for JetPack 5 (against its TensorRT 8.5), or ONNX Runtime 1.17+ built from source there \
    (jetson-containers' default for JetPack 5, 1.16.3, is too old); JetPack 4 has no 1.17 build: use \
    [engine] kind = \"tract\"; a PC: pip install \"onnxruntime>=1.17\". Then set [engine] library \
    (docs/accelerators.md)";

/// `libonnxruntime.so` or `libonnxruntime.so.1.N.M` in `dir`, the highest version first.
pub(super) fn libraries_in(dir: &Path) -> Vec<PathBuf> {
    let version = |name: &str| -> Option<Vec<u32>> {
        let rest = name.strip_prefix("libonnxruntime.so")?;
        if rest.is_empty() {
            return Some(Vec::new());
        }
        rest.strip_prefix('.')?.split('.').map(|p| p.parse().ok()).collect()
    };
    let mut found: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((version(e.file_name().to_str()?)?, e.path())))
        .collect();
    // Highest version first; the unversioned name (a link to one of them) after the versioned ones.
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|(_, p)| p).collect()
}

/// Every ONNX Runtime library under `root`, in the order of [`SEARCH`].
pub fn installed_libraries(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for pattern in SEARCH {
        let dirs: Vec<PathBuf> = match pattern.split_once("python3*") {
            Some((before, after)) => {
                let base = root.join(before);
                let mut pythons: Vec<(u32, PathBuf)> = std::fs::read_dir(&base)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|e| {
                        let minor = e.file_name().to_str()?.strip_prefix("python3.")?.parse().ok()?;
                        Some((minor, e.path().join(after.trim_start_matches('/'))))
                    })
                    .collect();
                pythons.sort_by_key(|p| std::cmp::Reverse(p.0));
                pythons.into_iter().map(|(_, d)| d).collect()
            }
            None => vec![root.join(pattern)],
        };
        for d in dirs {
            out.extend(libraries_in(&d));
        }
    }
    out
}

/// The library to load: the configured path, `ORT_DYLIB_PATH`, or the first found in [`SEARCH`].
pub fn find_library(configured: Option<&Path>) -> Result<PathBuf, EngineError> {
    if let Some(p) = configured.filter(|p| !p.as_os_str().is_empty()) {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    installed_libraries(Path::new("/")).into_iter().next().ok_or_else(|| {
        EngineError::Model(format!(
            "ONNX Runtime library not found: set [engine] library or ORT_DYLIB_PATH to libonnxruntime.so \
             ({ORT_FLOOR} or newer; {ORT_WAY}), or use [engine] kind = \"tract\". Looked in: {}",
            searched()
        ))
    })
}

/// The search locations as absolute paths, for messages.
pub fn searched() -> String {
    SEARCH.iter().map(|p| format!("/{p}")).collect::<Vec<_>>().join(", ")
}

/// Says why `library` could not be loaded, and what to do.
pub(super) fn load_error(library: &Path, e: &ort::LoadDynamicError) -> String {
    let shown = library.display();
    match e {
        ort::LoadDynamicError::BadVersion { version_str, .. } => format!(
            "{shown}: ONNX Runtime {version_str} is older than {ORT_FLOOR}, the oldest jetdetect can load \
             (its ONNX Runtime binding needs C API level 17). {ORT_WAY}"
        ),
        ort::LoadDynamicError::MissingApi { .. } => {
            format!("{shown}: not an ONNX Runtime library (it exports no OrtGetApiBase): set [engine] library to libonnxruntime.so")
        }
        ort::LoadDynamicError::InvalidVersionString => {
            format!("{shown}: its version string is not readable: is it ONNX Runtime? {ORT_WAY}")
        }
        ort::LoadDynamicError::Dlopen { error, .. } => {
            // libloading says "dlopen failed"; the loader's own words (which name the file it
            // could not find) are the error's source.
            let mut words = error.to_string();
            let mut source = std::error::Error::source(error);
            while let Some(s) = source {
                words = format!("{words}: {s}");
                source = s.source();
            }
            let missing = super::needed::missing(library);
            let hint = if cfg!(target_feature = "crt-static") {
                " (this is a statically linked build, which cannot load libraries: use the JetPack/glibc build)"
                    .to_string()
            } else if !missing.is_empty() {
                format!(
                    "; the loader cannot find what it needs: {} (install them, or add their folder to \
                     LD_LIBRARY_PATH)",
                    missing.join(", ")
                )
            } else {
                " (built for another CPU architecture?)".to_string()
            };
            format!("{shown}: cannot load ONNX Runtime: {words}{hint}")
        }
    }
}

/// Loads the library once per process and returns its environment. A failed
/// load is not remembered, so a corrected path can be tried again.
pub(super) fn environment(library: &Path) -> Result<&'static ort::environment::Environment, EngineError> {
    static LOADED: Mutex<Option<(PathBuf, &'static ort::environment::Environment)>> = Mutex::new(None);
    if !library.exists() {
        return Err(EngineError::Model(format!(
            "{}: no such file: set [engine] library or ORT_DYLIB_PATH to libonnxruntime.so, or use [engine] kind = \"tract\"",
            library.display()
        )));
    }
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((p, env)) = loaded.as_ref() {
        return if p == library {
            Ok(*env)
        } else {
            Err(EngineError::Model(format!(
                "ONNX Runtime is already loaded from {}; one process can load only one ({} was asked for)",
                p.display(),
                library.display()
            )))
        };
    }
    let builder = ort::init_from(library)
        .map_err(|e| EngineError::Load { message: load_error(library, &e), source: e })?;
    // ONNX Runtime's messages (and TensorRT's, which its provider relays) go to jetdetect's log.
    let env =
        builder.with_name("jetdetect").with_logger(Arc::new(super::trt_log::route)).build().map_err(|e| {
            EngineError::Ort {
                context: format!("{}: cannot initialise ONNX Runtime", library.display()),
                source: e,
            }
        })?;
    // A custom logger starts at VERBOSE; warnings and errors are what a service logs.
    env.set_log_level(ort::logging::LogLevel::Warning);
    let env: &'static ort::environment::Environment = Box::leak(Box::new(env));
    *loaded = Some((library.to_path_buf(), env));
    Ok(env)
}

/// Folders where the TensorRT provider's `libnvinfer` may be: the loader's
/// path, next to ONNX Runtime (pip wheels), JetPack and CUDA locations.
pub(super) fn tensorrt_dirs(library: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("LD_LIBRARY_PATH").map(|v| std::env::split_paths(&v).collect()).unwrap_or_default();
    if let Some(capi) = library.parent() {
        dirs.push(capi.to_path_buf());
        if let Some(site) = capi.parent().and_then(Path::parent) {
            dirs.push(site.join("tensorrt_libs"));
        }
    }
    for d in [
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/local/cuda/lib64",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
    ] {
        dirs.push(PathBuf::from(d));
    }
    dirs
}

/// The TensorRT version the provider will load, read from the first
/// `libnvinfer.so.*` found in `dirs` (symlinks resolved: `libnvinfer.so.10` ->
/// `10.3.0`). A cached engine only fits the TensorRT that built it.
pub fn tensorrt_version(dirs: &[PathBuf]) -> Option<String> {
    library_version(dirs, "libnvinfer.so.")
}

/// The version in the name of the first `{prefix}*` library found in `dirs`, links resolved, the
/// longest (most precise) one of its folder: `libcudart.so.12` -> `12.6.68`.
pub(super) fn library_version(dirs: &[PathBuf], prefix: &str) -> Option<String> {
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        let mut best: Option<String> = None;
        for e in entries.flatten() {
            let path = e.path();
            let real = std::fs::canonicalize(&path).unwrap_or(path);
            let Some(v) = real.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_prefix(prefix))
            else {
                continue;
            };
            if v.split('.').all(|p| p.parse::<u32>().is_ok())
                && best.as_ref().is_none_or(|b| v.split('.').count() > b.split('.').count())
            {
                best = Some(v.to_string());
            }
        }
        if best.is_some() {
            return best;
        }
    }
    None
}

/// The versions a cached engine is tied to, as its name carries them: `trt10.3.0_ort1.19.0`.
pub(super) fn cache_versions(tensorrt: Option<&str>, library: &Path) -> String {
    format!("trt{}_ort{}", tensorrt.unwrap_or("unknown"), ort_version(library))
}

/// The ONNX Runtime version, from its build information (`git-branch=rel-1.19.0`)
/// or the library's file name.
pub(super) fn ort_version(library: &Path) -> String {
    let info = ort::info();
    if let Some(v) = info.split("git-branch=rel-").nth(1) {
        return v.split([',', ' ']).next().unwrap_or(v).to_string();
    }
    let real = std::fs::canonicalize(library).unwrap_or_else(|_| library.to_path_buf());
    real.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split(".so.").nth(1))
        .unwrap_or("unknown")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensorrt_version_comes_from_the_resolved_libnvinfer() {
        let root = std::env::temp_dir().join(format!("jetdetect-trt-{}", std::process::id()));
        let (empty, jetpack, wheel) = (root.join("empty"), root.join("jetpack"), root.join("wheel"));
        for d in [&empty, &jetpack, &wheel] {
            std::fs::create_dir_all(d).unwrap();
        }
        // JetPack: libnvinfer.so.8 -> libnvinfer.so.8.5.2 (plus unrelated libraries).
        std::fs::write(jetpack.join("libnvinfer.so.8.5.2"), b"").unwrap();
        let _ = std::fs::remove_file(jetpack.join("libnvinfer.so.8"));
        std::os::unix::fs::symlink("libnvinfer.so.8.5.2", jetpack.join("libnvinfer.so.8")).unwrap();
        std::fs::write(jetpack.join("libnvinfer_plugin.so.8.5.2"), b"").unwrap();
        // A pip wheel ships only the major-version name.
        std::fs::write(wheel.join("libnvinfer.so.10"), b"").unwrap();
        assert_eq!(
            tensorrt_version(&[empty.clone(), jetpack.clone(), wheel.clone()]).as_deref(),
            Some("8.5.2")
        );
        assert_eq!(tensorrt_version(&[root.join("missing"), wheel]).as_deref(), Some("10"));
        assert_eq!(tensorrt_version(&[empty]), None);
        let _ = std::fs::remove_dir_all(root);
    }
}
