#!/usr/bin/env python3
"""What PX4 and ArduPilot end up with from jetdetect's MAVLink output: the receiving models
(px4.py, ardupilot.py, transcribed from their source) fed the daemon's real packets, in the
order and at the times they arrived, checked against the synthetic scene's truth.

Live:   verify.py --autopilot px4 --port P --socket S --seconds N [--save stream.jsonl]
Replay: verify.py --autopilot ardupilot --replay tests/mavlink/recordings/before-44-both.jsonl

Checks (ids as in the summary and in --expect-defects):
  PX4, for each reader (ObstacleMath with 36 and with 72 bins, v1.14):
    P1  no read past distances[71]                                   (issue 44, defect 1)
    P2  no bin more than 5 degrees outside the camera's view is written, and those nearer
        its edge only with an obstacle (reaching 2.5 degrees past a sector's edge is by design)
    P3  every unhidden tracked object: each bin it covers holds <= its range + 10 %
        (at least 95 % of comparisons)                               (defect 2: last sector wins)
    P4  blind (silence): "not moving" within 0.5 s, Hold after 5 s of no data
    P5  while seeing, the map has data at every step (but for the onset of a stall: PX4 gives
        up after 500 ms, jetdetect calls itself blind after [latency] stale_ms)
  ArduPilot:
    A1  every unhidden tracked object: the face at its bearing holds <= its range + 10 %
    A2  no OBSTACLE_DISTANCE_3D batch lands after a later frame's messages   (defect 3)
    A3  after a frame's messages, each of its 3D obstacles is in its face, from this frame
    A4  while jetdetect sees, the sensor stays Good (NoData turns avoidance off)  (defect 4)
    A5  blind (wall): the sensor stays Good and the face ahead holds the wall    (defect 5)
    A6  no face is set from outside the camera's view
Every datagram must also parse (pymavlink, MAVLink 2, good CRC) and come from 1/191.
Messages lost on the way show as gaps in MAVLink's sequence numbers: they are counted
("lost"), a frame during which one was lost is left out of A2 and A3 (ArduPilot, too, takes that
batch only with the next frame: UDP gives no more), and more than 1 % lost fails.

Exit status 0 when every check passes, or, with --expect-defects, when every named check
fails (the oracle finds those defects); 1 otherwise. Prints a JSON summary.
"""

import argparse
import json
import math
import os
import sys

