//! The composition root: the one place that reads the whole [`Config`] and builds the parts of
//! the daemon from their sections. Below it, each part knows only its own section; the
//! pipeline knows the outputs only as [`Output`]s and the cameras as opened sources.

use std::time::Duration;

use crate::config::Config;
use crate::detector::{Detector, DetectorSetup};
use crate::error::{Error, Result};
use crate::hazard::Hazards;
use crate::output::{self, Output};
use crate::pipeline::model_file::ModelFile;
use crate::pipeline::{self, Camera, Pipeline, RunSummary};
use crate::power::telemetry::Sampler;
use crate::power::{ClockControl, PowerSession};
use crate::shutdown::Shutdown;
use crate::source;

/// How a run is started, beyond the config file.
#[derive(Default)]
pub struct RunOptions {
    /// Where frames and statistics go ([`outputs`], plus `--echo` or a benchmark's counter).
    pub outputs: Vec<Box<dyn Output>>,
    /// Stop after this many published frames (`jetdetect bench`); `None` runs until stopped.
    pub max_frames: Option<u64>,
    /// Do not print the statistics table at the end (the caller reports them).
    pub quiet: bool,
    /// Who applies and restores the clocks.
    pub clocks: ClockControl,
    /// The flight controller's attitude as the MAVLink output receives it ([`attitude_feed`]),
    /// for the hazard layers.
    pub attitude: Option<std::sync::Arc<crate::hazard::course::AttitudeFeed>>,
}

/// Where the flight controller's ATTITUDE goes from the MAVLink output to the hazard layers:
/// made when `config` has both, and a `[vehicle] width_m` for the course to use it.
pub fn attitude_feed(config: &Config) -> Option<std::sync::Arc<crate::hazard::course::AttitudeFeed>> {
    let wanted =
        config.output.mavlink.is_some() && config.hazards.enabled && config.vehicle.width_m.is_some();
    wanted.then(Default::default)
}

/// Runs the daemon `config` describes until `shutdown` is requested or its sources end. The
/// clocks come first: an unclean exit's changes are put back and the profile applied; they are
/// restored when this returns, whatever it returns.
pub fn run(config: &Config, options: RunOptions, shutdown: Shutdown) -> Result<RunSummary> {
    let power = match options.clocks {
        ClockControl::Daemon => PowerSession::start(&config.power)?,
        ClockControl::Service => PowerSession::observe(&config.power),
    };
    let telemetry =
        Sampler::spawn(power.discovered.clone(), Duration::from_millis(config.power.telemetry_ms))
            .map_err(|e| Error::io("cannot start the telemetry thread", e))?;
    let sources = &config.source.0;
    let many = sources.len() > 1;
    let mut opened = Vec::with_capacity(sources.len());
    for s in sources {
        let src = source::open_with(&s.uri, &s.controls).map_err(|e| match many {
            true => Error::Camera { camera: s.name.clone(), source: Box::new(e) },
            false => Error::Source(e),
        })?;
        match many {
            true => log::info!("source {}: {}", s.name, src.describe()),
            false => log::info!("source: {}", src.describe()),
        }
        opened.push(src);
    }
    let model_file = ModelFile::new(&config.model.path);
    let detector = detector(config)?;
    let mut cameras = Vec::with_capacity(sources.len());
    for ((s, source), hazards) in sources.iter().zip(opened).zip(hazard_layers(config, &detector)?) {
        let hazards = match (hazards, &options.attitude) {
            (Some(h), Some(feed)) => Some(h.with_attitude_feed(std::sync::Arc::clone(feed))),
            (h, _) => h,
        };
        let stale = s.stale_ms.map_or(config.latency.stale(), |ms| Duration::from_secs_f64(ms / 1e3));
        cameras.push(Camera { name: s.name.clone(), source, stale, hazards });
    }
    let run = Pipeline {
        cameras,
        detector,
        max_batch_asked: config.engine.max_batch,
        outputs: options.outputs,
        stats_interval: Duration::from_secs(config.output.stats_interval_s),
        latency: config.latency,
        model_file,
        max_frames: options.max_frames,
        quiet: options.quiet,
    };
    let summary = pipeline::run(run, &telemetry, shutdown);
    drop(telemetry);
    drop(power);
    summary
}

/// The detector the config describes (`[model]`, `[engine]`, `[preprocess]`, `[detect]`, sized
/// for its cameras, on the board at `[power] root`).
pub fn detector(config: &Config) -> Result<Detector> {
    Detector::open(&DetectorSetup {
        model: &config.model,
        engine: &config.engine,
        preprocess: &config.preprocess,
        detect: &config.detect,
        cameras: config.source.0.len(),
        board_root: &config.power.root,
    })
    .map_err(|e| at_model_key(config, e))
}

