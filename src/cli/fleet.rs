//! `jetdetect fleet`: every robot on a broker in one live table ([`jetdetect::fleet`]).

use std::path::PathBuf;
use std::time::Duration;

use jetdetect::output::mqtt::{MqttConfig, Protocol};
use jetdetect::Error;

/// `jetdetect fleet`.
#[derive(clap::Args)]
pub struct Args {
    /// The broker: mqtt://host[:port] or mqtts://host[:port].
    #[arg(long)]
    broker: String,
    /// The robots' topic prefix ([output.mqtt] topic_prefix).
    #[arg(long, default_value = "jetdetect")]
    prefix: String,
    /// MQTT protocol: 3.1.1 or 5.
    #[arg(long, default_value = "3.1.1", value_parser = parse_protocol)]
    protocol: Protocol,
    /// User name for the broker.
    #[arg(long)]
    username: Option<String>,
    /// File whose first line is the password.
    #[arg(long)]
    password_file: Option<PathBuf>,
    /// PEM file of the broker's CA (mqtts://; default: the system's CAs).
    #[arg(long)]
    ca: Option<PathBuf>,
    /// PEM client certificate (with --key), if the broker asks for one.
    #[arg(long)]
    cert: Option<PathBuf>,
    /// PEM private key of --cert.
    #[arg(long)]
    key: Option<PathBuf>,
    /// One JSON line per refresh instead of the table (for scripts).
    #[arg(long)]
    json: bool,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0)]
    every: f64,
    /// Exit after this many seconds (default: run until interrupted).
    #[arg(long = "for")]
    duration: Option<f64>,
}

fn parse_protocol(s: &str) -> Result<Protocol, String> {
    match s {
        "3.1.1" | "4" => Ok(Protocol::V311),
        "5" => Ok(Protocol::V5),
        _ => Err(format!("'{s}': use 3.1.1 or 5")),
    }
}

/// Subscribes and prints until `--for` runs out (or forever).
pub fn run(args: Args) -> Result<bool, Error> {
    let config = MqttConfig {
        url: args.broker,
        protocol: args.protocol,
        device: "fleet".into(),
        topic_prefix: args.prefix,
        username: args.username.unwrap_or_default(),
        password_file: args.password_file,
        ca: args.ca,
        cert: args.cert,
        key: args.key,
        ..MqttConfig::default()
    };
    config.validate().map_err(|(key, why)| {
        let flag = match key {
            "url" => "broker".to_string(),
            "topic_prefix" => "prefix".to_string(),
            k => k.replace('_', "-"),
        };
        Error::Command(format!("--{flag}: {why}"))
    })?;
    if !(0.05..=3600.0).contains(&args.every) {
        return Err(Error::Command(format!("--every {}: give 0.05 to 3600 seconds", args.every)));
    }
    run_with(
        &config,
        Duration::from_secs_f64(args.every),
        args.duration.map(Duration::from_secs_f64),
        args.json,
    )
}

#[cfg(feature = "mqtt")]
fn run_with(
    config: &MqttConfig,
    every: Duration,
    duration: Option<Duration>,
    json: bool,
) -> Result<bool, Error> {
    use jetdetect::output::mqtt::link;
    let client_id = format!("jetdetect-fleet-{}-{}", jetdetect::output::mqtt::hostname(), std::process::id());
    let settings = link::settings(config, client_id, None).map_err(|e| Error::Output(Box::new(e)))?;
    jetdetect::fleet::watch(
        &settings,
        &config.topic_prefix,
        every,
        duration,
        json,
        &mut std::io::stdout().lock(),
    )
    .map_err(|e| Error::io("cannot write to standard output", e))?;
    Ok(true)
}

#[cfg(not(feature = "mqtt"))]
fn run_with(_: &MqttConfig, _: Duration, _: Option<Duration>, _: bool) -> Result<bool, Error> {
    Err(Error::Command("this jetdetect was built without MQTT support (the cargo feature `mqtt`)".into()))
}
