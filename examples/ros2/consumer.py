"""A minimal rclpy consumer of jetdetect's ROS 2 topics (docs/outputs.md): the detections with
their track ids, and the zones with the blind flag. Subscribes with the sensor-data QoS profile
(best effort), which matches jetdetect's default; a reliable subscription would not match.

    python3 consumer.py [--ros-args -r __ns:=/robot1]

Not yet run against a ROS 2 installation (none here).
"""

import json

import rclpy
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from std_msgs.msg import String
from vision_msgs.msg import Detection2DArray


class Consumer(Node):
    def __init__(self):
        super().__init__("jetdetect_consumer")
        self.create_subscription(Detection2DArray, "detections", self.on_detections, qos_profile_sensor_data)
        self.create_subscription(String, "hazard_zones", self.on_zones, qos_profile_sensor_data)

    def on_detections(self, msg):
        age = self.get_clock().now().nanoseconds - (msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec)
        for d in msg.detections:
            h = d.results[0].hypothesis
            track = d.id or "-"
            self.get_logger().info(
                f"{h.class_id} {h.score:.2f} track {track} at ({d.bbox.center.position.x:.0f}, "
                f"{d.bbox.center.position.y:.0f}) {d.bbox.size_x:.0f}x{d.bbox.size_y:.0f}, {age / 1e6:.1f} ms old")

    def on_zones(self, msg):
        h = json.loads(msg.data)  # the socket protocol's `hazards` message (docs/protocol.md)
        if h.get("blind"):
            self.get_logger().warn(f"jetdetect is blind: {h.get('reason')}: stop or slow down")
            return
        danger = [z for z in h["zones"] if z["level"] != "clear"]
        if danger:
            self.get_logger().warn(f"{h['level']}: {danger}")


def main():
    rclpy.init()
    rclpy.spin(Consumer())


if __name__ == "__main__":
    main()
