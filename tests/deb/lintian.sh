#!/usr/bin/env bash
# Debian's own checker on each package: no error and no warning; each overridden tag is shown with
# its reason (cross/debian/). One package per run (lintian takes two files with the same name and
# version for one package), and the tags are read from its output: with --show-overrides,
# lintian 2.116's --fail-on counts the overridden warning too.
#
#   tests/deb/lintian.sh dist/jetdetect_*_arm64.deb dist/static/jetdetect_*_arm64.deb
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: tests/deb/lintian.sh PACKAGE.deb..." >&2; exit 2; }
command -v lintian >/dev/null || { echo "lintian.sh: lintian is missing: apt install lintian man-db" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for deb in "$@"; do
    echo "lintian $deb:"
    lintian --fail-on none --tag-display-limit 0 --show-overrides "$deb" 2>&1 | grep -v 'root privileges' | tee "$out"
    if grep -E '^[EW]: ' "$out"; then echo "lintian: errors or warnings in $deb"; exit 1; fi
done
