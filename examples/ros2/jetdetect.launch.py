"""ROS 2 launch example: jetdetect beside a robot stack (docs/outputs.md).

jetdetect is a ROS 2 node of its own ([output.ros2] in its config: a DDS participant, no rclpy or
rclcpp), so it is started as a process; on a deployed robot the systemd service runs it instead
and only the transform below belongs in your launch. The frame_id in [output.ros2] names the
camera's optical frame, which this places on the robot.

    ros2 launch jetdetect.launch.py config:=/etc/jetdetect/jetdetect.toml

Not yet run against a ROS 2 installation (none here); the topics it publishes are checked with
Cyclone DDS in tests/ros2/run.sh.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    config = LaunchConfiguration("config")
    return LaunchDescription([
        DeclareLaunchArgument("config", default_value="/etc/jetdetect/jetdetect.toml",
                              description="jetdetect's config, with an [output.ros2] section"),
        # SIGINT first: jetdetect stops its pipeline, says goodbye on its socket and restores the
        # clocks; launch escalates to SIGTERM after 10 s.
        ExecuteProcess(cmd=["jetdetect", "run", "--config", config], output="screen",
                       sigterm_timeout="10"),
        # The camera 10 cm ahead of and 25 cm above base_link, looking forward: the optical frame
        # (z forward, x right, y down) is base_link turned by roll -90 deg and yaw -90 deg.
        Node(package="tf2_ros", executable="static_transform_publisher",
             arguments=["--x", "0.10", "--z", "0.25", "--roll", "-1.5708", "--yaw", "-1.5708",
                        "--frame-id", "base_link", "--child-frame-id", "camera"]),
        # Something that acts on the detections and zones: the consumer beside this file.
        ExecuteProcess(cmd=["python3", "consumer.py"], output="screen"),
    ])
