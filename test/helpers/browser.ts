// A real browser for the dashboard's tests: the one scripts/chromium.mjs launches (Debian's chromium).
export { CHROMIUM, launchBrowser, missingBrowser } from '../../scripts/chromium.mjs';
