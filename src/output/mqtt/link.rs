//! The connection to the broker, for both MQTT 3.1.1 and 5: rumqttc's client and event loop
//! behind one [`Client`] / [`Connection`] pair, the TLS setup (rustls with `ring`), and the one
//! line a user reads when the broker cannot be reached ([`describe`]).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rumqttc::{QoS, TlsConfiguration, Transport};

use super::{BrokerUrl, MqttConfig, Protocol};

/// Everything needed to connect, read and checked once.
#[derive(Clone)]
pub struct Settings {
    /// The broker.
    pub url: BrokerUrl,
    /// The url as written (for messages).
    pub url_text: String,
    /// MQTT 3.1.1 or 5.
    pub protocol: Protocol,
    /// The client id.
    pub client_id: String,
    /// User name and password, if any.
    pub login: Option<(String, String)>,
    /// Where the password came from (for messages; never the password).
    pub password_file: Option<String>,
    /// Where the CA came from (for messages).
    pub ca_file: Option<String>,
    /// TLS, for `mqtts://`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Keep-alive interval.
    pub keep_alive: Duration,
    /// The last will: topic and payload (QoS 1, retained).
    pub will: Option<(String, Vec<u8>)>,
}

/// Why the settings cannot be made: each names the `[output.mqtt]` key and its file, and keeps
/// the system's or rustls' error as its source.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The url (already checked with the config; kept for a caller that did not).
    #[error("url: {0}")]
    Url(String),
    /// A file cannot be read.
    #[error("{key} {}: {source}", path.display())]
    Read {
        /// The config key (`password_file`, `ca`, `cert`, `key`), or `the system CA bundle`.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// A certificate or key file is not PEM.
    #[error("{key} {}: not a PEM file: {source}", path.display())]
    NotPem {
        /// As in [`SetupError::Read`].
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// The PEM reader's error.
        #[source]
        source: io::Error,
    },
    /// A file is read but lacks what it must hold.
    #[error("{key} {}: {lacks}", path.display())]
    Lacks {
        /// As in [`SetupError::Read`].
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// E.g. `no certificate in it`.
        lacks: &'static str,
    },
    /// rustls refuses a CA certificate.
    #[error("{key} {}: {source}", path.display())]
    Certificate {
        /// As in [`SetupError::Read`].
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// rustls' error.
        #[source]
        source: rustls::Error,
    },
    /// rustls refuses the client certificate with its key.
    #[error("cert {} with key {}: {source}", cert.display(), key.display())]
    ClientCertificate {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls' error.
        #[source]
        source: rustls::Error,
    },
    /// rustls' protocol versions (not a file's fault).
    #[error("TLS: {0}")]
    Tls(#[source] rustls::Error),
}

impl SetupError {
    /// The `[output.mqtt]` key to fix, and what is wrong with it (for a config error at its line).
    pub fn key_and_message(&self) -> (&'static str, String) {
        let text = self.to_string();
        let key = match self {
            SetupError::Url(_) => "url",
            SetupError::Read { key, .. }
            | SetupError::NotPem { key, .. }
            | SetupError::Lacks { key, .. }
            | SetupError::Certificate { key, .. } => match *key {
                SYSTEM_CA_KEY => return ("ca", format!("{text} (set ca to the broker's CA file)")),
                key => key,
            },
            SetupError::ClientCertificate { .. } => "cert",
            SetupError::Tls(_) => "url",
        };
        let message = text.strip_prefix(key).map(str::trim_start).unwrap_or(&text);
        let message = message.strip_prefix(':').map(str::trim_start).unwrap_or(message);
        (key, message.to_string())
    }
}

/// Reads the password file and builds TLS from `config`; the error names the key and file.
pub fn settings(
    config: &MqttConfig,
    client_id: String,
    will: Option<(String, Vec<u8>)>,
) -> Result<Settings, SetupError> {
    let url = BrokerUrl::parse(&config.url).map_err(SetupError::Url)?;
    let login = match &config.password_file {
        Some(f) => {
            let read = |source| SetupError::Read { key: "password_file", path: f.clone(), source };
            let text = std::fs::read_to_string(f).map_err(read)?;
            let password = text.lines().next().unwrap_or("").to_string();
            if password.is_empty() {
                return Err(SetupError::Lacks {
                    key: "password_file",
                    path: f.clone(),
                    lacks: "its first line is empty",
                });
            }
            Some((config.username.clone(), password))
        }
        None if !config.username.is_empty() => Some((config.username.clone(), String::new())),
        None => None,
    };
    let tls = if url.tls {
        let client = match (&config.cert, &config.key) {
            (Some(c), Some(k)) => Some((c.as_path(), k.as_path())),
            _ => None,
        };
        Some(tls_config(config.ca.as_deref(), client)?)
    } else {
        None
    };
    Ok(Settings {
        url,
        url_text: config.url.clone(),
        protocol: config.protocol,
        client_id,
        login,
        password_file: config.password_file.as_ref().map(|p| p.display().to_string()),
        ca_file: config.ca.as_ref().map(|p| p.display().to_string()),
        tls,
        keep_alive: Duration::from_secs(config.keep_alive_s),
        will,
    })
}

/// The system's CA bundle (Debian's and Ubuntu's, which JetPack is).
const SYSTEM_CAS: &str = "/etc/ssl/certs/ca-certificates.crt";
/// How errors name [`SYSTEM_CAS`] when no `ca` is set.
const SYSTEM_CA_KEY: &str = "the system CA bundle";

fn pem_items(path: &Path, key: &'static str) -> Result<Vec<rustls_pemfile::Item>, SetupError> {
    let data = std::fs::read(path).map_err(|source| SetupError::Read { key, path: path.into(), source })?;
    rustls_pemfile::read_all(&mut &data[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| SetupError::NotPem { key, path: path.into(), source })
}

/// A rustls client configuration trusting `ca` (or the system's CAs), with a client
/// certificate when `client` gives one (certificate file, key file).
pub fn tls_config(
    ca: Option<&Path>,
    client: Option<(&Path, &Path)>,
) -> Result<Arc<rustls::ClientConfig>, SetupError> {
    let mut roots = rustls::RootCertStore::empty();
    let (ca_path, key) = match ca {
        Some(p) => (p, "ca"),
        None => (Path::new(SYSTEM_CAS), SYSTEM_CA_KEY),
    };
    for item in pem_items(ca_path, key)? {
        if let rustls_pemfile::Item::X509Certificate(c) = item {
            roots.add(c).map_err(|source| SetupError::Certificate { key, path: ca_path.into(), source })?;
        }
    }
    if roots.is_empty() {
        return Err(SetupError::Lacks { key, path: ca_path.into(), lacks: "no certificate in it" });
    }
    // ring, not aws-lc-rs: aws-lc is a CMake C build that the static aarch64 build cannot
    // take. ring has no post-quantum key exchange (hence the deprecation); brokers then
    // agree on X25519 or P-256.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(SetupError::Tls)?
        .with_root_certificates(roots);
    let config =
        match client {
            None => builder.with_no_client_auth(),
            Some((cert, keyfile)) => {
                let certs: Vec<_> = pem_items(cert, "cert")?
                    .into_iter()
                    .filter_map(|i| match i {
                        rustls_pemfile::Item::X509Certificate(c) => Some(c),
                        _ => None,
                    })
                    .collect();
                if certs.is_empty() {
                    return Err(SetupError::Lacks {
                        key: "cert",
                        path: cert.into(),
                        lacks: "no certificate in it",
                    });
                }
                let private = pem_items(keyfile, "key")?
                    .into_iter()
                    .find_map(|i| match i {
                        rustls_pemfile::Item::Pkcs1Key(k) => Some(k.into()),
                        rustls_pemfile::Item::Pkcs8Key(k) => Some(k.into()),
                        rustls_pemfile::Item::Sec1Key(k) => Some(k.into()),
                        _ => None,
                    })
                    .ok_or_else(|| SetupError::Lacks {
                        key: "key",
                        path: keyfile.into(),
                        lacks: "no private key in it",
                    })?;
                builder.with_client_auth_cert(certs, private).map_err(|source| {
                    SetupError::ClientCertificate { cert: cert.into(), key: keyfile.into(), source }
                })?
            }
        };
    Ok(Arc::new(config))
}

/// Publishing and subscribing; cheap to clone.
#[derive(Clone)]
pub enum Client {
    /// MQTT 3.1.1.
    V4(rumqttc::Client),
    /// MQTT 5.
    V5(rumqttc::v5::Client),
}

/// The event loop: [`Connection::next`] must be called continuously (it connects, reconnects,
/// sends and receives).
pub enum Connection {
    /// MQTT 3.1.1.
    V4(Box<rumqttc::Connection>),
    /// MQTT 5.
    V5(Box<rumqttc::v5::Connection>),
}

/// What the event loop reports, the same for both protocol versions.
#[derive(Debug)]
pub enum Net {
    /// Connected (a new session: nothing of an earlier one is resent by rumqttc).
    Connected,
    /// A publish went out with this packet id (0: QoS 0).
    Sent(u16),
    /// A publish is held back until packet id `0` is acknowledged (a broker acking out of order).
    AwaitAck(u16),
    /// The broker acknowledged packet id `pkid`; `refused` says why it did not take it (MQTT 5).
    Acked {
        /// The packet id.
        pkid: u16,
        /// The broker's reason for refusing the message, if it did.
        refused: Option<String>,
    },
    /// A message on a subscribed topic.
    Message {
        /// Its topic.
        topic: String,
        /// Its payload.
        payload: Vec<u8>,
        /// Whether the broker kept it (a retained message).
        retained: bool,
    },
    /// The connection failed or was lost: [`describe`]'s line.
    Failed(String),
    /// Something else (pings, subscriptions).
    Other,
    /// Every [`Client`] is gone: the loop ends.
    Closed,
}

/// Creates the client and its event loop (nothing is sent before the first [`Connection::next`]).
/// `cap`: requests the client may queue before `try_publish` refuses.
pub fn connect(s: &Settings, cap: usize) -> (Client, Connection) {
    let transport = match &s.tls {
        Some(t) => Transport::Tls(TlsConfiguration::Rustls(Arc::clone(t))),
        None => Transport::Tcp,
    };
    match s.protocol {
        Protocol::V311 => {
            let mut o = rumqttc::MqttOptions::new(&s.client_id, &s.url.host, s.url.port);
            o.set_transport(transport).set_keep_alive(s.keep_alive).set_clean_session(true).set_inflight(100);
            o.set_max_packet_size(1 << 20, 1 << 20);
            if let Some((u, p)) = &s.login {
                o.set_credentials(u, p);
            }
            if let Some((topic, payload)) = &s.will {
                o.set_last_will(rumqttc::LastWill::new(topic, payload.clone(), QoS::AtLeastOnce, true));
            }
            let (c, mut n) = rumqttc::Client::new(o, cap);
            n.eventloop.set_network_options(network_options());
            (Client::V4(c), Connection::V4(Box::new(n)))
        }
        Protocol::V5 => {
            let mut o = rumqttc::v5::MqttOptions::new(&s.client_id, &s.url.host, s.url.port);
            o.set_transport(transport).set_keep_alive(s.keep_alive).set_clean_start(true);
            o.set_outgoing_inflight_upper_limit(100);
            o.set_max_packet_size(Some(1 << 20));
            o.set_network_options(network_options());
            if let Some((u, p)) = &s.login {
                o.set_credentials(u, p);
            }
            if let Some((topic, payload)) = &s.will {
                o.set_last_will(rumqttc::v5::mqttbytes::v5::LastWill::new(
                    topic,
                    payload.clone(),
                    rumqttc::v5::mqttbytes::QoS::AtLeastOnce,
                    true,
                    None,
                ));
            }
            let (c, n) = rumqttc::v5::Client::new(o, cap);
            (Client::V5(c), Connection::V5(Box::new(n)))
        }
    }
}

/// TCP_NODELAY: a hazards message goes out when it is written. With Nagle's algorithm a small
/// publish waits for the broker's (delayed) acknowledgement of the previous one: 40 ms on
/// Linux, which was the whole of the 50-robot benchmark's p99 (43.5 ms, docs/benchmarks.md).
fn network_options() -> rumqttc::NetworkOptions {
    let mut n = rumqttc::NetworkOptions::new();
    n.set_tcp_nodelay(true);
    n
}

impl Client {
    /// Queues a publish without waiting; false when the client's queue is full (or closed).
    pub fn try_publish(&self, topic: &str, qos1: bool, retain: bool, payload: Vec<u8>) -> bool {
        match self {
            Client::V4(c) => {
                let qos = if qos1 { QoS::AtLeastOnce } else { QoS::AtMostOnce };
                c.try_publish(topic, qos, retain, payload).is_ok()
            }
            Client::V5(c) => {
                use rumqttc::v5::mqttbytes::QoS as Q5;
                let qos = if qos1 { Q5::AtLeastOnce } else { Q5::AtMostOnce };
                c.try_publish(topic, qos, retain, payload).is_ok()
            }
        }
    }

    /// Subscribes to `filter` at QoS 1 (waits for room in the client's queue).
    pub fn subscribe(&self, filter: &str) -> Result<(), String> {
        match self {
            Client::V4(c) => c.subscribe(filter, QoS::AtLeastOnce).map_err(|e| e.to_string()),
            Client::V5(c) => {
                c.subscribe(filter, rumqttc::v5::mqttbytes::QoS::AtLeastOnce).map_err(|e| e.to_string())
            }
        }
    }

    /// Asks for a clean disconnect (the broker then drops the last will).
    pub fn disconnect(&self) {
        let _ = match self {
            Client::V4(c) => c.try_disconnect().is_ok(),
            Client::V5(c) => c.try_disconnect().is_ok(),
        };
    }
}

impl Connection {
    /// Runs the event loop to its next event (blocking).
    pub fn next(&mut self, settings: &Settings) -> Net {
        match self {
            Connection::V4(c) => {
                use rumqttc::{Event, Incoming, Outgoing};
                match c.recv() {
                    Err(_) => Net::Closed,
                    Ok(Err(e)) => Net::Failed(describe(&e, settings)),
                    Ok(Ok(Event::Incoming(Incoming::ConnAck(_)))) => Net::Connected,
                    Ok(Ok(Event::Incoming(Incoming::PubAck(a)))) => {
                        Net::Acked { pkid: a.pkid, refused: None }
                    }
                    Ok(Ok(Event::Incoming(Incoming::Publish(p)))) => {
                        Net::Message { topic: p.topic, payload: p.payload.to_vec(), retained: p.retain }
                    }
                    Ok(Ok(Event::Outgoing(Outgoing::Publish(pkid)))) => Net::Sent(pkid),
                    Ok(Ok(Event::Outgoing(Outgoing::AwaitAck(pkid)))) => Net::AwaitAck(pkid),
                    Ok(Ok(_)) => Net::Other,
                }
            }
            Connection::V5(c) => {
                use rumqttc::v5::mqttbytes::v5::{Packet, PubAckReason};
                use rumqttc::v5::Event;
                use rumqttc::Outgoing;
                match c.recv() {
                    Err(_) => Net::Closed,
                    Ok(Err(e)) => Net::Failed(describe(&e, settings)),
                    Ok(Ok(Event::Incoming(Packet::ConnAck(_)))) => Net::Connected,
                    Ok(Ok(Event::Incoming(Packet::PubAck(a)))) => Net::Acked {
                        pkid: a.pkid,
                        refused: match a.reason {
                            PubAckReason::Success | PubAckReason::NoMatchingSubscribers => None,
                            other => Some(format!(
                                "{other:?}{}",
                                a.properties
                                    .and_then(|p| p.reason_string)
                                    .map(|r| format!(" ({r})"))
                                    .unwrap_or_default()
                            )),
                        },
                    },
                    Ok(Ok(Event::Incoming(Packet::Publish(p)))) => Net::Message {
                        topic: String::from_utf8_lossy(&p.topic).into_owned(),
                        payload: p.payload.to_vec(),
                        retained: p.retain,
                    },
                    Ok(Ok(Event::Outgoing(Outgoing::Publish(pkid)))) => Net::Sent(pkid),
                    Ok(Ok(Event::Outgoing(Outgoing::AwaitAck(pkid)))) => Net::AwaitAck(pkid),
                    Ok(Ok(_)) => Net::Other,
                }
            }
        }
    }

    /// After a failure: drops the connection and takes every request still in the client's
    /// queue out of it (the next session starts clean, so rumqttc resends none of them; the
    /// caller resends from its own queue).
    pub fn clean(&mut self) {
        match self {
            Connection::V4(c) => c.eventloop.clean(),
            Connection::V5(c) => c.eventloop.clean(),
        }
    }
}

/// The first `rustls::Error` or `std::io::Error` in `e`'s chain (looking inside I/O errors).
fn find_cause<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> (Option<&'a rustls::Error>, Option<&'a std::io::Error>) {
    let mut tls = None;
    let mut io = None;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            tls = tls.or(Some(t));
        }
        if let Some(i) = err.downcast_ref::<std::io::Error>() {
            io = io.or(Some(i));
            if let Some(t) = i.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
                tls = tls.or(Some(t));
            }
        }
        cur = err.source();
    }
    (tls, io)
}

