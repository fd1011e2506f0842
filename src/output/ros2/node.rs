//! The ROS 2 node: a DDS participant (RustDDS) with a `ros2-client` node, its publishers, and
//! the thread that turns handed-over frames into messages.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ros2_client::dds::rustdds::DomainParticipantBuilder;
use ros2_client::qos::{History, Reliability as QosReliability, WhenFull};
use ros2_client::{Context, MessageTypeName, Name, Node, NodeName, NodeOptions, Publisher, QosProfile};

use super::msgs::{
    BoundingBox2D, Detection2D, Detection2DArray, Header, ObjectHypothesis, ObjectHypothesisWithPose,
    Point2D, Pose2D, StringMsg, Time,
};
use super::{Reliability, Ros2Config};
use crate::output::protocol;
use crate::output::{Health, Interval, Output, OutputError, Started};
use crate::report::FrameReport;
use crate::yolo::{ClassNames, Detection};

/// One box as the publisher thread hands it over: the detection and its track (0: none).
#[derive(Clone, Copy, Debug)]
struct Tracked {
    det: Detection,
    track: u64,
}

/// What the publisher thread hands over; the node's thread swaps the buffers out.
struct Slot {
    /// Bumped with each hand-over.
    generation: u64,
    /// Capture time, Unix epoch ns; 0 for a blind notice (no frame).
    stamp_ns: u128,
    /// The frame's camera (for `{camera}` in `frame_id`).
    camera: Arc<str>,
    /// A frame's boxes (a blind notice has none and publishes no detections).
    boxes: Vec<Tracked>,
    /// The `hazards` JSON message for the zones topic; empty: nothing to publish there.
    zones: Vec<u8>,
    /// The class names, from `ready`.
    names: Option<ClassNames>,
    /// The output is finishing: the thread returns.
    stop: bool,
}

struct Shared {
    slot: Mutex<Slot>,
    bell: Condvar,
}

#[derive(Default)]
struct Counters {
    published: AtomicU64,
    errors: AtomicU64,
}

/// What `open` creates and the node's thread owns. Fields drop in order: the publishers go
/// before the node (and with it the participant), or RustDDS logs that it could not remove them.
struct Endpoints {
    detections: Publisher<Detection2DArray>,
    zones: Option<Publisher<StringMsg>>,
    /// Kept alive: dropping it takes the node off the ROS graph.
    _node: Node,
    frame_id: String,
}

/// The ROS 2 output: hands frames over on the publisher thread, publishes on its own.
pub struct Ros2Output {
    config: Ros2Config,
    hazards: bool,
    shared: Arc<Shared>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
}

impl Ros2Output {
    /// The output for `config` (validated); `hazards`: the hazard layer runs (zones to publish).
    pub fn new(config: &Ros2Config, hazards: bool) -> Ros2Output {
        Ros2Output {
            config: config.clone(),
            hazards,
            shared: Arc::new(Shared {
                slot: Mutex::new(Slot {
                    generation: 0,
                    stamp_ns: 0,
                    camera: Arc::from("cam0"),
                    boxes: Vec::with_capacity(128),
                    zones: Vec::with_capacity(4096),
                    names: None,
                    stop: false,
                }),
                bell: Condvar::new(),
            }),
            counters: Arc::new(Counters::default()),
            thread: None,
        }
    }

    fn qos(&self) -> QosProfile {
        let reliability = match self.config.reliability {
            Reliability::BestEffort => QosReliability::BestEffort,
            // A reader that does not keep up costs at most 10 ms of the node's thread per sample.
            Reliability::Reliable => {
                QosReliability::Reliable { when_full: WhenFull::Wait(Duration::from_millis(10)) }
            }
        };
        QosProfile::subscription_default()
            .reliability(reliability)
            .history(History::KeepLast { depth: self.config.depth as usize })
    }

    /// The participant, node and publishers.
    fn endpoints(&self) -> Result<Endpoints, String> {
        let c = &self.config;
        let mut builder = DomainParticipantBuilder::new(c.domain_id);
        if !c.interfaces.is_empty() {
            let addrs: Vec<std::net::IpAddr> = c.interfaces.iter().filter_map(|a| a.parse().ok()).collect();
            builder = builder.with_only_networks(addrs);
        }
        let participant = builder.build().map_err(|e| format!("cannot create the DDS participant: {e}"))?;
        let context = Context::from_domain_participant(participant)
            .map_err(|e| format!("cannot start ROS 2: {e:?}"))?;
        let name = NodeName::new(&c.namespace, &c.node).map_err(|e| format!("node name: {e:?}"))?;
        let mut node = context
            .new_node(name, NodeOptions::new().enable_rosout(false))
            .map_err(|e| format!("cannot create the node: {e:?}"))?;
        let qos = self.qos();
        let topic = |node: &mut Node, name: &str, pkg: &str, ty: &str| {
            let n = Name::parse(name).map_err(|e| format!("topic {name:?}: {e:?}"))?;
            node.create_topic(&n, MessageTypeName::new(pkg, ty), &qos)
                .map_err(|e| format!("cannot create topic {name:?}: {e:?}"))
        };
        let t = topic(&mut node, &c.detections_topic, "vision_msgs", "Detection2DArray")?;
        let detections = node
            .create_publisher(&t, None)
            .map_err(|e| format!("cannot publish {:?}: {e:?}", c.detections_topic))?;
        let zones = if self.hazards && !c.zones_topic.is_empty() {
            let t = topic(&mut node, &c.zones_topic, "std_msgs", "String")?;
            Some(
                node.create_publisher(&t, None)
                    .map_err(|e| format!("cannot publish {:?}: {e:?}", c.zones_topic))?,
            )
        } else {
            None
        };
        Ok(Endpoints { detections, zones, _node: node, frame_id: c.frame_id.clone() })
    }

