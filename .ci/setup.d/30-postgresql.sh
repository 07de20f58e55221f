#!/usr/bin/env bash
# The distribution's PostgreSQL (Debian 12: postgresql 15) for the scale-out test (test/e2e/scale-out.test.ts:
# two API servers and two dispatchers on one external PostgreSQL, issue 12), so that it runs on the engine
# users already run rather than the npm binaries the other tests use. Debian's postgresql package comes with
# the machine image (installed with libpq-dev when the image was built); on a machine without it this
# installs it. Nothing is started here: the test starts a private server of its own (initdb and postgres from
# /usr/lib/postgresql/N/bin) in a temp dir and stops it, as the SLURM tests do with their cluster; the
# package's own cluster (15/main) is not used, and Debian's postinst cannot start it here (no systemd).
# Not declared below on purpose: clean-machine must not purge a package the machine image ships.
# ci-apt:
# ci-daemon:
# ci-path:
set -euo pipefail
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
binDir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true; }
bin=$(binDir)
if [ -z "$bin" ] || [ ! -x "$bin/postgres" ] || [ ! -x "$bin/initdb" ]; then
  echo "30-postgresql: apt-get install postgresql"
  apt-get install -y -qq postgresql >/dev/null
  bin=$(binDir)
fi
if [ -z "$bin" ] || [ ! -x "$bin/postgres" ] || [ ! -x "$bin/initdb" ]; then
  echo "30-postgresql: no /usr/lib/postgresql/N/bin/postgres after installing postgresql" >&2
  exit 1
fi
echo "30-postgresql: $("$bin/postgres" --version) in $bin, ready in $((SECONDS - start)) s"
