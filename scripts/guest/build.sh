#!/usr/bin/env bash
# Builds a QEMU guest: Debian's 6.1 kernel, a busybox initramfs, and an ext4 root filesystem image.
#
#   scripts/guest/build.sh [FLAVOUR]     FLAVOUR = test (default) or cloud (scripts/guest/flavours/*.sh)
#
# Output, cached in $GUEST_CACHE/FLAVOUR/ (default /var/cache/berth-test/guest/test/):
#   vmlinuz, initrd.img, rootfs.img (raw ext4), build.json (what was built, from which inputs, how long)
# The last line printed is that directory. A second run with the same inputs (these scripts, the flavour,
# the kernel package, the node binary) rebuilds nothing. Boot it with -snapshot (or a qcow2 overlay) so
# the cached image is never written to:
#   qemu-system-x86_64 -accel tcg -machine q35 -m 1024 -smp 2 -nographic -no-reboot -snapshot \
#     -kernel vmlinuz -initrd initrd.img -drive file=rootfs.img,format=raw,if=virtio \
#     -append "console=ttyS0 panic=-1 root=/dev/vda init=$INIT"
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
flavour=${1:-test}
[ -f "$GUEST_SCRIPTS/flavours/$flavour.sh" ] || die "no flavour $flavour (scripts/guest/flavours/)"
PACKAGES= EXTRACT= CHECK= MODULES= INIT=/sbin/init COPY_NODE=0 ROOT_SIZE=1G ROOT_MODULES=
# shellcheck source=/dev/null
. "$GUEST_SCRIPTS/flavours/$flavour.sh"
need_cmds debootstrap mkfs.ext4 cpio modprobe depmod gzip sha256sum
BUSYBOX=${BUSYBOX:-/bin/busybox}
[ -x "$BUSYBOX" ] || die "$BUSYBOX missing (apt-get install busybox-static)"
start=$SECONDS

kernel=$(bash "$GUEST_SCRIPTS/kernel.sh" | tail -1)
kver=$(ls "$kernel/lib/modules")
node_bin=$(command -v node || true)
[ "$COPY_NODE" = 0 ] || [ -n "$node_bin" ] || die "node not found on PATH (the guest gets a copy of the host's)"

# The cache key: everything the image is made of.
key=$(
  {
    cat "$GUEST_SCRIPTS"/{lib.sh,kernel.sh,build.sh,initramfs-init.sh,guest-init.sh} "$GUEST_SCRIPTS/flavours/$flavour.sh"
    # shellcheck disable=SC2086
    [ -z "$EXTRACT" ] || apt-cache policy $EXTRACT | grep Candidate
    echo "$kernel"
    [ "$COPY_NODE" = 0 ] || "$node_bin" --version
  } | sha256sum | cut -c1-16
)
out=$GUEST_CACHE/$flavour
if [ -f "$out/build.json" ] && grep -q "\"key\": \"$key\"" "$out/build.json" &&
  [ -f "$out/rootfs.img" ] && [ -f "$out/initrd.img" ] && [ -f "$out/vmlinuz" ]; then
  echo "guest: $flavour guest cached in $out (key $key)" >&2
  echo "$out"
  exit 0
fi

