// One `berth up` per BERTH_HOME, and outages never destroy live agents (issue 10 item 2), with the real
// executable: a second `berth up` (or `berth server`) on a running home says who runs it and exits without
// touching it. Then `berth up` is SIGKILLed with a container running and stays down longer than
// node_lost_after; started again, it stops only the PostgreSQL its dead predecessor left, is not blocked by
// its lock, and adopts the live agent: the container completes once, the node is not failed.
import { writeFileSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/store/embedded.js';
import {
  assertBuilt,
  berth,
  berthDaemon,
  killProcessesMentioning,
  processesMentioning,
  readIfExists,
  testHome,
  until,
} from '../helpers/cli.js';

/** Short, but above the agents' longest retry pause (10 s) plus a ping. */
const NODE_LOST_AFTER_S = 15;

let home: string;
let env: NodeJS.ProcessEnv;
let listen: string;
let url: string;
const daemons: ReturnType<typeof berthDaemon>[] = [];

beforeAll(async () => {
  assertBuilt();
  ({ home, env } = testHome('berth-uplock-'));
  // The agents keep the API URL from their boot data: the restarted berth up listens where they look.
  listen = `127.0.0.1:${await freePort()}`;
  url = `http://${listen}`;
  writeFileSync(join(home, 'dispatch.json'), JSON.stringify({ node_lost_after: `${NODE_LOST_AFTER_S}s` }));
});

afterAll(async () => {
  for (const d of daemons) await d.stop('SIGKILL');
  killProcessesMentioning(home);
  rmSync(home, { recursive: true, force: true });
});

const up = () => {
  const d = berthDaemon(['up', '--listen', listen, '--config', join(home, 'dispatch.json')], env);
  daemons.push(d);
  return d;
};

async function api<T>(path: string, body?: unknown): Promise<T> {
  const token = readFileSync(join(home, 'admin-token'), 'utf8').trim();
  const r = await fetch(`${url}${path}`, {
    method: body ? 'POST' : 'GET',
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as T;
}

const postmaster = () => Number(readFileSync(join(home, 'pgdata', 'postmaster.pid'), 'utf8').split('\n')[0]);

describe('one berth up per BERTH_HOME', () => {
  let first: ReturnType<typeof berthDaemon>;
  let request: string;

  it(
    'a second berth up or berth server on the same home is refused and touches nothing',
    { timeout: 180_000 },
    async () => {
      first = up();
      await until(() => /Berth is up/.test(first.output()), 120_000, 'berth up');
      const pg = postmaster();
      for (const args of [
        ['up', '--listen', '127.0.0.1:0'],
        ['server', '--listen', '127.0.0.1:0'],
      ]) {
        const second = berth(args, env);
        expect(second.code, second.stderr).toBe(1);
        expect(second.stderr).toBe(
          `berth: berth up is already running on ${home} (pid ${first.child.pid}, API ${url}); stop it first, or use another BERTH_HOME (--home)\n`,
        );
      }
      expect(postmaster()).toBe(pg); // its database untouched
      expect(readIfExists(join(home, 'api-url'))?.trim()).toBe(url);
      expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ ok: true, database: 'up' });
      expect(first.output()).not.toMatch(/PostgreSQL exited/);
      // and it still works: a container runs on a local instance
      const req = await api<{ id: string; container_id: string }>('/v1/requests', {
        name: 'outlives',
        command: ['/bin/sh', '-c', 'echo started; sleep 45; echo finished'],
        vcpus: 0.5,
        ram: '64MiB',
      });
      request = req.id;
      await until(
        async () => (await api<{ state: string }>(`/v1/containers/${req.container_id}`)).state === 'Running',
        120_000,
        'the container to run',
      );
    },
  );

  it(
    `SIGKILLed and down for longer than node_lost_after (${NODE_LOST_AFTER_S}s): started again, it adopts the live agent and the container completes once`,
    { timeout: 240_000 },
    async () => {
      expect(request).toBeDefined();
      const pg = postmaster();
      first.child.kill('SIGKILL');
      await first.exited;
      const killedAt = Date.now();
      // What a dead berth up leaves: its PostgreSQL, its instance's agent (a VM keeps running), its lock file.
      expect(processesMentioning(join(home, 'pgdata')).length).toBeGreaterThan(0);
      expect(processesMentioning(join(home, 'instances')).some((l) => / agent /.test(l))).toBe(true);
      // The outage: nobody can ping for longer than node_lost_after (a wait for the clock, not for a state).
      await until(() => Date.now() - killedAt > (NODE_LOST_AFTER_S + 5) * 1000, 60_000, 'the outage to last');

      const second = up();
      await until(() => /Berth is up/.test(second.output()), 120_000, 'berth up again');
      expect(second.output()).toMatch(
        new RegExp(
          `stopping a PostgreSQL server \\(pid ${pg}\\) left running on .* by a Berth process that is gone`,
        ),
      );
      await until(
        async () => (await api<{ state: string }>(`/v1/requests/${request}`)).state === 'Final',
        120_000,
        'the request to finish',
      );
      const req = await api<{ outcome: string; attempts: number; temp_failures: number }>(
        `/v1/requests/${request}`,
      );
      expect(req, second.output()).toMatchObject({ outcome: 'success', temp_failures: 0 });
      const cs = await api<{ items: { state: string; exit_code: number | null }[] }>(
        `/v1/containers?request_id=${request}`,
      );
      expect(cs.items).toEqual([expect.objectContaining({ state: 'Complete', exit_code: 0 })]);
      expect(second.output()).not.toMatch(/lost:/);
      expect(await second.stop('SIGINT')).toBe(0);
      expect(processesMentioning(home)).toEqual([]);
    },
  );
});
