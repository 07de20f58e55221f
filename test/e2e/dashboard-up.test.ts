// `berth up` end to end with the dashboard and cost: the sign-in link it prints opens the dashboard in a
// real browser, a container submitted with the CLI shows its log live there, and `berth show`, `berth cost`
// and /metrics report what it cost. Real processes: berth up, its PostgreSQL, a local instance's agent.
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { Browser } from 'playwright-core';
import { launchBrowser, missingBrowser } from '../helpers/browser.js';
import { assertBuilt, berth, berthDaemon, killProcessesMentioning, testHome, until } from '../helpers/cli.js';
import { itIf } from '../helpers/needs.js';

const it = itIf(missingBrowser);

let home: string;
let env: NodeJS.ProcessEnv;
let daemon: ReturnType<typeof berthDaemon> | null = null;
let browser: Browser | null = null;

beforeAll(() => {
  assertBuilt();
  ({ home, env } = testHome('berth-dash-up-'));
});

afterAll(async () => {
  await browser?.close();
  await daemon?.stop('SIGKILL');
  killProcessesMentioning(home);
  rmSync(home, { recursive: true, force: true });
});

describe('berth up with the dashboard', () => {
  it(
    'prints a sign-in link; the dashboard shows a running container’s log; show, cost and metrics price it',
    { timeout: 240_000 },
    async () => {
      daemon = berthDaemon(['up', '--listen', '127.0.0.1:0'], env);
      const link = await until(
        () => /sign in to the dashboard: (http:\S+\/dashboard\/signin\?code=\S+)/.exec(daemon!.output())?.[1],
        120_000,
        'the sign-in link',
      );
      const base = new URL(link).origin;
      expect(daemon.output()).toContain(`dashboard: ${base}/dashboard`);

      const sub = berth(
        [
          'submit',
          '--name',
          'e2e-logger',
          '--label',
          'team=e2e',
          '--cpus',
          '0.5',
          '--ram',
          '128MiB',
          '--',
          'sh',
          '-c',
          'for i in 1 2 3 4 5 6 7 8; do echo "line $i"; sleep 1; done',
        ],
        env,
      );
      expect(sub.code, sub.stderr).toBe(0);
      const id = sub.stdout.trim();
      const bad = berth(['submit', '--label', 'berth-type=x', '--', 'true'], env);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('labels.berth-type: the prefix "berth-" is reserved');

      browser = await launchBrowser();
      const page = await browser.newPage();
      await page.goto(link);
      await page.waitForURL(`${base}/dashboard`);
      await page.goto(`${base}/dashboard/requests/${id}`);
      const logShows = (text: string) =>
        page.waitForFunction(
          (t) =>
            (
              globalThis as unknown as { document: { getElementById(id: string): { textContent: string } } }
            ).document
              .getElementById('log')
              .textContent.includes(t),
          text,
          { timeout: 120_000 },
        );
      await logShows('line 2');
      await logShows('line 7');
      await logShows('exit code 0');
      // The link was for one use.
      expect((await fetch(link, { redirect: 'manual' })).status).toBe(401);

      const show = berth(['show', id], env);
      expect(show.code, show.stderr).toBe(0);
      expect(show.stdout).toMatch(/labels: team=e2e/);
      expect(show.stdout).toMatch(/^ {2}cost: \d+\.\d+ \(all attempts/m);
      expect(show.stdout).toMatch(
        /cost: \d+\.\d+ \(\d+\.\d+ running: \d+% of a small at 0\.0200\/h for \d+s/,
      );
      const cost = berth(['cost', '--json', '--by', 'label:team'], env);
      expect(cost.code, cost.stderr).toBe(0);
      const s = JSON.parse(cost.stdout);
      expect(s.groups.map((g: { key: string }) => g.key)).toEqual(['e2e']);
      expect(s.groups[0].cost).toBeGreaterThan(0);
      expect(Math.abs(s.total + s.instances.unattributed - s.instances.cost)).toBeLessThan(0.005);
      const table = berth(['cost', '--since', 'today'], env);
      expect(table.stdout).toMatch(/^admin +\d/m);
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(metrics).toMatch(/^berth_spend_total\{type="small"\} \d/m);
      const again = berth(['dashboard'], env);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout.trim()).toMatch(new RegExp(`^${base}/dashboard/signin\\?code=[\\w-]{32}$`));

      expect(await daemon.stop('SIGINT')).toBe(0);
    },
  );
});
