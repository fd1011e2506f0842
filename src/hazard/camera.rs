//! The camera's geometry: `[camera]` intrinsics and mounting, and the bearing of a pixel.
//!
//! Pinhole model. Directions are given in the vehicle's body frame, FRD as MAVLink uses it:
//! azimuth 0 straight ahead and positive to the right, elevation positive up. The camera is
//! mounted with a yaw (positive: turned right) and a pitch (positive: tilted up), applied in
//! that order (pitch about the camera's own right axis, then yaw about the vertical).

use serde::{Deserialize, Serialize};

/// `[camera]`: how the camera sees. Either fields of view, or intrinsics in pixels of the
/// frames the source delivers; with neither, a 62.2-degree horizontal field of view (the
/// Raspberry Pi camera v2 / IMX219, the most common Jetson CSI camera) and square pixels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CameraConfig {
    /// Horizontal field of view, degrees (used when `fx` is not given).
    pub hfov_deg: f64,
    /// Vertical field of view, degrees; absent: square pixels (`fy = fx`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vfov_deg: Option<f64>,
    /// Focal length along x, pixels (from a calibration, e.g. OpenCV's camera matrix).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fx: Option<f64>,
    /// Focal length along y, pixels; absent: `fx`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fy: Option<f64>,
    /// Principal point x, pixels; absent: the frame's centre.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cx: Option<f64>,
    /// Principal point y, pixels; absent: the frame's centre.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cy: Option<f64>,
    /// Mounting yaw, degrees: positive when the camera looks right of the vehicle's forward axis.
    pub yaw_deg: f64,
    /// Mounting pitch, degrees: positive when the camera looks up.
    pub pitch_deg: f64,
}

impl Default for CameraConfig {
    fn default() -> Self {
        CameraConfig {
            hfov_deg: 62.2,
            vfov_deg: None,
            fx: None,
            fy: None,
            cx: None,
            cy: None,
            yaw_deg: 0.0,
            pitch_deg: 0.0,
        }
    }
}

impl CameraConfig {
    /// Checks the ranges; the error names the key and what is allowed.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(self.hfov_deg > 1.0 && self.hfov_deg < 179.0) {
            return Err((
                "hfov_deg",
                format!("{} is out of range: allowed 1 < hfov_deg < 179", self.hfov_deg),
            ));
        }
        if let Some(v) = self.vfov_deg.filter(|v| !(*v > 1.0 && *v < 179.0)) {
            return Err(("vfov_deg", format!("{v} is out of range: allowed 1 < vfov_deg < 179")));
        }
        for (key, v) in [("fx", self.fx), ("fy", self.fy)] {
            if let Some(v) = v.filter(|v| !(v.is_finite() && *v > 0.0)) {
                return Err((key, format!("{v} is not a focal length: give pixels, more than 0")));
            }
        }
        if self.fy.is_some() && self.fx.is_none() {
            return Err(("fy", "fy needs fx (give both, from the camera's calibration)".into()));
        }
        if self.fx.is_some() && self.vfov_deg.is_some() {
            return Err(("vfov_deg", "give either fields of view or fx/fy, not both".into()));
        }
        for (key, v) in [("cx", self.cx), ("cy", self.cy)] {
            if let Some(v) = v.filter(|v| !v.is_finite()) {
                return Err((key, format!("{v} is not a pixel position")));
            }
        }
        for (key, v, max) in [("yaw_deg", self.yaw_deg, 180.0), ("pitch_deg", self.pitch_deg, 90.0)] {
            if !(v.is_finite() && v.abs() <= max) {
                return Err((key, format!("{v} is out of range: allowed -{max} to {max}")));
            }
        }
        Ok(())
    }
}

/// The camera for frames of one size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    /// Frame width, pixels.
    pub width: u32,
    /// Frame height, pixels.
    pub height: u32,
    /// Focal lengths and principal point, pixels.
    pub fx: f64,
    /// Focal length along y.
    pub fy: f64,
    /// Principal point x.
    pub cx: f64,
    /// Principal point y.
    pub cy: f64,
    yaw: f64,
    pitch: f64,
}

/// A direction from the vehicle, degrees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Bearing {
    /// Azimuth: 0 ahead, positive right.
    pub azimuth_deg: f64,
    /// Elevation: positive up.
    pub elevation_deg: f64,
}

impl Camera {
    /// The camera of `config` for `width` x `height` frames.
    pub fn new(config: &CameraConfig, width: u32, height: u32) -> Camera {
        let (w, h) = (width.max(1) as f64, height.max(1) as f64);
        let fx = config.fx.unwrap_or_else(|| (w / 2.0) / (config.hfov_deg.to_radians() / 2.0).tan());
        let fy = match (config.fy, config.vfov_deg) {
            (Some(fy), _) => fy,
            (None, Some(v)) if config.fx.is_none() => (h / 2.0) / (v.to_radians() / 2.0).tan(),
            _ => fx,
        };
        Camera {
            width,
            height,
            fx,
            fy,
            cx: config.cx.unwrap_or(w / 2.0),
            cy: config.cy.unwrap_or(h / 2.0),
            yaw: config.yaw_deg.to_radians(),
            pitch: config.pitch_deg.to_radians(),
        }
    }

