// With `berth up` running a few hundred containers, SIGKILL its embedded PostgreSQL and one agent in the
// middle: everything carries on by itself, no request is lost, and no successful container runs twice.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/store/embedded.js';
import {
  assertBuilt,
  berthDaemon,
  killProcessesMentioning,
  processesMentioning,
  testHome,
  until,
} from '../helpers/cli.js';

let home: string;
let env: NodeJS.ProcessEnv;
let url: string;
let token: string;
const daemons: ReturnType<typeof berthDaemon>[] = [];

async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      const r = await fetch(`${url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      if (r.status === 503 && attempt < 100) throw new Error('unavailable');
      if (!r.ok)
        throw Object.assign(new Error(`${method} ${path}: ${r.status} ${await r.text()}`), { final: true });
      return (await r.json()) as T;
    } catch (err) {
      if ((err as { final?: boolean }).final || attempt >= 100) throw err;
      await new Promise((r) => setTimeout(r, 200)); // the database is coming back: retry, as a client would
    }
  }
}

beforeAll(async () => {
  assertBuilt();
  ({ home, env } = testHome('berth-upfaults-'));
  const listen = `127.0.0.1:${await freePort()}`;
  url = `http://${listen}`;
  const up = berthDaemon(['up', '--listen', listen], env);
  daemons.push(up);
  await until(() => /Berth is up/.test(up.output()), 120_000, 'berth up');
  token = readFileSync(join(home, 'admin-token'), 'utf8').trim();
});

afterAll(async () => {
  for (const d of daemons) await d.stop('SIGINT');
  killProcessesMentioning(home);
  rmSync(home, { recursive: true, force: true });
});

// What is still open, for the failure message: each unfinished request with its containers' states.
async function unfinished(): Promise<string> {
  const open = await api<{ items: { id: string; state: string; name: string }[] }>(
    'GET',
    '/v1/requests?name=f-&state=Committed&limit=1000',
  );
  const lines: string[] = [];
  for (const r of open.items.slice(0, 20)) {
    const cs = await api<{ items: Record<string, unknown>[] }>('GET', `/v1/containers?request_id=${r.id}`);
    lines.push(`${r.name} ${r.id} ${r.state}: ${JSON.stringify(cs.items)}`);
  }
  return `${open.items.length} open\n${lines.join('\n')}`;
}

describe('berth up under faults', () => {
  it(
    '300 containers survive a SIGKILL of PostgreSQL and of an agent; each runs to success exactly once',
    { timeout: 400_000 },
    async () => {
      const requests = Array.from({ length: 300 }, (_, i) => ({
        name: `f-${i}`,
        command: ['/bin/sh', '-c', `sleep 0.$((${i} % 5 + 1)); echo done ${i}`],
        vcpus: 0.1,
        ram: '32MiB',
      }));
      const { items } = await api<{ items: { id: string }[] }>('POST', '/v1/requests/batch', { requests });
      const finished = async () =>
        (await api<{ items: unknown[] }>('GET', '/v1/requests?name=f-&state=Final&limit=1000')).items.length;
      await until(async () => (await finished()) >= 30, 180_000, '30 requests to finish');

      const postgres = processesMentioning(join(home, 'pgdata')).find((l) => /postgres -D/.test(l));
      expect(postgres, 'the embedded PostgreSQL process').toBeDefined();
      process.kill(Number(postgres!.trim().split(/\s+/)[0]), 'SIGKILL');
      const agent = processesMentioning(join(home, 'instances')).find(
        (l) => / agent /.test(l) && !/\/bin\/sh/.test(l),
      );
      expect(agent, 'an agent process').toBeDefined();
      process.kill(Number(agent!.trim().split(/\s+/)[0]), 'SIGKILL');

      await until(async () => (await finished()) === 300, 360_000, 'all 300 requests to finish').catch(
        async (err: Error) => {
          const open = await unfinished().catch((e: Error) => `(cannot list them: ${e.message})`);
          const up = daemons[0]!;
          const state = up.child.exitCode ?? up.child.signalCode;
          throw new Error(
            `${err.message}\n--- not finished:\n${open}\n--- berth up ${state === null ? 'is running' : `exited (${state})`}; it said:\n${up.output().slice(-6000)}`,
          );
        },
      );
      for (const r of items) {
        const req = await api<{ outcome: string }>('GET', `/v1/requests/${r.id}`);
        expect(req.outcome, r.id).toBe('success');
        const cs = await api<{ items: { state: string; exit_code: number | null }[] }>(
          'GET',
          `/v1/containers?request_id=${r.id}`,
        );
        // Exactly one container completed with exit 0; any others ended as infrastructure failures.
        expect(
          cs.items.filter((c) => c.state === 'Complete' && c.exit_code === 0),
          r.id,
        ).toHaveLength(1);
        expect(
          cs.items.filter((c) => c.state === 'Complete' && c.exit_code !== 0),
          r.id,
        ).toHaveLength(0);
      }
      expect(daemons[0]!.output()).toMatch(/PostgreSQL exited unexpectedly \(SIGKILL\); starting it again/);
    },
  );
});
