# The guest the runtime tests boot: Debian 12 minbase, runc, bubblewrap (the process runtime's sandbox),
# docker.io, the host's node, cgroup v2 only, no systemd. Its init (guest-init.sh) runs /mnt/data/run from
# a second disk and powers off.
PACKAGES="runc iproute2 bubblewrap"
# docker.io and what it needs beyond minbase, unpacked without dpkg: installing them with debootstrap took
# ~90 s more (their maintainer scripts only add a group and services, which this guest has no use for).
# dockerd runs with --iptables=false --bridge=none, so iptables is left out.
EXTRACT="docker.io containerd tini libdevmapper1.02.1"
# Commands that must answer --version in the finished root (missing libraries show here, not in a test).
CHECK="dockerd containerd runc bwrap"
# Loaded by the initramfs (with their dependencies): the root disk, and overlay for runc's and docker's
# root filesystems.
MODULES="crc32c_generic virtio_pci virtio_blk ext4 overlay"
INIT=/sbin/berth-guest-init
COPY_NODE=1
ROOT_SIZE=1500M
