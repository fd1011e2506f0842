#!/usr/bin/env bash
# Boots Debian's own kernel with the `vivid` V4L2 test driver in QEMU (TCG, no KVM
# needed) with the freshly built jetdetect inside, and checks real V4L2 capture:
#   1. frames arrive at the negotiated format and size (YUYV, NV12, GREY, UYVY, RGB24, BGR24);
#   2. the daemon publishes detections on its socket inside the VM;
#   3. the camera is unbound from its driver mid-stream and bound again, and
#      capture resumes without restarting the process;
#   4. SIGTERM stops the daemon cleanly;
#   5. several cameras in one daemon: both vivid instances (n_devs=2), a synthetic camera and,
#      on x86-64 with GStreamer here, an RTSP camera (tests/rtsp/server.py on the host, reached
#      over QEMU's user network at 10.0.2.2; the guest runs the host's gst-launch-1.0 from /usr,
#      shared read-only over 9p): every camera served, none starved, frames fresh.
# Only Debian packages are used (qemu-system-x86 or qemu-system-arm, cpio, kmod, binutils,
# xz-utils; the kernel and busybox-static are downloaded as .debs, never installed).
# The guest architecture follows the binary: an x86-64 build boots Debian's amd64 kernel
# (qemu-system-x86_64), an aarch64 one (the static cross build) Debian's arm64 kernel on
# qemu-system-aarch64's `virt` machine; the arm64 .debs need `dpkg --add-architecture arm64`.
#
# usage: tests/vm/vivid.sh [path/to/jetdetect]     (default: target/debug/jetdetect)
# env:   VM_WORK=target/vm (cache: kernel, modules)   VM_TIMEOUT=360 (s; 900 for arm64)
#        JETDETECT_REQUIRE_GST=1: fail (rather than skip the RTSP camera) without GStreamer
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-target/debug/jetdetect}
WORK=${VM_WORK:-$PWD/target/vm}
[ -x "$BIN" ] || { echo "vivid.sh: $BIN is not built (cargo build first)" >&2; exit 2; }
case $(readelf -h "$BIN" | sed -n 's/.*Machine: *//p') in
    AArch64) ARCH=arm64 TRIPLET=aarch64-linux-gnu QEMU=qemu-system-aarch64 PKG=qemu-system-arm TMO=${VM_TIMEOUT:-900} ;;
    *X86-64*) ARCH=amd64 TRIPLET=x86_64-linux-gnu QEMU=qemu-system-x86_64 PKG=qemu-system-x86 TMO=${VM_TIMEOUT:-360} ;;
    *) echo "vivid.sh: $BIN is neither x86-64 nor aarch64" >&2; exit 2 ;;
esac
WORK=$WORK/$ARCH
for t in $QEMU cpio depmod modprobe readelf xz apt-get; do
    command -v "$t" >/dev/null || { echo "vivid.sh: $t is missing: apt-get install $PKG cpio kmod binutils xz-utils" >&2; exit 2; }
done

. tests/vm/kernel.sh
vm_stage_kernel "$ARCH" "$WORK"

ROOT=$WORK/root; rm -rf "$ROOT"
mkdir -p "$ROOT"/{bin,etc,proc,sys,dev,tmp,run,lib/modules,lib/$TRIPLET,lib64,jd}
cp "$STAGE/bin/busybox" "$ROOT/bin/"
vm_copy_modules "$ROOT" vivid
# The RTSP camera: the host's GStreamer (x86-64 only: the guest runs the host's binaries) and a
# real RTSP server on the host; the guest reaches it over QEMU's user network.
RTSP_ARGS=() APPEND=""
have_gst() {
    command -v gst-launch-1.0 >/dev/null \
        && /usr/bin/python3 -c 'import gi; gi.require_version("GstRtspServer", "1.0")' 2>/dev/null
}
if [ "$ARCH" = amd64 ] && have_gst; then
    vm_copy_modules "$ROOT" virtio_pci virtio_net 9pnet_virtio 9p
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    /usr/bin/python3 tests/rtsp/server.py --port "$PORT" --path /cam --fps 10 >"$WORK/rtsp.log" 2>&1 &
    RTSP_PID=$!
    trap 'kill $RTSP_PID 2>/dev/null || true' EXIT
    for _ in $(seq 100); do grep -q '^ready' "$WORK/rtsp.log" && break; sleep 0.1; done
    grep -q '^ready' "$WORK/rtsp.log" || { echo "vivid.sh: the RTSP server did not start:" >&2; cat "$WORK/rtsp.log" >&2; exit 1; }
    RTSP_ARGS=(-nic user,model=virtio-net-pci -virtfs local,path=/usr,mount_tag=hostusr,security_model=none,readonly=on)
    APPEND=" jd.rtsp=rtsp://10.0.2.2:$PORT/cam"
    echo "vivid.sh: RTSP camera $(cat "$WORK/rtsp.log") (the guest: rtsp://10.0.2.2:$PORT/cam)"
