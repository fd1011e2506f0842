#!/usr/bin/env bash
# Runs the shipped systemd/jetdetect.service, unchanged, under systemd as PID 1: Debian's
# own kernel in QEMU (TCG, no KVM needed) boots the host's own root, read-only over virtio-9p
# with a tmpfs overlay, into the host's systemd. The config pins a copy of an AGX Orin's sysfs
# under /srv/board ([power] root), which the unit's sandbox (ProtectSystem=strict) makes
# read-only to the daemon as ProtectKernelTunables makes the real /sys. It checks:
#   1. `systemctl start` returns with the daemon READY (Type=notify); the board is pinned by
#      the ExecStartPre=+ step; the daemon cannot write the board nor /sys; detections flow on
#      /run/jetdetect/detections.sock and the daemon reads the clocks as pinned;
#   2. `systemctl stop`: ExecStopPost=+ restores the board byte for byte;
#   3. SIGKILL: the unit restarts, restoring then pinning again;
#   4. control: the daemon made to pin the clocks itself in the same sandbox fails with
#      "Read-only file system" (what the split into + steps is for).
# Needs systemd installed on the host (its /lib/systemd/systemd boots the guest) and Debian's
# qemu-system-x86, cpio, kmod, binutils, xz-utils; the kernel comes as a .deb (tests/vm/kernel.sh).
#
# usage: tests/vm/systemd.sh [path/to/jetdetect]     (default: target/debug/jetdetect, x86-64)
# env:   VM_WORK=target/vm (cache: kernel, modules)   VM_TIMEOUT=480 (s)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-target/debug/jetdetect}
WORK=${VM_WORK:-$PWD/target/vm}/amd64
TMO=${VM_TIMEOUT:-480}
[ -x "$BIN" ] || { echo "systemd.sh: $BIN is not built (cargo build first)" >&2; exit 2; }
readelf -h "$BIN" | grep -q 'X86-64' || { echo "systemd.sh: $BIN is not an x86-64 binary (the guest boots this machine's own root)" >&2; exit 2; }
for t in qemu-system-x86_64 cpio depmod modprobe readelf strip xz apt-get; do
    command -v "$t" >/dev/null || { echo "systemd.sh: $t is missing: apt-get install qemu-system-x86 cpio kmod binutils xz-utils" >&2; exit 2; }
done
[ -x /lib/systemd/systemd ] || { echo "systemd.sh: /lib/systemd/systemd is missing: apt-get install systemd" >&2; exit 2; }
case $(realpath "$WORK") in /proc/* | /sys/* | /dev/*) echo "systemd.sh: VM_WORK must be on the root file system" >&2; exit 2 ;; esac

. tests/vm/kernel.sh
vm_stage_kernel amd64 "$WORK"

# What the guest installs (tests/vm/systemd/init), read through its view of this machine's /.
G=$(realpath "$WORK")/systemd-guest; rm -rf "$G"; mkdir -p "$G"
strip -o "$G/jetdetect" "$BIN"
cp systemd/jetdetect.service tests/vm/systemd/jdtest.target tests/vm/systemd/jdtest-check.service \
    tests/vm/systemd/check.sh models/obstacles-v8.onnx "$G/"
cp -a tests/fixtures/jetson/agx-orin-jp7 "$G/board"
config() {
    cat <<TOML
# The systemd VM's config (tests/vm/systemd.sh): a synthetic camera, the CPU engine, and the
# locked profile on a copy of an AGX Orin's sysfs at /srv/board.
[source]
uri = "synthetic://?width=320&height=240&fps=5"
[model]
path = "/usr/share/jetdetect/models/obstacles-v8.onnx"
[output]
stats_interval_s = 1
[power]
profile = "locked"
root = "/srv/board"
telemetry_ms = 500
$1
TOML
}
config "" > "$G/jetdetect.toml"
config 'on_failure = "exit"' > "$G/self.toml"
"$BIN" check --config "$G/jetdetect.toml" --quiet 2>/dev/null || true   # paths are the guest's; parsed there
if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify systemd/jetdetect.service 2>&1 | grep -v 'jetdetect: No such file\|Command /usr/bin/jetdetect' || true
fi

ROOT=$WORK/systemd-root; rm -rf "$ROOT"
mkdir -p "$ROOT"/{bin,etc,proc,sys,dev,lib/modules}
cp "$STAGE/bin/busybox" "$ROOT/bin/"
vm_copy_modules "$ROOT" virtio_pci 9pnet_virtio 9p overlay autofs4
cp tests/vm/systemd/init "$ROOT/init"; chmod +x "$ROOT/init"
(cd "$ROOT" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) > "$WORK/systemd-initramfs.cpio"
echo "systemd.sh: kernel $KVER, host systemd $(/lib/systemd/systemd --version | head -1 | cut -d' ' -f2), booting (timeout ${TMO}s)"

LOG=$WORK/systemd-console.log
# The guest is this machine's root, whatever it holds: fstab=no (its disks are not the guest's),
# systemd.firstboot=off (no wizard waiting on the console), no binfmt_misc (qemu-user-static's
# interpreters: the guest kernel has no such module, and its automount failed six times a boot),
# and show_status=auto so that a job
# holding the boot up prints "A start job is running for ..." into the console log.
set +e
timeout --kill-after=5 "$TMO" qemu-system-x86_64 -accel tcg -cpu "${VM_CPU:-qemu64}" -smp 2 -m 2048 -nic none \
    -nographic -no-reboot -kernel "$VMLINUX" -initrd "$WORK/systemd-initramfs.cpio" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -append "console=ttyS0 panic=-1 loglevel=3 jd.dir=$G systemd.unit=jdtest.target systemd.firstboot=off fstab=no systemd.mask=systemd-binfmt.service systemd.mask=proc-sys-fs-binfmt_misc.automount systemd.show_status=auto" </dev/null \
    | tr -d '\r' | tee "$LOG" | grep --line-buffered -E '@@ '
rc=${PIPESTATUS[0]}
set -e
echo "systemd.sh: qemu exit $rc (124: timed out); console log: $LOG"
# The check's lines reach the console through the journal, behind a "[time] unit[pid]: " prefix.
grep -q '@@ FAIL' "$LOG" && { grep '@@ FAIL' "$LOG"; exit 1; }
grep -q '@@ VM RESULT PASS' "$LOG" || { echo "systemd.sh: the guest did not report PASS"; tail -n 40 "$LOG"; exit 1; }
echo "systemd.sh: PASS"
