#!/usr/bin/env python3
"""jetdetect's ROS 2 output, received by an independent DDS implementation: Eclipse Cyclone DDS
(PyPI `cyclonedds`, the C library ROS 2's rmw_cyclonedds_cpp uses), on 127.0.0.1 only.

Subscribes to the ROS 2 topics by their DDS names and types, as a ROS 2 node would:
  - `rt/<detections_topic>`, `vision_msgs::msg::dds_::Detection2DArray_` (vision_msgs 4.x, ROS 2
    Humble and later), decoded field by field from the types below (CDR, the IDL of the .msg
    files) and compared with the daemon's own `detections` messages on its UNIX socket, frame by
    frame (matched by capture time = header stamp): frame id, count, class name, score, box
    centre and size, track id;
  - `rt/<zones_topic>`, `std_msgs::msg::dds_::String_`: the socket's `hazards` message as JSON,
    compared with the socket's for the same frame; with --blind, a blind notice must come;
  - `ros_discovery_info` (`rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_`, Jazzy's 16-byte
    gids): the node is on the ROS graph under its name and namespace, with its writers.

usage: check.py --domain N --socket PATH --seconds S [--topic T] [--zones-topic T] [--node N]
                [--namespace NS] [--frame-id F] [--blind] --out FILE
Prints a summary and exits 1 on any failure. Needs CYCLONEDDS_URI (set by tests/ros2/run.sh) to
keep discovery on the loopback interface.
"""

import argparse
import json
import socket
import sys
import threading
import time
from dataclasses import dataclass, field

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration


