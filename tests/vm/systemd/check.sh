#!/bin/bash
# The checks of the systemd test VM (tests/vm/systemd.sh), run by jdtest-check.service with
# systemd as PID 1. jetdetect.service is the shipped unit, byte for byte; the config pins a
# copy of an AGX Orin's sysfs under /srv/board ([power] root), which the sandbox makes
# read-only to the daemon exactly as ProtectKernelTunables makes /sys. Prints "@@ ..." lines
# the host reads and powers the VM off.
set -u
export RUST_LOG=info
fails=0
ok() { echo "@@ ok $*"; }
fail() { echo "@@ FAIL $*"; fails=$((fails + 1)); }
up() { cut -d' ' -f1 /proc/uptime; }
journal() { journalctl -u jetdetect --no-pager -o cat "$@" | sed 's/^/@@   | /'; }
finish() {
    systemctl stop jetdetect 2>/dev/null
    if [ $fails -eq 0 ]; then echo "@@ VM RESULT PASS"; else echo "@@ VM RESULT FAIL ($fails)"; fi
    systemctl --no-block poweroff
    exit 0
}
B=/srv/board ORIG=/srv/board.orig STATE=/var/lib/jetdetect/clocks.state
# Every file and link under $1 with its contents or target, sorted; readings (values the
# hardware moves on its own, never saved or restored: tests/common/mod.rs READINGS) by name only.
snap() {
    (cd "$1" && {
        find . -type l -printf '%p -> %l\n'
        find . -type f \( -path '*/clk/emc/rate' -o -name cur_freq -o -name scaling_cur_freq -o -name clk_rate \
            -o -name load \) -printf '%p (reading)\n'
        find . -type f ! -path '*/clk/emc/rate' ! -name cur_freq ! -name scaling_cur_freq ! -name clk_rate \
            ! -name load -print0 | xargs -0 md5sum
    } | LC_ALL=C sort)
}
snap $ORIG >/tmp/orig.snap
changed() { snap $B | diff /tmp/orig.snap - | grep -c '^>'; }
pinned() { [ "$(changed)" -gt 0 ] && [ -s $STATE ]; }
restored() { [ "$(changed)" -eq 0 ] && [ ! -e $STATE ]; }
prop() { systemctl show -P "$1" jetdetect; }
# Waits up to $2 s for jetdetect.service's ActiveState to be $1.
wait_state() {
    local i=0
    while [ "$(prop ActiveState)" != "$1" ] && [ $i -lt $(($2 * 5)) ]; do sleep 0.2; i=$((i + 1)); done
    [ "$(prop ActiveState)" = "$1" ]
}

echo "@@ systemd $(systemctl --version | head -1 | cut -d' ' -f2) is PID 1 ($(cat /proc/1/comm)), checks start at $(up) s"
[ "$(cat /proc/1/comm)" = systemd ] || { fail "PID 1 is $(cat /proc/1/comm), not systemd"; finish; }

# 1. Start: ExecStartPre check, ExecStartPre=+clocks apply, then the sandboxed daemon; Type=notify
#    makes `systemctl start` return once the daemon says READY=1.
t=$(up)
if systemctl start jetdetect; then
    ok "systemctl start jetdetect: $(prop ActiveState)/$(prop SubState) in $(awk "BEGIN{print $(up)-$t}") s (Type=notify)"
else
    fail "systemctl start jetdetect failed"; journal -n 40; finish
fi
pinned && ok "the board is pinned by ExecStartPre=+clocks apply ($(changed) files changed, $STATE saved)" \
    || { fail "the board is not pinned after the start"; journal -n 30; }
pid=$(prop MainPID)
# The daemon's own view: /srv and /sys read-only, no capability to change that.
err=$(nsenter -t "$pid" -m sh -c "echo x > $B/jd-probe" 2>&1) && fail "the daemon's namespace can write $B" \
    || ok "the daemon cannot write the board: ${err##*: }"
nsenter -t "$pid" -m awk '$5 == "/sys" { print $6 }' /proc/self/mountinfo | grep -q '^ro' \
    && ok "/sys is read-only in the daemon's namespace" || fail "/sys is writable in the daemon's namespace"
if timeout 120 jetdetect watch --json --count 4 >/tmp/watch.json 2>/tmp/watch.err; then
    n=$(grep -c '"detections"' /tmp/watch.json)
    ok "jetdetect watch: $n detection messages on /run/jetdetect/detections.sock"
else
    fail "jetdetect watch: $(tail -3 /tmp/watch.err)"
