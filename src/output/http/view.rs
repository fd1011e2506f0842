//! The live view's pictures: an encoder thread that takes frames from the picture tap, draws the
//! overlay on them and encodes them as JPEG, and the gallery of the newest ones that viewers
//! and snapshots read.
//!
//! The encoder runs on its own thread ("view"), never on inference's or the publisher's. With
//! nobody asking, the tap hands it nothing and it sleeps: no frame is converted or encoded. With
//! several viewers, each picture is encoded once and shared.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::clock::mono_ns;
use crate::output::protocol;
use crate::output::tap::{Picture, PictureTap, WANT_FOR};
use crate::preprocess::colour;
use crate::report::FrameReport;
use crate::yolo::ClassNames;

/// Encoded pictures kept for viewers that are a little behind.
const KEPT: usize = 16;

/// One encoded picture.
pub struct Encoded {
    /// Its number, counting from 1 over the run (all cameras).
    pub id: u64,
    /// The camera's index.
    pub camera: usize,
    /// When its frame was captured.
    pub captured: Instant,
    /// The frame with the overlay, JPEG.
    pub jpeg: Vec<u8>,
    /// The frame as captured, JPEG, when a raw snapshot was asked for.
    pub raw: Option<Vec<u8>>,
    /// What the page shows beside it (JSON): the frame's detections message, its hazards, the
    /// colour of each box, and timings.
    pub meta: String,
}

/// The view's state, shared by the encoder thread and the HTTP workers.
pub struct View {
    tap: Arc<PictureTap>,
    /// Camera names, by index.
    pub cameras: Vec<String>,
    /// `[view] interval_ms`.
    pub interval_ms: u64,
    quality: u8,
    names: Mutex<ClassNames>,
    /// The newest pictures, oldest first (the encoder is the only writer: ids ascend).
    gallery: Mutex<VecDeque<Arc<Encoded>>>,
    /// The next picture's id.
    next_id: AtomicU64,
    changed: Condvar,
    raw_until_ns: AtomicU64,
    encoded: AtomicU64,
    encode_us_total: AtomicU64,
    stop: AtomicBool,
}

impl View {
    /// A view of `cameras` fed by `tap`.
    pub fn new(tap: Arc<PictureTap>, cameras: Vec<String>, interval_ms: u64, quality: u8) -> View {
        View {
            tap,
            cameras,
            interval_ms,
            quality,
            names: Mutex::new(ClassNames::numbered(0)),
            gallery: Mutex::new(VecDeque::with_capacity(KEPT)),
            next_id: AtomicU64::new(1),
            changed: Condvar::new(),
            raw_until_ns: AtomicU64::new(0),
            encoded: AtomicU64::new(0),
            encode_us_total: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        }
    }

    fn gallery(&self) -> MutexGuard<'_, VecDeque<Arc<Encoded>>> {
        self.gallery.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tap inference hands this view's frames to.
    pub fn tap(&self) -> &Arc<PictureTap> {
        &self.tap
    }

    /// The class names labels use (known once the model is loaded).
    pub fn set_names(&self, names: &ClassNames) {
        *self.names.lock().unwrap_or_else(|e| e.into_inner()) = names.clone();
    }

    /// The index of the camera called `name`; an empty name is the first camera.
    pub fn camera(&self, name: &str) -> Option<usize> {
        match name {
            "" => Some(0),
            n => self.cameras.iter().position(|c| c == n),
        }
    }

    /// Pictures encoded since start, and the mean encoding time in ms (overlay included).
    pub fn encoded(&self) -> (u64, f64) {
        let n = self.encoded.load(Ordering::Relaxed);
        let us = self.encode_us_total.load(Ordering::Relaxed);
        (n, if n > 0 { us as f64 / n as f64 / 1e3 } else { 0.0 })
    }

    /// A viewer wants camera `camera`'s pictures (raw ones too, with `raw`) for a while.
    pub fn want(&self, camera: usize, raw: bool) {
        self.tap.want(camera);
        if raw {
            self.raw_until_ns.fetch_max(mono_ns(Instant::now() + WANT_FOR), Ordering::Relaxed);
        }
    }

    /// The picture `id`, while it is kept.
    pub fn picture(&self, id: u64) -> Option<Arc<Encoded>> {
        self.gallery().iter().find(|p| p.id == id).cloned()
    }

