#!/usr/bin/env bash
# The Debian package's life on an arm64 Debian root, under qemu-user (binfmt_misc):
#
#   sudo bash tests/deb/cycle.sh dist/jetdetect_0.1.0-1_arm64.deb
#
# 1. install (apt): the files, the binary runs, the config checks clean, the group and the state
#    and cache folders with their owners and modes, the unit enabled (deb-systemd-helper);
# 2. upgrade to a version whose default config changed, the config untouched: the new default
#    replaces it without a question;
# 3. the administrator edits the config ([power] root pointing at a copy of a Jetson Nano's sysfs
#    under /srv/board); upgrade to a version whose default changed again (--force-confold, as
#    unattended upgrades answer): the edit is kept and the new default lands beside it
#    (.dpkg-dist); the unit stays enabled;
# 4. clocks pinned by hand (`jetdetect clocks apply --profile max`), then remove: prerm restores
#    the board byte for byte; the config, state and group stay; the unit is masked;
# 5. purge: every file, folder, symlink, the group and deb-systemd-helper's records are gone:
#    the root is as before the install, except dpkg's and apt's own records and logs.
#
# systemd cannot run as PID 1 in a chroot, so the unit's state is read from what
# deb-systemd-helper leaves (the enablement symlinks and its state files); starting on install
# and restarting on upgrade are debhelper's own steps (deb-systemd-invoke), which do nothing
# without a running systemd. The root (mmdebstrap, Debian bookworm arm64, with adduser; about
# 80 s) is cached in target/deb-root/. Needs root, mmdebstrap, arch-test and qemu-user-static.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT_DIR=$PWD
# --root-only: make (or find) the cached root and stop; .ci/run does it early, in the background.
root_only=0
if [ "${1:-}" = --root-only ]; then root_only=1; else deb=$(realpath "${1:?usage: tests/deb/cycle.sh PACKAGE.deb | --root-only}"); fi
say() { printf 'deb cycle: %s\n' "$*"; }
[ $root_only = 1 ] || [ -f "$deb" ] || { say "$1: no such package file (build one with cross/deb.sh)"; exit 2; }
fails=0
ok() { say "ok: $*"; }
fail() { say "FAIL: $*"; fails=$((fails + 1)); }
[ "$(id -u)" = 0 ] || { say "needs root (chroot, mounts, binfmt_misc)"; exit 2; }
for t in mmdebstrap qemu-aarch64-static dpkg-deb; do
    command -v $t >/dev/null || { say "needs $t: apt-get install mmdebstrap arch-test qemu-user-static"; exit 2; }
done

