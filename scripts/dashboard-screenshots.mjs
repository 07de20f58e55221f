#!/usr/bin/env node
/* global fetch, setTimeout */
// Regenerates the dashboard screenshots in docs/img/ (npm run docs:screenshots): starts `berth up` in a
// temporary BERTH_HOME with a small workload of two users (long-running jobs that log, a failing one, jobs
// that wait behind the instance cap), signs in with Debian's chromium through playwright-core, holds an
// instance with the dashboard's own button, and photographs every page. Takes about three minutes (the
// charts need a few samples). Needs `npm run build` first and /usr/bin/chromium (.ci/setup.d/30-chromium.sh).
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchBrowser } from './chromium.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'docs', 'img');
const home = mkdtempSync(join(tmpdir(), 'berth-shots-'));
chmodSync(home, 0o755); // as root, the embedded PostgreSQL runs as the postgres user, which must reach it
const config = join(home, 'dispatch.json');
writeFileSync(
  config,
  JSON.stringify({
    scheduler: { max_instances: 4, idle_timeout: '60s' },
    boot_delay: '6s',
    sync_interval: '2s',
  }),
);

const log = (s) => console.error(`screenshots: ${s}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, f, ms = 120_000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(500);
  }
}

let output = '';
const up = spawn(
  process.execPath,
  [join(ROOT, 'bin', 'berth.js'), 'up', '--listen', '127.0.0.1:0', '--config', config],
  {
    env: { ...process.env, BERTH_HOME: home, BERTH_LOG_LEVEL: 'error' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  },
);
up.stdout.on('data', (d) => (output += d));
up.stderr.on('data', (d) => (output += d));
let browser = null;

async function main() {
  const base = await until('berth up', () => /dashboard: (http:\S+)\/dashboard/.exec(output)?.[1]);
  const admin = readFileSync(join(home, 'admin-token'), 'utf8').trim();
  const api = async (token, method, path, body) => {
    const r = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
    return r.json();
  };
  const user = async (owner) => (await api(admin, 'POST', '/v1/tokens', { scope: 'user', owner })).token;
  const alice = await user('alice');
  const bob = await user('bob');
  const loop = (name, n, s, what) =>
    `for i in $(seq 1 ${n}); do echo "${name}: ${what} $i of ${n}"; sleep ${s}; done; echo "${name}: done"`;
  const submit = (token, requests) => api(token, 'POST', '/v1/requests/batch', { requests });
  const sh = (script) => ['/bin/sh', '-c', script];
  await submit(alice, [
    ...[1, 2, 3].map((i) => ({
      name: `prep-${i}`,
      command: sh(`echo "preparing sample ${i}"; sleep 6; echo ready`),
      vcpus: 0.25,
      ram: '256MiB',
      priority: 600,
      labels: { team: 'genomics', project: 'atlas' },
    })),
    ...[1, 2, 3, 4].map((i) => ({
      name: `align-${i}`,
      command: sh(loop(`align-${i}`, 200, 1, 'aligned chunk')),
      vcpus: 0.5,
      ram: '512MiB',
      labels: { team: 'genomics', project: 'atlas' },
    })),
    ...[1, 2, 3, 4, 5].map((i) => ({
      name: `variant-call-${i}`,
      command: sh('echo calling variants; sleep 120'),
      vcpus: 2,
      ram: '3GiB',
      priority: 300,
      labels: { team: 'genomics' },
    })),
  ]);
  await submit(bob, [
    ...[1, 2].map((i) => ({
      name: `report-${i}`,
      command: sh(loop(`report-${i}`, 100, 2, 'rendered page')),
      vcpus: 1,
      ram: '1GiB',
      labels: { team: 'analytics' },
    })),
    {
      name: 'flaky-import',
      command: sh('echo importing; sleep 4; echo "error: input file missing" >&2; exit 3'),
      vcpus: 0.25,
      ram: '128MiB',
      container_count_max: 2,
      priority: 700,
      labels: { team: 'analytics' },
    },
  ]);
  log(`workload submitted to ${base}`);

  browser = await launchBrowser();
  const page = await browser.newPage({ viewport: { width: 1360, height: 860 }, deviceScaleFactor: 1 });
  const shot = async (name) => {
    await page.waitForTimeout(1500);
    await page.screenshot({ path: join(OUT, `dashboard-${name}.png`), fullPage: true });
    log(`docs/img/dashboard-${name}.png`);
  };
  mkdirSync(OUT, { recursive: true });
  await page.goto(`${base}/dashboard/signin`);
  await shot('signin');
  await page.fill('#token', admin);
  await page.click('button.primary');
  await page.waitForURL(`${base}/dashboard`);

  // Running work with logs, jobs waiting behind the cap, and a few minutes of samples for the charts.
  await until(
    'work to run',
    async () => (await api(admin, 'GET', '/v1/containers?state=Running')).items.length >= 3,
  );
  await page.waitForTimeout(150_000);
  const instances = (await api(admin, 'GET', '/v1/instances')).items;
  await page.goto(`${base}/dashboard/instances`);
  page.once('dialog', (d) => d.accept());
  await page.click(`tr[id="${instances[0].id}"] button[formaction$="/hold"]`);
  await page.waitForURL(/\/dashboard\/instances/);
  await until('the hold to apply', async () =>
    (await api(admin, 'GET', '/v1/instances')).items.some((i) => i.idle_behavior === 'hold'),
  );
  await page.goto(`${base}/dashboard`);
  await page.waitForSelector('.uplot');
  await shot('overview');
  await page.goto(`${base}/dashboard/queue`);
  await shot('queue');
  await page.goto(`${base}/dashboard/instances`);
  await shot('instances');
  await page.goto(`${base}/dashboard/requests`);
  await shot('requests');
  const align = (await api(admin, 'GET', '/v1/requests?name=align-2')).items[0];
  await page.goto(`${base}/dashboard/requests/${align.id}`);
  await page.waitForSelector('#log span:not(.dim)');
  await shot('request');
  await page.goto(`${base}/dashboard/cost?window=today&by=label:team`);
  await shot('cost');
}

let code = 0;
try {
  await main();
} catch (err) {
  console.error(err);
  console.error(output.slice(-3000));
  code = 1;
} finally {
  await browser?.close();
  try {
    process.kill(-up.pid, 'SIGINT');
  } catch {
    /* gone */
  }
  const stopped = await Promise.race([new Promise((r) => up.on('exit', () => r(true))), sleep(60_000)]);
  if (!stopped) process.kill(-up.pid, 'SIGKILL');
  rmSync(home, { recursive: true, force: true });
}
process.exit(code);
