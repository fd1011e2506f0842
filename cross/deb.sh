#!/usr/bin/env bash
# Packages a built jetdetect binary as a Debian package (dpkg-deb, no other tool):
#
#   cross/deb.sh BINARY [VERSION]     -> dist/jetdetect_VERSION_ARCH.deb
#
# The architecture comes from the binary (AArch64 -> arm64, x86-64 -> amd64): the arm64
# package is the one for Jetsons (`cross/build.sh deb`); CI also builds an amd64 one from
# the test build and installs it on the CI machine to try the maintainer scripts for real.
# Contents: /usr/bin/jetdetect, the systemd unit, /etc/jetdetect/jetdetect.toml
# (a conffile: upgrades keep local edits), the models, docs and examples.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: cross/deb.sh BINARY [VERSION]}
version=${2:-$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)}
case $(readelf -h "$bin" | sed -n 's/.*Machine: *//p') in
    AArch64) arch=arm64 ;;
    *X86-64*) arch=amd64 ;;
    *) echo "cross/deb.sh: $bin: not an aarch64 or x86-64 ELF file" >&2; exit 2 ;;
esac
static=0
readelf -d "$bin" | grep -q NEEDED || static=1

pkg=$(mktemp -d /tmp/jetdetect-deb.XXXXXX)
trap 'rm -rf "$pkg"' EXIT
install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/lib/systemd/system" "$pkg/etc/jetdetect" \
    "$pkg/usr/share/jetdetect/models" "$pkg/usr/share/jetdetect/systemd" "$pkg/usr/share/jetdetect/examples" \
    "$pkg/usr/share/doc/jetdetect"
install -m 0755 "$bin" "$pkg/usr/bin/jetdetect"
if [ "$arch" = amd64 ] && command -v strip >/dev/null; then strip "$pkg/usr/bin/jetdetect"; fi
install -m 0644 systemd/jetdetect.service "$pkg/lib/systemd/system/jetdetect.service"
install -m 0644 systemd/realtime.conf "$pkg/usr/share/jetdetect/systemd/realtime.conf"
install -m 0644 systemd/robot-outputs.conf "$pkg/usr/share/jetdetect/systemd/robot-outputs.conf"
install -m 0644 systemd/cameras.conf "$pkg/usr/share/jetdetect/systemd/cameras.conf"
# The reference config, reading the first camera (the documented default source is synthetic).
sed 's|^uri = "synthetic://[^"]*"|uri = "v4l2://auto"|' configs/jetdetect.toml >"$pkg/etc/jetdetect/jetdetect.toml"
grep -q '^uri = "v4l2://auto"' "$pkg/etc/jetdetect/jetdetect.toml" || { echo "cross/deb.sh: config source not set" >&2; exit 1; }
chmod 0644 "$pkg/etc/jetdetect/jetdetect.toml"
install -m 0644 models/obstacles-v8.onnx models/obstacles-v8-batch.onnx models/obstacles-v5.onnx models/obstacles.names "$pkg/usr/share/jetdetect/models/"
install -m 0644 examples/watch.py "$pkg/usr/share/jetdetect/examples/"
install -m 0644 README.md docs/deploy.md docs/power.md docs/protocol.md docs/accelerators.md docs/benchmarks.md \
    docs/v4l2.md docs/gstreamer.md docs/cameras.md docs/fleet.md docs/live-view.md docs/live-view.jpg "$pkg/usr/share/doc/jetdetect/"
cat >"$pkg/usr/share/doc/jetdetect/copyright" <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: jetdetect

Files: *
Copyright: the jetdetect authors
License: see the project's repository

Files: usr/share/jetdetect/models/*
Comment: YOLOv8-architecture models trained from scratch on the project's own synthetic
 scenes (models/README.md in the source tree).
EOF

depends=""
[ $static = 1 ] || depends="Depends: libc6 (>= 2.17)"
size=$(du -sk "$pkg" | cut -f1)
cat >"$pkg/DEBIAN/control" <<EOF
Package: jetdetect
Version: $version
Architecture: $arch
Maintainer: jetdetect developers <jetdetect@localhost>
Installed-Size: $size
${depends:+$depends
}Suggests: nvidia-l4t-core
Section: misc
Priority: optional
Description: steady low-latency YOLO obstacle detection for NVIDIA Jetson
 Captures from a V4L2 camera (always the newest frame), letterboxes on the CPU or
 the GPU/DLA, runs a YOLOv5/YOLOv8 ONNX model (TensorRT FP16 through ONNX Runtime
 when installed, a built-in CPU engine otherwise) and publishes every frame's
 detections with timestamps and per-stage latency on a UNIX socket. Pins and
 restores Jetson clocks from a power profile. Runs as the systemd service jetdetect.
EOF
echo /etc/jetdetect/jetdetect.toml >"$pkg/DEBIAN/conffiles"

# Maintainer scripts: never fail because systemd is not running (chroots, image builds).
cat >"$pkg/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    mkdir -p /var/lib/jetdetect /var/cache/jetdetect
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload || true
        # An upgrade restarts a running service; a first install starts nothing:
        # edit /etc/jetdetect/jetdetect.toml, then `systemctl enable --now jetdetect`.
        if [ -n "$2" ]; then systemctl try-restart jetdetect.service || true; fi
    fi
    if [ -z "$2" ]; then
        echo "jetdetect: edit /etc/jetdetect/jetdetect.toml, check it with"
        echo "  jetdetect check --config /etc/jetdetect/jetdetect.toml"
        echo "then start the service with: systemctl enable --now jetdetect"
    fi
fi
exit 0
EOF
cat >"$pkg/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ]; then
    # Stopping runs ExecStopPost, which puts the clocks back; without systemd (or after a
    # crash) the state file says what to restore.
    if [ -d /run/systemd/system ]; then
        systemctl stop jetdetect.service || true
        systemctl disable jetdetect.service || true
    fi
    if [ -e /var/lib/jetdetect/clocks.state ]; then
        /usr/bin/jetdetect clocks restore --config /etc/jetdetect/jetdetect.toml || true
    fi
fi
exit 0
EOF
cat >"$pkg/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = purge ]; then
    rm -rf /var/lib/jetdetect /var/cache/jetdetect
fi
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
exit 0
EOF
chmod 0755 "$pkg/DEBIAN/postinst" "$pkg/DEBIAN/prerm" "$pkg/DEBIAN/postrm"
(cd "$pkg" && find usr lib etc -type f -exec md5sum {} + >DEBIAN/md5sums)

mkdir -p dist
out=dist/jetdetect_${version}_$arch.deb
dpkg-deb --root-owner-group -Z"${DEB_COMPRESS:-xz}" --build "$pkg" "$out" >/dev/null
echo "cross/deb.sh: $out ($(du -h "$out" | cut -f1)), $( [ $static = 1 ] && echo static || echo 'glibc >= 2.17') binary"
