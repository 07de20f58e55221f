#!/usr/bin/env bash
# The cgroup v2 guest the runtime tests boot under QEMU (test/guest/): QEMU and the tools that build the
# guest, then scripts/guest/build.sh test (Debian's 6.1 kernel, a busybox initramfs, a Debian 12 root with
# runc, docker.io and this machine's node), cached in /var/cache/berth-test/guest/test/.
# Needs the busybox-static package from 20-runtimes.sh. Idempotent: installs nothing twice, rebuilds the
# guest only when its inputs changed. Prints each step's time.
set -euo pipefail
cd "$(dirname "$0")/../.."
export DEBIAN_FRONTEND=noninteractive
t0=$SECONDS

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v cpio >/dev/null || need+=(cpio)
command -v depmod >/dev/null || need+=(kmod)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v setpriv >/dev/null || need+=(util-linux)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  echo "40-guest: apt-get install ${need[*]}"
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  echo "40-guest: installed in $((SECONDS - t0)) s"
fi

bash scripts/guest/build.sh test >/dev/null
echo "40-guest: done in $((SECONDS - t0)) s"