# The ROS 2 message types, as rosidl turns them into DDS IDL (module::msg::dds_::Name_).
@dataclass
class Time(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: t.int32
    nanosec: t.uint32


@dataclass
class Header(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time
    frame_id: str


@dataclass
class Point2D(IdlStruct, typename="vision_msgs::msg::dds_::Point2D_"):
    x: t.float64
    y: t.float64


@dataclass
class Pose2D(IdlStruct, typename="vision_msgs::msg::dds_::Pose2D_"):
    position: Point2D
    theta: t.float64


@dataclass
class BoundingBox2D(IdlStruct, typename="vision_msgs::msg::dds_::BoundingBox2D_"):
    center: Pose2D
    size_x: t.float64
    size_y: t.float64


@dataclass
class ObjectHypothesis(IdlStruct, typename="vision_msgs::msg::dds_::ObjectHypothesis_"):
    class_id: str
    score: t.float64


@dataclass
class Point(IdlStruct, typename="geometry_msgs::msg::dds_::Point_"):
    x: t.float64
    y: t.float64
    z: t.float64


@dataclass
class Quaternion(IdlStruct, typename="geometry_msgs::msg::dds_::Quaternion_"):
    x: t.float64
    y: t.float64
    z: t.float64
    w: t.float64


@dataclass
class Pose(IdlStruct, typename="geometry_msgs::msg::dds_::Pose_"):
    position: Point
    orientation: Quaternion


@dataclass
class PoseWithCovariance(IdlStruct, typename="geometry_msgs::msg::dds_::PoseWithCovariance_"):
    pose: Pose
    covariance: t.array[t.float64, 36]


@dataclass
class ObjectHypothesisWithPose(IdlStruct, typename="vision_msgs::msg::dds_::ObjectHypothesisWithPose_"):
    hypothesis: ObjectHypothesis
    pose: PoseWithCovariance


@dataclass
class Detection2D(IdlStruct, typename="vision_msgs::msg::dds_::Detection2D_"):
    header: Header
    results: t.sequence[ObjectHypothesisWithPose]
    bbox: BoundingBox2D
    id: str


@dataclass
class Detection2DArray(IdlStruct, typename="vision_msgs::msg::dds_::Detection2DArray_"):
    header: Header
    detections: t.sequence[Detection2D]


@dataclass
class String(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str


@dataclass
class Gid(IdlStruct, typename="rmw_dds_common::msg::dds_::Gid_"):
    data: t.array[t.uint8, 16]


@dataclass
class NodeEntitiesInfo(IdlStruct, typename="rmw_dds_common::msg::dds_::NodeEntitiesInfo_"):
    node_namespace: t.bounded_str[256]
    node_name: t.bounded_str[256]
    reader_gid_seq: t.sequence[Gid]
    writer_gid_seq: t.sequence[Gid]


@dataclass
class ParticipantEntitiesInfo(IdlStruct, typename="rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_"):
    gid: Gid
    node_entities_info_seq: t.sequence[NodeEntitiesInfo]


def read_socket(path, dets, hazards, stop):
    """The daemon's detections (by capture time, ns) and hazards messages (by seq)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    for _ in range(600):
        try:
            s.connect(path)
            break
        except OSError:
            time.sleep(0.1)
    f = s.makefile("r")
    while not stop.is_set():
        line = f.readline()
        if not line:
            return
        m = json.loads(line)
        if m.get("type") == "detections":
            dets[m["capture_wall_ns"]] = m
        elif m.get("type") == "hazards" and "seq" in m:
            hazards[m["seq"]] = m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--domain", type=int, required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--topic", default="detections")
    ap.add_argument("--zones-topic", default="hazard_zones")
    ap.add_argument("--node", default="jetdetect")
    ap.add_argument("--namespace", default="/")
    ap.add_argument("--frame-id", default="camera")
    ap.add_argument("--blind", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    dets, hazards, stop = {}, {}, threading.Event()
    threading.Thread(target=read_socket, args=(args.socket, dets, hazards, stop), daemon=True).start()

    ns = "" if args.namespace == "/" else args.namespace.strip("/") + "/"
    dp = DomainParticipant(args.domain)
    sensor = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(50))
    det_reader = DataReader(dp, Topic(dp, f"rt/{ns}{args.topic}", Detection2DArray), qos=sensor)
    zone_reader = DataReader(dp, Topic(dp, f"rt/{ns}{args.zones_topic}", String), qos=sensor)
    graph_qos = Qos(
        Policy.Reliability.Reliable(duration(seconds=1)),
        Policy.Durability.TransientLocal,
        Policy.History.KeepLast(1),
    )
    graph_reader = DataReader(dp, Topic(dp, "ros_discovery_info", ParticipantEntitiesInfo), qos=graph_qos)

    got, zones, graph = [], [], []
    first = None
    end = time.time() + args.seconds
    while time.time() < end:
        for s in det_reader.take(N=50):
            got.append((time.time(), s))
            first = first or time.time()
        for s in zone_reader.take(N=50):
            zones.append(json.loads(s.data))
        for s in graph_reader.take(N=10):
            graph.append(s)
        time.sleep(0.01)
    stop.set()

    fails = []

    def check(ok, what):
        if not ok:
            fails.append(what)

    # Detection2DArray against the socket's detections, frame by frame.
    matched = boxes = 0
    for _, m in got:
        stamp = m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec
        check(m.header.frame_id == args.frame_id, f"frame_id {m.header.frame_id!r}")
        ref = dets.get(stamp)
        if ref is None:
            continue
        matched += 1
        check(len(m.detections) == len(ref["detections"]), f"{len(m.detections)} detections, socket {len(ref['detections'])}")
        for d, r in zip(m.detections, ref["detections"]):
            boxes += 1
            check(d.header == m.header, f"detection header {d.header}")
            check(len(d.results) == 1, f"{len(d.results)} results")
            h = d.results[0].hypothesis
            check(h.class_id == r["class"], f"class {h.class_id!r}, socket {r['class']!r}")
            check(abs(h.score - r["score"]) < 1e-4, f"score {h.score}, socket {r['score']}")
            q = d.results[0].pose.pose.orientation
            check((q.x, q.y, q.z, q.w) == (0.0, 0.0, 0.0, 1.0), f"orientation {q}")
            c = d.bbox.center
            check(abs(c.position.x - (r["x1"] + r["x2"]) / 2) < 0.01 and abs(c.position.y - (r["y1"] + r["y2"]) / 2) < 0.01,
                  f"centre {c}, socket {r}")
            check(abs(d.bbox.size_x - (r["x2"] - r["x1"])) < 0.01 and abs(d.bbox.size_y - (r["y2"] - r["y1"])) < 0.01,
                  f"size {d.bbox.size_x} x {d.bbox.size_y}, socket {r}")
            check(c.theta == 0.0, f"theta {c.theta}")
            want = str(r["track_id"]) if isinstance(r.get("track_id"), int) else ""
            check(d.id == want, f"id {d.id!r}, socket track {r.get('track_id')!r}")
    published = [k for k in dets if first is not None and k / 1e9 >= first - 0.5]
    check(len(got) >= 20, f"only {len(got)} Detection2DArray received")
    check(matched >= 0.9 * len(got), f"{matched}/{len(got)} arrays matched a socket frame")
    check(boxes >= 20, f"only {boxes} boxes compared")

    # The zones topic: the socket's hazards message, identical for the same frame.
    same = compared = 0
    blind = [z for z in zones if z.get("blind")]
    for z in zones:
        ref = hazards.get(z.get("seq"))
        if ref is None:
            continue
        compared += 1
        same += z == ref
    check(compared >= 20, f"only {compared} zone messages compared ({len(zones)} received)")
    check(same == compared, f"{compared - same}/{compared} zone messages differ from the socket's")
    if args.blind:
        check(len(blind) >= 1, "no blind notice on the zones topic")
        check(all(b.get("reason") for b in blind), f"blind notices without a reason: {blind[:2]}")

    # The ROS graph: the node, under its name and namespace, with its writers.
    nodes = [(n.node_namespace, n.node_name, len(n.writer_gid_seq)) for p in graph for n in p.node_entities_info_seq]
    check(any(n[:2] == (args.namespace, args.node) and n[2] >= 2 for n in nodes), f"node not on the ROS graph: {nodes}")

    summary = {
        "arrays": len(got),
        "matched": matched,
        "socket_frames_meanwhile": len(published),
        "boxes_compared": boxes,
        "zones": len(zones),
        "zones_identical": same,
        "blind_notices": len(blind),
        "graph_nodes": nodes[:4],
        "failures": fails[:20],
    }
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