elif [ "${JETDETECT_REQUIRE_GST:-0}" = 1 ] && [ "$ARCH" = amd64 ]; then
    echo "vivid.sh: JETDETECT_REQUIRE_GST=1 but GStreamer or gst-rtsp-server is missing" >&2; exit 2
else
    echo "vivid.sh: no RTSP camera in the VM ($ARCH; GStreamer here: $(have_gst && echo yes || echo no))"
fi
if [ "$ARCH" = amd64 ]; then strip -o "$ROOT/bin/jetdetect" "$BIN"; else cp "$BIN" "$ROOT/bin/jetdetect"; fi
for lib in $(readelf -d "$BIN" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    cp -L "/lib/$TRIPLET/$lib" "$ROOT/lib/$TRIPLET/$lib"
done
interp=$(readelf -l "$BIN" | sed -n 's/.*interpreter: \(.*\)\]/\1/p')
if [ -n "$interp" ]; then mkdir -p "$ROOT$(dirname "$interp")"; cp -L "$interp" "$ROOT$interp"; fi
cp models/obstacles-v8.onnx models/obstacles-v8-batch.onnx "$ROOT/jd/"
cp tests/vm/guest.sh "$ROOT/init"; chmod +x "$ROOT/init"
(cd "$ROOT" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) > "$WORK/initramfs.cpio"
echo "vivid.sh: kernel $KVER, initramfs $(du -h "$WORK/initramfs.cpio" | cut -f1), booting (timeout ${TMO}s)"

LOG=$WORK/console.log
if [ "$ARCH" = arm64 ]; then
    Q=(qemu-system-aarch64 -M virt -accel tcg -cpu "${VM_CPU:-cortex-a57}") CON=ttyAMA0
else
    Q=(qemu-system-x86_64 -accel tcg -cpu "${VM_CPU:-qemu64}") CON=ttyS0
fi
set +e
[ ${#RTSP_ARGS[@]} -gt 0 ] || RTSP_ARGS=(-nic none)
timeout --kill-after=5 "$TMO" "${Q[@]}" -smp 1 -m 1024 "${RTSP_ARGS[@]}" \
    -nographic -no-reboot -kernel "$VMLINUX" -initrd "$WORK/initramfs.cpio" \
    -append "console=$CON panic=-1 loglevel=3 vivid.n_devs=2 vivid.node_types=0x1,0x1$APPEND" </dev/null \
    | tr -d '\r' | tee "$LOG" | grep --line-buffered -E '^@@'
rc=${PIPESTATUS[0]}
set -e
echo "vivid.sh: qemu exit $rc (124: timed out); console log: $LOG"
grep -q '^@@ FAIL' "$LOG" && { grep '^@@ FAIL' "$LOG"; exit 1; }
# 5. The cameras' figures, as the daemon's last stats message inside the guest gave them.
python3 - "$LOG" "$APPEND" <<'PYEOF' || exit 1
import json, sys
log, rtsp = open(sys.argv[1]).read().splitlines(), "jd.rtsp=" in sys.argv[2]
stats = [json.loads(l.split(" ", 2)[2]) for l in log if l.startswith("@@ cameras-stats ")]
if not stats:
    sys.exit("vivid.sh: no stats message from the several-cameras daemon")
want = ["left", "right", "sim"] + (["ip"] if rtsp else [])
cams = {c["name"]: c for c in stats[-1]["cameras"]}
bad = []
for name in want:
    c = cams.get(name)
    if c is None:
        bad.append(f"{name}: missing"); continue
    f = c["frames"]
    print(f"vivid.sh: camera {name}: {f['captured']} captured, {f['processed']} processed, {f['dropped']} dropped, "
          f"{c['fps']['processed']:.2f} fps, newest frame {c['frame_age_ms']} ms old (bound {c['stale_ms']:.0f}), "
          f"{c['source']['state']}")
    if f["processed"] < 2:
        bad.append(f"{name}: starved ({f['processed']} frames processed)")
    if c["source"]["state"] != "streaming" or c["blind"] is not None:
        bad.append(f"{name}: {c['source']} blind={c['blind']}")
    if c["frame_age_ms"] is None or c["frame_age_ms"] > c["stale_ms"]:
        bad.append(f"{name}: newest frame {c['frame_age_ms']} ms old")
if sorted(cams) != sorted(want):
    bad.append(f"cameras {sorted(cams)}, want {sorted(want)}")
# Served in turn: no camera falls behind the others by more than a turn or two (the RTSP camera
# may join a turn late while its stream starts).
done = [cams[n]["frames"]["processed"] for n in want if n in cams]
if done and max(done) - min(done) > 2:
    bad.append(f"not served in turn: processed {dict(zip(want, done))}")
if bad:
    sys.exit("vivid.sh: several cameras: " + "; ".join(bad))
print(f"vivid.sh: {len(want)} cameras in one daemon, every one served")
PYEOF
grep -q '^@@ VM RESULT PASS' "$LOG" || { echo "vivid.sh: the guest did not report PASS"; tail -n 40 "$LOG"; exit 1; }
echo "vivid.sh: PASS"
