#!/usr/bin/env bash
# The process runtime's sandbox: bubblewrap (bwrap), which the agent finds on PATH (or at $BERTH_BWRAP).
# setpriv (util-linux, always installed on Debian) switches a sandbox to the container's own uid.
# Idempotent: installs nothing when bwrap is already there.
#
# What this script adds to the machine (read by .ci/clean-machine):
# ci-apt: bubblewrap
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
t0=$(date +%s%N)
if ! command -v bwrap >/dev/null; then
  echo "25-sandbox: apt-get install bubblewrap"
  apt-get install -y -qq bubblewrap >/dev/null
else
  echo "25-sandbox: bubblewrap already installed"
fi
# The sandbox must really work here (namespaces allowed): the agent refuses image-less containers otherwise.
bwrap --unshare-pid --unshare-net --ro-bind / / --proc /proc --dev /dev -- /bin/true
echo "25-sandbox: $(bwrap --version) works ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