/// A model that cannot be what the config says (not a model, not a detector, names that do not
/// fit) as an error at its `[model]` key's line, and an `[engine] library` that cannot be loaded
/// at that key's; other errors (a provider, a GPU) as they are.
fn at_model_key(config: &Config, e: Error) -> Error {
    use crate::engine::EngineError;
    let text = e.to_string();
    // The engine's own errors say "model" for the library and the providers too: only those
    // about the model file (which they name) are the model's.
    let names_model = text.contains(&config.model.path.display().to_string());
    let library = &config.engine.library;
    if matches!(e, Error::Engine(_))
        && !library.as_os_str().is_empty()
        && text.contains(&library.display().to_string())
    {
        let text = text.strip_prefix("model error: ").unwrap_or(&text);
        return Error::Config(config.origin.error("engine", "library", format!("[engine] library: {text}")));
    }
    let key = match &e {
        Error::Engine(EngineError::Model(_) | EngineError::Read { .. } | EngineError::Tract { .. })
            if names_model =>
        {
            "path"
        }
        Error::Layout { .. } => "path",
        Error::ClassCount { .. } | Error::Names(_) if config.model.names.is_some() => "names",
        Error::ClassCount { .. } | Error::Names(_) => "path",
        _ => return e,
    };
    let text = text.strip_prefix("model error: ").unwrap_or(&text);
    Error::Config(config.origin.error("model", key, format!("[model] {key}: {text}")))
}

/// Each camera's hazard layer (`[hazards]`, the camera's `[source.camera]` or `[camera]`), when
/// enabled, knowing the model's classes: a `[hazards.classes]` name the model lacks is an error
/// at its line in the config.
pub fn hazard_layers(config: &Config, detector: &Detector) -> Result<Vec<Option<Hazards>>> {
    let mut layers = Vec::with_capacity(config.source.0.len());
    for s in &config.source.0 {
        if !config.hazards.enabled {
            layers.push(None);
            continue;
        }
        let camera = s.camera.as_ref().unwrap_or(&config.camera);
        let layer = Hazards::new(&config.hazards, camera, detector.names())
            .map_err(|e| config.origin.error("hazards", &format!("classes.{}", e.name), e.to_string()))?;
        layers.push(Some(layer.with_vehicle(&config.vehicle)));
    }
    Ok(layers)
}

/// What `run` builds before its first frame from `config`, built and dropped: the `[power]`
/// profile planned for the board (nothing written), the detector (`config` as given: `check`
/// hands it the CPU engine) and the hazard layers. Returns the
/// detector, for the caller to describe.
pub fn check(config: &Config) -> Result<Detector> {
    PowerSession::check(&config.power)?;
    let detector = detector(config)?;
    hazard_layers(config, &detector)?;
    Ok(detector)
}

/// The outputs `config` asks for: systemd's notify socket (when systemd set one; it keeps the
/// watchdog fed from now until the pipeline is ready), the socket (`[output]`) and the
/// HTTP server (`[metrics] listen`, with the live view under `[view]`), which bind when the
/// pipeline opens them. The MAVLink output passes the flight controller's ATTITUDE to
/// `attitude` ([`attitude_feed`]).
pub fn outputs(
    config: &Config,
    attitude: Option<&std::sync::Arc<crate::hazard::course::AttitudeFeed>>,
) -> Vec<Box<dyn Output>> {
    let o = &config.output;
    let group = (!o.socket_group.is_empty()).then_some(o.socket_group.as_str());
    let mut outputs: Vec<Box<dyn Output>> = vec![
        Box::new(output::notify::NotifyOutput::from_env()),
        Box::new(
            output::socket::SocketOutput::new(&o.socket, group, o.client_buffer_kib * 1024)
                .with_hazards(config.hazards.enabled),
        ),
    ];
    if let Some(m) = &config.output.mavlink {
        let mavlink = output::mavlink::MavlinkOutput::new(m);
        outputs.push(Box::new(match attitude {
            Some(feed) => mavlink.with_attitude_feed(std::sync::Arc::clone(feed)),
            None => mavlink,
        }));
    }
    #[cfg(feature = "ros2")]
    if let Some(r) = &config.output.ros2 {
        outputs.push(Box::new(output::ros2::Ros2Output::new(r, config.hazards.enabled)));
    }
    #[cfg(feature = "mqtt")]
    if let Some(m) = &config.output.mqtt {
        let cameras = config.source.0.iter().map(|s| s.name.clone()).collect();
        outputs.push(Box::new(output::mqtt::MqttOutput::new(m, config.hazards.enabled, cameras)));
    }
    if !config.metrics.listen.is_empty() {
        let cameras = config.source.0.iter().map(|s| s.name.clone()).collect();
        let (metrics, view, interval_s) = (&config.metrics, &config.view, config.output.stats_interval_s);
        outputs.push(Box::new(output::http::HttpOutput::new(metrics, view, cameras, interval_s)));
    }
    outputs
}
