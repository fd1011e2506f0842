//! Where detections go: the UNIX socket and its protocol, the optional
//! Prometheus endpoint, and systemd notifications. Outputs consume finished
//! frame reports; they never reach back into the pipeline stages.

pub mod metrics;
pub mod notify;
pub mod protocol;
pub mod socket;
