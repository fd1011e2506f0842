#!/usr/bin/env bash
# jetdetect's MQTT output against paho-mqtt (tests/mqtt/check.py), on 127.0.0.1 only: Debian's
# mosquitto on a free port; the daemon publishes a synthetic scene (10 fps, hazards on, the camera
# stalling once for 1.5 s so a blind notice goes out); paho subscribes and compares every message
# with the daemon's own socket; after the daemon stops, a new paho subscriber must get the retained
# "offline" status.
# Needs mosquitto (apt) and python3 with paho-mqtt (PYTHONPATH).
#
# usage: tests/mqtt/run.sh [path/to/jetdetect]   (default target/debug/jetdetect)
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/outputs.sh
BIN=${1:-target/debug/jetdetect}
[ -x "$BIN" ] || { echo "mqtt/run.sh: $BIN is not built (cargo build first)" >&2; exit 2; }
command -v mosquitto >/dev/null || { echo "mqtt/run.sh: mosquitto is missing: apt install mosquitto" >&2; exit 2; }
python3 -c 'import paho.mqtt' 2>/dev/null \
    || { echo "mqtt/run.sh: the paho-mqtt Python package is missing: pip install paho-mqtt" >&2; exit 2; }
W=$(mktemp -d /tmp/jetdetect-mqtt.XXXXXX)
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
jd= broker=
cleanup() {
    [ -n "$jd" ] && kill "$jd" 2>/dev/null
    [ -n "$broker" ] && kill "$broker" 2>/dev/null
    wait 2>/dev/null || true
}
trap cleanup EXIT

printf 'user root\nlistener %s 127.0.0.1\nallow_anonymous true\n' "$PORT" >"$W/mosquitto.conf"
mosquitto -c "$W/mosquitto.conf" 2>"$W/mosquitto.log" & broker=$!
for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.05; done

cat >"$W/jd.toml" <<TOML
[source]
uri = "synthetic://?width=640&height=480&fps=10&format=yuyv&seed=5&objects=4&approach=2&stall=60&stall_ms=1500"
[model]
path = "$PWD/models/obstacles-v8.onnx"
names = "$PWD/models/obstacles.names"
[output]
socket = "$W/d.sock"
stats_interval_s = 2
[output.mqtt]
url = "mqtt://127.0.0.1:$PORT"
device = "robot-7"
queue_dir = "$W/queue"
detections_hz = 2
TOML
hazards_toml 500 >>"$W/jd.toml"

python3 tests/mqtt/check.py --port "$PORT" --device robot-7 --socket "$W/d.sock" --seconds 12 --blind \
    >"$W/check.out" 2>&1 & chk=$!
RUST_LOG=info "$BIN" run --config "$W/jd.toml" 2>"$W/jd.log" & jd=$!
check_then_stop mqtt
if python3 tests/mqtt/check.py --port "$PORT" --device robot-7 --retained signal >"$W/retained.out" 2>&1; then
    echo "ok   mqtt: $(tail -n 1 "$W/retained.out")"
else
    echo "FAIL mqtt:"; cat "$W/retained.out"; exit 1
fi
grep -E "MQTT" "$W/jd.log" | sed 's/^/     log: /'
rm -rf "$W"
echo "mqtt/run.sh: PASS"
