#!/usr/bin/env bash
# SLURM 22.05 for the slurm backend's tests (test/backends/slurm/) and `npm run bench -- vs-slurm`:
# slurmctld, slurmd, the client commands and munge. Nothing is started here: each test starts its own
# private cluster (munged, slurmctld and several slurmd) in a temp dir on free ports and stops it after
# (bench/slurm-cluster.ts), so no daemon outlives the tests. Idempotent: installs only what is missing.
#
# What this script adds to the machine (read by .ci/clean-machine, which removes it all again; the daemons
# are the tests' own, listed so that one a killed test left behind is stopped too):
# ci-apt: slurmctld slurmd slurm-client munge
# ci-daemon: slurmctld slurmd munged
# ci-path: /etc/munge /var/lib/munge /var/log/munge /etc/slurm /var/lib/slurm /var/log/slurm
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
t0=$(date +%s)
need=()
for p in slurmctld slurmd slurm-client munge; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "30-slurm: apt-get install ${need[*]}"
  apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "30-slurm: slurmctld slurmd slurm-client munge already installed"
fi
# The package creates the key on install; a machine where it was removed gets a new one.
if [ ! -s /etc/munge/munge.key ]; then
  echo "30-slurm: creating /etc/munge/munge.key"
  mungekey --create --force 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null
  chown munge: /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
fi
echo "30-slurm: done in $(($(date +%s) - t0)) s ($(slurmctld -V 2>/dev/null || echo 'slurmctld ?'))"
