//! A frame's hazards as MAVLink messages: pure functions from [`HazardFrame`] to the message
//! structs of the `mavlink` crate (which serialises them and computes the CRC). No I/O here;
//! `link` sends what these build.
//!
//! Conventions, from the message definitions (common.xml, ardupilotmega.xml) and the two
//! receivers that matter (PX4's collision prevention, ArduPilot's `AP_Proximity_MAV`):
//! - OBSTACLE_DISTANCE: 72 sectors of `increment_f` degrees spanning the camera's horizontal
//!   field of view, in `MAV_FRAME_BODY_FRD`; `angle_offset` is the *centre* of sector 0
//!   (ArduPilot places sector `j` at `angle_offset + j * increment`); distances in cm; a sector
//!   with nothing in it is `max_distance + 1` ("no obstacle"), one whose obstacle has no range
//!   estimate is `UINT16_MAX` ("unknown").
//! - OBSTACLE_DISTANCE_3D: one per tracked obstacle with a range, the obstacle's position in
//!   FRD metres (x ahead, y right, z down), its track id, all of a frame's messages with the
//!   same `time_boot_ms` (ArduPilot clears its boundary when the stamp changes).

use mavlink::dialects::ardupilotmega::{
    MavAutopilot, MavDistanceSensor, MavFrame, MavModeFlag, MavSeverity, MavState, MavType, HEARTBEAT_DATA,
    OBSTACLE_DISTANCE_3D_DATA, OBSTACLE_DISTANCE_DATA, STATUSTEXT_DATA,
};

use crate::hazard::{HazardFrame, Obstacle};

/// Sectors in an OBSTACLE_DISTANCE message.
pub const SECTORS: usize = 72;

/// A sector whose obstacle's range is unknown (MAVLink's `UINT16_MAX`).
pub const UNKNOWN: u16 = u16::MAX;

/// The distances the messages say the sensor measures, and what an obstacle without a range
/// estimate is reported as.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// `min_distance`, cm: nearer ranges are reported as this.
    pub min_cm: u16,
    /// `max_distance`, cm: farther obstacles are not reported.
    pub max_cm: u16,
    /// The distance reported for an obstacle with no range estimate (no `[hazards.classes]`
    /// size for its class); `None`: its sectors are "unknown".
    pub unranged_cm: Option<u16>,
}

impl Limits {
    /// "No obstacle": `max_distance + 1`.
    pub fn clear(&self) -> u16 {
        self.max_cm + 1
    }

    /// The sector value for an obstacle `range_m` away (`None`: no estimate), or `None` when it
    /// is beyond `max_distance` (the sector stays clear).
    pub fn distance_cm(&self, range_m: Option<f64>) -> Option<u16> {
        match range_m {
            Some(r) => {
                let cm = (r * 100.0).round();
                (cm <= self.max_cm as f64).then(|| (cm.max(self.min_cm as f64)) as u16)
            }
            None => Some(self.unranged_cm.unwrap_or(UNKNOWN)),
        }
    }
}

/// Which of two values a sector keeps: a known distance over "unknown" over "no obstacle",
/// and the nearer of two known distances.
fn merge(current: u16, new: u16, clear: u16) -> u16 {
    match (current, new) {
        (c, n) if c == clear => n,
        (c, n) if n == clear => c,
        (UNKNOWN, n) => n,
        (c, UNKNOWN) => c,
        (c, n) => c.min(n),
    }
}

/// The sector (0..72) that azimuth `az` falls in, for a field of view starting at `left`
/// with sectors `increment` degrees wide, clamped to the field of view.
pub fn sector_of(az: f64, left: f64, increment: f64) -> usize {
    (((az - left) / increment).floor().max(0.0) as usize).min(SECTORS - 1)
}

/// Fills `out` with one frame's OBSTACLE_DISTANCE: every obstacle's distance over the sectors
/// its box covers, the nearest where several share a sector. `time_usec` is the capture time
/// (Unix epoch microseconds).
pub fn obstacle_distance(h: &HazardFrame, time_usec: u64, limits: &Limits, out: &mut OBSTACLE_DISTANCE_DATA) {
    let (left, right) = h.span_deg;
    let increment = (right - left) / SECTORS as f64;
    out.time_usec = time_usec;
    out.sensor_type = MavDistanceSensor::MAV_DISTANCE_SENSOR_UNKNOWN;
    out.frame = MavFrame::MAV_FRAME_BODY_FRD;
    out.increment_f = increment as f32;
    // For receivers that read only the integer field (it is ignored when increment_f is set).
    out.increment = increment.round().clamp(1.0, 255.0) as u8;
    out.angle_offset = (left + increment / 2.0) as f32;
    out.min_distance = limits.min_cm;
    out.max_distance = limits.max_cm;
    let clear = limits.clear();
    out.distances.fill(clear);
    if increment.is_nan() || increment <= 0.0 {
        return;
    }
    for o in &h.obstacles {
        let Some(cm) = limits.distance_cm(o.range_m) else { continue };
        let (a, b) = (o.azimuth.0.min(o.azimuth.1), o.azimuth.0.max(o.azimuth.1));
        if b < left || a > right {
            continue;
        }
        for s in &mut out.distances[sector_of(a, left, increment)..=sector_of(b, left, increment)] {
            *s = merge(*s, cm, clear);
        }
    }
}

