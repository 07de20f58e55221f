// The browser the dashboard's tests and `npm run docs:screenshots` drive: Debian's chromium
// (.ci/setup.d/30-chromium.sh) through playwright-core, with the launch arguments that work on our
// machines (../shared/ENVIRONMENT.md). Never `playwright install`: it downloads a browser.
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** Why no browser can run here, or null. */
export const missingBrowser = existsSync(CHROMIUM)
  ? null
  : `no browser at ${CHROMIUM} (apt-get install chromium; .ci/setup.d/30-chromium.sh)`;

export function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
