# Helpers for .ci/run (sourced): the stage timer, builds in the background, the build cache.
# shellcheck shell=bash

ci_start=$(date +%s)
stage_start=$ci_start
STAGE=""

# stage NAME: ends the current stage (its time and the total) and starts NAME.
stage() {
    local now
    now=$(date +%s)
    if [ -n "$STAGE" ]; then
        printf '::: %-28s %4ss  (total %ss)\n' "$STAGE" $((now - stage_start)) $((now - ci_start))
    fi
    STAGE=$1
    stage_start=$now
    printf '\n::: stage: %s\n' "$1"
}

ci_exit() {
    local rc=$? failed=$STAGE
    stage done
    if [ $rc -eq 0 ]; then echo "::: CI passed"; else echo "::: CI FAILED (exit $rc) in stage $failed"; fi
}

# Builds beside the VMs: a single-CPU TCG guest leaves a core idle, so each aarch64 build starts
# with the VM stage before the one that needs it, at the lowest priority (nice 19: the guest gets
# the CPU it asks for, the build what is left), and that stage waits for it. `bg NAME` starts the
# command registered as BG_CMD[NAME] (output in /tmp/jetdetect-ci-NAME.txt); `bg_wait NAME`
# waits for it, or runs it now when no earlier stage started it (a selection of stages), and
# fails the stage if it failed.
declare -A BG BG_CMD
bg() {
    local name=$1
    # shellcheck disable=SC2086
    (nice -n 19 ${BG_CMD[$name]} >"/tmp/jetdetect-ci-$name.txt" 2>&1; echo $? >"/tmp/jetdetect-ci-$name.rc") &
    BG[$name]=$!
}
bg_wait() {
    local name=$1
    if [ -z "${BG[$name]:-}" ]; then
        bg "$name"
    fi
    wait "${BG[$name]}" || true
    if [ "$(cat "/tmp/jetdetect-ci-$name.rc")" != 0 ]; then
        cat "/tmp/jetdetect-ci-$name.txt"
        echo "$name failed (above)"
        exit 1
    fi
    # Its output without cargo's progress lines (none at all is fine: cargo install -q).
    grep -v '^ *\(Compiling\|Downloaded\|Downloading\) ' "/tmp/jetdetect-ci-$name.txt" | tail -n "${2:-12}" || true
}

# The build cache: the clone's target/ (and fuzz/target/) as links into a folder outside the
# clone, named by a hash of what decides the compiled output (both Cargo.locks, rustc's and
# cargo's versions, nightly's for the fuzz build), so a changed lock file or toolchain starts
# from empty instead of reusing stale output. One key is kept; others are removed. Off with
# JETDETECT_CI_CACHE= (empty), or where the clone already has a target/.
build_cache() {
    local dir=${JETDETECT_CI_CACHE-/var/cache/jetdetect-ci}
    if [ -z "$dir" ]; then
        echo "build cache: off (JETDETECT_CI_CACHE is empty): a cold build"
        return
    fi
    if [ -e target ] || [ -e fuzz/target ]; then
        echo "build cache: not used, this checkout already has target/"
        return
    fi
    local nightly=""
    command -v rustup >/dev/null 2>&1 && nightly=$(rustup run nightly rustc -V 2>/dev/null || true)
    local key
    key=$({ cat Cargo.lock fuzz/Cargo.lock; rustc -vV; cargo -V; echo "$nightly"; } | sha256sum | cut -c1-16)
    mkdir -p "$dir"
    local old
    for old in "$dir"/*; do
        [ -d "$old" ] && [ "$(basename "$old")" != "$key" ] && { echo "build cache: removing $old (another key)"; rm -rf "$old"; }
    done
    # Each checkout path adds its own build of this crate: past 25 GB, start again.
    if [ -d "$dir/$key" ] && [ "$(du -s --block-size=1G "$dir/$key" | cut -f1)" -gt 25 ]; then
        echo "build cache: $dir/$key is over 25 GB, starting again"
        rm -rf "${dir:?}/$key"
    fi
    if [ -d "$dir/$key/target" ]; then
        echo "build cache: warm, $dir/$key ($(du -sh "$dir/$key" | cut -f1))"
    else
        echo "build cache: cold, $dir/$key"
    fi
    mkdir -p "$dir/$key/target" "$dir/$key/fuzz-target"
    ln -s "$dir/$key/target" target
    ln -s "$dir/$key/fuzz-target" fuzz/target
}
