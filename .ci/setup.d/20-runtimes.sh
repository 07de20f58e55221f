#!/usr/bin/env bash
# Container runtimes for the agent's runtime tests (test/agent/): docker (daemon started here when none
# answers), runc, podman when it installs, and the tiny busybox test image (scripts/build-test-image.sh).
# Idempotent: a second run installs nothing new, keeps a running daemon and rebuilds nothing.
#
# What this script adds to the machine (read by .ci/clean-machine, which removes it all again):
# ci-apt: docker.io runc podman busybox-static
# ci-daemon: dockerd containerd containerd-shim-runc-v2 conmon
# ci-path: /var/cache/berth-test /run/berth-test /tmp/berth-dockerd.*.log
# ci-path: /var/lib/docker /var/lib/containerd /run/docker /run/docker.sock /run/containerd /etc/docker
# ci-path: /var/lib/containers /run/containers /run/libpod /var/lib/cni
set -euo pipefail
cd "$(dirname "$0")/../.."
source .ci/lib.sh
export DEBIAN_FRONTEND=noninteractive
STATE=/run/berth-test
mkdir -p "$STATE"

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v runc >/dev/null || need+=(runc)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  step "20-runtimes: apt-get install ${need[*]}" quietly apt-get install -y -qq "${need[@]}"
else
  echo "20-runtimes: docker.io, runc, busybox-static already installed"
fi
if ! command -v podman >/dev/null; then
  step "20-runtimes: apt-get install podman" quietly apt-get install -y -qq podman ||
    echo "20-runtimes: podman did not install; podman tests will skip"
else
  echo "20-runtimes: podman already installed"
fi

# The daemon: keep one that answers; otherwise start our own (no systemd here) and remember its pid so
# teardown stops only the one we started.
start_dockerd() {
  local log
  log=$(mktemp /tmp/berth-dockerd.XXXXXX.log)
  echo "20-runtimes: starting dockerd --iptables=false --bridge=none --ip-masq=false (log $log)"
  setsid nohup dockerd --iptables=false --bridge=none --ip-masq=false >"$log" 2>&1 </dev/null &
  echo $! >"$STATE/dockerd.pid"
  local deadline=$((SECONDS + 30))
  until timeout 5 docker version >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      echo "20-runtimes: dockerd did not answer within 30 s; its log:" >&2
      tail -30 "$log" >&2
      return 1
    fi
    sleep 0.2
  done
}
if timeout 5 docker version >/dev/null 2>&1; then
  echo "20-runtimes: a docker daemon already answers"
else
  step "20-runtimes: dockerd ready" start_dockerd
fi

step "20-runtimes: test image" bash scripts/build-test-image.sh
