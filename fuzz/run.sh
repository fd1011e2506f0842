#!/usr/bin/env bash
# Coverage-guided fuzzing of everything that parses outside data (cargo fuzz, libFuzzer):
#   config       Config::parse on arbitrary text
#   uri          SourceUri::parse, and source::open on synthetic:// URIs
#   yolo_decode  Decoder::decode on arbitrary tensors, layouts, letterboxes and thresholds
#   mjpeg        source::mjpeg::decode on corrupt and hostile JPEG frames
#   raw_frames   raw frame files (file://...?width=&height=&format=) of any content
#   http_head    the HTTP server's bounded request-head reader, the head sent in pieces
#
#   fuzz/run.sh [SECONDS per target (default 60)] [target...]
#
# Needs a nightly toolchain and cargo-fuzz (`rustup toolchain install nightly --profile minimal`,
# `cargo install cargo-fuzz`); FUZZ_INSTALL=1 installs both. Built without a sanitizer (`-s none`:
# the crate has no unsafe code on these paths) but with debug assertions and overflow checks.
# Seeds come from the repository (configs, the test JPEG). The corpus grows in fuzz/corpus/
# (ignored by git). Exit 1 on any crash, timeout or out-of-memory: the input is saved in
# fuzz/artifacts/<target>/ and `cargo +nightly fuzz run -s none --codegen-units 16 <target> <file>`
# replays it.
set -euo pipefail
cd "$(dirname "$0")"
SECS=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(config uri yolo_decode mjpeg raw_frames http_head)
if [ "${FUZZ_INSTALL:-0}" = 1 ]; then
    rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
    command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.2 --locked
fi
command -v cargo-fuzz >/dev/null || { echo "fuzz: cargo-fuzz is not installed (FUZZ_INSTALL=1 installs it)" >&2; exit 1; }

# Seeds.
mkdir -p corpus/config corpus/uri corpus/yolo_decode corpus/mjpeg corpus/raw_frames corpus/http_head
cp ../configs/*.toml corpus/config/
i=0
for u in 'synthetic://?width=64&height=48&fps=0&format=nv12&seed=3&objects=4' \
         'synthetic://?width=32&height=32&fps=0&format=yuyv&frames=2' \
         'file:///tmp/clip.yuv?width=640&height=480&format=yuyv&loop=true' \
         'v4l2:///dev/video0?width=640&height=480&fps=30&format=mjpeg&timeout_ms=1000' \
         'v4l2://auto?format=nv12'; do
    printf '%s' "$u" >corpus/uri/seed$i; i=$((i + 1))
done
{ printf '\0\0\0\0'; cat ../tests/fixtures/images/scene_800x600.jpg; } >corpus/mjpeg/scene_800x600
head -c 4096 /dev/urandom >corpus/yolo_decode/random
{ printf '\1\20\20'; head -c 1536 /dev/urandom; } >corpus/raw_frames/yuyv16
printf '\3GET /picture.json?camera=cam0&after=12 HTTP/1.1\r\nHost: localhost\r\nCookie: jetdetect_token=x\r\n\r\n' >corpus/http_head/get

# No sanitizer; 16 codegen units instead of cargo-fuzz's 1 (with fuzz/Cargo.toml's profile: only
# jetdetect, the JPEG decoder and the TOML parser optimised) keep the build at about 200 s on
# 2 cores, not 650 s.
BUILD=(-s none --codegen-units 16)
status=0
for t in "${TARGETS[@]}"; do
    echo "fuzz: $t for $SECS s"
    log=/tmp/jetdetect-fuzz-$t.log
    if cargo +nightly fuzz run "${BUILD[@]}" "$t" "corpus/$t" -- \
            -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
        cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo '?')
        echo "fuzz: $t: no crash in $runs runs ($SECS s), coverage $cov edges, corpus $(ls "corpus/$t" | wc -l) inputs"
    else
        echo "fuzz: $t: FAILED" >&2
        grep -E 'panicked|ERROR|SUMMARY|Test unit written|out-of-memory|timeout' "$log" | head -20 >&2
        status=1
    fi
done
exit $status
