import type { Browser } from 'playwright-core';

export declare const CHROMIUM: string;
/** Why no browser can run here, or null. */
export declare const missingBrowser: string | null;
export declare function launchBrowser(): Promise<Browser>;
