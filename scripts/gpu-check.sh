#!/usr/bin/env bash
# GPU check for the ONNX Runtime engine: CPU, CUDA, TensorRT FP32 and FP16 on the demo
# model and frames, on an x86_64 (or Jetson) machine with an NVIDIA GPU; on a Jetson with DLA
# cores also preprocessing and the model on DLA core 0, with TensorRT's placement report.
#
#   scripts/gpu-check.sh            # everything, ~2-5 min (TensorRT builds twice, cold)
#   FRAMES=100 scripts/gpu-check.sh # fewer timed frames
#   MODEL=tests/reference/families/yolo26-e2e.onnx scripts/gpu-check.sh
#                                   # an end-to-end head (its TopK and gathers) under TensorRT;
#                                   # rtdetr-default.onnx there for RT-DETR (GridSample, stretched
#                                   # input), yolov8-nms.onnx for NMS inside the graph (docs/models.md)
#
# Needs: the onnxruntime-gpu wheel and the TensorRT wheels in the python3 this finds
# (`pip install onnxruntime-gpu tensorrt-cu12`; their CUDA/cuDNN libraries come as
# nvidia-* wheels), and a jetdetect binary ($JETDETECT, else target/release/jetdetect,
# else built here with cargo). Nothing is downloaded by this script.
#
# Prints, per mode: model load (TensorRT engine build cold, then from the cache),
# warm-up, per-frame P50/P99 of preprocessing, inference and the whole detector, FPS;
# then the agreement of each mode's detections with the pure-Rust CPU engine (tract)
# on the fixture images and synthetic frames. Paste the output into docs/benchmarks.md.
set -uo pipefail
cd "$(dirname "$0")/.."

FRAMES=${FRAMES:-300}
SOURCE=${SOURCE:-"synthetic://?width=1280&height=720&fps=0&format=yuyv&seed=1"}
MODEL=${MODEL:-models/obstacles-v8.onnx}
PY=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/jetdetect-gpu-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

say() { printf '\n== %s\n' "$*"; }

say "machine"
echo "$(uname -m), $(nproc) CPUs, jetdetect $(git rev-parse --short HEAD 2>/dev/null || echo '(not a git checkout)')"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
    || echo "nvidia-smi: not found (no NVIDIA driver?)"

# --- ONNX Runtime (GPU build) and the CUDA / cuDNN / TensorRT libraries it loads.
info=$("$PY" - <<'EOF' 2>&1
import glob, os, sys
try:
    import onnxruntime as ort
except Exception as e:
    sys.exit(f"onnxruntime is not importable ({e}): pip install onnxruntime-gpu tensorrt-cu12")
capi = os.path.join(os.path.dirname(ort.__file__), "capi")
lib = sorted(glob.glob(os.path.join(capi, "libonnxruntime.so*")))
if not lib:
    sys.exit(f"{capi}: no libonnxruntime.so")
dirs = [capi]
for site in {os.path.dirname(os.path.dirname(ort.__file__))}:
    dirs += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
    dirs += sorted(glob.glob(os.path.join(site, "tensorrt_libs")))
    dirs += sorted(glob.glob(os.path.join(site, "tensorrt")))
print(lib[-1])
print(":".join(dirs))
print(ort.__version__, " ".join(ort.get_available_providers()))
try:
    import tensorrt
    print("tensorrt", tensorrt.__version__)
except Exception as e:
    print(f"tensorrt: not importable ({e})")
EOF
)
if [ $? -ne 0 ]; then
    echo "$info"
    exit 2
fi
ORT_LIB=$(sed -n 1p <<<"$info")
export LD_LIBRARY_PATH="$(sed -n 2p <<<"$info")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "onnxruntime"
echo "library:   $ORT_LIB"
echo "version:   $(sed -n 3p <<<"$info")"
echo "$(sed -n 4p <<<"$info")"

# --- jetdetect
BIN=${JETDETECT:-target/release/jetdetect}
if [ ! -x "$BIN" ]; then
    if command -v cargo >/dev/null; then
        say "building jetdetect (release)"
        cargo build --release --locked || exit 2
    else
        echo "$BIN: not found and no cargo: build it elsewhere and set JETDETECT"
        exit 2
    fi
fi
"$BIN" --version

# mode name | flags
MODES=(
    "tract-cpu|--engine tract"
    "ort-cpu|--engine onnxruntime --providers cpu"
    "ort-cpu+graph-pre|--engine onnxruntime --providers cpu --preprocess gpu"
    "ort-cuda|--engine onnxruntime --providers cuda"
    "ort-cuda+gpu-pre|--engine onnxruntime --providers cuda --preprocess gpu"
    "trt-fp32|--engine onnxruntime --providers tensorrt --precision fp32"
    "trt-fp16|--engine onnxruntime --providers tensorrt --precision fp16"
    "trt-fp16+gpu-pre|--engine onnxruntime --providers tensorrt --precision fp16 --preprocess gpu"
)
# Jetson Xavier, AGX Orin, Orin NX (TensorRT <= 10.7): the DLA rows. The source's 1280x720 shrinks
# by a whole factor into the demo model's 256x256, as the DLA form of the preprocessing needs.
DLA=$(find /sys/devices/platform -maxdepth 3 -name '*.nvdla*' 2>/dev/null | head -1)
if [ -n "$DLA" ]; then
    MODES+=(
        "trt-fp16+dla-pre|--engine onnxruntime --providers tensorrt --precision fp16 --preprocess dla"
        "trt-dla0|--engine onnxruntime --providers tensorrt --precision fp16 --dla-core 0"
        "trt-dla0+dla-pre|--engine onnxruntime --providers tensorrt --precision fp16 --dla-core 0 --preprocess dla"
    )
