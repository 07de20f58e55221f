#!/usr/bin/env bash
# With BERTH_CLOUD_INIT_TEST=1 (the test is opt-in, see its header): the `cloud` QEMU guest (Debian 12,
# systemd, cloud-init) of test/cloud/ec2-cloud-init.test.ts, built by
# scripts/guest/build.sh (the guest tooling of the cgroup v2 work; cached by its inputs, so a second run
# builds nothing), and genisoimage for the test's NoCloud seed disk. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
if [ "${BERTH_CLOUD_INIT_TEST:-0}" != 1 ]; then
  echo "45-guest-cloud: BERTH_CLOUD_INIT_TEST is not 1: no cloud guest (test/cloud/ec2-cloud-init.test.ts is opt-in)"
  exit 0
fi
if [ ! -f scripts/guest/build.sh ]; then
  echo "45-guest-cloud: scripts/guest/build.sh is not in this tree: no cloud guest (its test will say so)"
  exit 0
fi
need=()
command -v genisoimage >/dev/null || need+=(genisoimage)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
if [ ${#need[@]} -gt 0 ]; then
  echo "45-guest-cloud: apt-get install ${need[*]}"
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
bash scripts/guest/build.sh cloud | tail -1
echo "45-guest-cloud: ready in $((SECONDS - start)) s"
