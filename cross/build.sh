#!/usr/bin/env bash
# Builds jetdetect for aarch64 (Jetson) on an x86_64 Debian/Ubuntu host.
#
#   cross/build.sh static     # aarch64-unknown-linux-musl, fully static, tract engine: any aarch64 Linux
#   cross/build.sh jetpack    # aarch64-unknown-linux-gnu, glibc 2.17 symbols only: JetPack 4.6 to 7,
#                             # loads ONNX Runtime / TensorRT / CUDA from the device at run time
#   cross/build.sh deb        # the JetPack flavour as a Debian package (dist/jetdetect_*_arm64.deb)
#   cross/build.sh deb static # the static flavour's package (dist/static/jetdetect_*_arm64.deb)
#
# Results go to dist/. Tools: the Rust standard library for the target (rustup; without
# rustup, Debian's rustc-web with its arm64 std and std sources), and zig + cargo-zigbuild
# from PyPI as the linker (zig carries musl and glibc stubs of any version). Missing tools
# are installed into target/cross-tools/ (pip) and, as root, through apt. cross/README.md
# explains the choice.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
what=${1:-}
case $what in
    static | jetpack) flavour=$what ;;
    deb) flavour=${2:-jetpack} ;;
    *)
        sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
case $flavour in
    static) target=aarch64-unknown-linux-musl zigtarget=aarch64-unknown-linux-musl ;;
    jetpack) target=aarch64-unknown-linux-gnu zigtarget=aarch64-unknown-linux-gnu.2.17 ;;
    *) echo "cross/build.sh: flavour '$flavour': use static or jetpack" >&2; exit 2 ;;
esac
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
TOOLS=$ROOT/target/cross-tools
mkdir -p "$TOOLS" dist

say() { printf 'cross/build.sh: %s\n' "$*"; }

# --- zig and cargo-zigbuild (PyPI), kept in target/cross-tools/py.
ZIG_VERSION=0.17.1 ZIGBUILD_VERSION=0.24.1
export PYTHONPATH=$TOOLS/py${PYTHONPATH:+:$PYTHONPATH}
export PATH=$TOOLS/py/bin:$PATH
if ! command -v cargo-zigbuild >/dev/null || ! python3 -c 'import ziglang' 2>/dev/null; then
    say "installing ziglang $ZIG_VERSION and cargo-zigbuild $ZIGBUILD_VERSION into $TOOLS/py (pip)"
    python3 -m pip install -q --disable-pip-version-check --only-binary=:all: --target "$TOOLS/py" \
        "ziglang==$ZIG_VERSION" "cargo-zigbuild==$ZIGBUILD_VERSION" 2>&1 \
        | grep -v "WARNING: Running pip as the 'root' user" || true
fi
command -v cargo-zigbuild >/dev/null || { say "cargo-zigbuild did not install (pip install ziglang cargo-zigbuild)"; exit 1; }

# --- the Rust standard library for the target.
build_std=()
if command -v rustup >/dev/null && rustup target list --installed 2>/dev/null | grep -qx "$target"; then
    :
elif command -v rustup >/dev/null && rustup target add "$target"; then
    :
else
    # Debian's packages only: rustc-web 1.96 with the arm64 std (gnu) or the std sources (musl, build-std).
    say "rustup cannot provide $target: using Debian's rustc-web"
    if [ "$(id -u)" = 0 ]; then
        dpkg --add-architecture arm64
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustc-web cargo-web rust-web-src libstd-rust-web-dev:arm64 >/dev/null
    fi
    [ -x /usr/bin/rustc ] && /usr/bin/rustc --version | grep -q . \
        || { say "no Rust for $target: install rustup's target, or (as root) Debian's rustc-web packages"; exit 1; }
    export RUSTC=/usr/bin/rustc CARGO=/usr/bin/cargo
    unset RUSTUP_TOOLCHAIN
    if [ "$flavour" = static ]; then
        export RUSTC_BOOTSTRAP=1
        export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C link-self-contained=no"
        build_std=(-Zbuild-std=std,panic_abort)
    fi
fi

# --- build.
say "building $flavour ($zigtarget), release profile"
start=$(date +%s)
cargo zigbuild --release --locked --target "$zigtarget" "${build_std[@]}"
bin=$ROOT/target/$target/release/jetdetect
say "built $bin in $(($(date +%s) - start)) s"

# --- check what was built, as CI does.
file "$bin" 2>/dev/null || true
machine=$(readelf -h "$bin" | sed -n 's/.*Machine: *//p')
[ "$machine" = AArch64 ] || { say "$bin is $machine, not AArch64"; exit 1; }
if [ "$flavour" = static ]; then
    if readelf -l "$bin" | grep -q 'Requesting program interpreter' || readelf -d "$bin" | grep -q NEEDED; then
        say "$bin is not fully static:"; readelf -d "$bin" | grep NEEDED || true; exit 1
    fi
else
    newest=$(readelf -V "$bin" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -u | tail -1)
    [ "$newest" = GLIBC_2.17 ] || { say "$bin needs $newest (JetPack 4.6 has glibc 2.27; the target is 2.17)"; exit 1; }
    say "needs: $(readelf -d "$bin" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')(glibc symbols <= 2.17)"
fi
out=dist/jetdetect-$version-aarch64-$flavour
cp "$bin" "$out"
say "$out ($(du -h "$out" | cut -f1))"

[ "$what" = deb ] || exit 0
exec bash cross/deb.sh "$flavour"
