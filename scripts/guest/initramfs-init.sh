#!/bin/sh
# /init of the guest's busybox initramfs: loads the modules the root disk needs (virtio, ext4; the list is
# /modules.load), mounts root= and switch_roots into init= (both from the kernel command line).
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules.load); do modprobe "$m" || echo "initramfs: cannot load $m"; done
root=/dev/vda
init=/sbin/init
for arg in $(cat /proc/cmdline); do
  case $arg in
    root=*) root=${arg#root=} ;;
    init=*) init=${arg#init=} ;;
  esac
done
i=0
while [ ! -b "$root" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
mkdir -p /newroot
if ! mount -t ext4 -o rw "$root" /newroot; then
  echo "initramfs: cannot mount $root; powering off"
  echo o >/proc/sysrq-trigger
fi
mount --move /dev /newroot/dev
umount /sys /proc
exec switch_root /newroot "$init"
