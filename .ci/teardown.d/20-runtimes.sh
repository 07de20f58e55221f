#!/usr/bin/env bash
# Stops the dockerd that .ci/setup.d/20-runtimes.sh started (and only that one).
set -uo pipefail
pidfile=/run/berth-test/dockerd.pid
[ -f "$pidfile" ] || exit 0
pid=$(cat "$pidfile")
if kill -0 "$pid" 2>/dev/null; then
  kill -TERM "$pid"
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
fi
rm -f "$pidfile"
