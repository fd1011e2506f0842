#!/usr/bin/env bash
# Makes the Debian package of an aarch64 build with cargo-deb, configured in Cargo.toml's
# [package.metadata.deb] (the files, the dependencies, the unit's maintainer-script steps)
# and cross/debian/ (maintainer scripts, changelog, lintian overrides):
#
#   cross/deb.sh [jetpack]    -> dist/jetdetect_VERSION-1_arm64.deb         (glibc >= 2.17)
#   cross/deb.sh static       -> dist/static/jetdetect_VERSION-1_arm64.deb  (musl, static)
#
# It packages the binary cross/build.sh made (target/<triple>/release/jetdetect; `cross/build.sh
# deb [static]` does both steps). First it writes what is generated into target/deb/: the man
# pages and shell completions (`jetdetect generate`, run by the packaged binary itself, under
# qemu-aarch64-static on an x86_64 host), the copyright file (cross/copyright.py, from Cargo's
# metadata for the flavour's target) and the installed config. cargo-deb, pinned, is installed
# into target/cross-tools/ when missing (about 45 s). docs/deploy.md describes the package.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
flavour=${1:-jetpack}
case $flavour in
    jetpack) target=aarch64-unknown-linux-gnu variant=() out=dist qemu_root=(-L /usr/aarch64-linux-gnu) ;;
    static) target=aarch64-unknown-linux-musl variant=(--variant static) out=dist/static qemu_root=() ;;
    *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
say() { printf 'cross/deb.sh: %s\n' "$*"; }
bin=$ROOT/target/$target/release/jetdetect
[ -x "$bin" ] || { say "no $bin: build it first with cross/build.sh $flavour (or run cross/build.sh deb $flavour)"; exit 1; }

CARGO_DEB_VERSION=3.8.0
TOOLS=$ROOT/target/cross-tools
export PATH=$TOOLS/cargo/bin:$PATH
if ! cargo deb --version 2>/dev/null | grep -qF "$CARGO_DEB_VERSION"; then
    say "installing cargo-deb $CARGO_DEB_VERSION into $TOOLS/cargo"
    cargo install -q --locked --root "$TOOLS/cargo" cargo-deb --version "$CARGO_DEB_VERSION"
fi

# --- what is generated: target/deb/.
gen=$ROOT/target/deb
rm -rf "$gen"
mkdir -p "$gen/man" "$gen/completions"
run_target() {
    if [ "$(uname -m)" = aarch64 ]; then
        "$bin" "$@"
    elif command -v qemu-aarch64-static >/dev/null; then
        qemu-aarch64-static "${qemu_root[@]}" "$bin" "$@"
    else
        say "cannot run the aarch64 binary here to write its man pages: install qemu-user-static (and libc6-arm64-cross for jetpack)"
        exit 1
    fi
}
run_target generate man --out "$gen/man" >/dev/null
for shell in bash zsh fish; do run_target generate "$shell" --out "$gen/completions" >/dev/null; done
say "$(ls "$gen/man" | wc -l) man pages, 3 completion scripts"
python3 cross/copyright.py --target "$target" "$gen/copyright"
# The installed config: the reference config, reading the first camera (its documented default
# source is synthetic).
sed 's|^uri = "synthetic://[^"]*"|uri = "v4l2://auto"|' configs/jetdetect.toml >"$gen/jetdetect.toml"
grep -q '^uri = "v4l2://auto"' "$gen/jetdetect.toml" || { say "configs/jetdetect.toml: [source] uri not found"; exit 1; }

# --- the package.
mkdir -p "$out"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
deb=$out/jetdetect_${version}-1_arm64.deb
# The binary keeps the symbols the release profile keeps (no DWARF); cargo-deb's strip would
# run the host's binutils on an aarch64 file.
# A packager signs with their own name, the Debian way: DEBFULLNAME and DEBEMAIL (default: the
# project's address in Cargo.toml).
maintainer=()
[ -n "${DEBEMAIL:-}" ] && maintainer=(--maintainer "${DEBFULLNAME:-$DEBEMAIL} <$DEBEMAIL>")
cargo deb --no-build --no-strip --target "$target" "${variant[@]}" "${maintainer[@]}" --output "$deb" ${DEB_FAST:+--fast} >/dev/null
say "$deb ($(du -h "$deb" | cut -f1)), $flavour flavour"
