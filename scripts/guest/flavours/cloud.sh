# A guest shaped like a cloud VM image: systemd as PID 1 (which mounts cgroup v2) and Debian's cloud-init,
# for booting EC2-style UserData (from a NoCloud seed disk) under QEMU. Built by `build.sh cloud`.
# python3-cffi-backend: debootstrap does not resolve virtual packages, and python3-cryptography (for
# cloud-init) depends on the virtual python3-cffi-backend-api-* it provides.
PACKAGES="systemd-sysv cloud-init python3-cffi-backend ifupdown isc-dhcp-client netbase iproute2 ca-certificates runc udev"
MODULES="crc32c_generic virtio_pci virtio_blk ext4 overlay virtio_net isofs"
INIT=/sbin/init
COPY_NODE=1
ROOT_SIZE=2G
ROOT_MODULES=all # systemd-udevd loads what the devices need