fi
# The socket's readers: the group jetdetect (Group=), not everyone.
perms="$(stat -c '%U:%G %a' /run/jetdetect) $(stat -c '%U:%G %a' /run/jetdetect/detections.sock)"
[ "$perms" = "root:jetdetect 750 root:jetdetect 660" ] && ok "/run/jetdetect and the socket: $perms" \
    || fail "/run/jetdetect and the socket: $perms (want root:jetdetect 750 and 660)"
gid=$(getent group jetdetect | cut -d: -f3)
if timeout 60 setpriv --reuid=65534 --regid=65534 --groups="$gid" jetdetect watch --json --count 1 >/dev/null 2>/tmp/member.err; then
    ok "a user in the group jetdetect reads detections"
else
    fail "a user in the group jetdetect cannot read detections: $(tail -2 /tmp/member.err)"
fi
if timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups jetdetect watch --json --count 1 >/dev/null 2>&1; then
    fail "a user outside the group jetdetect reads detections"
else
    ok "a user outside the group jetdetect is refused"
fi
grep -q '"pinned":true' /tmp/watch.json && ok "the daemon's telemetry reads the clocks pinned" \
    || fail "no stats line with \"pinned\":true: $(grep -o '"telemetry":{[^}]*' /tmp/watch.json | tail -1)"
journalctl -u jetdetect --no-pager -o cat | grep -q 'applied by the service' \
    && ok "the daemon logs the profile as applied by the service" || { fail "no 'applied by the service' in the journal"; journal | grep -v 'fps, end-to-end\|/sys/devices' | head -40; }

# 2. A clean stop: ExecStopPost=+clocks restore puts back every file byte for byte.
systemctl stop jetdetect
restored && ok "systemctl stop: the board is restored byte for byte and the state file removed" \
    || { fail "after systemctl stop: $(snap $B | diff /tmp/orig.snap - | grep '^>' | head -3 | tr '\n' ' ') state: $(ls $STATE 2>&1)"; journal -n 20; }

# 3. SIGKILL: Restart=on-failure runs ExecStopPost (restore), then the start steps again.
systemctl start jetdetect || { fail "second start"; journal -n 20; finish; }
cursor=$(journalctl -u jetdetect -n 0 --show-cursor --no-pager | sed -n 's/^-- cursor: //p')
systemctl kill -s KILL --kill-who=main jetdetect
i=0; while [ "$(prop NRestarts)" -lt 1 ] && [ $i -lt 300 ]; do sleep 0.2; i=$((i + 1)); done
if [ "$(prop NRestarts)" -ge 1 ] && wait_state active 120; then
    log=$(journalctl -u jetdetect --no-pager -o cat --after-cursor="$cursor")
    if echo "$log" | grep -q '^restored [0-9]* values' && echo "$log" | grep -q "profile 'locked' applied"; then
        ok "kill -9: restored ($(echo "$log" | grep -o '^restored [0-9]* values' | head -1)), restarted and pinned again (NRestarts=$(prop NRestarts))"
    else
        fail "kill -9: no restore then apply in the journal"; echo "$log" | tail -20 | sed 's/^/@@   | /'
    fi
    pinned || fail "after the restart the board is not pinned"
else
    fail "kill -9: not restarted ($(prop ActiveState)/$(prop SubState), NRestarts=$(prop NRestarts))"; journal -n 30
fi
systemctl stop jetdetect
restored && ok "stop after the restart: restored byte for byte" || fail "stop after the restart left the board changed"

# 4. Negative control: the daemon made to hold the clocks itself, as before the split, in the
#    same sandbox. It cannot write, and with on_failure = "exit" the start fails.
mkdir -p /run/systemd/system/jetdetect.service.d
cat > /run/systemd/system/jetdetect.service.d/self.conf <<'CONF'
[Service]
ExecStartPre=
ExecStart=
ExecStart=/usr/bin/jetdetect run --config /etc/jetdetect/self.toml --clocks self
Restart=no
CONF
systemctl daemon-reload
cursor=$(journalctl -u jetdetect -n 0 --show-cursor --no-pager | sed -n 's/^-- cursor: //p')
if systemctl start jetdetect 2>/dev/null; then
    fail "the daemon holding the clocks itself started in the sandbox"
else
    log=$(journalctl -u jetdetect --no-pager -o cat --after-cursor="$cursor")
    if echo "$log" | grep -q 'Read-only file system'; then
        ok "control: the daemon pinning clocks itself inside the sandbox fails: $(echo "$log" | grep 'Read-only file system' | head -1 | cut -c1-160)"
    else
        fail "control: the start failed without 'Read-only file system'"; echo "$log" | tail -15 | sed 's/^/@@   | /'
    fi
fi
restored && ok "control: the board is as it was" || fail "control: the board changed"
rm -r /run/systemd/system/jetdetect.service.d; systemctl daemon-reload
echo "@@ checks done at $(up) s"
finish
