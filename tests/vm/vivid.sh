#!/usr/bin/env bash
# Boots Debian's own kernel with the `vivid` V4L2 test driver in QEMU (TCG, no KVM
# needed) with the freshly built jetdetect inside, and checks real V4L2 capture:
#   1. frames arrive at the negotiated format and size (YUYV, NV12, GREY, UYVY, RGB24, BGR24);
#   2. the daemon publishes detections on its socket inside the VM;
#   3. the camera is unbound from its driver mid-stream and bound again, and
#      capture resumes without restarting the process;
#   4. SIGTERM stops the daemon cleanly.
# Only Debian packages are used (qemu-system-x86 or qemu-system-arm, cpio, kmod, binutils,
# xz-utils; the kernel and busybox-static are downloaded as .debs, never installed).
# The guest architecture follows the binary: an x86-64 build boots Debian's amd64 kernel
# (qemu-system-x86_64), an aarch64 one (the static cross build) Debian's arm64 kernel on
# qemu-system-aarch64's `virt` machine; the arm64 .debs need `dpkg --add-architecture arm64`.
#
# usage: tests/vm/vivid.sh [path/to/jetdetect]     (default: target/debug/jetdetect)
# env:   VM_WORK=target/vm (cache: kernel, modules)   VM_TIMEOUT=240 (s; 600 for arm64)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-target/debug/jetdetect}
WORK=${VM_WORK:-$PWD/target/vm}
[ -x "$BIN" ] || { echo "vivid.sh: $BIN is not built (cargo build first)" >&2; exit 2; }
case $(readelf -h "$BIN" | sed -n 's/.*Machine: *//p') in
    AArch64) ARCH=arm64 TRIPLET=aarch64-linux-gnu QEMU=qemu-system-aarch64 PKG=qemu-system-arm TMO=${VM_TIMEOUT:-600} ;;
    *X86-64*) ARCH=amd64 TRIPLET=x86_64-linux-gnu QEMU=qemu-system-x86_64 PKG=qemu-system-x86 TMO=${VM_TIMEOUT:-240} ;;
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
if [ "$ARCH" = amd64 ]; then strip -o "$ROOT/bin/jetdetect" "$BIN"; else cp "$BIN" "$ROOT/bin/jetdetect"; fi
for lib in $(readelf -d "$BIN" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    cp -L "/lib/$TRIPLET/$lib" "$ROOT/lib/$TRIPLET/$lib"
done
interp=$(readelf -l "$BIN" | sed -n 's/.*interpreter: \(.*\)\]/\1/p')
if [ -n "$interp" ]; then mkdir -p "$ROOT$(dirname "$interp")"; cp -L "$interp" "$ROOT$interp"; fi
cp models/obstacles-v8.onnx "$ROOT/jd/"
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
timeout --kill-after=5 "$TMO" "${Q[@]}" -smp 1 -m 1024 -nic none \
    -nographic -no-reboot -kernel "$VMLINUX" -initrd "$WORK/initramfs.cpio" \
    -append "console=$CON panic=-1 loglevel=3 vivid.n_devs=2 vivid.node_types=0x1,0x1" </dev/null \
    | tr -d '\r' | tee "$LOG" | grep --line-buffered -E '^@@'
rc=${PIPESTATUS[0]}
set -e
echo "vivid.sh: qemu exit $rc (124: timed out); console log: $LOG"
grep -q '^@@ FAIL' "$LOG" && { grep '^@@ FAIL' "$LOG"; exit 1; }
grep -q '^@@ VM RESULT PASS' "$LOG" || { echo "vivid.sh: the guest did not report PASS"; tail -n 40 "$LOG"; exit 1; }
echo "vivid.sh: PASS"
