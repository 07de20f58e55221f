// The dispatcher on the local driver, as separate processes (`berth server`, `berth dispatch`): 50
// containers of mixed sizes; the dispatcher is killed with SIGKILL in the middle and started again. It
// adopts every instance; no container is lost or run twice; afterwards every instance goes away.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  assertBuilt,
  testHome,
  berthDaemon,
  readIfExists,
  until,
  killProcessesMentioning,
  processesMentioning,
} from '../helpers/cli.js';

let home: string;
let env: NodeJS.ProcessEnv;
let url: string;
let token: string;
const daemons: ReturnType<typeof berthDaemon>[] = [];

async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const r = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as T;
}

function liveInstances(): number {
  const text = readIfExists(join(home, 'instances.json'));
  if (!text) return 0;
  return (JSON.parse(text) as { instances: { state: string }[] }).instances.filter(
    (i) => i.state !== 'terminated',
  ).length;
}

beforeAll(async () => {
  assertBuilt();
  ({ home, env } = testHome('berth-dispatch-'));
  const server = berthDaemon(['server', '--listen', '127.0.0.1:0'], env);
  daemons.push(server);
  url = (await until(() => readIfExists(join(home, 'api-url')), 60_000, 'the server'))
    .trim()
    .replace(/\/$/, '');
  token = readFileSync(join(home, 'admin-token'), 'utf8').trim();
  writeFileSync(
    join(home, 'dispatch.json'),
    JSON.stringify({
      cluster: 'e2e',
      instance_types: [
        { name: 'small', vcpus: 1, ram: '1GiB', price: 0.05 },
        { name: 'medium', vcpus: 2, ram: '2GiB', price: 0.1 },
      ],
      scheduler: { idle_timeout: '3s', arrival_window: '3s', max_instances: 4 },
      boot_delay: '500ms',
      sync_interval: '1s',
      tick_interval: '500ms',
    }),
  );
});

afterAll(async () => {
  for (const d of daemons.reverse()) await d.stop('SIGINT');
  killProcessesMentioning(home);
  rmSync(home, { recursive: true, force: true });
});

describe('dispatcher on the local driver', () => {
  it(
    'runs 50 containers exactly once across a SIGKILL of the dispatcher, then every instance goes away',
    { timeout: 300_000 },
    async () => {
      // Errors logged: the check at the end that no pass failed reads them.
      const dispatch = () =>
        berthDaemon(['dispatch', '--config', join(home, 'dispatch.json'), '--log-level', 'error'], env);
      let d = dispatch();
      daemons.push(d);
      const sizes = [
        { vcpus: 0.25, ram: '64MiB' },
        { vcpus: 0.5, ram: '256MiB' },
        { vcpus: 1, ram: '512MiB' },
        { vcpus: 1.5, ram: '1GiB' },
      ];
      const requests = Array.from({ length: 50 }, (_, i) => ({
        name: `e2e-${i}`,
        command: ['/bin/sh', '-c', `echo start ${i}; sleep 0.${(i % 7) + 2}; echo end ${i}`],
        priority: 100 + (i % 5) * 100,
        ...sizes[i % sizes.length],
      }));
      const { items } = await api<{ items: { id: string }[] }>('POST', '/v1/requests/batch', { requests });
      const ids = items.map((r) => r.id);

      const finished = async () => {
        const page = await api<{ items: { state: string }[] }>(
          'GET',
          '/v1/requests?name=e2e-&state=Final&limit=1000',
        );
        return page.items.length;
      };
      await until(async () => (await finished()) >= 10, 120_000, '10 requests to finish');
      const before = liveInstances();
      expect(before).toBeGreaterThan(0);
      d.child.kill('SIGKILL');
      await d.exited;
      d = dispatch();
      daemons.push(d);
      await until(async () => (await finished()) === 50, 240_000, 'all 50 requests to finish');

      for (const id of ids) {
        const req = await api<{ outcome: string; attempts: number; temp_failures: number }>(
          'GET',
          `/v1/requests/${id}`,
        );
        expect(req, id).toMatchObject({ outcome: 'success', attempts: 1, temp_failures: 0 });
        const cs = await api<{ items: { id: string; state: string }[] }>(
          'GET',
          `/v1/containers?request_id=${id}`,
        );
        expect(cs.items.map((c) => c.state)).toEqual(['Complete']);
        const events = await api<{ items: { message: string }[] }>(
          'GET',
          `/v1/containers/${cs.items[0]!.id}/events`,
        );
        expect(events.items.filter((e) => e.message.startsWith('Running')).length).toBe(1);
        const logs = await api<{ items: { data: string }[] }>(
          'GET',
          `/v1/containers/${cs.items[0]!.id}/logs`,
        );
        const n = ids.indexOf(id);
        expect(logs.items.map((c) => c.data).join('')).toBe(`start ${n}\nend ${n}\n`);
      }
      // the arrivals leave arrival_window (3 s), no idle instance is kept warm; a tick + a sync: all gone
      await until(() => liveInstances() === 0, 20_000, 'every instance to shut down');
      await until(
        () => processesMentioning(join(home, 'instances')).length === 0,
        20_000,
        'every agent process to exit',
      );
      expect(d.output()).not.toMatch(/pass failed/);
    },
  );
});
