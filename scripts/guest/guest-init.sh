#!/bin/sh
# PID 1 of the `test` guest (installed as /sbin/berth-guest-init): mounts what a Linux system without
# systemd needs, with cgroup v2 at /sys/fs/cgroup as Debian 12, Ubuntu 22.04+ and Amazon Linux 2023 mount
# it; runs /mnt/data/run from the second disk (put there by the host), and powers off. Everything goes to
# the serial console, which the host reads.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /mnt/data
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
hostname berth-guest
ip link set lo up 2>/dev/null
# A NIC on QEMU's user network (-nic user): its fixed addresses, no DHCP; the host's loopback is 10.0.2.2.
if [ -e /sys/class/net/eth0 ]; then
  ip addr add 10.0.2.15/24 dev eth0 && ip link set eth0 up && ip route add default via 10.0.2.2
fi
echo "berth-guest: up at $(cut -d' ' -f1 /proc/uptime) s, kernel $(uname -r), cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
if mount -t ext4 -o ro /dev/vdb /mnt/data 2>/dev/null && [ -x /mnt/data/run ]; then
  /mnt/data/run
  echo "berth-guest: run exited $? at $(cut -d' ' -f1 /proc/uptime) s"
else
  echo "berth-guest: no /dev/vdb with an executable run script"
fi
sync
echo o >/proc/sysrq-trigger
sleep 10