/// One obstacle's OBSTACLE_DISTANCE_3D, when it has a range within the limits. `time_boot_ms`
/// is the frame's capture time on the monotonic clock, the same for all of a frame's messages.
pub fn obstacle_3d(o: &Obstacle, time_boot_ms: u32, limits: &Limits) -> Option<OBSTACLE_DISTANCE_3D_DATA> {
    let range = o.range_m?;
    let (min_m, max_m) = (limits.min_cm as f64 / 100.0, limits.max_cm as f64 / 100.0);
    if !(range.is_finite() && range <= max_m) {
        return None;
    }
    let r = range.max(min_m);
    let (az, el) = (o.bearing.azimuth_deg.to_radians(), o.bearing.elevation_deg.to_radians());
    Some(OBSTACLE_DISTANCE_3D_DATA {
        time_boot_ms,
        x: (r * el.cos() * az.cos()) as f32,
        y: (r * el.cos() * az.sin()) as f32,
        // FRD: z points down; elevation is positive up.
        z: (-r * el.sin()) as f32,
        min_distance: min_m as f32,
        max_distance: max_m as f32,
        obstacle_id: track_id(o.id),
        sensor_type: MavDistanceSensor::MAV_DISTANCE_SENSOR_UNKNOWN,
        frame: MavFrame::MAV_FRAME_BODY_FRD,
    })
}

/// A track number as OBSTACLE_DISTANCE_3D's `obstacle_id`: 1 to 65534, wrapping
/// (`UINT16_MAX` means "unknown" and 0 is never a track).
pub fn track_id(id: u64) -> u16 {
    ((id.max(1) - 1) % (u16::MAX as u64 - 1) + 1) as u16
}

/// The HEARTBEAT of an onboard computer (`MAV_TYPE_ONBOARD_CONTROLLER`, no autopilot) in `state`.
pub fn heartbeat(state: MavState) -> HEARTBEAT_DATA {
    HEARTBEAT_DATA {
        custom_mode: 0,
        mavtype: MavType::MAV_TYPE_ONBOARD_CONTROLLER,
        autopilot: MavAutopilot::MAV_AUTOPILOT_INVALID,
        base_mode: MavModeFlag::empty(),
        system_status: state,
        mavlink_version: 3,
    }
}

