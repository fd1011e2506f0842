# Sourced by the test VMs (tests/vm/vivid.sh, tests/vm/systemd.sh): stages Debian's own kernel
# for one architecture, downloaded as .debs and unpacked (never installed), and copies modules
# with their dependencies into an initramfs tree. Only Debian packages are used.
#
#   vm_stage_kernel ARCH WORK   sets KVER, STAGE (the unpacked kernel + busybox-static) and
#                               VMLINUX (what -kernel boots) for ARCH = amd64 | arm64
#   vm_copy_modules ROOT MOD..  copies MOD and what it depends on under ROOT/lib/modules and
#                               appends their paths, in load order, to ROOT/etc/modules.list

vm_stage_kernel() {
    local arch=$1 work=$2 off
    mkdir -p "$work/debs"
    KVER=$(apt-cache depends "linux-image-$arch:$arch" 2>/dev/null | sed -n 's/.*Depends: linux-image-\([0-9][^ :]*\).*/\1/p' | head -1)
    [ -n "$KVER" ] || { echo "vm: cannot resolve Debian's $arch kernel version (dpkg --add-architecture $arch; apt-get update)" >&2; return 2; }
    STAGE=$work/stage-$KVER
    if [ ! -e "$STAGE/boot/vmlinuz-$KVER" ]; then
        (cd "$work/debs" && apt-get download "linux-image-$KVER:$arch" "busybox-static:$arch" >/dev/null)
        rm -rf "$STAGE"; mkdir -p "$STAGE"
        for f in "$work"/debs/linux-image-"$KVER"_*.deb "$work"/debs/busybox-static_*.deb; do dpkg -x "$f" "$STAGE"; done
        depmod -b "$STAGE" "$KVER"
    fi
    VMLINUX=$work/vmlinux-$KVER
    if [ "$arch" = arm64 ]; then
        VMLINUX=$STAGE/boot/vmlinuz-$KVER   # QEMU loads the compressed arm64 Image itself
    elif [ ! -s "$VMLINUX" ]; then  # the uncompressed ELF boots through PVH, skipping ~10 s of decompression under TCG
        off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$STAGE/boot/vmlinuz-$KVER" | head -1 | cut -d: -f1)
        tail -c +$((off + 1)) "$STAGE/boot/vmlinuz-$KVER" | xz -dc --single-stream > "$VMLINUX" 2>/dev/null || true
        [ "$(head -c4 "$VMLINUX")" = $'\x7fELF' ] || { echo "vm: kernel extraction failed" >&2; rm -f "$VMLINUX"; return 1; }
    fi
}

vm_copy_modules() {
    local root=$1 md=$STAGE/lib/modules/$KVER m p r
    shift
    mkdir -p "$root/etc"; touch "$root/etc/modules.list"
    for m in "$@"; do
        modprobe -d "$STAGE" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}' | while read -r p; do
            r=${p#"$md"/}
            grep -qxF "$r" "$root/etc/modules.list" && continue
            mkdir -p "$root/lib/modules/$(dirname "$r")"; cp "$p" "$root/lib/modules/$r"; echo "$r" >> "$root/etc/modules.list"
        done
    done
}