fi

say "timing: $FRAMES frames of $SOURCE, model $MODEL"
for m in "${MODES[@]}"; do
    name=${m%%|*}
    flags=${m#*|}
    cache="$WORK/cache-$name"
    # shellcheck disable=SC2086
    common=(--model "$MODEL" --ort-library "$ORT_LIB" --trt-cache "$cache" $flags)
    for run in cold cached; do
        if [ $run = cached ] && [[ $name != trt-* ]]; then continue; fi
        if "$BIN" bench --mode detector "${common[@]}" --source "$SOURCE" --frames "$FRAMES" --warmup 10 --json \
            >"$WORK/$name-$run.json" 2>"$WORK/$name-$run.log"; then
            :
        else
            echo "{\"error\": $("$PY" -c 'import json,sys; print(json.dumps(sys.stdin.read()[-600:]))' <"$WORK/$name-$run.log")}" \
                >"$WORK/$name-$run.json"
        fi
    done
    # Detections for the agreement check: fixture images + synthetic frames of three formats.
    "$BIN" detect "${common[@]}" tests/fixtures/images \
        "synthetic://?width=1280&height=720&fps=0&format=yuyv&seed=7&frames=20" \
        "synthetic://?width=640&height=480&fps=0&format=nv12&seed=8&frames=20" \
        >"$WORK/$name-detect.jsonl" 2>>"$WORK/$name-detect.log" || true
done

if [ -n "$DLA" ]; then
    say "DLA placement (TensorRT's report, saved next to each cached engine; DLA found at $DLA)"
    for f in "$WORK"/cache-*/*.placement.txt; do
        [ -e "$f" ] || { echo "no placement report written (see the *-cold.log files)"; break; }
        echo "-- ${f#"$WORK"/}"
        cat "$f"
    done
    grep -h "preprocessing on DLA" "$WORK"/*-cold.log 2>/dev/null | sort -u | head -20
fi

"$PY" - "$WORK" "${MODES[@]}" <<'EOF'
import json, os, sys
work, modes = sys.argv[1], [m.split("|")[0] for m in sys.argv[2:]]

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception as e:
        return {"error": f"{path}: {e}"}

def pct(r, stage):
    for name, p in r["stages"]:
        if name == stage:
            return f"{p['p50']:7.2f} {p['p99']:7.2f}"
    return " " * 15

print(f"\n{'mode':<18} {'load s':>7} {'cached':>7} {'warm s':>7} | {'pre p50/p99 ms':>15} | "
      f"{'infer p50/p99 ms':>15} | {'detect p50/p99 ms':>15} | {'FPS':>6}")
for m in modes:
    cold = load(os.path.join(work, f"{m}-cold.json"))
    if "error" in cold:
        lines = [l for l in cold["error"].splitlines() if l.startswith("jetdetect:")]
        reason = (lines[-1] if lines else " ".join(cold["error"].split()))[:300]
        print(f"{m:<18} unavailable: {reason}")
        continue
    cached = load(os.path.join(work, f"{m}-cached.json"))
    c = f"{cached['load_s']:7.2f}" if "load_s" in cached else "      -"
    print(f"{m:<18} {cold['load_s']:7.2f} {c} {cold['warmup_s']:7.2f} | {pct(cold, 'preprocess')} | "
          f"{pct(cold, 'inference')} | {pct(cold, 'detect')} | {cold['fps']:6.1f}")
    print(f"{'':<18} engine: {cold['engine']}; preprocessing: {cold['preprocessing']}")

def iou(a, b):
    ix = max(0.0, min(a["x2"], b["x2"]) - max(a["x1"], b["x1"]))
    iy = max(0.0, min(a["y2"], b["y2"]) - max(a["y1"], b["y1"]))
    inter = ix * iy
    union = (a["x2"] - a["x1"]) * (a["y2"] - a["y1"]) + (b["x2"] - b["x1"]) * (b["y2"] - b["y1"]) - inter
    return inter / union if union > 0 else 0.0

def frames(m):
    try:
        with open(os.path.join(work, f"{m}-detect.jsonl")) as f:
            return [json.loads(l)["detections"] for l in f if l.strip()]
    except Exception:
        return []

ref = frames("tract-cpu")
print(f"\nagreement with tract (CPU) on {len(ref)} frames: boxes matched (same class, IoU >= 0.5), "
      "worst score difference, mean IoU")
for m in modes[1:]:
    got = frames(m)
    if len(got) != len(ref) or not ref:
        print(f"{m:<18} no comparable detections ({len(got)} frames)")
        continue
    matched = total = 0
    worst = 0.0
    ious = []
    for a, b in zip(ref, got):
        total += max(len(a), len(b))
        used = set()
        for d in a:
            best, bi = 0.0, None
            for i, e in enumerate(b):
                if i in used or e["class_id"] != d["class_id"]:
                    continue
                v = iou(d, e)
                if v > best:
                    best, bi = v, i
            if bi is not None and best >= 0.5:
                used.add(bi)
                matched += 1
                ious.append(best)
                worst = max(worst, abs(d["score"] - b[bi]["score"]))
    mean_iou = sum(ious) / len(ious) if ious else 0.0
    print(f"{m:<18} {matched}/{total} matched, score diff <= {worst:.4f}, mean IoU {mean_iou:.4f}")
EOF