/// One line saying why the broker could not be reached or was lost, and what to do.
pub fn describe(e: &(dyn std::error::Error + 'static), s: &Settings) -> String {
    let at = format!("{}:{}", s.url.host, s.url.port);
    let ca = || match &s.ca_file {
        Some(f) => format!("the CA in [output.mqtt] ca ({f})"),
        None => "any system CA (set [output.mqtt] ca to the broker's CA)".into(),
    };
    let (tls, io) = find_cause(e);
    if let Some(t) = tls {
        use rustls::{AlertDescription as A, CertificateError as C, Error as E};
        return match t {
            E::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => {
                format!("TLS to {at}: the broker's certificate is not signed by {}", ca())
            }
            E::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => format!(
                "TLS to {at}: the broker's certificate has expired (or this machine's clock is wrong: check `date`)"
            ),
            E::InvalidCertificate(C::NotValidYet | C::NotValidYetContext { .. }) => format!(
                "TLS to {at}: the broker's certificate is not valid yet (is this machine's clock right? check `date`)"
            ),
            E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => format!(
                "TLS to {at}: the broker's certificate is not for {:?}: connect by the name it was issued to",
                s.url.host
            ),
            E::AlertReceived(a @ (A::CertificateExpired | A::BadCertificate | A::CertificateRequired
            | A::UnknownCA | A::CertificateUnknown | A::AccessDenied)) => format!(
                "TLS to {at}: the broker refused this robot's client certificate ({a:?}): check [output.mqtt] cert and key, and that the broker's CA signed them"
            ),
            other => format!("TLS to {at}: {other}"),
        };
    }
    let text = e.to_string();
    if text.contains("BadUserNamePassword") || text.contains("NotAuthorized") {
        let who = match (&s.login, &s.password_file) {
            (Some((u, _)), Some(f)) => format!("user {u:?}, password from {f}"),
            (Some((u, _)), None) => format!("user {u:?}, no password_file"),
            _ => "no username: set [output.mqtt] username and password_file".into(),
        };
        return format!(
            "the broker at {at} refused the login ({who}): check them against the broker's password file"
        );
    }
    if text.contains("BadClientId") || text.contains("ClientIdentifierNotValid") {
        return format!(
            "the broker at {at} refused the client id {:?}: set [output.mqtt] client_id",
            s.client_id
        );
    }
    if let Some(i) = io {
        use std::io::ErrorKind as K;
        return match i.kind() {
            K::ConnectionRefused => {
                format!("connection refused by {at}: is the broker running and listening there?")
            }
            K::TimedOut => format!("no answer from {at}: is the host up and the port open?"),
            K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => {
                format!("the broker at {at} closed the connection ({i})")
            }
            _ if i.to_string().contains("lookup") => {
                format!("cannot resolve {:?}: check the host name in [output.mqtt] url", s.url.host)
            }
            _ => format!("cannot reach {at}: {i}"),
        };
    }
    if text.contains("imeout") {
        return format!("no answer from {at} in time: is the host up and the port open?");
    }
    if text.contains("closed by peer") || text.contains("ConnectionAborted") {
        return format!("the broker at {at} closed the connection");
    }
    format!("broker {}: {text}", s.url_text)
}
