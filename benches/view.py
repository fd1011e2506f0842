#!/usr/bin/env python3
"""What the live view costs the pipeline: FPS and end-to-end latency with the view closed, with one
viewer and with five, on the demo config (benches/view.sh runs this; docs/live-view.md has figures).

Usage: view.py JETDETECT CONFIG SECONDS_PER_PHASE OUT.json

One daemon runs through the phases in turn: closed, 1 viewer, 5 viewers, closed again. Every frame's
end-to-end latency comes from its `detections` message on the UNIX socket (a reader here takes
them all), so FPS and percentiles are over each phase's own frames. A viewer does what the page
does: long-polls /picture.json, fetches each picture's JPEG, and /status.json once a second. The
viewers run on this machine (Python threads), so their own CPU time is part of the cost measured
here; a browser on a laptop in the field costs the board only the HTTP serving.
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BIN, CONFIG, PHASE_S, OUT = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
# The stats interval (whole seconds): /metrics is rendered once per interval, so each phase waits
# one interval for its count. Default: the config's own (STATS_S unset).
STATS_S = os.environ.get("STATS_S")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def config(port, sock):
    text = open(CONFIG).read()
    base = os.path.dirname(os.path.abspath(CONFIG))
    # The demo's relative paths, made absolute; our own socket and port.
    text = re.sub(r'"\.\./', f'"{os.path.dirname(base)}/', text)
    text = re.sub(r'(?m)^socket = .*$', f'socket = "{sock}"', text)
    text = re.sub(r'(?m)^listen = .*$', f'listen = "127.0.0.1:{port}"', text)
    if STATS_S:
        text = re.sub(r'(?m)^stats_interval_s = .*$', f'stats_interval_s = {int(STATS_S)}', text)
    assert "[view]" in text and "enabled = true" in text, f"{CONFIG} does not turn the view on"
    return text


class Reader(threading.Thread):
    """Every detections message's end-to-end latency, with the time it arrived."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.samples = []
        self.path = path

    def run(self):
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.path)
        buf = b""
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                return
            buf += chunk
            *lines, buf = buf.split(b"\n")
            now = time.monotonic()
            for line in lines:
                if b'"type":"detections"' in line:
                    m = json.loads(line)
                    self.samples.append((now, m["latency_ms"]["end_to_end"]))


class Viewer(threading.Thread):
    def __init__(self, port, stop):
        super().__init__(daemon=True)
        self.base = f"http://127.0.0.1:{port}/"
        self.stop = stop
        self.seen = []  # (monotonic time, picture id, JPEG bytes) per picture shown

    def get(self, path):
        with urllib.request.urlopen(self.base + path, timeout=10) as r:
            return r.status, r.read()

    def run(self):
        after, last_status = 0, 0.0
        while not self.stop.is_set():
            if time.monotonic() - last_status > 1.0:
                self.get("status.json")
                last_status = time.monotonic()
            status, body = self.get(f"picture.json?after={after}")
            if status != 200:
                continue
            meta = json.loads(body)
            _, jpeg = self.get(meta["image"])
            after = meta["id"]
            self.seen.append((time.monotonic(), after, len(jpeg)))


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def pictures_total(port):
    return int(metric(port, "jetdetect_view_pictures_total"))


def main():
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="jd-view-bench-")
    sock = os.path.join(tmp, "d.sock")
    cfg = os.path.join(tmp, "view.toml")
    text = config(port, sock)
    open(cfg, "w").write(text)
    interval = re.search(r'(?m)^stats_interval_s = (\d+)', text)
    stats_s = int(interval.group(1)) if interval else 5  # the daemon's default
    daemon = subprocess.Popen([BIN, "run", "--config", cfg], stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "daemon.log"), "w"))
    try:
        deadline = time.time() + 60
        while not os.path.exists(sock):
            if daemon.poll() is not None or time.time() > deadline:
                sys.exit("the daemon did not start:\n" + open(os.path.join(tmp, "daemon.log")).read())
            time.sleep(0.1)
        reader = Reader(sock)
        reader.start()
        time.sleep(5)  # warm-up
        rows = []
        for name, viewers in [("closed", 0), ("1 viewer", 1), ("5 viewers", 5), ("closed again", 0)]:
            if viewers == 0 and rows:
                # The last viewer's requests lapse (3 s), then /metrics (rendered once per stats
                # interval) catches up with what they had encoded.
                time.sleep(4 + stats_s + 0.5)
            stop = threading.Event()
            vs = [Viewer(port, stop) for _ in range(viewers)]
            for v in vs:
                v.start()
            time.sleep(1)
            p0, t0, n0 = pictures_total(port), time.monotonic(), len(reader.samples)
            cpu0 = os.times()
            time.sleep(PHASE_S)
            t1, n1 = time.monotonic(), len(reader.samples)
            # /metrics is rendered once per stats interval: wait for the next one to read the count.
            time.sleep(stats_s + 0.5)
            p1 = pictures_total(port)
            stop.set()
            lat = [l for (t, l) in reader.samples[n0:n1]]
            # What the viewers were shown within the window; the pictures encoded then, from
            # their ids (one encoder numbers them all), or from /metrics with nobody watching.
            shown = [(i, b) for v in vs for (t, i, b) in v.seen if t0 <= t <= t1]
            ids = [i for (i, _) in shown]
            encoded = (max(ids) - min(ids) + 1) if ids else p1 - p0
            row = {
                "phase": name,
                "viewers": viewers,
                "fps": round((n1 - n0) / (t1 - t0), 2),
                "e2e_p50_ms": round(percentile(lat, 0.50), 2),
                "e2e_p99_ms": round(percentile(lat, 0.99), 2),
                "frames": n1 - n0,
                "pictures_encoded": encoded,
                "pictures_per_viewer_s": round(len(shown) / max(1, viewers) / (t1 - t0), 2) if viewers else 0,
                "encode_ms_mean_so_far": round(metric(port, "jetdetect_view_encode_seconds") * 1e3, 2),
                "kib_per_picture": round(sum(b for (_, b) in shown) / max(1, len(shown)) / 1024, 1) if viewers else 0,
            }
            rows.append(row)
            print(f"{name:>13}: {row['fps']:6.2f} fps, e2e p50 {row['e2e_p50_ms']:6.2f} ms, p99 {row['e2e_p99_ms']:6.2f} ms, "
                  f"{row['pictures_encoded']} pictures encoded, {row['pictures_per_viewer_s']} pictures/s per viewer, "
                  f"{row['kib_per_picture']} KiB each, {row['encode_ms_mean_so_far']} ms to draw and encode one (mean so far)", flush=True)
            for v in vs:
                v.join(timeout=15)
        json.dump({"config": CONFIG, "seconds_per_phase": PHASE_S, "rows": rows}, open(OUT, "w"), indent=1)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


if __name__ == "__main__":
    main()