    fn stop(&mut self, wait: Duration) {
        {
            let mut slot = self.shared.slot.lock().unwrap_or_else(|p| p.into_inner());
            slot.stop = true;
        }
        self.shared.bell.notify_one();
        let Some(thread) = self.thread.take() else { return };
        if !crate::output::join_within(thread, wait) {
            log::warn!("ROS 2: the publishing thread is stuck in DDS; leaving it behind");
        }
    }

    /// Hands one message over: `fill` writes the slot's buffers (the publisher thread's only work).
    fn hand_over(&self, fill: impl FnOnce(&mut Slot)) {
        {
            let mut slot = self.shared.slot.lock().unwrap_or_else(|p| p.into_inner());
            fill(&mut slot);
            slot.generation += 1;
        }
        self.shared.bell.notify_one();
    }
}

impl Output for Ros2Output {
    fn open(&mut self) -> Result<(), OutputError> {
        let c = &self.config;
        let endpoints = self.endpoints().map_err(OutputError::Ros2)?;
        let zones = endpoints.zones.is_some();
        let (shared, counters) = (Arc::clone(&self.shared), Arc::clone(&self.counters));
        let thread = std::thread::Builder::new()
            .name("ros2".into())
            .spawn(move || run(endpoints, &shared, &counters))
            .map_err(|source| OutputError::Thread { context: "cannot start the ROS 2 thread", source })?;
        self.thread = Some(thread);
        let ns = if c.namespace == "/" { String::new() } else { c.namespace.clone() };
        log::info!(
            "ROS 2: node {ns}/{} in domain {}: vision_msgs/Detection2DArray on {}{}, {} keep last {}{}",
            c.node,
            c.domain_id,
            c.detections_topic,
            if zones {
                format!(", std_msgs/String (hazards JSON) on {}", c.zones_topic)
            } else {
                String::new()
            },
            match c.reliability {
                Reliability::BestEffort => "best effort",
                Reliability::Reliable => "reliable",
            },
            c.depth,
            if c.interfaces.is_empty() { String::new() } else { format!(", on {}", c.interfaces.join(", ")) }
        );
        if !self.hazards && !c.zones_topic.is_empty() {
            log::info!("ROS 2: {} is not published: [hazards] is off", c.zones_topic);
        }
        Ok(())
    }

    fn ready(&mut self, started: &Started) {
        let mut slot = self.shared.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.names = Some(started.names.clone());
    }

    fn frame(&mut self, report: &FrameReport, _dropped: u64, now: Instant) {
        let zones = self.hazards && !self.config.zones_topic.is_empty();
        self.hand_over(|slot| {
            slot.stamp_ns = report.captured_wall_ns;
            if *slot.camera != *report.camera.name {
                slot.camera = Arc::clone(&report.camera.name);
            }
            slot.boxes.clear();
            let tracks = &report.hazards.track_of;
            slot.boxes.extend(
                report
                    .detections
                    .iter()
                    .enumerate()
                    .map(|(i, d)| Tracked { det: *d, track: tracks.get(i).copied().unwrap_or(0) }),
            );
            let Slot { names, zones: json, .. } = slot;
            json.clear();
            if let (true, Some(names)) = (zones, names.as_ref()) {
                protocol::write_hazards(json, report, names, now);
            }
        });
    }

    fn tick(&mut self, health: &Health<'_>) {
        // One message per notice (the topic's slot holds one): the first blind camera's, which
        // names its camera; the notice repeats while any camera is blind.
        if let (Some(b), true) = (health.blind.first(), health.blind_notice) {
            if self.hazards && !self.config.zones_topic.is_empty() {
                self.hand_over(|slot| {
                    slot.stamp_ns = 0;
                    slot.boxes.clear();
                    slot.zones.clear();
                    protocol::write_blind(&mut slot.zones, b, Instant::now());
                });
            }
        }
    }

