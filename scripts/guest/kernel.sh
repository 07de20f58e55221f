#!/usr/bin/env bash
# Debian's 6.1 kernel for the guest, without installing it on the host: `apt-get download` of the package
# linux-image-amd64 points to, then `dpkg-deb -x`. Cached as $GUEST_CACHE/kernel-<package>/ (vmlinuz,
# lib/modules/<version>/). Prints that directory on its last line.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need_cmds apt-get apt-cache dpkg-deb

pkg=${BERTH_GUEST_KERNEL_PACKAGE:-$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')}
[ -n "$pkg" ] || die "no linux-image-amd64 in the apt lists (apt-get update?)"
dir=$GUEST_CACHE/kernel-$pkg
if [ ! -f "$dir/vmlinuz" ]; then
  mkdir -p "$GUEST_CACHE"
  tmp=$(mktemp -d "$GUEST_CACHE/.kernel.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  step "download $pkg" bash -c "cd '$tmp' && apt-get download -qq -o APT::Sandbox::User=root '$pkg'"
  step "extract $pkg" dpkg-deb -x "$tmp"/"$pkg"_*.deb "$tmp/x"
  mkdir -p "$tmp/out/lib"
  mv "$tmp"/x/boot/vmlinuz-* "$tmp/out/vmlinuz"
  mv "$tmp/x/lib/modules" "$tmp/out/lib/modules"
  # The package's postinst would index the modules; modprobe -d needs that index.
  depmod -b "$tmp/out" "$(ls "$tmp/out/lib/modules")"
  rm -rf "$dir"
  mv "$tmp/out" "$dir"
else
  echo "guest: kernel $pkg cached in $dir" >&2
fi
echo "$dir"
