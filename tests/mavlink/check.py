#!/usr/bin/env python3
"""jetdetect's MAVLink output, checked by an independent implementation: pymavlink.

Receives what `jetdetect run` sends ([output.mavlink]) over UDP or a serial link, and reads the
daemon's UNIX socket for the synthetic scene's ground truth. Checks, against pymavlink's
ardupilotmega definitions (which include common):
  - every frame parses with a good CRC (a bad one is a BAD_DATA message here), is MAVLink 2,
    comes from system 1 / component 191, and is one of the four messages jetdetect sends;
  - HEARTBEAT: an onboard controller, no autopilot, about heartbeat_hz;
  - OBSTACLE_DISTANCE: BODY_FRD, 36 sectors of 10 degrees from -20 (angle_offset), every value a
    distance in [min, max], max + 1 ("no obstacle") or UINT16_MAX ("unknown"); once per frame
    (no capture time twice); each unhidden, detected object of the scene in the sector nearest
    its true bearing at 10 % of its true range (its class's real height over its true box height);
  - OBSTACLE_DISTANCE_3D: BODY_FRD, ids of the frame's tracks, positions along their bearings;
  - with --blind: the source stalls; STATUSTEXT says blind, the HEARTBEAT says CRITICAL, and no
    obstacle message comes until it says ACTIVE again.
With --reconnect the serial link is expected to vanish and come back (the harness kills and
restarts socat): the checker reopens it and requires obstacle messages after the gap.

usage: check.py --mav URL [--baud N] --socket PATH --seconds S [--blind] [--reconnect] --out FILE
Prints a summary and exits 1 on any failure.
"""

import argparse
import json
import math
import os
import sys
import threading
import time

os.environ["MAVLINK20"] = "1"
from pymavlink import mavutil  # noqa: E402
from pymavlink.dialects.v20 import ardupilotmega as apm  # noqa: E402

# The socket reader and the box overlap are the oracles' (tests/mavlink/oracle/).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle"))
import stream  # noqa: E402
from verify import iou  # noqa: E402

HFOV = 62.2
HEIGHTS = {0: 0.5, 1: 0.3, 2: 0.7}  # box, ball, cone: the harness's [hazards.classes]
SENT = {"HEARTBEAT", "STATUSTEXT", "OBSTACLE_DISTANCE", "OBSTACLE_DISTANCE_3D"}


