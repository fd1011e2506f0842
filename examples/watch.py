#!/usr/bin/env python3
"""A jetdetect client using only Python's standard library.

    python3 examples/watch.py [/run/jetdetect/detections.sock]

Connects to the daemon's UNIX socket, reads one JSON object per line
(docs/protocol.md) and prints each frame's detections with the delivery
latency measured here: capture_mono_ns is CLOCK_MONOTONIC, the same clock as
time.monotonic_ns(), so the difference is the age of the frame on arrival.
With [hazards] on, it prints each frame's zones and approaching obstacles, and
BLIND when the daemon has no fresh frame.
"""
import json
import socket
import sys
import time

path = sys.argv[1] if len(sys.argv) > 1 else "/run/jetdetect/detections.sock"
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.connect(path)
except OSError as e:
    sys.exit(f"{path}: cannot connect: {e} (is jetdetect running?)")

cameras = []
cam = ""  # with several cameras, each frame's line starts with its camera's name
for line in sock.makefile("r", encoding="utf-8"):
    msg = json.loads(line)
    kind = msg.get("type")
    if kind in ("detections", "hazards") and len(cameras) > 1:
        cam = msg["camera"] + ": "
    if kind == "hello":
        cameras = [c["name"] for c in msg.get("cameras", [])]
        print(f"connected: {msg['source']} | {msg['engine']} | classes {', '.join(msg['classes'])}")
    elif kind == "detections":
        arrival_ms = (time.monotonic_ns() - msg["capture_mono_ns"]) / 1e6
        objects = ", ".join(
            f"{d['class']} {d['score']:.2f} ({d['x1']:.0f},{d['y1']:.0f})-({d['x2']:.0f},{d['y2']:.0f})"
            for d in msg["detections"]
        )
        print(f"{cam}#{msg['seq']:<6} {arrival_ms:6.1f} ms since capture  {objects}")
    elif kind == "hazards" and msg["blind"]:
        print(f"{cam}BLIND ({msg['reason']}): {msg['detail']}; newest frame {msg['frame_age_ms']:.0f} ms old")
    elif kind == "hazards":
        zones = " ".join(
            f"[{z['level']}]" if z["track_id"] is None or z["level"] == "clear"
            else f"[{z['level'].upper()} #{z['track_id']} {z['ttc_s']:.1f}s]"
            for z in msg["zones"]
        )
        closing = ", ".join(
            f"{o['class']}#{o['track_id']} {o['azimuth_deg']:+.0f}deg ttc {o['ttc_s']:.1f}s"
            for o in msg["obstacles"] if o["trend"] == "approaching" and o["ttc_s"] is not None
        )
        print(f"{cam}#{msg['seq']:<6} zones {zones}" + (f"  approaching: {closing}" if closing else ""))
    elif kind == "stats":
        e2e = msg["latency_ms"]["end_to_end"]
        print(f"stats: {msg['fps']['processed']:.1f} fps, p50 {e2e['p50']:.1f} p99 {e2e['p99']:.1f} ms, "
              f"dropped {msg['frames']['dropped']}")
    elif kind == "bye":
        print(f"jetdetect stopped ({msg['reason']})")
        break