# --- aarch64 programs run through qemu-user: binfmt_misc, from qemu-user-static's own entry.
if [ "$(uname -m)" != aarch64 ]; then
    [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
        cat /usr/lib/binfmt.d/qemu-aarch64.conf >/proc/sys/fs/binfmt_misc/register
        say "registered qemu-aarch64 with binfmt_misc (/usr/lib/binfmt.d/qemu-aarch64.conf)"
    fi
fi

# --- the arm64 root.
cache=$ROOT_DIR/target/deb-root/bookworm-arm64.tar
if [ ! -s "$cache" ]; then
    mkdir -p "$(dirname "$cache")"
    t0=$(date +%s)
    # mmdebstrap picks its output format from the name: a tarball needs the .tar ending.
    mmdebstrap --quiet --arch=arm64 --variant=apt --include=adduser bookworm "${cache%.tar}.part.tar"
    mv "${cache%.tar}.part.tar" "$cache"
    say "Debian bookworm arm64 root made in $(($(date +%s) - t0)) s ($cache)"
fi
[ $root_only = 0 ] || exit 0
work=$(mktemp -d /tmp/jetdetect-deb-cycle.XXXXXX)
R=$work/root
cleanup() {
    for m in "$R/proc" "$R/dev"; do mountpoint -q "$m" && umount -l "$m"; done
    rm -rf "$work"
}
trap cleanup EXIT
mkdir "$R"
tar -C "$R" -xf "$cache"
mount -t proc proc "$R/proc"
mount --bind /dev "$R/dev"
in_root() { chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
apt_install() { in_root apt-get install -y -q -o Dpkg::Options::=--force-confold "$@" >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; return 1; }; }
in_root uname -m | grep -qx aarch64 || { say "the root does not run as aarch64"; exit 1; }

# A copy of a Jetson Nano's sysfs (JetPack 4, Ubuntu 18.04), for the clocks on removal.
cp -a tests/fixtures/jetson/nano-jp4 "$R/srv/board"

# What the root holds before: every path with its type, owner, mode and contents (md5), except
# what an install rightly changes and is not the package's: dpkg's and apt's records, logs and
# caches; /run (a tmpfs on a booted system; adduser leaves its lock file there); and the
# backups of the account files (/etc/group- and the like) that addgroup and delgroup rewrite
# on every change (/etc/group and /etc/gshadow themselves are compared).
snapshot() {
    (cd "$R" && find . -xdev \( -path ./proc -o -path ./dev -o -path ./tmp -o -path ./run -o -path ./var/lib/dpkg -o -path ./var/lib/apt \
        -o -path ./var/cache/apt -o -path ./var/cache/debconf -o -path ./var/log -o -path ./root \
        -o -path ./etc/group- -o -path ./etc/gshadow- -o -path ./etc/passwd- -o -path ./etc/shadow- \) -prune -o \
        \( -type f -printf '%p f %U:%G %m ' -exec md5sum {} \; \) -o \( -type l -printf '%p l -> %l\n' \) \
        -o -printf '%p %y %U:%G %m\n' | sed 's/  \.\/.*$//' | LC_ALL=C sort)
}
snapshot >"$work/before"

# --- the upgrade packages: the same files, a later version, a changed default config.
repack() { # VERSION STATS_INTERVAL OUT
    local d=$work/repack-$1
    dpkg-deb -R "$deb" "$d"
    sed -i "s/^Version: .*/Version: $1/" "$d/DEBIAN/control"
    sed -i "s/^stats_interval_s = .*/stats_interval_s = $2/" "$d/etc/jetdetect/jetdetect.toml"
    grep -q "^stats_interval_s = $2\$" "$d/etc/jetdetect/jetdetect.toml" || { say "repack: no stats_interval_s in the config"; exit 1; }
    (cd "$d" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | xargs -0 md5sum >DEBIAN/md5sums)
    dpkg-deb --root-owner-group -Zgzip -b "$d" "$3" >/dev/null
    rm -rf "$d"
}
v1=$(dpkg-deb -f "$deb" Version)
mkdir -p "$R/tmp/pkgs"
cp "$deb" "$R/tmp/pkgs/v1.deb"
repack 99.0.0-1 7 "$R/tmp/pkgs/v2.deb"
repack 99.0.1-1 9 "$R/tmp/pkgs/v3.deb"
version() { in_root dpkg-query -W -f '${Version}' jetdetect 2>/dev/null || true; }
conf=$R/etc/jetdetect/jetdetect.toml
wants=$R/etc/systemd/system/multi-user.target.wants/jetdetect.service

# 1. Install.
t0=$(date +%s)
apt_install /tmp/pkgs/v1.deb || { fail "apt-get install $v1"; exit 1; }
[ "$(version)" = "$v1" ] && ok "installed $v1 with apt-get in $(($(date +%s) - t0)) s" || fail "installed version: $(version)"
for f in /usr/bin/jetdetect /lib/systemd/system/jetdetect.service /etc/jetdetect/jetdetect.toml \
    /usr/share/jetdetect/models/obstacles-v8.onnx /usr/share/man/man1/jetdetect.1.gz /usr/share/man/man1/jetdetect-run.1.gz \
    /usr/share/bash-completion/completions/jetdetect /usr/share/zsh/vendor-completions/_jetdetect \
    /usr/share/fish/vendor_completions.d/jetdetect.fish /usr/share/doc/jetdetect/copyright \
    /usr/share/doc/jetdetect/changelog.Debian.gz /usr/share/doc/jetdetect/deploy.md /usr/share/lintian/overrides/jetdetect; do
    [ -e "$R$f" ] || fail "$f is not installed"
done
ok "$(in_root dpkg -L jetdetect | wc -l) paths installed, the expected ones among them"
in_root jetdetect --version | grep -q '^jetdetect ' && ok "$(in_root jetdetect --version) runs (qemu-user)" || fail "jetdetect --version"
in_root jetdetect check --config /etc/jetdetect/jetdetect.toml --quiet && ok "the installed config checks clean" \
    || fail "jetdetect check --config /etc/jetdetect/jetdetect.toml"
in_root dpkg-query -W -f '${Conffiles}' jetdetect | grep -q '^ /etc/jetdetect/jetdetect.toml ' \
    && ok "/etc/jetdetect/jetdetect.toml is a conffile" || fail "no conffile"
in_root getent group jetdetect >/dev/null && ok "group jetdetect created (gid $(in_root getent group jetdetect | cut -d: -f3))" \
    || fail "no group jetdetect"
for d in /var/lib/jetdetect /var/cache/jetdetect; do
    m=$(in_root stat -c '%U:%G %a' $d 2>&1)
    [ "$m" = "root:jetdetect 700" ] && ok "$d: $m" || fail "$d: $m (want root:jetdetect 700)"
done
case $(readlink "$wants") in /lib/systemd/system/jetdetect.service | /usr/lib/systemd/system/jetdetect.service) true ;; *) false ;; esac && ok "the unit is enabled (multi-user.target.wants)" \
    || fail "the unit is not enabled: $(ls -l "$wants" 2>&1)"