    /// Waits until `deadline` for a picture of `camera` that passes `ok`; the newest such.
    pub fn wait_for(
        &self,
        camera: usize,
        deadline: Instant,
        ok: impl Fn(&Encoded) -> bool,
    ) -> Option<Arc<Encoded>> {
        let mut g = self.gallery();
        loop {
            if let Some(p) = g.iter().rev().find(|p| p.camera == camera && ok(p)) {
                return Some(p.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.stop.load(Ordering::Relaxed) {
                return None;
            }
            g = self.changed.wait_timeout(g, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Starts the encoder thread.
    pub fn start(self: &Arc<View>) -> std::io::Result<JoinHandle<()>> {
        let view = self.clone();
        std::thread::Builder::new().name("view".into()).spawn(move || view.encode_loop())
    }

    /// Stops the encoder thread and wakes every waiting viewer.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.tap.close();
        let _g = self.gallery();
        self.changed.notify_all();
    }

    fn encode_loop(&self) {
        let mut rgb = Vec::new();
        while !self.stop.load(Ordering::Relaxed) {
            let Some(picture) = self.tap.take(Duration::from_millis(500)) else { continue };
            let t = Instant::now();
            match self.encode(&picture, &mut rgb) {
                Ok(e) => {
                    self.encode_us_total.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                    self.encoded.fetch_add(1, Ordering::Relaxed);
                    let mut g = self.gallery();
                    if g.len() == KEPT {
                        g.pop_front();
                    }
                    g.push_back(Arc::new(e));
                    drop(g);
                    self.changed.notify_all();
                }
                Err(e) => log::warn!("live view: cannot encode frame {}: {e}", picture.frame.seq),
            }
            self.tap.give_back(picture);
        }
    }

    fn encode(&self, p: &Picture, rgb: &mut Vec<u8>) -> Result<Encoded, String> {
        let f = &p.frame;
        f.check_len().map_err(|e| e.to_string())?;
        colour::to_rgb(f, rgb);
        let jpeg = |rgb: &[u8]| crate::overlay::jpeg(rgb, f.width, f.height, self.quality);
        let raw = match self.raw_until_ns.load(Ordering::Relaxed) > mono_ns(Instant::now()) {
            true => Some(jpeg(rgb)?),
            false => None,
        };
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let r = &p.report;
        crate::overlay::draw(rgb, r, &names);
        let out = jpeg(rgb)?;
        // Numbered once it exists: ids have no gaps.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        Ok(Encoded {
            id,
            camera: r.camera.index,
            captured: r.captured,
            jpeg: out,
            raw,
            meta: meta(id, r, &names, self.cameras.len()),
        })
    }
}

/// The JSON the page shows beside picture `id`: `{"id", "image", "camera", "cameras", "age_ms",
/// "colours", "detections", "hazards"}`.
fn meta(id: u64, r: &FrameReport, names: &ClassNames, cameras: usize) -> String {
    #[derive(Serialize)]
    struct Meta<'a> {
        id: u64,
        image: String,
        camera: &'a str,
        cameras: usize,
        age_ms: f64,
        colours: Vec<String>,
        detections: serde_json::Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        hazards: Option<serde_json::Value>,
    }
    let now = Instant::now();
    let mut d = Vec::with_capacity(1024);
    protocol::write_detections(&mut d, r, names, now, 0);
    let mut h = Vec::new();
    let hazards = match r.hazards.zones.is_empty() {
        true => None,
        false => {
            protocol::write_hazards(&mut h, r, names, now);
            serde_json::from_slice(&h).ok()
        }
    };
    let colours = r
        .detections
        .iter()
        .map(|d| {
            let [r, g, b] = crate::overlay::colour(d.class_id);
            format!("#{r:02x}{g:02x}{b:02x}")
        })
        .collect();
    let meta = Meta {
        id,
        image: format!("picture/{id}.jpg"),
        camera: &r.camera.name,
        cameras,
        age_ms: (now.saturating_duration_since(r.captured).as_secs_f64() * 1e4).round() / 10.0,
        colours,
        detections: serde_json::from_slice(&d).unwrap_or(serde_json::Value::Null),
        hazards,
    };
    // Plain structs and JSON values: serialising cannot fail.
    serde_json::to_string(&meta).unwrap_or_default()
}
