#!/usr/bin/env bash
# Checks the static aarch64 build on an x86_64 host (CI runs it after cross/build.sh static):
# ELF headers, then under qemu-aarch64-static: --version, `check` on the shipped configs,
# and `detect` on the fixture images with the same detections as the host build.
#
# usage: tests/cross.sh AARCH64_STATIC_BINARY [HOST_BINARY]   (host default: target/debug/jetdetect)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: tests/cross.sh AARCH64_STATIC_BINARY [HOST_BINARY]}
host=${2:-target/debug/jetdetect}
work=$(mktemp -d /tmp/jetdetect-cross.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "tests/cross.sh: FAIL: $*" >&2; exit 1; }
for t in file readelf qemu-aarch64-static python3; do
    command -v $t >/dev/null || fail "$t is missing (apt-get install file binutils qemu-user-static)"
done

desc=$(file -b "$bin")
echo "file: $desc"
[[ $desc == *"ARM aarch64"* ]] || fail "not an aarch64 binary"
[[ $desc == *"statically linked"* || $desc == *"static-pie linked"* ]] || fail "not statically linked"
! readelf -l "$bin" | grep -q 'program interpreter' || fail "has a program interpreter"
! readelf -d "$bin" 2>/dev/null | grep -q NEEDED || fail "has NEEDED entries: $(readelf -d "$bin" | grep NEEDED)"
echo "ok: static AArch64, no interpreter, no NEEDED entries, $(du -h "$bin" | cut -f1)"

run() { qemu-aarch64-static "$bin" "$@"; }
v=$(run --version) || fail "--version under qemu-aarch64-static"
[ "$v" = "$("$host" --version)" ] || fail "version '$v' differs from the host build's"
echo "ok: --version: $v"

run check --config configs/demo.toml --quiet || fail "check configs/demo.toml"
# The reference config names the installed model path; point it at the repository's copy.
sed "s|/usr/share/jetdetect/models/|$PWD/models/|" configs/jetdetect.toml >"$work/jetdetect.toml"
run check --config "$work/jetdetect.toml" --quiet || fail "check configs/jetdetect.toml"
echo "ok: check passes on configs/demo.toml and configs/jetdetect.toml"

t0=$(date +%s)
run detect --config configs/demo.toml tests/fixtures/images \
    "synthetic://?width=640&height=480&fps=0&format=nv12&seed=5&frames=4" >"$work/aarch64.jsonl" \
    || fail "detect under qemu-aarch64-static"
"$host" detect --config configs/demo.toml tests/fixtures/images \
    "synthetic://?width=640&height=480&fps=0&format=nv12&seed=5&frames=4" >"$work/host.jsonl"
python3 - "$work/aarch64.jsonl" "$work/host.jsonl" <<'PY' || fail "aarch64 detections differ from the host build's"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 8, (len(a), len(b))
boxes = 0
for x, y in zip(a, b):
    assert x["image"] == y["image"] and len(x["detections"]) == len(y["detections"]), (x, y)
    for d, e in zip(x["detections"], y["detections"]):
        assert d["class_id"] == e["class_id"], (d, e)
        assert abs(d["score"] - e["score"]) < 1e-3, (d, e)
        assert all(abs(d[k] - e[k]) < 0.5 for k in ("x1", "y1", "x2", "y2")), (d, e)
        boxes += 1
assert boxes > 10, boxes
print(f"ok: detect: {boxes} boxes on 8 frames equal the host build's (score < 1e-3, boxes < 0.5 px)")
PY
echo "tests/cross.sh: PASS ($(($(date +%s) - t0)) s of detect under emulation)"
