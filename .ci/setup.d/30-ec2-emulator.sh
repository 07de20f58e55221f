#!/usr/bin/env bash
# The emulated EC2 of the ec2 driver's tests (test/cloud/ec2-*.test.ts, test/e2e/up-ec2.test.ts): the tests
# start moto_server themselves on a free port and stop it. Python's moto[server] 5.x comes with the
# machine image (PyPI is not reachable; Debian 12 has no python3-moto package), so this only checks it, and
# installs iproute2 for the booted instances' network namespaces. Idempotent.
set -euo pipefail
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
command -v ip >/dev/null || { echo "30-ec2-emulator: apt-get install iproute2"; apt-get install -y -qq iproute2 >/dev/null; }
if ! command -v "${BERTH_MOTO_SERVER:-moto_server}" >/dev/null; then
  echo "30-ec2-emulator: moto_server is not on PATH: the EC2 tests need Python's moto[server] 5.x" >&2
  exit 1
fi
python3 -c 'import moto; print("30-ec2-emulator: moto", moto.__version__, "at", moto.__file__)' 2>/dev/null ||
  echo "30-ec2-emulator: $(command -v "${BERTH_MOTO_SERVER:-moto_server}") (its python3 is not the default one)"
echo "30-ec2-emulator: ready in $((SECONDS - start)) s"