/// A STATUSTEXT of `severity` saying `text` (cut at 50 bytes, on a character boundary).
pub fn statustext(severity: MavSeverity, text: &str) -> STATUSTEXT_DATA {
    let mut end = text.len().min(50);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut bytes = [0u8; 50];
    bytes[..end].copy_from_slice(&text.as_bytes()[..end]);
    STATUSTEXT_DATA { severity, text: bytes.into(), id: 0, chunk_seq: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hazard::{Bearing, Level, Ttc};

    const LIMITS: Limits = Limits { min_cm: 30, max_cm: 2000, unranged_cm: None };

    fn obstacle(id: u64, az: (f64, f64), range_m: Option<f64>) -> Obstacle {
        Obstacle {
            id,
            detection: 0,
            bearing: Bearing { azimuth_deg: (az.0 + az.1) / 2.0, elevation_deg: 0.0 },
            azimuth: az,
            velocity_px_s: [0.0; 2],
            ttc: Ttc::default(),
            range_m,
            level: Level::Clear,
        }
    }

    fn frame(obstacles: &[Obstacle]) -> HazardFrame {
        HazardFrame { span_deg: (-36.0, 36.0), obstacles: obstacles.to_vec(), ..HazardFrame::default() }
    }

    fn encode(h: &HazardFrame, limits: &Limits) -> OBSTACLE_DISTANCE_DATA {
        let mut out = OBSTACLE_DISTANCE_DATA::default();
        obstacle_distance(h, 1_700_000_000_000_000, limits, &mut out);
        out
    }

    #[test]
    fn an_empty_view_is_clear_everywhere() {
        let m = encode(&frame(&[]), &LIMITS);
        assert!(m.distances.iter().all(|&d| d == 2001), "{:?}", m.distances);
        assert_eq!((m.increment_f, m.angle_offset, m.increment), (1.0, -35.5, 1));
        assert_eq!((m.min_distance, m.max_distance), (30, 2000));
        assert_eq!(m.frame, MavFrame::MAV_FRAME_BODY_FRD);
    }

    #[test]
    fn an_obstacle_fills_the_sectors_its_box_covers() {
        let m = encode(&frame(&[obstacle(1, (-10.5, -5.2), Some(4.0))]), &LIMITS);
        let hit: Vec<usize> = (0..SECTORS).filter(|&i| m.distances[i] != 2001).collect();
        // Sector j spans [-36 + j, -35 + j): -10.5 is in 25, -5.2 in 30.
        assert_eq!(hit, (25..=30).collect::<Vec<_>>());
        assert!(hit.iter().all(|&i| m.distances[i] == 400));
        // The receiver's view: sector j's centre is angle_offset + j * increment.
        let centre = |j: usize| m.angle_offset + j as f32 * m.increment_f;
        assert!(centre(25) > -11.0 && centre(30) < -4.7);
    }

    #[test]
    fn the_nearest_wins_and_known_beats_unknown() {
        let m = encode(
            &frame(&[
                obstacle(1, (0.0, 3.0), Some(8.0)),
                obstacle(2, (2.0, 5.0), Some(3.0)),
                obstacle(3, (4.5, 8.0), None),
            ]),
            &LIMITS,
        );
        assert_eq!(&m.distances[36..=41], &[800, 800, 300, 300, 300, 300]);
        assert_eq!(&m.distances[42..=44], &[UNKNOWN, UNKNOWN, UNKNOWN]);
        assert_eq!(m.distances[45], 2001);
        let m = encode(&frame(&[obstacle(3, (4.5, 8.0), None)]), &Limits { unranged_cm: Some(50), ..LIMITS });
        assert_eq!(&m.distances[40..=45], &[50, 50, 50, 50, 50, 2001]);
    }

    #[test]
    fn ranges_are_clamped_to_min_and_dropped_past_max() {
        let m = encode(
            &frame(&[obstacle(1, (-1.0, 1.0), Some(0.1)), obstacle(2, (20.0, 21.0), Some(25.0))]),
            &LIMITS,
        );
        assert_eq!(&m.distances[35..=36], &[30, 30]);
        assert_eq!(m.distances[56], 2001);
        // Boxes reaching past the field of view are clamped to its edge sectors.
        let m = encode(
            &frame(&[obstacle(1, (-50.0, -35.5), Some(2.0)), obstacle(2, (35.9, 60.0), Some(2.0))]),
            &LIMITS,
        );
        assert_eq!((m.distances[0], m.distances[71]), (200, 200));
        let m = encode(&frame(&[obstacle(1, (40.0, 60.0), Some(2.0))]), &LIMITS);
        assert!(m.distances.iter().all(|&d| d == 2001));
    }

    #[test]
    fn a_turned_camera_offsets_the_sectors() {
        let h = HazardFrame { span_deg: (60.0, 120.0), ..frame(&[obstacle(1, (89.0, 91.0), Some(5.0))]) };
        let m = encode(&h, &LIMITS);
        let centre = |j: usize| m.angle_offset + j as f32 * m.increment_f;
        let hit: Vec<usize> = (0..SECTORS).filter(|&i| m.distances[i] != 2001).collect();
        assert!(hit.iter().all(|&j| (centre(j) - 90.0).abs() < 1.5), "{hit:?}");
        assert_eq!(m.increment, 1);
        assert!((m.increment_f - 60.0 / 72.0).abs() < 1e-6);
    }

    #[test]
    fn the_3d_position_follows_the_bearing_in_frd() {
        let mut o = obstacle(7, (29.0, 31.0), Some(10.0));
        o.bearing.elevation_deg = 10.0;
        let m = obstacle_3d(&o, 1234, &LIMITS).unwrap();
        let r = (m.x * m.x + m.y * m.y + m.z * m.z).sqrt();
        assert!((r - 10.0).abs() < 1e-4);
        assert!(m.x > 0.0 && m.y > 0.0 && m.z < 0.0, "ahead, right, above: {m:?}");
        assert!((m.y.atan2(m.x).to_degrees() - 30.0).abs() < 1e-3);
        assert_eq!((m.obstacle_id, m.time_boot_ms, m.min_distance, m.max_distance), (7, 1234, 0.3, 20.0));
        assert!(obstacle_3d(&obstacle(1, (0.0, 1.0), None), 0, &LIMITS).is_none());
        assert!(obstacle_3d(&obstacle(1, (0.0, 1.0), Some(20.5)), 0, &LIMITS).is_none());
    }

    #[test]
    fn track_ids_wrap_past_65534_and_never_say_unknown() {
        assert_eq!(track_id(1), 1);
        assert_eq!(track_id(65534), 65534);
        assert_eq!(track_id(65535), 1);
        assert_eq!(track_id(0), 1);
    }

    #[test]
    fn statustext_is_cut_on_a_character_boundary() {
        // 61 bytes: byte 50 is inside the 25th "é".
        let m = statustext(MavSeverity::MAV_SEVERITY_WARNING, &format!("a{}", "é".repeat(30)));
        let text: &[u8] = &m.text[..];
        assert_eq!(text.iter().filter(|&&b| b != 0).count(), 49);
        assert!(std::str::from_utf8(&text[..49]).is_ok());
    }
}
