#!/bin/busybox sh
# /init of the vivid test VM (see tests/vm/vivid.sh). Prints "@@ ..." lines the
# host reads: "@@ ok ...", "@@ FAIL ...", and "@@ VM RESULT PASS|FAIL".
export PATH=/bin LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/lib/aarch64-linux-gnu RUST_LOG=info
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
up() { cut -d' ' -f1 /proc/uptime; }
fails=0
ok() { echo "@@ ok $*"; }
fail() { echo "@@ FAIL $*"; fails=$((fails + 1)); }
finish() {
    if [ $fails -eq 0 ]; then echo "@@ VM RESULT PASS"; else echo "@@ VM RESULT FAIL ($fails)"; fi
    sync; poweroff -f
}

while read -r m; do
    case $m in */vivid.ko) insmod /lib/modules/$m n_devs=2 node_types=0x1,0x1 ;; *) insmod /lib/modules/$m ;; esac \
        || echo "@@ insmod failed: $m"
done </etc/modules.list
i=0; while [ ! -e /dev/video0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -e /dev/video0 ] || { fail "no /dev/video0 after loading vivid"; finish; }
echo "@@ vivid up at $(up) s: $(cat /sys/class/video4linux/video0/name)"

jetdetect probe-camera /dev/video0 >/tmp/probe.txt 2>&1 || fail "probe-camera exited $?"
grep -q 'video capture' /tmp/probe.txt && grep -q '^  YUYV' /tmp/probe.txt && grep -q 'brightness' /tmp/probe.txt \
    && ok "probe-camera lists formats and controls" || { fail "probe-camera output"; head -20 /tmp/probe.txt; }
# vivid's 64-bit test control, read with the extended-control ioctls (tegracam's gain and exposure are such).
grep -E 'integer_64_bits.*integer64' /tmp/probe.txt >/dev/null && ok "probe-camera: $(grep -o 'integer_64_bits.*' /tmp/probe.txt | head -1)" \
    || fail "no 64-bit control listed: $(grep -i 'integer' /tmp/probe.txt | head -3 | tr '\n' ' ')"

