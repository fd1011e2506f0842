//! A frame's hazards as MAVLink messages: pure functions from [`HazardFrame`] to the message
//! structs of the `mavlink` crate (which serialises them and computes the CRC). No I/O here;
//! `link` sends what these build.
//!
//! The layout is chosen from how the two receivers that matter read it (their handlers are
//! transcribed, line by line, in tests/mavlink/oracle/; docs/outputs.md says more):
//!
//! - OBSTACLE_DISTANCE: **36 sectors of 10 degrees round the vehicle** in `MAV_FRAME_BODY_FRD`,
//!   `increment = increment_f = 10`, `angle_offset = -20` (the centre of sector 0; sector `j`
//!   is centred at `-20 + 10 j`). Why these numbers:
//!   - PX4 (`CollisionPrevention::_addObstacleSensorData`, BODY_FRD branch) loops over
//!     `j < 360 / increment` message sectors and reads `distances[j]`; only 72 exist, so an
//!     increment under 5 degrees reads past the array. Where several message sectors fall in one
//!     of its bins, the last one read wins, not the nearest. Its bins are 10 degrees centred on
//!     multiples of 10 (`BIN_SIZE`, `ObstacleMath::get_lower_bound_angle`), 5 degrees in the
//!     newest `CollisionPrevention.hpp`: sectors on the same grid map one to one (or one to
//!     two), and the older v1.14 reader (`msg_index = ceil(...)`) picks exactly sector `i`.
//!   - ArduPilot (`AP_Proximity_MAV::handle_obstacle_distance_msg`) reads
//!     `MIN(360 / increment + 0.5, 72)` = 36 sectors at `mid_angle = j * increment +
//!     angle_offset` and keeps the nearest per 45-degree face, but it restarts a face each
//!     time the run of sectors enters it again: with sector 0 at 0 degrees, face 0 (the nose)
//!     would be visited twice (0..20 and 340..350) and the second visit would overwrite the
//!     first. Starting at -20 makes every face one contiguous run (5, 4, 5, 4, ... sectors).
//!   - Each sector's value is the nearest obstacle overlapping it **widened by 2.5 degrees each
//!     side** ([`OVERLAP_DEG`]), so a 5-degree PX4 bin that straddles two sectors and takes the
//!     later one still gets a value covering all of it.
//!   - A sector wholly inside the camera's view with nothing in it is "clear"
//!     (`max_distance + 1`); a sector outside the view or only partly in it is "unknown"
//!     (`UINT16_MAX`) unless an obstacle overlaps it. PX4 treats unknown as no data (it will not
//!     fly there with `CP_GO_NO_DATA = 0`); ArduPilot skips it like clear: it has no "unknown".
//!   - Ranges nearer than `min_distance` are sent as `min_distance + 1` cm: PX4 v1.14's
//!     velocity compensation uses bins strictly above `min_distance`, ArduPilot drops values
//!     below it.
//! - OBSTACLE_DISTANCE_3D: one per tracked obstacle with a range, FRD metres, its track id; a
//!   frame's messages share the frame's `time_boot_ms`, and a closing message ([`close_3d`])
//!   with the next stamp and a point beyond `max_distance` follows them: ArduPilot moves a
//!   batch into its boundary only when a message with a new stamp arrives, and rejects the
//!   point after that move, so the batch lands now instead of one frame late (or seconds late,
//!   after frames with nothing to send).

use mavlink::dialects::ardupilotmega::{
    MavAutopilot, MavDistanceSensor, MavFrame, MavModeFlag, MavSeverity, MavState, MavType, HEARTBEAT_DATA,
    OBSTACLE_DISTANCE_3D_DATA, OBSTACLE_DISTANCE_DATA, STATUSTEXT_DATA,
};

use crate::hazard::{HazardFrame, Obstacle};

/// Sectors in an OBSTACLE_DISTANCE message that carry data (the other 36 of the 72 are
/// "unknown"; no receiver reads them at a 10-degree increment).
pub const SECTORS: usize = 36;

/// The width of a sector, degrees (`increment`, `increment_f`).
pub const SECTOR_DEG: f64 = 10.0;

/// The centre of sector 0 (`angle_offset`), degrees, positive right of the nose.
pub const ANGLE_OFFSET_DEG: f64 = -20.0;

/// How far past its own edges each sector's value reaches, degrees.
pub const OVERLAP_DEG: f64 = 2.5;

