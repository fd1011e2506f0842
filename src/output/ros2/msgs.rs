//! The ROS 2 messages jetdetect publishes, as serde structs whose field order is the `.msg`
//! files' (CDR serialises fields in declaration order, with no names): `vision_msgs` 4.x (ROS 2
//! Humble and later) `Detection2DArray` and what it contains, `std_msgs/Header`,
//! `builtin_interfaces/Time`, `geometry_msgs/PoseWithCovariance` and `std_msgs/String`.
//! Written here rather than generated: these nine types are all jetdetect needs, and generating
//! them would need a ROS installation at build time.

use serde::ser::SerializeTuple;
use serde::{Serialize, Serializer};

/// `builtin_interfaces/msg/Time`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Time {
    /// Seconds since the Unix epoch.
    pub sec: i32,
    /// Nanoseconds within the second.
    pub nanosec: u32,
}

impl Time {
    /// A wall-clock time in nanoseconds since the Unix epoch.
    pub fn from_unix_ns(ns: u128) -> Time {
        Time { sec: (ns / 1_000_000_000) as i32, nanosec: (ns % 1_000_000_000) as u32 }
    }
}

/// `std_msgs/msg/Header`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Header {
    /// When the data was captured.
    pub stamp: Time,
    /// The coordinate frame the data is in.
    pub frame_id: String,
}

/// `vision_msgs/msg/Point2D`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Point2D {
    /// Pixels from the left edge.
    pub x: f64,
    /// Pixels from the top edge.
    pub y: f64,
}

/// `vision_msgs/msg/Pose2D`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Pose2D {
    /// Position.
    pub position: Point2D,
    /// Rotation, radians (0: boxes are axis-aligned).
    pub theta: f64,
}

/// `vision_msgs/msg/BoundingBox2D`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct BoundingBox2D {
    /// The box's centre.
    pub center: Pose2D,
    /// Width, pixels.
    pub size_x: f64,
    /// Height, pixels.
    pub size_y: f64,
}

/// `vision_msgs/msg/ObjectHypothesis`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ObjectHypothesis {
    /// The class, by name.
    pub class_id: String,
    /// Its score, 0..1.
    pub score: f64,
}

/// `geometry_msgs/msg/Point`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Point {
    /// Metres.
    pub x: f64,
    /// Metres.
    pub y: f64,
    /// Metres.
    pub z: f64,
}

/// `geometry_msgs/msg/Quaternion`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Quaternion {
    /// x.
    pub x: f64,
    /// y.
    pub y: f64,
    /// z.
    pub z: f64,
    /// w.
    pub w: f64,
}

impl Default for Quaternion {
    /// The identity (ROS's default is all zeros, which is no rotation at all; the identity is
    /// what a consumer multiplying by it expects).
    fn default() -> Self {
        Quaternion { x: 0.0, y: 0.0, z: 0.0, w: 1.0 }
    }
}

/// `geometry_msgs/msg/Pose`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Pose {
    /// Position.
    pub position: Point,
    /// Orientation.
    pub orientation: Quaternion,
}

/// `float64[36]`: a fixed array, serialised without a length (serde's arrays stop at 32).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Covariance(pub [f64; 36]);

impl Default for Covariance {
    fn default() -> Self {
        Covariance([0.0; 36])
    }
}

impl Serialize for Covariance {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(36)?;
        for v in &self.0 {
            t.serialize_element(v)?;
        }
        t.end()
    }
}

/// `geometry_msgs/msg/PoseWithCovariance`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PoseWithCovariance {
    /// Pose.
    pub pose: Pose,
    /// Row-major 6x6 covariance.
    pub covariance: Covariance,
}

/// `vision_msgs/msg/ObjectHypothesisWithPose`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ObjectHypothesisWithPose {
    /// Class and score.
    pub hypothesis: ObjectHypothesis,
    /// A 3D pose: jetdetect leaves it at the origin (a 2D detector knows none).
    pub pose: PoseWithCovariance,
}

/// `vision_msgs/msg/Detection2D`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Detection2D {
    /// The frame's header.
    pub header: Header,
    /// Class hypotheses (jetdetect gives one: NMS is class-aware).
    pub results: Vec<ObjectHypothesisWithPose>,
    /// The box.
    pub bbox: BoundingBox2D,
    /// The track id as text, empty for a box no track holds (vision_msgs: "may be used to
    /// associate a detection with a track").
    pub id: String,
}

/// `vision_msgs/msg/Detection2DArray`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Detection2DArray {
    /// The frame: capture time, `frame_id`.
    pub header: Header,
    /// Its detections.
    pub detections: Vec<Detection2D>,
}

/// `std_msgs/msg/String`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StringMsg {
    /// The text.
    pub data: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_splits_nanoseconds() {
        assert_eq!(
            Time::from_unix_ns(1_790_000_000_123_456_789),
            Time { sec: 1_790_000_000, nanosec: 123_456_789 }
        );
    }
}
