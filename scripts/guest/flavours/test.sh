# The guest the runtime tests boot: Debian 12 minbase, runc, bubblewrap (the process runtime's sandbox),
# docker.io, the host's node, cgroup v2 only, no systemd. Its init (guest-init.sh) runs /mnt/data/run from
# a second disk and powers off.
PACKAGES="runc iproute2 bubblewrap"
# docker.io and what it needs beyond minbase, unpacked without dpkg: installing them with debootstrap took
# ~90 s more (their maintainer scripts only add a group and services, which this guest has no use for).
# dockerd runs with --iptables=false --bridge=none, so iptables is left out.
# criu (Debian's 3.17.1, which passes `criu check` on this 6.1 kernel, unlike on the 6.18 host) and the
# libraries minbase lacks; its python3 tools (crit) are not needed.
EXTRACT="docker.io containerd tini libdevmapper1.02.1 criu libbsd0 libmd0 libnet1 libnftables1 libnl-3-200 libprotobuf-c1 libmnl0 libnftnl11 libxtables12 libjansson4"
# Commands that must answer --version in the finished root (missing libraries show here, not in a test).
CHECK="dockerd containerd runc bwrap criu"
# Loaded by the initramfs (with their dependencies): the root disk, and overlay for runc's and docker's
# root filesystems; and what `criu check` probes: netfilter netlink and nf_tables, the socket diag modules,
# tun and veth; and virtio_net, for the guest that reaches an API on the host (QEMU's user network:
# guest-init.sh configures eth0 when the host gives it one).
MODULES="crc32c_generic virtio_pci virtio_blk ext4 overlay nfnetlink nf_tables unix_diag inet_diag tcp_diag udp_diag netlink_diag af_packet_diag tun veth virtio_net"
INIT=/sbin/berth-guest-init
COPY_NODE=1
ROOT_SIZE=1500M
