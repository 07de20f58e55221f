// A real browser for the dashboard's tests: Debian's chromium (.ci/setup.d/30-chromium.sh) driven by
// playwright-core, with the launch arguments that work on our machines (../shared/ENVIRONMENT.md).
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** Why the browser tests cannot run here, or null. */
export const missingBrowser: string | null = existsSync(CHROMIUM)
  ? null
  : `no browser at ${CHROMIUM} (apt-get install chromium; .ci/setup.d/30-chromium.sh)`;

export function launchBrowser(): Promise<Browser> {
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
