# The guest the runtime tests boot: Debian 12 minbase, runc, the host's node, cgroup v2 only, no systemd.
# Its init (guest-init.sh) runs /mnt/data/run from a second disk and powers off.
PACKAGES="runc iproute2 docker.io"
# Loaded by the initramfs (with their dependencies): the root disk, and overlay for runc's root filesystems.
MODULES="crc32c_generic virtio_pci virtio_blk ext4 overlay"
INIT=/sbin/berth-guest-init
COPY_NODE=1
ROOT_SIZE=1500M
