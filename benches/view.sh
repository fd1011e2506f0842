#!/usr/bin/env bash
# The live view's cost to the pipeline (docs/live-view.md): FPS and end-to-end p50/p99 with the
# view closed, with one viewer and with five, on CONFIG (default configs/demo.toml, which turns the
# view on). Environment: JETDETECT (default target/release/jetdetect), CONFIG, PHASE_S (seconds per
# phase, default 30), STATS_S (the stats interval, default the config's; each phase waits one for
# /metrics), OUT (default /tmp/jetdetect-view-bench.json).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${JETDETECT:-target/release/jetdetect}
[ -x "$BIN" ] || { echo "view bench: $BIN: not built (cargo build --release, or set JETDETECT)" >&2; exit 1; }
exec python3 benches/view.py "$BIN" "${CONFIG:-configs/demo.toml}" "${PHASE_S:-30}" \
    "${OUT:-/tmp/jetdetect-view-bench.json}"
