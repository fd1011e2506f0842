//! Zones: the horizontal field of view cut into N equal sectors (3 by default: left, centre,
//! right; up to 72, MAVLink's `OBSTACLE_DISTANCE` sector count), each with its most urgent
//! obstacle and a level.

use serde::Serialize;

named_enum! {
    /// How urgent an obstacle, or a zone, is.
    pub enum Level {
        /// Nothing approaching within `caution_ttc_s`.
        Clear = "clear",
        /// Something approaching, contact within `caution_ttc_s`.
        Caution = "caution",
        /// Contact within `danger_ttc_s`.
        Danger = "danger",
    }
}

impl std::str::FromStr for Level {
    type Err = crate::named::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s)
            .ok_or_else(|| crate::named::UnknownName::new("level: ", s, " is not a level", Self::names(", ")))
    }
}

/// One sector's state for a frame.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Zone {
    /// Left edge, degrees of azimuth.
    pub from_deg: f64,
    /// Right edge, degrees of azimuth.
    pub to_deg: f64,
    /// The most urgent obstacle's level (`clear` when there is none).
    pub level: Level,
    /// The most urgent obstacle's track number.
    pub track: Option<u64>,
    /// Its time to contact, seconds.
    pub ttc_s: Option<f64>,
    /// Its estimated range, metres.
    pub range_m: Option<f64>,
}

/// What the zones need to know of a track.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// Track number.
    pub track: u64,
    /// Azimuths of the box's left and right edges.
    pub azimuth: (f64, f64),
    /// Its level.
    pub level: Level,
    /// Time to contact, when approaching with enough confidence.
    pub ttc_s: Option<f64>,
    /// Estimated range.
    pub range_m: Option<f64>,
    /// Box height in pixels (bigger: nearer, all else equal).
    pub height_px: f32,
}

impl Candidate {
    /// Orders by urgency: level, then the sooner contact, then the nearer estimate, then the
    /// bigger box. `Less` is more urgent.
    fn urgency(&self, other: &Candidate) -> std::cmp::Ordering {
        let inf = f64::INFINITY;
        other
            .level
            .cmp(&self.level)
            .then(self.ttc_s.unwrap_or(inf).total_cmp(&other.ttc_s.unwrap_or(inf)))
            .then(self.range_m.unwrap_or(inf).total_cmp(&other.range_m.unwrap_or(inf)))
            .then(other.height_px.total_cmp(&self.height_px))
    }
}

impl PartialOrd for Level {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Level {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (*self as u8).cmp(&(*other as u8))
    }
}

/// Fills `zones` (resized to `n`) for the field of view `span` (left, right azimuth) from the
/// candidates: each goes to every sector its box overlaps.
pub fn fill(zones: &mut Vec<Zone>, n: usize, span: (f64, f64), candidates: &[Candidate]) {
    let n = n.max(1);
    let width = (span.1 - span.0) / n as f64;
    zones.clear();
    for i in 0..n {
        let (from, to) = (span.0 + width * i as f64, span.0 + width * (i + 1) as f64);
        let best = candidates
            .iter()
            .filter(|c| c.azimuth.0.min(c.azimuth.1) < to && c.azimuth.0.max(c.azimuth.1) >= from)
            .min_by(|a, b| a.urgency(b));
        zones.push(Zone {
            from_deg: from,
            to_deg: to,
            level: best.map_or(Level::Clear, |c| c.level),
            track: best.map(|c| c.track),
            ttc_s: best.and_then(|c| c.ttc_s),
            range_m: best.and_then(|c| c.range_m),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(track: u64, az: (f64, f64), level: Level, ttc_s: Option<f64>) -> Candidate {
        Candidate { track, azimuth: az, level, ttc_s, range_m: None, height_px: 50.0 }
    }

    #[test]
    fn each_zone_shows_its_most_urgent_obstacle() {
        let mut zones = Vec::new();
        let cands = [
            c(1, (-30.0, -20.0), Level::Caution, Some(3.0)),
            c(2, (-25.0, -22.0), Level::Danger, Some(1.0)),
            // Straddles centre and right.
            c(3, (5.0, 15.0), Level::Caution, Some(3.5)),
            c(4, (20.0, 25.0), Level::Caution, Some(2.5)),
        ];
        fill(&mut zones, 3, (-30.0, 30.0), &cands);
        assert_eq!(zones.len(), 3);
        assert_eq!((zones[0].from_deg, zones[0].to_deg), (-30.0, -10.0));
        assert_eq!((zones[0].level, zones[0].track), (Level::Danger, Some(2)));
        assert_eq!((zones[1].level, zones[1].track), (Level::Caution, Some(3)));
        assert_eq!((zones[2].level, zones[2].track, zones[2].ttc_s), (Level::Caution, Some(4), Some(2.5)));
        fill(&mut zones, 72, (-30.0, 30.0), &[]);
        assert_eq!(zones.len(), 72);
        assert!(zones.iter().all(|z| z.level == Level::Clear && z.track.is_none()));
        assert!((zones[71].to_deg - 30.0).abs() < 1e-9);
        assert!(Level::Danger > Level::Caution && Level::Caution > Level::Clear);
    }
}
