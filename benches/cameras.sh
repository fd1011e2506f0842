#!/usr/bin/env bash
# Several cameras, one inference thread: batched engine runs against one camera per run.
# For 1, 2 and 4 synthetic cameras (640x480 YUYV, FPS each, 6 objects), the daemon's pipeline
# (`jetdetect bench --mode pipeline`, no clients) runs the dynamic-batch model
# (models/obstacles-v8-batch.onnx) twice: `[engine] max_batch = 1` (round-robin: the cameras in
# turn, one frame per engine run) and `max_batch = 4` (the newest frame of every ready camera in
# one run). It prints, per run: frames processed per second in all, the slowest camera's share,
# and each camera's end-to-end latency (median of the cameras' p50, worst camera's p99) and
# queue time; the JSON of every run is kept in OUT.
#
#   benches/cameras.sh [more jetdetect bench flags]
#
# Environment: JETDETECT (default target/release/jetdetect), ENGINE (tract, or onnxruntime with
# ORT_DYLIB_PATH), FPS (30 per camera), SECONDS_EACH (20), CAMERAS ("1 2 4"), OUT (a temporary
# folder).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${JETDETECT:-target/release/jetdetect}
ENGINE=${ENGINE:-tract}
FPS=${FPS:-30}
SECONDS_EACH=${SECONDS_EACH:-20}
CAMERAS=${CAMERAS:-1 2 4}
OUT=${OUT:-$(mktemp -d /tmp/jetdetect-cameras.XXXXXX)}
mkdir -p "$OUT"
say() { printf 'cameras: %s\n' "$*" >&2; }
[ -x "$BIN" ] || { say "$BIN: not built (cargo build --release, or set JETDETECT)"; exit 1; }
if [ "$ENGINE" = onnxruntime ]; then
    [ -n "${ORT_DYLIB_PATH:-}" ] || { say "ENGINE=onnxruntime needs ORT_DYLIB_PATH"; exit 1; }
    ENGINE_TOML="kind = \"onnxruntime\"
library = \"$ORT_DYLIB_PATH\"
providers = [\"cpu\"]"
else
    ENGINE_TOML="kind = \"$ENGINE\""
fi

for n in $CAMERAS; do
    for batch in 1 4; do
        cfg="$OUT/cameras-$n-batch-$batch.toml"
        {
            for i in $(seq 1 "$n"); do
                printf '[[source]]\nname = "cam%s"\nuri = "synthetic://?width=640&height=480&fps=%s&format=yuyv&seed=%s&objects=6"\n' \
                    "$i" "$FPS" "$i"
            done
            printf '[model]\npath = "%s/models/obstacles-v8-batch.onnx"\n' "$PWD"
            printf '[engine]\n%s\nmax_batch = %s\n' "$ENGINE_TOML" "$batch"
            printf '[output]\nsocket = "%s/unused.sock"\nstats_interval_s = 5\n' "$OUT"
        } >"$cfg"
        frames=$((n * FPS * SECONDS_EACH))
        say "$n camera(s), max_batch $batch, $ENGINE: $frames frames"
        "$BIN" bench --config "$cfg" --mode pipeline --frames "$frames" --clients 0 --json "$@" \
            >"$OUT/cameras-$n-batch-$batch.json"
    done
done

python3 - "$OUT" "$CAMERAS" "$FPS" <<'PYEOF'
import json, statistics, sys
out, cameras, fps = sys.argv[1], [int(c) for c in sys.argv[2].split()], float(sys.argv[3])
print(f"{'cameras':>7} {'runs':<11} {'fps all':>8} {'slowest cam':>11} {'e2e p50':>8} {'e2e p99':>8} "
      f"{'queue p50':>9} {'infer p50':>9}   (ms; per camera: median of p50s, worst p99)")
for n in cameras:
    for batch in (1, 4):
        r = json.load(open(f"{out}/cameras-{n}-batch-{batch}.json"))
        cams = r["cameras"]
        lat = lambda c, stage, q: c["latency_ms"][stage][q]
        slowest = min(c["fps"]["processed"] for c in cams)
        p50 = statistics.median(lat(c, "end_to_end", "p50") for c in cams)
        p99 = max(lat(c, "end_to_end", "p99") for c in cams)
        q50 = statistics.median(lat(c, "queue", "p50") for c in cams)
        i50 = statistics.median(lat(c, "inference", "p50") for c in cams)
        runs = "one each" if batch == 1 else "batched"
        print(f"{n:>7} {runs:<11} {r['fps']:8.1f} {slowest:11.1f} {p50:8.1f} {p99:8.1f} {q50:9.1f} {i50:9.1f}")
PYEOF
say "JSON in $OUT"
