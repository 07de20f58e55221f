#!/usr/bin/env bash
# The distribution's PostgreSQL (Debian 12: postgresql 15) for the scale-out test (test/e2e/scale-out.test.ts:
# two API servers and two dispatchers on one external PostgreSQL, issue 12), so that it runs on the engine
# users already run rather than the npm binaries the other tests use. Debian's postgresql package comes with
# the machine image (installed with libpq-dev when the image was built), so this only checks it, as
# 30-ec2-emulator.sh does for moto; clean-machine must leave it. Nothing is started here: the test starts a
# private server of its own (initdb and postgres from /usr/lib/postgresql/N/bin) in a temp dir and stops it,
# as the SLURM tests do with their cluster; the package's own cluster (15/main) is not used.
# ci-apt:
# ci-daemon:
# ci-path:
set -euo pipefail
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$bin" ] || [ ! -x "$bin/postgres" ] || [ ! -x "$bin/initdb" ]; then
  echo "30-postgresql: no /usr/lib/postgresql/N/bin/postgres: the scale-out test needs Debian's postgresql package" >&2
  exit 1
fi
echo "30-postgresql: $("$bin/postgres" --version) in $bin"
