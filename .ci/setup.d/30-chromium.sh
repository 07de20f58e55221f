#!/usr/bin/env bash
# A browser for the dashboard's tests (test/web/): Debian's chromium, driven by playwright-core (an npm
# dev dependency) with executablePath /usr/bin/chromium. Never `playwright install`: it downloads a browser
# from a CDN this machine cannot reach. Idempotent: a second run installs nothing.
#
# What this script adds to the machine (read by .ci/clean-machine, which removes it all again):
# ci-apt: chromium
# ci-daemon:
# ci-path:
set -euo pipefail
cd "$(dirname "$0")/../.."
source .ci/lib.sh
export DEBIAN_FRONTEND=noninteractive

# Without recommends (a desktop's worth of packages); its fonts come through fontconfig's dependencies.
if [ ! -x /usr/bin/chromium ]; then
  step "30-chromium: apt-get install chromium" quietly apt-get install -y -qq --no-install-recommends chromium
else
  echo "30-chromium: chromium already installed"
fi
echo "30-chromium: $(/usr/bin/chromium --version 2>/dev/null | head -1)"
