#!/usr/bin/env python3
"""jetdetect's MQTT output, received by an independent client: Eclipse paho-mqtt (PyPI), on
127.0.0.1 only, compared message by message with the daemon's own UNIX socket.

  - topics: only <prefix>/<device>/{hazards,stats,status,detections} appear;
  - hazards: every frame's hazards message on the socket arrives (matched by camera and capture
    time), equal field for field except the two that depend on when each copy was written
    (publish_mono_ns, frame_age_ms); blind notices arrive too (with --blind);
  - stats: every stats message on the socket arrives, equal as a whole;
  - detections: each one that arrives equals the socket's for that frame (boxes, classes,
    scores, tracks), at most --detections-hz per second;
  - status: "online" while the daemon runs. With --retained, instead: a new subscriber gets the
    retained status, which must be "offline" with the given reason.

usage: check.py --port P --device D --socket PATH --seconds S [--blind] [--detections-hz N]
       check.py --port P --device D --retained REASON
Prints a summary and exits 1 on any failure.
"""

import argparse
import json
import socket
import sys
import threading
import time

import paho.mqtt.client as mqtt

TIME_FIELDS = ("publish_mono_ns", "frame_age_ms")


def subscriber(port, topic, on_message, client_id):
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv311)
    ready = threading.Event()

    def on_connect(client, userdata, flags, reason, properties):
        client.subscribe(topic, qos=1)

    def on_subscribe(client, userdata, mid, reasons, properties):
        ready.set()

    c.on_connect = on_connect
    c.on_subscribe = on_subscribe
    c.on_message = on_message
    c.connect("127.0.0.1", port, keepalive=30)
    c.loop_start()
    if not ready.wait(10):
        sys.exit("check.py: could not subscribe to the broker")
    return c


def retained(args):
    got = []
    done = threading.Event()

    def on_message(client, userdata, msg):
        got.append((msg.topic, msg.retain, json.loads(msg.payload)))
        done.set()

    c = subscriber(args.port, f"{args.prefix}/{args.device}/status", on_message, "check-retained")
    done.wait(5)
    c.loop_stop()
    fails = []
    if not got:
        fails.append("no retained status")
    else:
        topic, retain, status = got[0]
        if not retain:
            fails.append(f"the status is not retained: {status}")
        if status.get("state") != "offline" or status.get("reason") != args.retained:
            fails.append(f"want offline with reason {args.retained!r}, got {status}")
        for key in ("type", "schema", "device", "version", "cameras", "wall_ns"):
            if key not in status:
                fails.append(f"status without {key}: {status}")
        if status.get("device") != args.device:
            fails.append(f"status of device {status.get('device')!r}")
    for f in fails:
        print("FAIL", f)
    if not fails:
        print(f"retained status: offline ({args.retained})")
    return 1 if fails else 0


def live(args):
    mq = {"hazards": [], "stats": [], "status": [], "detections": [], "other": []}
    lock = threading.Lock()
    base = f"{args.prefix}/{args.device}/"

    def on_message(client, userdata, msg):
        kind = msg.topic[len(base):] if msg.topic.startswith(base) else None
        with lock:
            if kind in mq:
                mq[kind].append((time.monotonic(), json.loads(msg.payload)))
            else:
                mq["other"].append(msg.topic)

    c = subscriber(args.port, f"{args.prefix}/#", on_message, "check-live")

    sock = []
    s = socket.socket(socket.AF_UNIX)
    deadline = time.monotonic() + 60
    while True:
        try:
            s.connect(args.socket)
            break
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(f"check.py: cannot connect to {args.socket}")
            time.sleep(0.05)
    s.settimeout(1.0)
    buf = b""
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            sock.append(json.loads(line))
    s.close()
    # What was published until now has a few seconds to arrive.
    time.sleep(3)
    c.loop_stop()

    fails = []
    with lock:
        if mq["other"]:
            fails.append(f"messages on other topics: {sorted(set(mq['other']))}")
        by_frame = {(m["camera"], m["capture_mono_ns"]): m for _, m in mq["hazards"] if not m["blind"]}
        frames = [m for m in sock if m["type"] == "hazards" and not m["blind"]]
        missing = 0
        for m in frames:
            got = by_frame.get((m["camera"], m["capture_mono_ns"]))
            if got is None:
                missing += 1
                continue
            a = {k: v for k, v in m.items() if k not in TIME_FIELDS}
            b = {k: v for k, v in got.items() if k not in TIME_FIELDS}
            if a != b:
                fails.append(f"hazards of frame {m['seq']} differ: socket {a} mqtt {b}")
                break
        if missing:
            fails.append(f"{missing} of {len(frames)} hazards messages did not arrive")
        if len(frames) < 20:
            fails.append(f"only {len(frames)} hazards messages on the socket")
        if args.blind:
            blinds = [m for _, m in mq["hazards"] if m["blind"]]
            if not blinds:
                fails.append("no blind notice arrived")
            elif any(b["zones"] or b["obstacles"] or not b.get("reason") for b in blinds):
                fails.append(f"a blind notice with zones or without a reason: {blinds[0]}")
        stats = [m for m in sock if m["type"] == "stats"]
        mq_stats = [m for _, m in mq["stats"]]
        for m in stats:
            if m not in mq_stats:
                fails.append(f"the stats message at uptime {m['uptime_s']} did not arrive equal")
                break
        if not stats:
            fails.append("no stats message on the socket")
        dets = {(m["camera"], m["seq"]): m for m in sock if m["type"] == "detections"}
        for _, m in mq["detections"]:
            want = dets.get((m["camera"], m["seq"]))
            if want is None:
                continue  # before the socket client connected
            if want["detections"] != m["detections"] or want["capture_mono_ns"] != m["capture_mono_ns"]:
                fails.append(f"detections of frame {m['seq']} differ")
                break
        if not mq["detections"]:
            fails.append("no detections message arrived")
        span = args.seconds + 3
        if len(mq["detections"]) > args.detections_hz * span * 1.2 + 2:
            fails.append(f"{len(mq['detections'])} detections messages in {span} s: over {args.detections_hz}/s")
        states = [m["state"] for _, m in mq["status"]]
        if "online" not in states:
            fails.append(f"no online status: {states}")
        frame_msgs = [(m["camera"], m["capture_mono_ns"]) for _, m in mq["hazards"] if not m["blind"]]
        dups = len(frame_msgs) - len(set(frame_msgs))
        summary = (
            f"{len(frames)} hazards, {len(stats)} stats, {len(mq['detections'])} detections "
            f"({args.detections_hz}/s cap), status {states}, {dups} duplicates"
        )
    for f in fails:
        print("FAIL", f)
    print(summary)
    return 1 if fails else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--device", required=True)
    p.add_argument("--prefix", default="jetdetect")
    p.add_argument("--socket")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--blind", action="store_true")
    p.add_argument("--detections-hz", type=float, default=2)
    p.add_argument("--retained")
    args = p.parse_args()
    sys.exit(retained(args) if args.retained else live(args))


if __name__ == "__main__":
    main()
