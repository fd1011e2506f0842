#!/usr/bin/env bash
# jetdetect's MAVLink output against pymavlink (tests/mavlink/check.py), on 127.0.0.1 only:
#   1. UDP: the daemon sends to udpout:127.0.0.1:PORT, pymavlink listens; the synthetic camera
#      stalls for 2.5 s (the blind silence), 5 fps (the 10 Hz floor repeats between frames);
#   2. serial: a pseudo-terminal pair from socat carries the same stream at 921600 baud; socat is
#      killed (the port vanishes) and started again after 2 s: the daemon reopens it by itself.
# Needs python3 with pymavlink and pyserial (PYTHONPATH), and socat.
#
# usage: tests/mavlink/run.sh [path/to/jetdetect]   (default target/debug/jetdetect)
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/outputs.sh
BIN=${1:-target/debug/jetdetect}
[ -x "$BIN" ] || { echo "mavlink/run.sh: $BIN is not built (cargo build first)" >&2; exit 2; }
command -v socat >/dev/null || { echo "mavlink/run.sh: socat is missing: apt-get install socat" >&2; exit 2; }
python3 -c 'import pymavlink, serial' 2>/dev/null \
    || { echo "mavlink/run.sh: pymavlink and pyserial are missing: pip install pymavlink pyserial" >&2; exit 2; }
W=$(mktemp -d /tmp/jetdetect-mavlink.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

config() {  # $1: the MAVLink url, $2: the source's extra parameters
    cat <<TOML
[source]
uri = "synthetic://?width=640&height=480&fps=5&format=yuyv&seed=5&objects=4&approach=2$2"
[model]
path = "$PWD/models/obstacles-v8.onnx"
names = "$PWD/models/obstacles.names"
[output]
socket = "$W/d.sock"
stats_interval_s = 2
[output.mavlink]
url = "$1"
rate_hz = 10
max_distance_m = 60
TOML
    hazards_toml 600
}

fails=0
# 1. UDP, with a stall.
PORT=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
config "udpout:127.0.0.1:$PORT" "&stall=30&stall_ms=2500" > "$W/udp.toml"
python3 tests/mavlink/check.py --mav "udpin:127.0.0.1:$PORT" --socket "$W/d.sock" --seconds 16 --blind \
    --out "$W/udp.json" > "$W/udp.check" 2>&1 & chk=$!
RUST_LOG=info "$BIN" run --config "$W/udp.toml" 2> "$W/udp.log" & jd=$!; pids+=("$jd")
wait "$chk" && echo "ok   udp: $(cat "$W/udp.check" | tail -n 1)" || { echo "FAIL udp:"; cat "$W/udp.check"; tail -n 20 "$W/udp.log"; fails=$((fails + 1)); }
kill -TERM "$jd"; wait "$jd" || { echo "FAIL udp: the daemon exited $?"; fails=$((fails + 1)); }
rm -f "$W/d.sock"

# 2. Serial through a pty pair; the port vanishes for 2 s and comes back.
pty() { socat pty,raw,echo=0,link="$W/fc" pty,raw,echo=0,link="$W/jd" & socat_pid=$!; pids+=("$socat_pid"); }
pty
while [ ! -e "$W/jd" ]; do sleep 0.05; done
config "serial:$W/jd:921600" "" > "$W/serial.toml"
python3 tests/mavlink/check.py --mav "$W/fc" --baud 921600 --socket "$W/d.sock" --seconds 16 --reconnect \
    --out "$W/serial.json" > "$W/serial.check" 2>&1 & chk=$!
RUST_LOG=info "$BIN" run --config "$W/serial.toml" 2> "$W/serial.log" & jd=$!; pids+=("$jd")
sleep 7
kill "$socat_pid"; wait "$socat_pid" 2>/dev/null || true
sleep 2
pty
wait "$chk" && echo "ok   serial: $(tail -n 1 "$W/serial.check")" || { echo "FAIL serial:"; cat "$W/serial.check"; tail -n 20 "$W/serial.log"; fails=$((fails + 1)); }
kill -TERM "$jd"; wait "$jd" || { echo "FAIL serial: the daemon exited $?"; fails=$((fails + 1)); }
grep -E "MAVLink .*(cannot connect|send failed|connected)" "$W/serial.log" | head -n 5 | sed 's/^/     log: /'
[ $fails -eq 0 ] || { echo "mavlink/run.sh: $fails failed (logs in $W)"; exit 1; }
rm -rf "$W"
echo "mavlink/run.sh: PASS"