    /// The ray through pixel `(u, v)` in the vehicle's body axes, forward, right, down (FRD),
    /// the mounting's pitch and yaw applied; not of unit length.
    pub fn ray(&self, u: f64, v: f64) -> [f64; 3] {
        // The ray in the camera's own FRD axes, then pitched and yawed.
        let (f, r, d) = (1.0, (u - self.cx) / self.fx, (v - self.cy) / self.fy);
        let (sp, cp) = self.pitch.sin_cos();
        let (f, d) = (f * cp + d * sp, -f * sp + d * cp);
        let (sy, cy) = self.yaw.sin_cos();
        [f * cy - r * sy, f * sy + r * cy, d]
    }

    /// The direction of pixel `(u, v)`.
    pub fn bearing(&self, u: f64, v: f64) -> Bearing {
        let [f, r, d] = self.ray(u, v);
        // Continuous across the camera's view: the branch of the angle nearest its yaw, so a
        // camera looking backwards sees 150..210 degrees, not 150..180 then -180..-150 (its
        // zones and MAVLink sectors run left to right like any other camera's).
        let yaw = self.yaw.to_degrees();
        let turn = r.atan2(f).to_degrees() - yaw;
        let azimuth_deg = yaw + turn - 360.0 * (turn / 360.0).round();
        Bearing { azimuth_deg, elevation_deg: (-d).atan2(f.hypot(r)).to_degrees() }
    }

    /// The azimuth of image column `u`, read along the row of the principal point.
    pub fn azimuth(&self, u: f64) -> f64 {
        self.bearing(u, self.cy).azimuth_deg
    }

    /// The azimuths of the frame's left and right edges: the horizontal field of view.
    pub fn horizontal_span(&self) -> (f64, f64) {
        (self.azimuth(0.0), self.azimuth(self.width as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn bearings_follow_the_field_of_view_and_the_mounting() {
        let cam = Camera::new(&CameraConfig { hfov_deg: 90.0, ..Default::default() }, 640, 480);
        assert!(close(cam.fx, 320.0) && close(cam.fy, 320.0));
        let b = cam.bearing(320.0, 240.0);
        assert!(close(b.azimuth_deg, 0.0) && close(b.elevation_deg, 0.0));
        let (l, r) = cam.horizontal_span();
        assert!(close(l, -45.0) && close(r, 45.0), "{l} {r}");
        // Up in the picture is up in the world.
        assert!(cam.bearing(320.0, 0.0).elevation_deg > 30.0);

        let turned = Camera::new(
            &CameraConfig { hfov_deg: 90.0, yaw_deg: 30.0, pitch_deg: -10.0, ..Default::default() },
            640,
            480,
        );
        let b = turned.bearing(320.0, 240.0);
        assert!(close(b.azimuth_deg, 30.0) && close(b.elevation_deg, -10.0), "{b:?}");
        let (l, r) = turned.horizontal_span();
        assert!(l < -14.0 && r > 74.0 && close(turned.azimuth(320.0), 30.0), "{l} {r}");

        // Looking backwards (or nearly): the view's azimuths run on through 180 degrees, left to
        // right, instead of jumping to -180.
        for (yaw, centre) in [(180.0, 180.0), (-180.0, -180.0), (-170.0, -170.0), (170.0, 170.0)] {
            let back =
                Camera::new(&CameraConfig { hfov_deg: 60.0, yaw_deg: yaw, ..Default::default() }, 640, 480);
            let (l, r) = back.horizontal_span();
            assert!(close(l, centre - 30.0) && close(r, centre + 30.0), "yaw {yaw}: {l} {r}");
            assert!(close(back.azimuth(320.0), centre), "yaw {yaw}");
        }

        // Calibrated intrinsics win over the field of view.
        let cal = CameraConfig { fx: Some(500.0), fy: Some(520.0), cx: Some(300.0), ..Default::default() };
        let cam = Camera::new(&cal, 640, 480);
        assert!(close(cam.bearing(800.0, 240.0).azimuth_deg, 45.0));
        let cam = Camera::new(&CameraConfig { vfov_deg: Some(90.0), ..Default::default() }, 640, 480);
        assert!(close(cam.fy, 240.0));
    }

    #[test]
    fn bad_geometry_names_the_key() {
        let bad = |c: CameraConfig| c.validate().unwrap_err().0;
        assert_eq!(bad(CameraConfig { hfov_deg: 200.0, ..Default::default() }), "hfov_deg");
        assert_eq!(bad(CameraConfig { fx: Some(-1.0), ..Default::default() }), "fx");
        assert_eq!(bad(CameraConfig { fy: Some(500.0), ..Default::default() }), "fy");
        assert_eq!(bad(CameraConfig { pitch_deg: 95.0, ..Default::default() }), "pitch_deg");
        CameraConfig::default().validate().unwrap();
    }
}