def open_link(args):
    if args.mav.startswith("udp"):
        return mavutil.mavlink_connection(args.mav, dialect="ardupilotmega", robust_parsing=True)
    while not os.path.exists(args.mav):
        time.sleep(0.05)
    return mavutil.mavlink_connection(args.mav, baud=args.baud, dialect="ardupilotmega", robust_parsing=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mav", required=True)
    ap.add_argument("--baud", type=int, default=921600)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--blind", action="store_true")
    ap.add_argument("--reconnect", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    events, lock, stop = [], threading.Lock(), threading.Event()
    reader = threading.Thread(target=stream.read_socket, args=(args.socket, events, lock, stop), daemon=True)
    reader.start()
    link = open_link(args)
    got, bad, reopened = [], 0, 0
    end = time.time() + args.seconds
    while time.time() < end:
        try:
            m = link.recv_match(blocking=True, timeout=0.2)
        except (OSError, mavutil.mavlink.MAVError) as e:
            if not args.reconnect:
                raise
            # The serial link went away: reopen it when it is back.
            print(f"check.py: link lost ({e}); reopening", file=sys.stderr)
            try:
                link.close()
            except OSError:
                pass
            time.sleep(0.2)
            link = open_link(args)
            reopened += 1
            got.append((time.time(), "REOPENED", None))
            continue
        if m is None:
            continue
        if m.get_type() == "BAD_DATA":
            bad += 1
            continue
        got.append((time.time(), m.get_type(), m))
    stop.set()
    with lock:
        frames = {e["frame"]["capture_wall_ns"] // 1000: e["frame"] for e in events}

    fails = []

    def check(ok, what):
        if not ok:
            fails.append(what)

    check(bad == 0, f"{bad} frames with a bad CRC or unparsable")
    check(len(got) > 20, f"only {len(got)} messages")
    kinds = {}
    for _, t, m in got:
        if m is None:
            continue
        kinds[t] = kinds.get(t, 0) + 1
        check(t in SENT, f"unexpected message {t}")
        check((m.get_srcSystem(), m.get_srcComponent()) == (1, 191), f"{t} from {m.get_srcSystem()}/{m.get_srcComponent()}")
        check(m.get_msgbuf()[0] == 0xFD, f"{t} is not MAVLink 2")

    # HEARTBEAT.
    # (A gap across a lost link is the link's, not the sender's: runs are cut at a reopen.)
    beats = [(at, m) for at, t, m in got if t in ("HEARTBEAT", "REOPENED")]
    runs = [b for b in beats if b[1] is not None]
    for _, m in runs:
        check(m.type == apm.MAV_TYPE_ONBOARD_CONTROLLER and m.autopilot == apm.MAV_AUTOPILOT_INVALID, f"heartbeat {m}")
        check(m.mavlink_version == 3, f"heartbeat version {m.mavlink_version}")
    steady = [
        b[0] - a[0]
        for a, b in zip(beats, beats[1:])
        if a[1] is not None and b[1] is not None and a[1].system_status == b[1].system_status
    ]
    check(len(runs) >= args.seconds * 0.5, f"{len(runs)} heartbeats in {args.seconds} s")
    check(all(g < 1.5 for g in steady), f"heartbeat gaps up to {max(steady, default=0):.2f} s")

    # OBSTACLE_DISTANCE: fields, and the scene's objects in their sectors.
    fx = 320.0 / math.tan(math.radians(HFOV) / 2)
    compared = within = 0
    state = apm.MAV_STATE_BOOT
    seeing_times, in_blind, blind_seen = [], [], False
    texts = []
    for at, t, m in got:
        if t == "REOPENED":
            seeing_times.append(None)
            continue
        if t == "HEARTBEAT":
            state = m.system_status
            blind_seen |= state == apm.MAV_STATE_CRITICAL
            continue
        if t == "STATUSTEXT":
            texts.append(m.text)
            continue
        if state == apm.MAV_STATE_CRITICAL:
            in_blind.append(t)
        if t == "OBSTACLE_DISTANCE_3D":
            check(m.frame == apm.MAV_FRAME_BODY_FRD and m.obstacle_id not in (0, 65535), f"{m}")
            r = math.sqrt(m.x ** 2 + m.y ** 2 + m.z ** 2)
            check(m.min_distance - 1e-4 <= r <= m.max_distance + 1e-4 and m.x > 0, f"3D position {m}")
            continue
        if t != "OBSTACLE_DISTANCE":
            continue
        seeing_times.append(at)
        check(m.frame == apm.MAV_FRAME_BODY_FRD and m.sensor_type == apm.MAV_DISTANCE_SENSOR_UNKNOWN, f"{m}")
        check((m.increment_f, m.increment, m.angle_offset) == (10.0, 10, -20.0), f"layout {m.increment_f} {m.increment} {m.angle_offset}")
        check(len(m.distances) == 72 and all(d == 65535 for d in m.distances[36:]), "36 of 72 sectors carry data")
        for d in m.distances:
            check(m.min_distance <= d <= m.max_distance or d in (m.max_distance + 1, 65535), f"sector value {d}")
        f = frames.get(m.time_usec)
        if f is None:
            continue
        truths = []
        for g in f["truth"]:
            cx = (g["x1"] + g["x2"]) / 2
            az = math.degrees(math.atan((cx - 320.0) / fx))
            rng = fx * HEIGHTS[g["class_id"]] / (g["y2"] - g["y1"])
            span = (math.degrees(math.atan((g["x1"] - 320) / fx)), math.degrees(math.atan((g["x2"] - 320) / fx)))
            truths.append((az, rng, span, g))
        for az, rng, span, g in truths:
            tracked = any(
                isinstance(d.get("track_id"), int) and iou((d["x1"], d["y1"], d["x2"], d["y2"]), (g["x1"], g["y1"], g["x2"], g["y2"])) > 0.7
                for d in f["detections"]
            )
            nearer = any(
                o is not g and r2 < rng * 1.1 and s2[0] < span[1] + 16 and s2[1] > span[0] - 16 for _, r2, s2, o in truths
            )
            if g["visible"] < 0.95 or not tracked or nearer or rng * 100 > m.max_distance:
                continue
            compared += 1
            # The sector nearest its centre (angle_offset + j * increment) holds its range.
            s = round((az + 20.0) / 10.0) % 36
            if abs(m.distances[s] / 100 - rng) <= 0.1 * rng:
                within += 1
    check(kinds.get("OBSTACLE_DISTANCE", 0) > 20, f"{kinds.get('OBSTACLE_DISTANCE', 0)} OBSTACLE_DISTANCE")
    check(compared >= 20, f"only {compared} objects compared")
    check(within >= 0.95 * compared, f"{within}/{compared} objects in their sector at 10 %")

    # Once per frame: a repeat would look fresh to the autopilot (both stamp on receipt).
    stamps = [m.time_usec for _, t, m in got if t == "OBSTACLE_DISTANCE"]
    check(len(stamps) == len(set(stamps)), f"{len(stamps) - len(set(stamps))} OBSTACLE_DISTANCE repeated")
    gaps = [b - a for a, b in zip(seeing_times, seeing_times[1:]) if a is not None and b is not None and b - a < 1.0]
    gaps.sort()
    p90 = gaps[len(gaps) * 9 // 10] if gaps else float("inf")

    if args.blind:
        check(blind_seen, "the heartbeat never said CRITICAL (blind)")
        check(not in_blind, f"sent while blind: {in_blind[:5]}")
        check(any(x.startswith("jetdetect: blind") for x in texts), f"no blind STATUSTEXT: {texts}")
    if args.reconnect:
        check(reopened >= 1, "the serial link never went away")
        after = [t for t in got[next((i for i, g in enumerate(got) if g[1] == "REOPENED"), len(got)):] if t[1] == "OBSTACLE_DISTANCE"]
        check(len(after) > 5, f"{len(after)} OBSTACLE_DISTANCE after the link came back")

    summary = {
        "messages": kinds,
        "bad_crc": bad,
        "compared": compared,
        "within": within,
        "gap_p90_ms": round(p90 * 1000, 1),
        "gap_max_ms": round(max(gaps, default=0) * 1000, 1),
        "statustext": texts,
        "reopened": reopened,
        "failures": fails[:20],
    }
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