    fn interval(&mut self, _interval: &Interval<'_>) {}

    fn finish(&mut self, _run: &Interval<'_>, _reason: &str) {
        self.stop(Duration::from_secs(1));
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        log::info!(
            "ROS 2: {} messages published, {} failed",
            load(&self.counters.published),
            load(&self.counters.errors)
        );
    }
}

impl Drop for Ros2Output {
    fn drop(&mut self) {
        self.stop(Duration::from_millis(200));
    }
}

/// The node's thread: waits for a hand-over, builds the messages, publishes them.
fn run(endpoints: Endpoints, shared: &Shared, counters: &Counters) {
    let mut boxes: Vec<Tracked> = Vec::with_capacity(128);
    let mut zones: Vec<u8> = Vec::with_capacity(4096);
    let mut names: Option<ClassNames> = None;
    let mut generation = 0;
    let mut last_error: Option<Instant> = None;
    loop {
        let stamp_ns;
        let camera;
        {
            let mut slot = shared.slot.lock().unwrap_or_else(|p| p.into_inner());
            while slot.generation == generation && !slot.stop {
                slot = shared.bell.wait(slot).unwrap_or_else(|p| p.into_inner());
            }
            if slot.generation == generation {
                return; // stopping, nothing new
            }
            generation = slot.generation;
            stamp_ns = slot.stamp_ns;
            camera = Arc::clone(&slot.camera);
            std::mem::swap(&mut boxes, &mut slot.boxes);
            std::mem::swap(&mut zones, &mut slot.zones);
            if names.is_none() {
                names = slot.names.clone();
            }
        }
        let mut failed = None;
        if stamp_ns != 0 {
            let frame_id = endpoints.frame_id.replace("{camera}", &camera);
            let msg = detections(&boxes, stamp_ns, &frame_id, names.as_ref());
            match endpoints.detections.publish(msg) {
                Ok(()) => counters.published.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    failed = Some(format!("{e:?}"));
                    counters.errors.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
        if let (Some(p), false) = (&endpoints.zones, zones.is_empty()) {
            let data = String::from_utf8_lossy(&zones).trim_end().to_string();
            match p.publish(StringMsg { data }) {
                Ok(()) => counters.published.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    failed = Some(format!("{e:?}"));
                    counters.errors.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
        if let Some(e) = failed {
            if last_error.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                log::warn!(
                    "ROS 2: publishing failed: {e} ({} failures so far; logged at most every 10 s)",
                    counters.errors.load(Ordering::Relaxed)
                );
                last_error = Some(Instant::now());
            }
        }
    }
}

/// The `Detection2DArray` of one frame.
fn detections(
    boxes: &[Tracked],
    stamp_ns: u128,
    frame_id: &str,
    names: Option<&ClassNames>,
) -> Detection2DArray {
    let header = Header { stamp: Time::from_unix_ns(stamp_ns), frame_id: frame_id.to_string() };
    Detection2DArray {
        header: header.clone(),
        detections: boxes
            .iter()
            .map(|b| {
                let d = &b.det;
                let class_id = match names {
                    Some(n) => n.name(d.class_id).to_string(),
                    None => d.class_id.to_string(),
                };
                Detection2D {
                    header: header.clone(),
                    results: vec![ObjectHypothesisWithPose {
                        hypothesis: ObjectHypothesis { class_id, score: d.score as f64 },
                        ..Default::default()
                    }],
                    bbox: BoundingBox2D {
                        center: Pose2D {
                            position: Point2D {
                                x: (d.x1 + d.x2) as f64 / 2.0,
                                y: (d.y1 + d.y2) as f64 / 2.0,
                            },
                            theta: 0.0,
                        },
                        size_x: (d.x2 - d.x1) as f64,
                        size_y: (d.y2 - d.y1) as f64,
                    },
                    id: if b.track == 0 { String::new() } else { b.track.to_string() },
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_maps_to_detection2d_field_by_field() {
        let names = ClassNames::from_metadata("{0: 'box', 1: 'ball'}").unwrap();
        let det = Detection { class_id: 1, score: 0.75, x1: 10.0, y1: 20.0, x2: 50.0, y2: 100.0 };
        let m = detections(
            &[Tracked { det, track: 7 }, Tracked { det, track: 0 }],
            1_790_000_000_250_000_000,
            "cam",
            Some(&names),
        );
        assert_eq!(m.header.stamp, Time { sec: 1_790_000_000, nanosec: 250_000_000 });
        assert_eq!(m.header.frame_id, "cam");
        let d = &m.detections[0];
        assert_eq!(d.header, m.header);
        assert_eq!(d.results[0].hypothesis.class_id, "ball");
        assert_eq!(d.results[0].hypothesis.score, 0.75);
        assert_eq!(d.results[0].pose.pose.orientation.w, 1.0);
        assert_eq!((d.bbox.center.position.x, d.bbox.center.position.y), (30.0, 60.0));
        assert_eq!((d.bbox.size_x, d.bbox.size_y), (40.0, 80.0));
        assert_eq!(d.id, "7");
        assert_eq!(m.detections[1].id, "", "an untracked box has no id");
    }
}
