"""What the oracles are fed: MAVLink datagrams as they arrived, and the daemon's frames.

A *stream* is a list of events in arrival order, each a dict:
  {"t": seconds, "mav": "<hex of one UDP datagram>"}            a datagram from jetdetect
  {"t": seconds, "frame": {...}}                                 a detections message from the
                                                                 daemon's socket (the scene's
                                                                 truth and the tracked boxes)
`t` is time.monotonic() at receipt: both autopilots stamp what they receive on arrival
(PX4 `hrt_absolute_time()`, ArduPilot `AP_HAL::millis()`), so receipt time is the clock their
handlers run on here too.

`record()` captures a live run (UDP peer + socket reader) and can save it as JSON lines; the
same file replays through `load()`. tests/mavlink/recordings/ holds streams of the encoder
before issue 44, so the oracles can be shown to find its defects without building it again.
"""

import json
import socket
import threading
import time

# The fields of a detections message the oracles use (the rest is left out of recordings).
FRAME_KEYS = ("capture_wall_ns", "capture_mono_ns", "width", "height", "truth", "detections", "blind")


def read_socket(path, events, lock, stop):
    """Appends the daemon's detections messages at `path` to `events` as {"t", "frame"} until
    `stop` is set or the socket closes."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    for _ in range(600):
        try:
            s.connect(path)
            break
        except OSError:
            time.sleep(0.1)
    else:
        return
    f = s.makefile("r")
    while not stop.is_set():
        line = f.readline()
        if not line:
            return
        m = json.loads(line)
        if m.get("type") != "detections":
            continue
        frame = {k: m[k] for k in FRAME_KEYS if k in m}
        frame["detections"] = [
            {k: d[k] for k in ("x1", "y1", "x2", "y2", "class_id", "track_id") if k in d}
            for d in frame.get("detections", [])
        ]
        with lock:
            events.append({"t": time.monotonic(), "frame": frame})


def record(port, socket_path, seconds, until=None):
    """Receives on 127.0.0.1:`port` (UDP) and reads `socket_path` for `seconds`, or until
    `until(events)` says so. Returns the stream."""
    events, lock, stop = [], threading.Lock(), threading.Event()
    reader = threading.Thread(target=read_socket, args=(socket_path, events, lock, stop), daemon=True)
    reader.start()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # A roomy receive buffer: on a loaded CI machine this Python reader can fall behind, and
    # what the kernel drops then is the harness's loss, not the daemon's (verify.py counts any).
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    udp.bind(("127.0.0.1", port))
    udp.settimeout(0.05)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            data, _ = udp.recvfrom(65536)
        except socket.timeout:
            continue
        with lock:
            events.append({"t": time.monotonic(), "mav": data.hex()})
            if until is not None and until(events):
                break
    stop.set()
    udp.close()
    with lock:
        return sorted(events, key=lambda e: e["t"])


def save(events, path):
    t0 = events[0]["t"] if events else 0.0
    with open(path, "w") as f:
        for e in events:
            e = dict(e, t=round(e["t"] - t0, 6))
            f.write(json.dumps(e, separators=(",", ":")) + "\n")


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="record a jetdetect MAVLink stream and its frames")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    ev = record(a.port, a.socket, a.seconds)
    save(ev, a.out)
    print(f"{sum('mav' in e for e in ev)} datagrams, {sum('frame' in e for e in ev)} frames -> {a.out}")
