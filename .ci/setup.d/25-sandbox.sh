#!/usr/bin/env bash
# The process runtime's sandbox: bubblewrap (bwrap), which the agent finds on PATH (or at --bwrap /
# $BERTH_BWRAP). setpriv (util-linux, always installed on Debian) switches a sandbox to the container's
# own uid. Idempotent: installs nothing when bwrap is already there.
#
# What this script adds to the machine (read by .ci/clean-machine):
# ci-apt: bubblewrap
# ci-path:
set -euo pipefail
cd "$(dirname "$0")/../.."
source .ci/lib.sh
export DEBIAN_FRONTEND=noninteractive
if ! command -v bwrap >/dev/null; then
  step "25-sandbox: apt-get install bubblewrap" quietly apt-get install -y -qq bubblewrap
else
  echo "25-sandbox: bubblewrap already installed"
fi
# The sandbox must really work here (namespaces allowed): the agent refuses image-less containers otherwise.
step "25-sandbox: $(bwrap --version) works" \
  bwrap --unshare-pid --unshare-net --ro-bind / / --proc /proc --dev /dev -- /bin/true
