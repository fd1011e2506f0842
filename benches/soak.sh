#!/usr/bin/env bash
# Two soaks.
#
# DURATION set (e.g. DURATION=8h, 10m, 90s): the long soak. `jetdetect run` with CONFIG
# (default configs/demo.toml) on SOURCE (default a 30 fps 640x480 YUYV synthetic camera) for
# that long, one client reading every message; RSS and descriptors sampled from /proc, FPS
# and end-to-end p99 from every `stats` message. Fails when RSS grows by more than
# RSS_SLACK_KIB (4096), descriptors grow, FPS falls by more than FPS_DROP_PCT (10) or p99 grows
# by more than P99_GROWTH_PCT (50) and more than P99_SLACK_MS (5) between the first and last
# quarter, or a message is lost.
# Every sample goes to SAMPLES (CSV, default /tmp/jetdetect-soak.csv). See benches/soak_daemon.py.
#   DURATION=8h benches/soak.sh
#
# Otherwise: runs the daemon's pipeline for many frames (10 000 by default) and checks that the
# process's resident memory and open file descriptors stay flat: RSS may not grow by more
# than RSS_SLACK_KIB (default 4096) between the first sample after warm-up and the end, and
# the descriptor count must end where it started. One client reads the socket throughout.
#
#   benches/soak.sh [extra jetdetect bench flags...]
#
# Environment: JETDETECT (default target/release/jetdetect), FRAMES (10000), SOURCE
# (unpaced 640x480 YUYV synthetic frames), RSS_SLACK_KIB. Exit 1 when memory or
# descriptors grow. Example with ONNX Runtime:
#   benches/soak.sh --engine onnxruntime --ort-library /path/to/libonnxruntime.so --providers cpu
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${JETDETECT:-target/release/jetdetect}
[ -x "$BIN" ] || { echo "soak: $BIN: not built (cargo build --release, or set JETDETECT)" >&2; exit 1; }
if [ -n "${DURATION:-}" ]; then
    exec python3 benches/soak_daemon.py "$BIN" "${CONFIG:-configs/demo.toml}" \
        "${SOURCE:-synthetic://?width=640&height=480&fps=30&format=yuyv&seed=21&objects=6}" "$DURATION"
fi
FRAMES=${FRAMES:-10000}
SOURCE=${SOURCE:-synthetic://?width=640&height=480&fps=0&format=yuyv&seed=21&objects=6}
SLACK=${RSS_SLACK_KIB:-4096}
out=$(mktemp /tmp/jetdetect-soak.XXXXXX.json)
start=$(date +%s)
"$BIN" bench --config configs/demo.toml --source "$SOURCE" --frames "$FRAMES" --clients 1 --json "$@" >"$out"
python3 - "$out" "$SLACK" "$(($(date +%s) - start))" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
slack, secs = int(sys.argv[2]), sys.argv[3]
rss, fds = r["rss_kib"], r["fds"]
e2e = dict(r["stages"])["end_to_end"]
print(f"soak: {r['frames']} frames published in {secs} s ({r['fps']:.1f} FPS, {r['dropped']} dropped), "
      f"engine {r['engine']}")
print(f"soak: RSS {rss['first']} -> {rss['last']} KiB (max {rss['max']}), open fds {fds['first']} -> {fds['last']} "
      f"(max {fds['max']}); end to end p50 {e2e['p50']:.2f} p99 {e2e['p99']:.2f} max {e2e['max']:.2f} ms")
print(f"soak: client read {r['client_lines']} lines, {r['client_frames']} frames, missed {r['client_missed']}")
trace = r["rss_trace"]
step = max(1, len(trace) // 10)
print("soak: RSS KiB by frame: " + ", ".join(f"{f}: {k}" for f, k in trace[::step] + trace[-1:]))
bad = []
if rss["last"] - rss["first"] > slack:
    bad.append(f"RSS grew by {rss['last'] - rss['first']} KiB (> {slack})")
if fds["last"] != fds["first"]:
    bad.append(f"open fds went from {fds['first']} to {fds['last']}")
if r["client_missed"] and r["client_missed"][0]:
    bad.append(f"the client missed {r['client_missed'][0]} of the {r['frames']} frames published")
if bad:
    sys.exit("soak: FAIL: " + "; ".join(bad))
print("soak: PASS (memory and descriptors flat)")
PY
rm -f "$out"
