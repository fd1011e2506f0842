//! ONNX Runtime's log, routed to jetdetect's, and TensorRT's placement report read out of it.
//!
//! ONNX Runtime writes to stderr on its own; jetdetect gives the environment a logger that
//! passes each message to the `log` crate at its level, so it lands in the journal with the
//! rest. TensorRT's builder messages reach ONNX Runtime's default logger through the TensorRT
//! provider's `TensorrtLogger`, which sends everything that is not an error at WARNING and
//! prefixes it `[<date> <time> <severity>]`; that prefix is read back here, so TensorRT's INFO
//! and VERBOSE lines go to `debug` and do not fill the journal with warnings.
//!
//! With `trt_detailed_build_log` on, an engine build with a DLA core prints which layers run
//! where: TensorRT 8 and later write `---------- Layers Running on DLA ----------` followed by
//! `[DlaLayer] {ForeignNode[first...last]}` lines and `---------- Layers Running on GPU
//! ----------` followed by `[GpuLayer] KIND: name` lines; layers refused by the DLA are warned of
//! one by one (`Layer 'x' (CAST): Unsupported on DLA. Switching this layer's device type to
//! GPU.`, `Default DLA is enabled but layer x is not supported on DLA, falling back to GPU.`,
//! `DLA supports only 16 subgraphs per DLA core. Switching to GPU for layer x`). [`Capture`]
//! collects those lines while a stage is built and [`Placement::parse`] reads them.
//!
//! Written from ONNX Runtime's `tensorrt_execution_provider.h` (the logger) and TensorRT's
//! builder output as quoted in NVIDIA's issue tracker; not yet run on a board.

use std::sync::Mutex;

/// Lines kept while a [`Capture`] is alive.
static CAPTURED: Mutex<Option<Vec<String>>> = Mutex::new(None);

/// The environment's logger: every ONNX Runtime message, to `log` at its level.
pub fn route(level: ort::logging::LogLevel, category: &str, _id: &str, location: &str, message: &str) {
    use ort::logging::LogLevel;
    let (tensorrt, text) = strip_tensorrt_prefix(message);
    if let Some(lines) = CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        if is_placement(text) {
            lines.push(text.to_string());
        }
    }
    let level = match (level, tensorrt) {
        (LogLevel::Fatal | LogLevel::Error, _) => log::Level::Error,
        (_, Some(TrtSeverity::Warning)) | (LogLevel::Warning, None) => log::Level::Warn,
        (_, Some(TrtSeverity::Info)) | (LogLevel::Info, None) => log::Level::Debug,
        _ => log::Level::Trace,
    };
    if log::log_enabled!(target: "onnxruntime", level) {
        let source = if tensorrt.is_some() { "TensorRT" } else { category };
        log::log!(target: "onnxruntime", level, "{source}: {text} ({location})");
    }
}

/// TensorRT's severity, as the provider's logger writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TrtSeverity {
    Warning,
    Info,
    Verbose,
}

/// `[2024-05-14 10:00:00    INFO] msg` -> (Info, `msg`); other messages unchanged.
fn strip_tensorrt_prefix(message: &str) -> (Option<TrtSeverity>, &str) {
    let Some(rest) = message.strip_prefix('[') else { return (None, message) };
    let Some((head, text)) = rest.split_once("] ") else { return (None, message) };
    if !head.starts_with(|c: char| c.is_ascii_digit()) {
        return (None, message);
    }
    let severity = match head.rsplit(' ').next().unwrap_or("") {
        "WARNING" => TrtSeverity::Warning,
        "INFO" => TrtSeverity::Info,
        // `UNKNOWN` is what the provider writes for kVERBOSE; errors never get here as WARNING.
        _ => TrtSeverity::Verbose,
    };
    (Some(severity), text)
}

fn is_placement(text: &str) -> bool {
    ["DLA", "[DlaLayer]", "[GpuLayer]", "Layers Running on GPU", "Layers running on GPU"]
        .iter()
        .any(|k| text.contains(k))
}

/// Collects TensorRT's placement lines while alive (one stage build at a time: the engine and
/// its stages are built one after the other on one thread).
pub struct Capture(());

impl Capture {
    /// Starts collecting.
    pub fn start() -> Capture {
        *CAPTURED.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
        Capture(())
    }

    /// Stops and returns the lines collected.
    pub fn finish(self) -> Vec<String> {
        CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// Where TensorRT put the layers of one engine build.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// DLA layers (fused groups: `{ForeignNode[dla/conv_3...dla/clip_5]}`).
    pub dla: Vec<String>,
    /// GPU layers, `KIND: name`.
    pub gpu: Vec<String>,
    /// Layers TensorRT moved from the DLA to the GPU, with its reason.
    pub fallbacks: Vec<String>,
}

impl Placement {
    /// Reads TensorRT's build messages (one per item, as [`Capture`] collects them).
    pub fn parse<S: AsRef<str>>(lines: &[S]) -> Placement {
        #[derive(PartialEq)]
        enum Section {
            None,
            Dla,
            Gpu,
        }
        let mut p = Placement::default();
        let mut section = Section::None;
        for line in lines.iter().flat_map(|l| l.as_ref().lines()) {
            let line = line.trim();
            let lower = line.to_ascii_lowercase();
            if lower.contains("layers running on dla") {
                section = Section::Dla;
            } else if lower.contains("layers running on gpu") {
                section = Section::Gpu;
            } else if let Some(layer) = line.strip_prefix("[DlaLayer]") {
                p.dla.push(layer.trim().to_string());
            } else if let Some(layer) = line.strip_prefix("[GpuLayer]") {
                p.gpu.push(layer.trim().to_string());
            } else if lower.contains("switching this layer's device type to gpu")
                || lower.contains("falling back to gpu")
                || lower.contains("switching to gpu for layer")
            {
                p.fallbacks.push(line.to_string());
            } else if line.starts_with('{') && section != Section::None {
                // TensorRT 7: the groups on one line, `{a,b}, {c}`.
                let groups = line.split("}, {").map(|g| format!("{{{}}}", g.trim_matches(['{', '}', ' '])));
                match section {
                    Section::Dla => p.dla.extend(groups),
                    _ => p.gpu.extend(groups),
                }
            } else if !line.is_empty() {
                section = Section::None;
            }
        }
        p
    }

