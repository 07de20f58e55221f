#!/usr/bin/env bash
# Builds the tiny busybox root filesystem the runtime tests use, without any registry:
#   $BERTH_TEST_CACHE/busybox-rootfs.tar   (default cache /var/cache/berth-test)
# and imports it as berth-test-busybox:latest into docker (and podman) when they are present.
# Idempotent: the tarball is built once (deterministically) and re-imported only when its digest changed.
set -euo pipefail
CACHE=${BERTH_TEST_CACHE:-/var/cache/berth-test}
TAR=$CACHE/busybox-rootfs.tar
IMAGE=berth-test-busybox:latest
BUSYBOX=${BUSYBOX:-/bin/busybox}

mkdir -p "$CACHE"
if [ ! -s "$TAR" ]; then
  [ -x "$BUSYBOX" ] || { echo "build-test-image: $BUSYBOX missing (apt-get install busybox-static)" >&2; exit 1; }
  dir=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  trap 'rm -rf "$dir"' EXIT
  mkdir -p "$dir"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,root,work}
  chmod 1777 "$dir/tmp"
  cp "$BUSYBOX" "$dir/bin/busybox"
  for applet in $("$BUSYBOX" --list); do
    [ -e "$dir/bin/$applet" ] || ln -s busybox "$dir/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$dir/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$dir/etc/group"
  tar -C "$dir" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$TAR.tmp" .
  mv "$TAR.tmp" "$TAR"
  echo "build-test-image: built $TAR ($(du -h "$TAR" | cut -f1))"
fi
digest=$(sha256sum "$TAR" | cut -c1-64)
echo "$digest" >"$CACHE/busybox-rootfs.tar.sha256"

import_into() { # $1 = docker|podman
  local have
  have=$("$1" image inspect --format '{{index .Config.Labels "berth.rootfs.sha256"}}' "$IMAGE" 2>/dev/null || true)
  if [ "$have" != "$digest" ]; then
    # No --quiet: docker's import has no such flag (podman's has); the image id it prints goes to /dev/null.
    "$1" import --change "LABEL berth.rootfs.sha256=$digest" --change 'CMD ["/bin/sh"]' "$TAR" "$IMAGE" >/dev/null
    echo "build-test-image: imported $IMAGE into $1"
  fi
}
if command -v docker >/dev/null && timeout 5 docker version >/dev/null 2>&1; then import_into docker; fi
if command -v podman >/dev/null; then import_into podman || echo "build-test-image: podman import failed" >&2; fi