# 2. Upgrade, the config untouched: the new default replaces it.
apt_install /tmp/pkgs/v2.deb || fail "apt-get install v2"
[ "$(version)" = 99.0.0-1 ] && grep -q '^stats_interval_s = 7$' "$conf" && [ ! -e "$conf.dpkg-dist" ] \
    && ok "upgrade to 99.0.0-1: the untouched config took the new default" \
    || fail "upgrade to 99.0.0-1: version $(version), $(grep '^stats_interval_s' "$conf"), $(ls "$conf".dpkg-* 2>&1)"

# 3. The administrator's edit survives an upgrade that changes the default again.
sed -i 's|^root = "/"|root = "/srv/board"|' "$conf"
printf '# site: this robot\n' >>"$conf"
grep -q '^root = "/srv/board"$' "$conf" || { fail "could not edit [power] root"; exit 1; }
apt_install /tmp/pkgs/v3.deb || fail "apt-get install v3"
if [ "$(version)" = 99.0.1-1 ] && grep -q '^root = "/srv/board"$' "$conf" && grep -q '^# site: this robot$' "$conf" \
    && grep -q '^stats_interval_s = 7$' "$conf" && grep -q '^stats_interval_s = 9$' "$conf.dpkg-dist"; then
    ok "upgrade to 99.0.1-1: the edited config kept, the new default beside it as jetdetect.toml.dpkg-dist"
else
    fail "upgrade to 99.0.1-1: version $(version); config: $(grep -c 'srv/board\|site: this' "$conf") edits, $(ls "$conf".dpkg-* 2>&1)"
fi
[ -L "$wants" ] && ok "the unit is still enabled after the upgrades" || fail "the upgrade disabled the unit"
in_root jetdetect check --config /etc/jetdetect/jetdetect.toml --quiet || fail "the edited config does not check"

# 4. Clocks pinned, then remove: prerm restores them; config, state folders and group stay.
snap_board() { (cd "$R/srv/board" && find . -type f ! -name cur_freq ! -name scaling_cur_freq ! -name load -print0 | xargs -0 md5sum | LC_ALL=C sort); }
snap_board >"$work/board.before"
in_root jetdetect clocks apply --config /etc/jetdetect/jetdetect.toml --profile max >/dev/null
n=$(snap_board | diff "$work/board.before" - | grep -c '^>' || true)
[ "$n" -gt 0 ] && [ -s "$R/var/lib/jetdetect/clocks.state" ] && ok "clocks pinned by hand: $n files changed, state saved" \
    || fail "clocks apply changed $n files"
in_root apt-get remove -y -q jetdetect >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt-get remove"; }
snap_board | diff -q "$work/board.before" - >/dev/null && [ ! -e "$R/var/lib/jetdetect/clocks.state" ] \
    && ok "remove: prerm restored the board byte for byte (state file gone)" \
    || fail "remove: the board is not restored: $(snap_board | diff "$work/board.before" - | head -3 | tr '\n' ' ')"
[ ! -e "$R/usr/bin/jetdetect" ] && [ ! -e "$R/lib/systemd/system/jetdetect.service" ] && ok "remove: the program and the unit are gone" \
    || fail "remove left the program or the unit"
[ -e "$conf" ] && [ -d "$R/var/lib/jetdetect" ] && in_root getent group jetdetect >/dev/null \
    && ok "remove: config, state folder and group kept (dpkg state: $(in_root dpkg-query -W -f '${db:Status-Abbrev}' jetdetect))" \
    || fail "remove took the config, the state folder or the group"
[ "$(readlink "$R/etc/systemd/system/jetdetect.service")" = /dev/null ] && ok "remove: the unit is masked (deb-systemd-helper)" \
    || fail "remove: the unit is not masked: $(ls -l "$R/etc/systemd/system/jetdetect.service" 2>&1)"

# 5. Purge: nothing is left.
in_root apt-get purge -y -q jetdetect >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt-get purge"; }
in_root dpkg-query -W jetdetect >/dev/null 2>&1 && fail "purge: dpkg still knows jetdetect" || ok "purge: dpkg no longer knows jetdetect"
snapshot >"$work/after"
if diff "$work/before" "$work/after" >"$work/diff"; then
    ok "purge: the root is as before the install ($(wc -l <"$work/before") paths compared): no file, folder, link or group left"
else
    fail "purge left changes behind:"; sed 's/^/    /' "$work/diff" | head -30
fi

[ $fails -eq 0 ] && { say "PASS ($deb)"; exit 0; }
say "FAILED: $fails checks ($deb)"
exit 1