    /// Nothing was reported (the engine came from the cache, or the log was not detailed).
    pub fn is_empty(&self) -> bool {
        self.dla.is_empty() && self.gpu.is_empty() && self.fallbacks.is_empty()
    }

    /// GPU layers and fallbacks that name a node with `prefix` (`dla/`: meant for the DLA).
    pub fn off_the_dla(&self, prefix: &str) -> Vec<&str> {
        self.gpu.iter().chain(&self.fallbacks).filter(|l| l.contains(prefix)).map(String::as_str).collect()
    }

    /// The report as text, one layer per line (what is saved next to the engine cache).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (title, list) in [("DLA", &self.dla), ("GPU", &self.gpu), ("moved to the GPU", &self.fallbacks)] {
            s.push_str(&format!("# {title}: {}\n", list.len()));
            for l in list {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TensorRT 8.5 build of the DLA form on AGX Orin as the provider relays it (layer names
    /// from `graph::build_dla`; message texts as TensorRT writes them).
    const BUILD_LOG: [&str; 9] = [
        "[2026-12-04 08:00:01    INFO] [MemUsageChange] Init CUDA: CPU +0, GPU +0, now: CPU 300, GPU 4000 (MiB)",
        "[2026-12-04 08:00:02 WARNING] Layer 'unpack/cast_0' (CAST): Unsupported on DLA. Switching this layer's device type to GPU.",
        "[2026-12-04 08:00:02 WARNING] Layer 'unpack/gather_7' (GATHER): Unsupported on DLA. Switching this layer's device type to GPU.",
        "[2026-12-04 08:00:03    INFO] ---------- Layers Running on DLA ----------",
        "[2026-12-04 08:00:03    INFO] [DlaLayer] {ForeignNode[dla/batchnormalization_12...dla/conv_17]}",
        "[2026-12-04 08:00:03    INFO] ---------- Layers Running on GPU ----------",
        "[2026-12-04 08:00:03    INFO] [GpuLayer] CAST: unpack/cast_0",
        "[2026-12-04 08:00:03    INFO] [GpuLayer] GATHER: unpack/gather_7",
        "[2026-12-04 08:00:04    INFO] [GpuLayer] CAST: output/cast_18",
    ];

    #[test]
    fn reads_the_placement_out_of_the_providers_messages() {
        let lines: Vec<&str> =
            BUILD_LOG.iter().map(|m| strip_tensorrt_prefix(m).1).filter(|t| is_placement(t)).collect();
        let p = Placement::parse(&lines);
        assert_eq!(p.dla, ["{ForeignNode[dla/batchnormalization_12...dla/conv_17]}"]);
        assert_eq!(p.gpu, ["CAST: unpack/cast_0", "GATHER: unpack/gather_7", "CAST: output/cast_18"]);
        assert_eq!(p.fallbacks.len(), 2);
        assert!(p.off_the_dla("dla/").is_empty());
        assert!(p.to_text().starts_with("# DLA: 1\n{ForeignNode"), "{}", p.to_text());
        // A layer of the DLA part on the GPU is found.
        let moved = Placement::parse(&[
            "---------- Layers Running on GPU ----------",
            "[GpuLayer] CONVOLUTION: dla/conv_17",
        ]);
        assert_eq!(moved.off_the_dla("dla/"), ["CONVOLUTION: dla/conv_17"]);
    }

    #[test]
    fn tensorrt_7_lists_groups_on_one_line() {
        let p = Placement::parse(&[
            "--------------- Layers running on DLA: ",
            "{conv_1,batch_norm_1}, {conv_2}",
            "--------------- Layers running on GPU: ",
            "{yolo_1}",
        ]);
        assert_eq!(p.dla, ["{conv_1,batch_norm_1}", "{conv_2}"]);
        assert_eq!(p.gpu, ["{yolo_1}"]);
    }

    #[test]
    fn severities_are_read_back_from_the_prefix() {
        assert_eq!(strip_tensorrt_prefix("[2026-12-04 08:00:01    INFO] x"), (Some(TrtSeverity::Info), "x"));
        assert_eq!(
            strip_tensorrt_prefix("[2026-12-04 08:00:01 WARNING] y"),
            (Some(TrtSeverity::Warning), "y")
        );
        assert_eq!(
            strip_tensorrt_prefix("[2026-12-04 08:00:01 UNKNOWN] z"),
            (Some(TrtSeverity::Verbose), "z")
        );
        assert_eq!(strip_tensorrt_prefix("[W:onnxruntime] plain"), (None, "[W:onnxruntime] plain"));
        assert_eq!(strip_tensorrt_prefix("no prefix"), (None, "no prefix"));
    }
}
