//! The composition root: the one place that reads the whole [`Config`] and builds the parts of
//! the daemon from their sections. Below it, each part knows only its own section; the
//! pipeline knows the outputs only as [`Output`]s.

use crate::config::Config;
use crate::detector::{Detector, DetectorSetup};
use crate::error::Result;
use crate::output::{self, Output};

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
}

/// The outputs `config` asks for: systemd's notify socket (when systemd set one; it keeps the
/// watchdog fed from now until the pipeline is ready), the socket (`[output]`) and the
/// HTTP server (`[metrics] listen`, with the live view under `[view]`), which bind when the
/// pipeline opens them.
pub fn outputs(config: &Config) -> Vec<Box<dyn Output>> {
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
        outputs.push(Box::new(output::mavlink::MavlinkOutput::new(m)));
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
