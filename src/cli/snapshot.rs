//! `jetdetect snapshot`: saves the newest frame of a running daemon as JPEG, with or without its
//! overlay, through the daemon's `GET /snapshot.jpg` (`[view] enabled`).

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use jetdetect::config::Config;
use jetdetect::output::http::read_token;
use jetdetect::output::OutputError;
use jetdetect::Error;

/// `jetdetect snapshot`.
#[derive(clap::Args)]
pub struct Args {
    /// Where to write the JPEG.
    #[arg(long, short)]
    out: PathBuf,
    /// The frame as captured, without boxes, labels and zones.
    #[arg(long)]
    raw: bool,
    /// The camera (its [[source]] name; default: the first).
    #[arg(long)]
    camera: Option<String>,
    /// The daemon's config: the server's address ([metrics] listen) and token come from it.
    #[arg(long, short, default_value = "/etc/jetdetect/jetdetect.toml")]
    config: PathBuf,
    /// The server's address instead of the config's, e.g. http://192.168.1.20:9464.
    #[arg(long)]
    url: Option<String>,
    /// The access token's file instead of the config's [metrics] token_file.
    #[arg(long)]
    token_file: Option<PathBuf>,
}

/// Fetches the snapshot and writes it to `--out`.
pub fn run(args: Args) -> Result<bool, Error> {
    let (base, token_file) = match &args.url {
        Some(u) => (u.trim_end_matches('/').to_string(), args.token_file.clone()),
        None => {
            let c = Config::load(&args.config)?;
            if c.metrics.listen.is_empty() || !c.view.enabled {
                return Err(Error::Command(format!(
                    "{}: the daemon serves no snapshots: set [metrics] listen and [view] enabled = true \
                     (or give --url)",
                    args.config.display()
                )));
            }
            // A server on every address is reached on loopback from here.
            let listen = c.metrics.listen.replace("0.0.0.0:", "127.0.0.1:").replace("[::]:", "[::1]:");
            let file = args
                .token_file
                .clone()
                .or((!c.metrics.token_file.as_os_str().is_empty()).then_some(c.metrics.token_file));
            (format!("http://{listen}"), file)
        }
    };
    let mut url = format!("{base}/snapshot.jpg?raw={}", args.raw as u8);
    if let Some(c) = &args.camera {
        url.push_str(&format!("&camera={c}"));
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(15)))
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = agent.get(&url);
    if let Some(f) = &token_file {
        let token = read_token(f).map_err(OutputError::from)?;
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let mut response = request
        .call()
        .map_err(|e| Error::Command(format!("{url}: {e} (is jetdetect running, with [view] enabled?)")))?;
    let status = response.status();
    let body = response
        .body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_vec()
        .map_err(|e| Error::Command(format!("{url}: {e}")))?;
    if status != 200 {
        return Err(Error::Command(format!("{url}: {status}: {}", String::from_utf8_lossy(&body).trim())));
    }
    // Written whole or not at all: a temporary file beside it, then renamed.
    let tmp = args.out.with_extension("jpg.part");
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &args.out)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(format!("{}", args.out.display()), e)
    })?;
    eprintln!("{}: {} bytes", args.out.display(), body.len());
    Ok(true)
}
