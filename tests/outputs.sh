# Shared by the output checks against independent receivers (tests/mavlink/run.sh,
# tests/ros2/run.sh, tests/mqtt/run.sh); sourced, not run.

# The [hazards] and [latency] sections the checks run with: the demo model's classes with their
# sizes (the ranges come from them) and the freshness bound, $1 milliseconds.
hazards_toml() {
    cat <<TOML
[hazards]
enabled = true
[hazards.classes]
box = { height_m = 0.5 }
ball = { height_m = 0.3 }
cone = { height_m = 0.7 }
[latency]
stale_ms = $1
TOML
}

# Waits for the checker (pid $chk), then stops the daemon (pid $jd) with SIGTERM. On a failure
# prints the checker's output ($W/check.out) and the daemon's log ($W/jd.log) and exits 1.
# $1: the check's name.
check_then_stop() {
    if wait "$chk"; then
        echo "ok   $1: $(tail -n 1 "$W/check.out")"
    else
        echo "FAIL $1:"; cat "$W/check.out"; tail -n 20 "$W/jd.log"
        exit 1
    fi
    kill -TERM "$jd"
    wait "$jd" || { echo "FAIL $1: the daemon exited $?"; tail -n 20 "$W/jd.log"; exit 1; }
    jd=
}