# 1. Formats: record a few frames in each and check the negotiated geometry and byte count.
for spec in yuyv:2 nv12:1.5 grey:1 uyvy:2 rgb24:3 bgr24:3; do
    f=${spec%%:*}; bpp=${spec##*:}
    if jetdetect record --source "v4l2:///dev/video0?width=640&height=480&fps=30&format=$f" --frames 3 \
            --out /tmp/$f.raw >/tmp/$f.log 2>&1; then
        want=$(awk "BEGIN{print int(640*480*$bpp*3)}")
        got=$(stat -c %s /tmp/$f.raw)
        if grep -q "width=640&height=480&format=$f" /tmp/$f.log && [ "$got" = "$want" ]; then
            ok "format $f: 3 frames of 640x480 $f ($got bytes)"
        else
            fail "format $f: $got bytes (want $want): $(tail -1 /tmp/$f.log)"
        fi
    else
        fail "record $f: $(tail -3 /tmp/$f.log | tr '\n' ' ')"
    fi
done
# v4l2://auto finds the capture node.
jetdetect record --source "v4l2://auto?format=nv12" --frames 1 --out /tmp/auto.raw >/tmp/auto.log 2>&1 \
    && grep -q 'format=nv12' /tmp/auto.log && ok "v4l2://auto: $(grep -o 'width=.*' /tmp/auto.log)" \
    || fail "v4l2://auto: $(tail -2 /tmp/auto.log | tr '\n' ' ')"
# A camera that is not there: record fails with a clear message, never a panic.
jetdetect record --source "v4l2:///dev/video9" --frames 1 --out /tmp/none.raw >/tmp/none.log 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q '/dev/video9: cannot open' /tmp/none.log && ok "missing camera: exit 1, '$(tail -1 /tmp/none.log)'" \
    || fail "missing camera: exit $rc: $(tail -2 /tmp/none.log | tr '\n' ' ')"
# A size the driver cannot do exactly is negotiated, with the reason logged.
jetdetect record --source "v4l2:///dev/video0?width=641&height=481&format=yuyv" --frames 1 --out /tmp/odd.raw >/tmp/odd.log 2>&1 \
    && grep -q 'replay with' /tmp/odd.log && ok "odd size negotiated: $(grep -o 'width=[0-9]*&height=[0-9]*' /tmp/odd.log)" \
    || fail "odd size: $(tail -2 /tmp/odd.log | tr '\n' ' ')"

# 2. The daemon on the camera.
cat >/jd/vm.toml <<EOF
[source]
uri = "v4l2:///dev/video0?width=640&height=480&fps=30&format=yuyv&timeout_ms=1000"
[source.controls]
brightness = 140
integer_64_bits = 5000000000
[model]
path = "/jd/obstacles-v8.onnx"
[output]
socket = "/run/jd.sock"
stats_interval_s = 1
EOF
jetdetect run --config /jd/vm.toml >/tmp/daemon.out 2>/tmp/daemon.log &
pid=$!
i=0; while [ ! -S /run/jd.sock ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ -S /run/jd.sock ] || { fail "daemon socket did not appear"; cat /tmp/daemon.log; finish; }
grep -q 'control Brightness = 140' /tmp/daemon.log && ok "control brightness set and read back" \
    || fail "control not applied: $(grep -i control /tmp/daemon.log | head -2)"
grep -q 'control Integer 64 Bits = 5000000000' /tmp/daemon.log && ok "64-bit control set past 2^32 and read back" \
    || fail "64-bit control: $(grep -i '64 bits' /tmp/daemon.log | head -2)"
# v4l2://auto passes over the node the daemon streams from (busy), saying so, and takes the next one.
RUST_LOG=info jetdetect record --source "v4l2://auto?format=yuyv" --frames 1 --out /tmp/auto2.raw >/tmp/auto2.log 2>&1 \
    && grep -q 'skipping /dev/video0: it is busy' /tmp/auto2.log && grep -q '/dev/video1' /tmp/auto2.log \
    && ok "v4l2://auto skips the busy /dev/video0 and records from /dev/video1" \
    || fail "v4l2://auto with a busy node: $(grep -E 'skipping|video1|rror' /tmp/auto2.log | head -3 | tr '\n' ' ')"
timeout 90 jetdetect watch --socket /run/jd.sock --json --count 3 >/tmp/watch1.txt 2>&1
n=$(grep -c '"type":"detections"' /tmp/watch1.txt)
[ "$n" -ge 3 ] && ok "daemon published $n detections messages from /dev/video0 at $(up) s" \
    || { fail "daemon published $n messages"; tail -5 /tmp/daemon.log; }
grep -q '"width":640,"height":480' /tmp/watch1.txt && ok "messages carry the 640x480 camera geometry" || fail "geometry in messages"

# 3. Unplug the camera mid-stream (unbind the vivid platform device), then plug it back.
dev=$(basename "$(readlink /sys/class/video4linux/video0/device)")
echo "$dev" > /sys/bus/platform/drivers/vivid/unbind && ok "unbound $dev at $(up) s" || fail "unbind $dev"
sleep 4
kill -0 $pid 2>/dev/null && ok "daemon still running with the camera gone" || fail "daemon exited when the camera went away"
timeout 10 jetdetect watch --socket /run/jd.sock --json >/tmp/watch2.txt 2>&1 &
wpid=$!
sleep 3; kill $wpid 2>/dev/null
grep -q '"state":"unavailable"' /tmp/watch2.txt && ok "stats report the camera unavailable" \
    || fail "no 'unavailable' state on the socket: $(grep stats /tmp/watch2.txt | tail -1)"
echo "$dev" > /sys/bus/platform/drivers/vivid/bind && ok "bound $dev again at $(up) s" || fail "bind $dev"
i=0; while [ ! -e /dev/video0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
# Inference runs at a frame every few seconds under TCG emulation: allow a minute.
timeout 60 jetdetect watch --socket /run/jd.sock --json --count 3 >/tmp/watch3.txt 2>&1
n=$(grep -c '"type":"detections"' /tmp/watch3.txt)
[ "$n" -ge 3 ] && ok "capture resumed: $n detections messages after the camera came back, same process" \
    || { fail "capture did not resume ($n messages)"; tail -8 /tmp/daemon.log; }
grep -q 'camera is back' /tmp/daemon.log && ok "the daemon logged the recovery" || fail "no recovery log line"

# 4. Clean stop.
kill -TERM $pid
i=0; while kill -0 $pid 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
wait $pid; rc=$?
[ $rc -eq 0 ] && ok "SIGTERM: exit 0" || fail "SIGTERM: exit $rc"
[ ! -e /run/jd.sock ] && ok "socket removed" || fail "socket left behind"
echo "@@ daemon log:"; sed 's/^/@@   /' /tmp/daemon.log | grep -vE 'client [0-9]+ (connected|left)' | tail -25
finish