mkdir -p "$GUEST_CACHE"
tmp=$(mktemp -d "$GUEST_CACHE/.build-$flavour.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

build_initramfs() {
  local d=$tmp/initramfs
  mkdir -p "$d"/{bin,proc,sys,dev,newroot}
  cp "$BUSYBOX" "$d/bin/busybox"
  for applet in sh mount umount modprobe insmod switch_root sleep cat mkdir echo; do ln -s busybox "$d/bin/$applet"; done
  # shellcheck disable=SC2086
  copy_modules "$kernel" "$kver" "$d" $MODULES >"$d/modules.load"
  install -m 755 "$GUEST_SCRIPTS/initramfs-init.sh" "$d/init"
  (cd "$d" && find . | cpio -o -H newc --quiet | gzip -1) >"$tmp/initrd.img"
}

build_rootfs() {
  local r=$tmp/root mirror
  mirror=$(debian_mirror)
  mkdir -p "$GUEST_CACHE/debs"
  echo "guest: debootstrap --variant=minbase --include=${PACKAGES// /,} bookworm from $mirror" >&2
  # A clean environment: the caller's (PYTHON*, PIP_*, a PATH into pyenv...) would reach the packages'
  # maintainer scripts in the chroot.
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    debootstrap --variant=minbase --cache-dir="$GUEST_CACHE/debs" ${PACKAGES:+--include="${PACKAGES// /,}"} \
    bookworm "$r" "$mirror" >"$tmp/debootstrap.log" 2>&1 || {
    tail -30 "$tmp/debootstrap.log" >&2
    [ -f "$r/debootstrap/debootstrap.log" ] && tail -30 "$r/debootstrap/debootstrap.log" >&2
    die "debootstrap failed"
  }
  if [ -n "$EXTRACT" ]; then
    # Unpacked without dpkg (no maintainer scripts: they would only add users and services), from the
    # host's apt lists, which are the same bookworm.
    mkdir -p "$tmp/extract"
    # shellcheck disable=SC2086
    (cd "$tmp/extract" && apt-get download -qq -o APT::Sandbox::User=root $EXTRACT)
    local deb
    # Through tar --keep-directory-symlink: the root's /lib, /bin, /sbin are symlinks into /usr (merged
    # /usr), which a plain extraction of a package's ./lib/ would replace with a directory.
    for deb in "$tmp"/extract/*.deb; do dpkg-deb --fsys-tarfile "$deb" | tar -C "$r" -x --keep-directory-symlink; done
  fi
  local cmd
  for cmd in $CHECK; do chroot "$r" "$cmd" --version >/dev/null || die "$cmd does not run in the guest root"; done
  rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*
  install -m 755 "$GUEST_SCRIPTS/guest-init.sh" "$r/sbin/berth-guest-init"
  if [ "$ROOT_MODULES" = all ]; then
    mkdir -p "$r/lib/modules"
    cp -a "$kernel/lib/modules/$kver" "$r/lib/modules/"
  fi
  if [ "$COPY_NODE" != 0 ]; then
    install -m 755 "$node_bin" "$r/usr/local/bin/node"
    # Its shared libraries, where the root does not have them already (minbase has libc and libstdc++).
    local lib
    for lib in $(ldd "$node_bin" | awk '/=> \// {print $3} /^\t\// {print $1}'); do
      [ -e "$r$lib" ] || { mkdir -p "$r$(dirname "$lib")" && cp -L "$lib" "$r$lib"; }
    done
    chroot "$r" /usr/local/bin/node --version >/dev/null || die "node does not run in the guest root"
  fi
  echo "berth-guest" >"$r/etc/hostname"
}

step "initramfs ($MODULES)" build_initramfs
step "root filesystem" build_rootfs
step "ext4 image ($ROOT_SIZE)" mkfs.ext4 -q -F -L berth-root -d "$tmp/root" "$tmp/rootfs.img" "$ROOT_SIZE" >&2
cp "$kernel/vmlinuz" "$tmp/vmlinuz"
cat >"$tmp/build.json" <<JSON
{
  "flavour": "$flavour",
  "key": "$key",
  "kernel": "$kver",
  "packages": "$PACKAGES",
  "init": "$INIT",
  "built": "$(date -u +%FT%TZ)",
  "seconds": $((SECONDS - start))
}
JSON
rm -rf "$tmp/root" "$tmp/initramfs" "$out"
mkdir -p "$out"
mv "$tmp"/{vmlinuz,initrd.img,rootfs.img,build.json} "$out/"
echo "guest: $flavour guest built in $((SECONDS - start)) s: $out ($(du -sh --apparent-size "$out/rootfs.img" | cut -f1) root image)" >&2
echo "$out"
