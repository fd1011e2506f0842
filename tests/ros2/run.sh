#!/usr/bin/env bash
# jetdetect's ROS 2 output against Cyclone DDS (tests/ros2/check.py), on 127.0.0.1 only: the
# daemon publishes on a synthetic scene (10 fps, hazards on, the camera stalling once for 1.5 s so
# a blind notice goes out); a Cyclone DDS participant subscribes to the ROS 2 topics and compares
# every message with the daemon's own socket. Discovery stays on the loopback interface: Cyclone
# with multicast off and 127.0.0.1 as its peer, jetdetect with `interfaces = ["127.0.0.1"]`, and a
# domain id of this run's own.
# Needs python3 with cyclonedds (PYTHONPATH).
#
# usage: tests/ros2/run.sh [path/to/jetdetect]   (default target/debug/jetdetect)
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/outputs.sh
BIN=${1:-target/debug/jetdetect}
[ -x "$BIN" ] || { echo "ros2/run.sh: $BIN is not built (cargo build first)" >&2; exit 2; }
python3 -c 'import cyclonedds' 2>/dev/null \
    || { echo "ros2/run.sh: the cyclonedds Python package is missing: pip install cyclonedds" >&2; exit 2; }
W=$(mktemp -d /tmp/jetdetect-ros2.XXXXXX)
DOMAIN=$((100 + RANDOM % 100))
export CYCLONEDDS_URI="<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface address=\"127.0.0.1\"/></Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>40</MaxAutoParticipantIndex><Peers><Peer address=\"127.0.0.1\"/></Peers></Discovery></Domain></CycloneDDS>"
jd=
cleanup() { [ -n "$jd" ] && kill "$jd" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT

cat >"$W/jd.toml" <<TOML
[source]
uri = "synthetic://?width=640&height=480&fps=10&format=yuyv&seed=5&objects=4&approach=2&stall=60&stall_ms=1500"
[model]
path = "$PWD/models/obstacles-v8.onnx"
names = "$PWD/models/obstacles.names"
[output]
socket = "$W/d.sock"
stats_interval_s = 2
[output.ros2]
domain_id = $DOMAIN
namespace = "/robot1"
frame_id = "front_camera"
interfaces = ["127.0.0.1"]
TOML
hazards_toml 500 >>"$W/jd.toml"

python3 tests/ros2/check.py --domain "$DOMAIN" --socket "$W/d.sock" --seconds 14 --namespace /robot1 \
    --frame-id front_camera --blind --out "$W/check.json" >"$W/check.out" 2>&1 & chk=$!
RUST_LOG=info "$BIN" run --config "$W/jd.toml" 2>"$W/jd.log" & jd=$!
check_then_stop ros2
grep -E "ROS 2" "$W/jd.log" | sed 's/^/     log: /'
rm -rf "$W"
echo "ros2/run.sh: PASS"
