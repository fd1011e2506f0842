#!/usr/bin/env bash
# The shipped unit as systemd reads it, outside the VM: with the package's optional drop-ins every
# key is known (systemd-analyze verify), and its exposure score is at most 2.5 (systemd-analyze
# security). verify wants the unit's programs: BINARY (a host build) stands in for
# /usr/bin/jetdetect while it runs, and everything placed is removed again. Needs root.
#
#   tests/vm/systemd/analyze.sh target/debug/jetdetect
set -euo pipefail
cd "$(dirname "$0")/../../.."
bin=${1:?usage: tests/vm/systemd/analyze.sh BINARY}
[ "$(id -u)" = 0 ] || { echo "analyze.sh: run as root (it places the unit under /etc/systemd/system)" >&2; exit 1; }
[ ! -e /usr/bin/jetdetect ] || { echo "analyze.sh: /usr/bin/jetdetect exists: this check would replace it" >&2; exit 1; }
out=$(mktemp)
cleanup() {
    rm -rf /etc/systemd/system/jetdetect.service.d /etc/systemd/system/jetdetect.service /usr/bin/jetdetect "$out"
}
trap cleanup EXIT
install -m 0755 "$bin" /usr/bin/jetdetect
mkdir -p /etc/systemd/system/jetdetect.service.d
cp systemd/realtime.conf systemd/robot-outputs.conf systemd/cameras.conf /etc/systemd/system/jetdetect.service.d/
cp systemd/jetdetect.service /etc/systemd/system/jetdetect.service
systemd-analyze verify /etc/systemd/system/jetdetect.service 2>&1 | tee "$out"
if grep -Ei 'unknown|invalid|failed|ignoring' "$out"; then echo "a drop-in does not parse"; exit 1; fi
systemd-analyze security --offline=true systemd/jetdetect.service | tail -n 1 | tee "$out"
score=$(grep -o 'exposure level for jetdetect.service: [0-9.]*' "$out" | awk '{print $NF}')
awk -v s="$score" 'BEGIN { exit !(s <= 2.5) }' || { echo "exposure $score > 2.5"; exit 1; }