os.environ["MAVLINK20"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pymavlink.dialects.v20 import ardupilotmega as apm  # noqa: E402

import ardupilot  # noqa: E402
import px4  # noqa: E402
import stream  # noqa: E402

HEIGHTS = {0: 0.5, 1: 0.3, 2: 0.7}  # box, ball, cone: tests/outputs.sh's [hazards.classes]
STEP = 0.02  # the autopilots' control steps, s (both run collision logic at >= 50 Hz)


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


class Scene:
    """The socket's frames: the truth behind each message, as azimuths and ranges."""

    def __init__(self, frames, hfov, yaw):
        self.by_usec = {f["capture_wall_ns"] // 1000: f for f in frames}
        self.by_ms = {f["capture_mono_ns"] // 1_000_000: f for f in frames}
        self.hfov, self.yaw = hfov, yaw
        self.view = (yaw - hfov / 2, yaw + hfov / 2)

    def objects(self, f, max_m):
        """The unhidden, tracked objects of frame f with no nearer object within 16 degrees:
        (azimuth span, centre azimuth, range)."""
        w = f["width"]
        fx = (w / 2) / math.tan(math.radians(self.hfov) / 2)
        az = lambda x: self.yaw + math.degrees(math.atan((x - w / 2) / fx))  # noqa: E731
        truths = []
        for g in f.get("truth", []):
            rng = fx * HEIGHTS[g["class_id"]] / max(g["y2"] - g["y1"], 1e-6)
            truths.append(((az(g["x1"]), az(g["x2"])), az((g["x1"] + g["x2"]) / 2), rng, g))
        out = []
        for span, centre, rng, g in truths:
            tracked = any(
                isinstance(d.get("track_id"), int)
                and iou((d["x1"], d["y1"], d["x2"], d["y2"]), (g["x1"], g["y1"], g["x2"], g["y2"])) > 0.7
                for d in f.get("detections", [])
            )
            nearer = any(
                o is not g and r2 < rng * 1.1 and s2[0] < span[1] + 16 and s2[1] > span[0] - 16
                for s2, _, r2, o in truths
            )
            if g["visible"] >= 0.95 and tracked and not nearer and rng < max_m - 1:
                out.append((span, centre, rng))
        return out


def parse(events):
    """Datagrams into (t, message) with pymavlink; the frames; parse failures; and the messages
    lost on the way: {index in msgs: how many of jetdetect's messages were lost just before it},
    from the gaps in MAVLink's sequence numbers (one per message sent, wrapping at 256)."""
    mav = apm.MAVLink(None)
    mav.robust_parsing = True
    msgs, frames, bad, lost = [], [], [], {}
    for e in events:
        if "frame" in e:
            frames.append(e["frame"])
            continue
        for m in mav.parse_buffer(bytes.fromhex(e["mav"])) or []:
            if m.get_type() == "BAD_DATA":
                bad.append(e["mav"][:40])
            elif (m.get_srcSystem(), m.get_srcComponent()) != (1, 191):
                bad.append(f"{m.get_type()} from {m.get_srcSystem()}/{m.get_srcComponent()}")
            else:
                if msgs:
                    gap = (m.get_seq() - msgs[-1][1].get_seq() - 1) % 256
                    if gap:
                        lost[len(msgs)] = gap
                msgs.append((e["t"], m))
    return msgs, frames, bad, lost


def heartbeat_states(msgs):
    """[(t, state)] of jetdetect's HEARTBEAT changes."""
    out, last = [], None
    for t, m in msgs:
        if m.get_type() == "HEARTBEAT" and m.system_status != last:
            out.append((t, m.system_status))
            last = m.system_status
    return out


def state_at(states, t):
    s = None
    for ts, st in states:
        if ts > t:
            break
        s = st
    return s


def since(states, t, wanted):
    """How long the state has been `wanted` at t (None when it is not)."""
    s, since_t = None, None
    for ts, st in states:
        if ts > t:
            break
        if st != s:
            since_t = ts
        s = st
    return t - since_t if s == wanted else None


def blind_spells(states):
    """[(start, end)] of CRITICAL spells (end: the next state's time, or None)."""
    out = []
    for i, (t, s) in enumerate(states):
        if s == apm.MAV_STATE_CRITICAL:
            end = states[i + 1][0] if i + 1 < len(states) else None
            out.append((t, end))
    return out


def run_px4(msgs, scene, states, reader, bins, args):
    model = px4.Px4(reader, bins, start_us=int(msgs[0][0] * 1e6) if msgs else 0)
    res = {"P1": [], "P2": [], "P3": [0, 0, []], "P4": [], "P5": 0}
    left, right = scene.view
    last_od_t = None
    first_od_t = None
    t_step = msgs[0][0] if msgs else 0.0
    steps = []  # (t, data_present, not_moving)
    for t, m in msgs:
        while t_step < t:
            model.step(int(t_step * 1e6))
            steps.append((t_step, model.data_present, model.hold_commanded_at))
            t_step += STEP
        if m.get_type() != "OBSTACLE_DISTANCE":
            continue
        n_oob = len(model.oob_reads)
        model.handle_obstacle_distance(m, int(t * 1e6))
        last_od_t = t
        first_od_t = first_od_t if first_od_t is not None else t
        if len(model.oob_reads) > n_oob:
            res["P1"].append((round(t, 3), model.oob_reads[n_oob:][:3]))
        for i, j, d in model.writes:
            lo, hi = model.bin_span(i)
            far = hi <= left - 5 or lo >= right + 5
            edge = (hi <= left or lo >= right) and d > m.max_distance
            if far or edge:
                res["P2"].append((round(t, 3), i, round(lo, 1), j, d))
        f = scene.by_usec.get(m.time_usec)
        if f is None:
            continue
        for span, centre, rng in scene.objects(f, m.max_distance / 100):
            for i in range(model.bin_count):
                lo, hi = model.bin_span(i)
                if hi > span[0] + 1 and lo < span[1] - 1:
                    res["P3"][1] += 1
                    d = model.distances[i]
                    if d != 65535 and d / 100 <= rng * 1.10:
                        res["P3"][0] += 1
                    elif len(res["P3"][2]) < 5:
                        res["P3"][2].append(f"t={t:.2f} object at {centre:.1f} deg ({span[0]:.1f}..{span[1]:.1f}), "
                                            f"{rng:.2f} m: bin {i} ({lo:.1f}..{hi:.1f}) holds {d}")
    end = msgs[-1][0] if msgs else 0.0
    while t_step < end:
        model.step(int(t_step * 1e6))
        steps.append((t_step, model.data_present, model.hold_commanded_at))
        t_step += STEP
    # P5: data at every step while seeing, once a message can have arrived; a step in the
    # onset of a stall (jetdetect says CRITICAL within stale_ms + a tick) is excused.
    spells = blind_spells(states)
    for t, present, _ in steps:
        active = since(states, t, apm.MAV_STATE_ACTIVE)
        onset = any(0 <= s - t <= args.stale_s + 0.1 for s, _ in spells)
        if first_od_t is not None and t > first_od_t + 0.1 and active is not None and active > 0.7 and not present and not onset:
            res["P5"] += 1
    # P4: each blind spell: not moving within 0.5 s of the last message (+ a step), Hold after 5 s.
    for start, stop in blind_spells(states):
        before = [t for t, m in msgs if m.get_type() == "OBSTACLE_DISTANCE" and t <= start + 0.05]
        if not before:
            continue
        last = before[-1]
        spell_end = stop if stop is not None else end
        stopped = [t for t, present, _ in steps if last < t <= spell_end and not present]
        if not stopped or stopped[0] > last + 0.5 + 2 * STEP:
            res["P4"].append(f"blind at {start:.2f}: still moving {((stopped[0] if stopped else spell_end) - last):.2f} s "
                             "after the last message")
        if spell_end - last > 6.2:
            holds = [h for t, _, h in steps if last < t <= spell_end and h is not None]
            if not holds or holds[0] / 1e6 > last + 6.1:
                res["P4"].append(f"blind at {start:.2f}: no Hold within 6.1 s of the last message")
    fails = {}
    if res["P1"]:
        fails["P1"] = f"{len(model.oob_reads)} reads past distances[71], e.g. (j, value) {res['P1'][0][1]}"
    if res["P2"]:
        fails["P2"] = f"{len(res['P2'])} bins outside the view written, e.g. (t, bin, from deg, sector, value) {res['P2'][0]}"
    ok, n, examples = res["P3"]
    if n and ok < 0.95 * n:
        fails["P3"] = f"{ok}/{n} covered bins hold the object; " + " | ".join(examples[:3])
    if res["P4"] and args.blind == "silent":
        fails["P4"] = "; ".join(res["P4"])
    if res["P5"]:
        fails["P5"] = f"{res['P5']} steps without data while seeing"
    summary = {
        "bins_compared": n,
        "bins_holding": ok,
        "oob_reads": len(model.oob_reads),
        "outside_view_writes": len(res["P2"]),
        "hold_s_after_start": None if model.hold_commanded_at is None else round(model.hold_commanded_at / 1e6 - msgs[0][0], 2),
    }
    return model.name(), fails, summary


def run_ardupilot(msgs, scene, states, args, lost):
    model = ardupilot.ArduPilot()
    left, right = scene.view
    res = {"A1": [0, 0, []], "A2": [], "A3": [0, 0, []], "A4": 0, "A5": [], "A6": []}
    newest_frame_ms = None
    batch = []  # (frame_ms, face, length): this frame's 3D obstacles
    # A message lost between a frame's first message and the next frame's (its closing message,
    # say) lets ArduPilot take the batch only with the next frame, as it would on the vehicle:
    # such frames are counted, not held against the encoder (A2, A3).
    gap_in_frame = False
    lost_frames = set()
    unverified = 0
    prearm = {}
    t_step = msgs[0][0] if msgs else 0.0

    def frame_ms_of(m):
        if m.get_type() == "OBSTACLE_DISTANCE":
            f = scene.by_usec.get(m.time_usec)
            return None if f is None else f["capture_mono_ns"] // 1_000_000
        if m.obstacle_id == 65535:
            return (m.time_boot_ms - 1) & 0xFFFFFFFF
        return m.time_boot_ms

    def check_batch():
        nonlocal unverified
        if gap_in_frame:
            lost_frames.update(fms for fms, _, _ in batch)
            unverified += len(batch)
            return
        for fms, face, length in batch:
            res["A3"][1] += 1
            b = model.boundary
            layer, sector = face
            st = b.stamp[layer][sector]
            same_frame = st is not None and (
                (st[0] == "3D" and st[1] == fms)
                or (st[0] == "OD" and scene.by_usec.get(st[1], {}).get("capture_mono_ns", -1) // 1_000_000 == fms)
            )
            if b.valid[layer][sector] and b.distance[layer][sector] <= length + 0.01 and same_frame:
                res["A3"][0] += 1
            elif len(res["A3"][2]) < 5:
                res["A3"][2].append(f"frame {fms}: 3D obstacle in face {face} at {length:.2f} m; the face "
                                    f"{'holds ' + str(round(b.distance[layer][sector], 2)) + ' from ' + str(st) if b.valid[layer][sector] else 'is empty'}")

    def step_to(t):
        nonlocal t_step
        while t_step < t:
            now_ms = int(t_step * 1000)
            model.update(now_ms)
            active = since(states, t_step, apm.MAV_STATE_ACTIVE)
            if active is not None and active > 1.0 and not model.avoidance_active():
                res["A4"] += 1
            blind = since(states, t_step, apm.MAV_STATE_CRITICAL)
            if blind is not None and blind > 0.3 and args.blind == "wall":
                ahead = ardupilot.get_face(0.0, ardupilot.wrap_360(scene.yaw))
                b = model.boundary
                holds = b.valid[ahead[0]][ahead[1]] and b.distance[ahead[0]][ahead[1]] <= args.blind_distance + 0.01
                if not (model.avoidance_active() and holds) and len(res["A5"]) < 3:
                    res["A5"].append(f"t={t_step:.2f}, blind {blind:.1f} s: status {model.status}, "
                                     f"face ahead {'holds ' + str(round(b.distance[ahead[0]][ahead[1]], 2)) if b.valid[ahead[0]][ahead[1]] else 'empty'}")
            p = model.prearm_failure()
            key = "blind" if blind is not None else ("seeing" if active is not None else "starting")
            prearm.setdefault(key, set()).add(p.split(" deg")[0] if p else "ok")
            t_step += STEP

    for i, (t, m) in enumerate(msgs):
        step_to(t)
        gap_in_frame = gap_in_frame or i in lost
        kind = m.get_type()
        if kind not in ("OBSTACLE_DISTANCE", "OBSTACLE_DISTANCE_3D"):
            continue
        fms = frame_ms_of(m)
        if fms is not None and (newest_frame_ms is None or fms > newest_frame_ms):
            # A later frame begins: the previous frame's 3D obstacles must be in place.
            check_batch()
            batch = []
            newest_frame_ms = fms
            gap_in_frame = False
        n_push = len(model.pushes)
        model.handle(m, int(t * 1000))
        for now_ms, landed in model.pushes[n_push:]:
            for face, (dist, pitch, yaw, stamp) in landed:
                if newest_frame_ms is not None and stamp[1] < newest_frame_ms and stamp[1] not in lost_frames:
                    res["A2"].append(f"t={t:.2f}: frame {stamp[1]}'s 3D obstacle (face {face}, {dist:.2f} m) "
                                     f"landed {newest_frame_ms - stamp[1]} ms of frames late")
        if kind == "OBSTACLE_DISTANCE_3D" and m.obstacle_id != 65535:
            x, y, z = m.x, m.y, -m.z
            length = math.sqrt(x * x + y * y + z * z)
            if m.min_distance <= length <= m.max_distance:
                yaw = ardupilot.wrap_360(math.degrees(math.atan2(y, x)))
                pitch = ardupilot.wrap_180(math.degrees(math.pi / 2 - math.atan2(math.hypot(x, y), z)))
                batch.append((m.time_boot_ms, ardupilot.get_face(pitch, yaw), length))
        if kind == "OBSTACLE_DISTANCE":
            for face, yaw, dist in model.od_faces:
                rel = (yaw - scene.yaw + 180) % 360 - 180 + scene.yaw
                if rel < left - 12.5 or rel > right + 12.5:
                    res["A6"].append(f"t={t:.2f}: face {face} set from {yaw:.1f} deg")
            f = scene.by_usec.get(m.time_usec)
            if f is None:
                continue
            for span, centre, rng in scene.objects(f, m.max_distance / 100):
                face = ardupilot.get_face(0.0, ardupilot.wrap_360(centre))
                res["A1"][1] += 1
                b = model.boundary
                if b.valid[face[0]][face[1]] and b.distance[face[0]][face[1]] <= rng * 1.10:
                    res["A1"][0] += 1
                elif len(res["A1"][2]) < 5:
                    res["A1"][2].append(f"t={t:.2f}: object at {centre:.1f} deg, {rng:.2f} m: face {face} "
                                        f"{'holds ' + str(round(b.distance[face[0]][face[1]], 2)) if b.valid[face[0]][face[1]] else 'empty'}")
    if msgs:
        step_to(msgs[-1][0])
        check_batch()
    fails = {}
    ok, n, ex = res["A1"]
    if n and ok < 0.95 * n:
        fails["A1"] = f"{ok}/{n} objects in their face; " + " | ".join(ex[:3])
    if res["A2"]:
        fails["A2"] = f"{len(res['A2'])} 3D obstacles landed after a later frame's messages, e.g. {res['A2'][0]}"
    ok3, n3, ex3 = res["A3"]
    if n3 and ok3 < n3:
        fails["A3"] = f"{ok3}/{n3} of a frame's 3D obstacles in place after it; " + " | ".join(ex3[:3])
    if res["A4"]:
        fails["A4"] = f"{res['A4'] * STEP:.1f} s of NoData (avoidance off) while jetdetect said ACTIVE"
    if res["A5"]:
        fails["A5"] = "; ".join(res["A5"])
    if res["A6"]:
        fails["A6"] = f"{len(res['A6'])} faces from outside the view, e.g. {res['A6'][0]}"
    summary = {
        "objects_compared": n,
        "objects_in_face": ok,
        "batches_landed": len(model.pushes),
        "late_3d": len(res["A2"]),
        "three_d_checked": n3,
        "three_d_unverified_lost": unverified,
        "nodata_while_seeing_s": round(res["A4"] * STEP, 2),
        "prearm": {k: sorted(v) for k, v in prearm.items()},
    }
    return "ArduPilot", fails, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--autopilot", choices=("px4", "ardupilot"), required=True)
    ap.add_argument("--replay")
    ap.add_argument("--port", type=int)
    ap.add_argument("--socket")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--save")
    ap.add_argument("--hfov", type=float, default=62.2)
    ap.add_argument("--yaw", type=float, default=0.0)
    ap.add_argument("--blind", choices=("silent", "wall"))
    ap.add_argument("--blind-distance", type=float, default=2.0)
    ap.add_argument("--stale-s", type=float, default=0.6, help="the daemon's [latency] stale_ms, s")
    ap.add_argument("--expect-defects", default="")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.blind is None:
        args.blind = "silent" if args.autopilot == "px4" else "wall"
    if args.replay:
        events = stream.load(args.replay)
    else:
        events = stream.record(args.port, args.socket, args.seconds)
        if args.save:
            stream.save(events, args.save)
    msgs, frames, bad, lost = parse(events)
    scene = Scene(frames, args.hfov, args.yaw)
    states = heartbeat_states(msgs)
    results = {}
    fails = {}
    if bad:
        fails["parse"] = f"{len(bad)} datagrams that do not parse or are not from 1/191: {bad[:3]}"
    # Datagrams lost on the way (UDP under load) are not the encoder's doing, but more than a
    # few would hide what the checks are for.
    n_lost = sum(lost.values())
    if n_lost > max(2, len(msgs) // 100):
        fails["lost"] = f"{n_lost} of {n_lost + len(msgs)} messages lost on the way (MAVLink sequence gaps)"
    if args.autopilot == "px4":
        for reader, bins in (("obstaclemath", 36), ("obstaclemath", 72), ("v1.14", 36)):
            name, f, s = run_px4(msgs, scene, states, reader, bins, args)
            results[name] = s
            for k, v in f.items():
                fails[f"{k} {name}"] = v
    else:
        name, f, s = run_ardupilot(msgs, scene, states, args, lost)
        results[name] = s
        for k, v in f.items():
            fails[k] = v
    kinds = {}
    for _, m in msgs:
        kinds[m.get_type()] = kinds.get(m.get_type(), 0) + 1
    summary = {"messages": kinds, "lost": n_lost, "frames": len(frames), "models": results, "failed": fails}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    print(json.dumps(summary))
    expected = [d for d in args.expect_defects.split(",") if d]
    if expected:
        missing = [d for d in expected if not any(k.split(" ")[0] == d for k in fails)]
        if missing:
            print(f"verify.py: the oracle did not find {missing}", file=sys.stderr)
            sys.exit(1)
        sys.exit(0)
    if len(frames) < 10 or kinds.get("HEARTBEAT", 0) < 3:
        print(f"verify.py: too little to judge: {len(frames)} frames, {kinds}", file=sys.stderr)
        sys.exit(1)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