/// A sector whose content is unknown (MAVLink's `UINT16_MAX`).
pub const UNKNOWN: u16 = u16::MAX;

/// The distances the messages say the sensor measures, and what an obstacle without a range
/// estimate and the blind wall are reported as.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// `min_distance`, cm: nearer ranges are reported as `min_cm + 1`.
    pub min_cm: u16,
    /// `max_distance`, cm: farther obstacles are not reported.
    pub max_cm: u16,
    /// The distance reported for an obstacle with no range estimate (no `[hazards.classes]`
    /// size for its class); `None`: its sectors are "unknown".
    pub unranged_cm: Option<u16>,
    /// The blind wall's distance ([`wall`]), cm.
    pub wall_cm: u16,
}

impl Limits {
    /// "No obstacle": `max_distance + 1`.
    pub fn clear(&self) -> u16 {
        self.max_cm + 1
    }

    /// The nearest value a sector carries: `min_distance + 1`.
    pub fn nearest(&self) -> u16 {
        self.min_cm + 1
    }

    /// The sector value for an obstacle `range_m` away (`None`: no estimate), or `None` when it
    /// is beyond `max_distance` (the sector stays as it is).
    pub fn distance_cm(&self, range_m: Option<f64>) -> Option<u16> {
        match range_m {
            Some(r) => {
                let cm = (r * 100.0).round();
                (cm <= self.max_cm as f64).then(|| (cm.max(self.nearest() as f64)) as u16)
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

/// The centre of sector `j`, degrees, as the receivers compute it
/// (`angle_offset + j * increment`).
pub fn sector_centre(j: usize) -> f64 {
    ANGLE_OFFSET_DEG + j as f64 * SECTOR_DEG
}

/// `az` moved by whole turns to within half a turn of `reference`.
fn near(az: f64, reference: f64) -> f64 {
    az - 360.0 * ((az - reference) / 360.0).round()
}

/// What sector `j` reaches (its 10 degrees widened by [`OVERLAP_DEG`]), as azimuths within
/// half a turn of `reference`.
pub fn sector_reach(j: usize, reference: f64) -> (f64, f64) {
    let c = near(sector_centre(j), reference);
    (c - SECTOR_DEG / 2.0 - OVERLAP_DEG, c + SECTOR_DEG / 2.0 + OVERLAP_DEG)
}

/// Fills the fields every OBSTACLE_DISTANCE shares.
fn header(time_usec: u64, limits: &Limits, out: &mut OBSTACLE_DISTANCE_DATA) {
    out.time_usec = time_usec;
    out.sensor_type = MavDistanceSensor::MAV_DISTANCE_SENSOR_UNKNOWN;
    out.frame = MavFrame::MAV_FRAME_BODY_FRD;
    out.increment_f = SECTOR_DEG as f32;
    out.increment = SECTOR_DEG as u8;
    out.angle_offset = ANGLE_OFFSET_DEG as f32;
    out.min_distance = limits.min_cm;
    out.max_distance = limits.max_cm;
    out.distances.fill(UNKNOWN);
}

/// Fills `out` with one frame's OBSTACLE_DISTANCE: per sector, the nearest obstacle reaching
/// into it; "clear" where the camera sees the whole sector and nothing is there; "unknown"
/// elsewhere. `time_usec` is the capture time (Unix epoch microseconds).
pub fn obstacle_distance(h: &HazardFrame, time_usec: u64, limits: &Limits, out: &mut OBSTACLE_DISTANCE_DATA) {
    header(time_usec, limits, out);
    let (left, right) = h.span_deg;
    if !(left.is_finite() && right.is_finite() && right > left) {
        return;
    }
    let middle = (left + right) / 2.0;
    let clear = limits.clear();
    for j in 0..SECTORS {
        let (a, b) = sector_reach(j, middle);
        if a >= left && b <= right {
            out.distances[j] = clear;
        }
    }
    for o in &h.obstacles {
        let Some(cm) = limits.distance_cm(o.range_m) else { continue };
        let (a, b) = (o.azimuth.0.min(o.azimuth.1), o.azimuth.0.max(o.azimuth.1));
        // What the camera saw of it (a box cannot reach past the picture; rounding can).
        let (a, b) = (near(a, middle).max(left), near(b, middle).min(right));
        // Out of view, or a NaN azimuth: nothing to place.
        if a.partial_cmp(&b).is_none_or(|o| o == std::cmp::Ordering::Greater) {
            continue;
        }
        for j in 0..SECTORS {
            let (lo, hi) = sector_reach(j, middle);
            if b >= lo && a < hi {
                out.distances[j] = merge(out.distances[j], cm, clear);
            }
        }
    }
}

/// Fills `out` with the blind wall: every sector the camera's view `span_deg` reaches into
/// holds an obstacle at `wall_cm`, the rest is unknown. ArduPilot keeps its proximity sensor
/// healthy (so avoidance with its other sensors stays on) and will not let the vehicle close
/// in on the view; docs/outputs.md has what each autopilot does with it.
pub fn wall(span_deg: (f64, f64), time_usec: u64, limits: &Limits, out: &mut OBSTACLE_DISTANCE_DATA) {
    header(time_usec, limits, out);
    let (left, right) = span_deg;
    if !(left.is_finite() && right.is_finite() && right > left) {
        return;
    }
    let middle = (left + right) / 2.0;
    for j in 0..SECTORS {
        let (a, b) = sector_reach(j, middle);
        if b > left && a < right {
            out.distances[j] = limits.wall_cm;
        }
    }
}

/// Elevations, degrees, that ArduPilot files into the middle layer of its boundary, the one
/// OBSTACLE_DISTANCE writes (`AP_Proximity_Boundary_3D::get_face`: layers of
/// `PROXIMITY_PITCH_WIDTH_DEG` = 30 from -75, the middle one is layer 2).
pub const MIDDLE_LAYER_DEG: (f64, f64) = (-15.0, 15.0);

/// One obstacle's OBSTACLE_DISTANCE_3D, when it has a range within the limits (and, with
/// `off_middle_layer`, only when ArduPilot would file it above or below the middle layer, so
/// that it never writes a face OBSTACLE_DISTANCE writes). `time_boot_ms` is the frame's
/// capture time on the monotonic clock, the same for all of a frame's messages.
pub fn obstacle_3d(
    o: &Obstacle,
    time_boot_ms: u32,
    limits: &Limits,
    off_middle_layer: bool,
) -> Option<OBSTACLE_DISTANCE_3D_DATA> {
    let range = o.range_m?;
    let (min_m, max_m) = (limits.min_cm as f64 / 100.0, limits.max_cm as f64 / 100.0);
    if !(range.is_finite() && range <= max_m) {
        return None;
    }
    let el_deg = o.bearing.elevation_deg;
    if off_middle_layer && el_deg >= MIDDLE_LAYER_DEG.0 && el_deg < MIDDLE_LAYER_DEG.1 {
        return None;
    }
    let r = range.max(limits.nearest() as f64 / 100.0);
    let (az, el) = (o.bearing.azimuth_deg.to_radians(), el_deg.to_radians());
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

/// The message that closes a frame's OBSTACLE_DISTANCE_3D batch: the next stamp
/// (`time_boot_ms + 1`), which makes ArduPilot move the batch into its boundary at once
/// (`handle_obstacle_distance_3d_msg`: a new stamp pushes the temporary boundary), and a point
/// 1 m beyond `max_distance`, which it then rejects as out of range; obstacle id `UINT16_MAX`
/// ("unknown"). Any other reader sees nothing within range. Sent after every frame's batch,
/// an empty one too, so that a view with nothing in it still keeps ArduPilot's sensor
/// healthy (its 500 ms timeout counts any message).
pub fn close_3d(time_boot_ms: u32, limits: &Limits) -> OBSTACLE_DISTANCE_3D_DATA {
    let max_m = limits.max_cm as f32 / 100.0;
    OBSTACLE_DISTANCE_3D_DATA {
        time_boot_ms: time_boot_ms.wrapping_add(1),
        x: max_m + 1.0,
        y: 0.0,
        z: 0.0,
        min_distance: limits.min_cm as f32 / 100.0,
        max_distance: max_m,
        obstacle_id: u16::MAX,
        sensor_type: MavDistanceSensor::MAV_DISTANCE_SENSOR_UNKNOWN,
        frame: MavFrame::MAV_FRAME_BODY_FRD,
    }
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

    const LIMITS: Limits = Limits { min_cm: 30, max_cm: 2000, unranged_cm: None, wall_cm: 200 };
    const CLEAR: u16 = 2001;

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
            course: None,
        }
    }

    /// A 62.2-degree camera looking ahead.
    fn frame(obstacles: &[Obstacle]) -> HazardFrame {
        HazardFrame { span_deg: (-31.1, 31.1), obstacles: obstacles.to_vec(), ..HazardFrame::default() }
    }

    fn encode(h: &HazardFrame, limits: &Limits) -> OBSTACLE_DISTANCE_DATA {
        let mut out = OBSTACLE_DISTANCE_DATA::default();
        obstacle_distance(h, 1_700_000_000_000_000, limits, &mut out);
        out
    }

    /// The sectors holding something other than "unknown".
    fn known(m: &OBSTACLE_DISTANCE_DATA) -> Vec<(usize, u16)> {
        (0..72).filter(|&j| m.distances[j] != UNKNOWN).map(|j| (j, m.distances[j])).collect()
    }

    #[test]
    fn an_empty_view_is_clear_where_whole_sectors_are_seen_and_unknown_elsewhere() {
        let m = encode(&frame(&[]), &LIMITS);
        // Sectors centred at -20, -10, 0, 10, 20 lie wholly within +-31.1 (with their 2.5-degree
        // reach); -30 and 30 only partly.
        assert_eq!(known(&m), [(0, CLEAR), (1, CLEAR), (2, CLEAR), (3, CLEAR), (4, CLEAR)]);
        assert_eq!((m.increment_f, m.increment, m.angle_offset), (10.0, 10, -20.0));
        assert_eq!((m.min_distance, m.max_distance), (30, 2000));
        assert_eq!(m.frame, MavFrame::MAV_FRAME_BODY_FRD);
        assert!(m.distances[SECTORS..].iter().all(|&d| d == UNKNOWN));
    }

    #[test]
    fn an_obstacle_fills_every_sector_it_reaches_into() {
        // -10.5..-5.2: sector 1 (centre -10, reach -17.5..-2.5) and sector 2 (centre 0, reach
        // -7.5..7.5); not sector 0 (reach to -12.5).
        let m = encode(&frame(&[obstacle(1, (-10.5, -5.2), Some(4.0))]), &LIMITS);
        assert_eq!(known(&m), [(0, CLEAR), (1, 400), (2, 400), (3, CLEAR), (4, CLEAR)]);
        // As the receivers place them: sector j at angle_offset + j * increment.
        assert_eq!(sector_centre(1), m.angle_offset as f64 + m.increment_f as f64);
    }

    #[test]
    fn the_nearest_wins_and_known_beats_unknown() {
        let m = encode(
            &frame(&[
                obstacle(1, (-3.0, 3.0), Some(8.0)),
                obstacle(2, (5.0, 6.0), Some(3.0)),
                obstacle(3, (16.0, 18.0), None),
            ]),
            &LIMITS,
        );
        // 5..6 reaches sectors 2 (to 7.5) and 3 (from 2.5): 3 m beats 8 m in sector 2.
        // The unranged obstacle (16..18) is unknown in sectors 3 and 4; 3 keeps its 3 m.
        assert_eq!(known(&m), [(0, CLEAR), (1, 800), (2, 300), (3, 300)]);
        let limits = Limits { unranged_cm: Some(50), ..LIMITS };
        let m = encode(&frame(&[obstacle(3, (16.0, 18.0), None)]), &limits);
        assert_eq!(known(&m), [(0, CLEAR), (1, CLEAR), (2, CLEAR), (3, 50), (4, 50)]);
    }

    #[test]
    fn an_obstacle_at_the_edge_of_the_view_is_reported_in_a_sector_the_camera_sees_only_partly() {
        // 28..31 reaches sector 5 (centre 30, only partly in view: unknown when empty).
        let m = encode(&frame(&[obstacle(1, (28.0, 31.0), Some(6.0))]), &LIMITS);
        assert_eq!(m.distances[5], 600);
        assert_eq!(m.distances[4], CLEAR, "sector 4 reaches to 20 + 5 + 2.5 only");
        assert_eq!(m.distances[6], UNKNOWN);
    }

    #[test]
    fn ranges_are_kept_above_min_distance_and_dropped_past_max() {
        let m = encode(
            &frame(&[obstacle(1, (-1.0, 1.0), Some(0.1)), obstacle(2, (19.0, 21.0), Some(25.0))]),
            &LIMITS,
        );
        // Strictly above min_distance: PX4 v1.14 ignores a bin at exactly min_distance.
        assert_eq!(m.distances[2], 31);
        assert_eq!(m.distances[4], CLEAR);
        // Boxes reaching past the field of view count only where the camera saw them.
        let m = encode(&frame(&[obstacle(1, (-50.0, -30.0), Some(2.0))]), &LIMITS);
        assert_eq!((m.distances[34], m.distances[35], m.distances[0]), (UNKNOWN, 200, CLEAR));
        let m = encode(&frame(&[obstacle(1, (40.0, 60.0), Some(2.0))]), &LIMITS);
        assert_eq!(known(&m).len(), 5, "out of view: nothing");
    }

    #[test]
    fn a_turned_camera_fills_the_sectors_where_it_looks_across_the_tail_too() {
        let h = HazardFrame { span_deg: (60.0, 120.0), ..frame(&[obstacle(1, (89.0, 91.0), Some(5.0))]) };
        let m = encode(&h, &LIMITS);
        // Centres 70..110 (sectors 9..13) are wholly seen; 90 (sector 11) holds the obstacle.
        assert_eq!(known(&m), [(9, CLEAR), (10, CLEAR), (11, 500), (12, CLEAR), (13, CLEAR)]);
        // Looking backwards, azimuths given either side of 180 land in the same sectors.
        for az in [(175.0, 185.0), (-185.0, -175.0)] {
            let h = HazardFrame { span_deg: (150.0, 210.0), ..frame(&[obstacle(1, az, Some(5.0))]) };
            let m = encode(&h, &LIMITS);
            let hit: Vec<usize> = known(&m).iter().filter(|(_, d)| *d == 500).map(|(j, _)| *j).collect();
            assert_eq!(hit, [19, 20, 21], "{az:?}");
            assert_eq!(sector_centre(20), 180.0);
        }
    }

    #[test]
    fn the_wall_covers_every_sector_the_view_reaches_into() {
        let mut m = OBSTACLE_DISTANCE_DATA::default();
        wall((-31.1, 31.1), 5, &LIMITS, &mut m);
        assert_eq!(known(&m), [(0, 200), (1, 200), (2, 200), (3, 200), (4, 200), (5, 200), (35, 200)]);
        assert_eq!(m.time_usec, 5);
    }

    #[test]
    fn the_3d_position_follows_the_bearing_in_frd() {
        let mut o = obstacle(7, (29.0, 31.0), Some(10.0));
        o.bearing.elevation_deg = 10.0;
        let m = obstacle_3d(&o, 1234, &LIMITS, false).unwrap();
        let r = (m.x * m.x + m.y * m.y + m.z * m.z).sqrt();
        assert!((r - 10.0).abs() < 1e-4);
        assert!(m.x > 0.0 && m.y > 0.0 && m.z < 0.0, "ahead, right, above: {m:?}");
        assert!((m.y.atan2(m.x).to_degrees() - 30.0).abs() < 1e-3);
        assert_eq!((m.obstacle_id, m.time_boot_ms, m.min_distance, m.max_distance), (7, 1234, 0.3, 20.0));
        assert!(obstacle_3d(&obstacle(1, (0.0, 1.0), None), 0, &LIMITS, false).is_none());
        assert!(obstacle_3d(&obstacle(1, (0.0, 1.0), Some(20.5)), 0, &LIMITS, false).is_none());
    }

    #[test]
    fn off_the_middle_layer_only_what_ardupilot_files_above_or_below_it_is_sent() {
        let at = |el: f64| {
            let mut o = obstacle(7, (0.0, 1.0), Some(5.0));
            o.bearing.elevation_deg = el;
            obstacle_3d(&o, 0, &LIMITS, true).is_some()
        };
        assert_eq!(
            [at(-20.0), at(-15.0), at(0.0), at(14.9), at(15.0), at(40.0)],
            [true, false, false, false, true, true]
        );
    }

    #[test]
    fn the_closing_message_has_the_next_stamp_and_nothing_within_range() {
        let m = close_3d(u32::MAX, &LIMITS);
        assert_eq!((m.time_boot_ms, m.obstacle_id, m.frame), (0, u16::MAX, MavFrame::MAV_FRAME_BODY_FRD));
        let r = (m.x * m.x + m.y * m.y + m.z * m.z).sqrt();
        assert!(r > m.max_distance, "{m:?}");
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
