// Scale out (issue 12): two API servers and two dispatchers (one cluster, tags a and b) on one external
// PostgreSQL, the distribution's (Debian's postgresql package, .ci/setup.d/30-postgresql.sh), not the npm
// binaries the other tests use: a private server of its own in a temp dir, stopped after. The processes are
// separate (`berth server`, `berth dispatch` on the local driver). 1,000
// containers are submitted through both servers; dispatcher a is killed with SIGKILL midway and not
// restarted: dispatcher b takes over its unplaced locks (dispatcher_lost_after) and every container runs
// exactly once. Agents of each dispatcher report to a different server.
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { createPool, withDatabase, type Db } from '../../src/store/db.js';
import { startEmbedded, systemPostgresBinDir, type EmbeddedServer } from '../../src/store/embedded.js';
import { itIf } from '../helpers/needs.js';
import { destroyLocalInstances } from '../helpers/up.js';
import {
  assertBuilt,
  berthDaemon,
  killProcessesMentioning,
  startServer,
  testHome,
  until,
} from '../helpers/cli.js';

const N = 1_000;
const homes: string[] = [];
const daemons: ReturnType<typeof berthDaemon>[] = [];
const binDir = systemPostgresBinDir();
const it = itIf(
  binDir === null
    ? "no system PostgreSQL (/usr/lib/postgresql/N/bin: Debian's postgresql package, .ci/setup.d/30-postgresql.sh)"
    : null,
);
let pgDir: string | null = null;
let server: EmbeddedServer | null = null;
let db: { pool: Db; url: string };

function home(prefix: string, extra: NodeJS.ProcessEnv = {}) {
  const h = testHome(prefix);
  homes.push(h.home);
  return { home: h.home, env: { ...h.env, BERTH_DATABASE_URL: db.url, ...extra } };
}

beforeAll(async () => {
  if (binDir === null) return;
  assertBuilt();
  pgDir = mkdtempSync(join(tmpdir(), 'berth-scale-pg-'));
  chmodSync(pgDir, 0o755); // as root the server runs as the postgres user, which must reach it
  server = await startEmbedded({ dataDir: join(pgDir, 'pgdata'), binDir });
  const admin = createPool(server.url, 1);
  await admin.query('CREATE DATABASE scale');
  await admin.end();
  const url = withDatabase(server.url, 'scale');
  db = { pool: createPool(url, 4), url };
}, 120_000);

afterAll(async () => {
  for (const d of daemons.reverse()) await d.stop('SIGINT');
  // The dispatchers leave their local instances running (the SIGKILLed one, and the other as any stop does):
  // destroy them, or their agents' cgroups outlive the test.
  const left: string[] = [];
  for (const h of homes) left.push(...(await destroyLocalInstances(h)));
  for (const h of homes) {
    killProcessesMentioning(h);
    rmSync(h, { recursive: true, force: true });
  }
  await db?.pool.end();
  await server?.stop();
  if (pgDir) rmSync(pgDir, { recursive: true, force: true });
  expect(left, 'instance cgroups left behind').toEqual([]);
});

describe("two API servers and two dispatchers on one external PostgreSQL (the distribution's)", () => {
  it(`${N} containers submitted through both servers run exactly once across a SIGKILL of one dispatcher`, async () => {
    const started = Date.now();
    // The distribution's server, not the npm binaries': a distribution's build names its package right after
    // the version ("PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on …"); the npm binaries' does not.
    const version = String((await db.pool.query('SELECT version() AS v')).rows[0].v);
    expect(version).toMatch(/^PostgreSQL \S+ \(\w/);
    const a = home('berth-scale-a-');
    const sa = await startServer(a.home, a.env);
    daemons.push(sa.server);
    const token = readFileSync(join(a.home, 'admin-token'), 'utf8').trim();
    const b = home('berth-scale-b-');
    const sb = await startServer(b.home, b.env);
    daemons.push(sb.server);
    const urls = [sa.url, sb.url];

    const dispatcher = (tag: string, apiUrl: string) => {
      const h = home(`berth-scale-d${tag}-`, { BERTH_API_URL: apiUrl });
      const config = join(h.home, 'dispatch.json');
      writeFileSync(
        config,
        JSON.stringify({
          cluster: 'scale',
          tag,
          instance_types: [{ name: 'small', vcpus: 2, ram: '2GiB', price: 0.05 }],
          scheduler: { idle_timeout: '3s', arrival_window: '3s', max_instances: 4 },
          boot_delay: '200ms',
          sync_interval: '1s',
          tick_interval: '250ms',
          dispatcher_lost_after: '3s',
        }),
      );
      const d = berthDaemon(['dispatch', '--config', config, '--log-level', 'error'], h.env);
      daemons.push(d);
      return d;
    };
    const da = dispatcher('a', sa.url);
    const db2 = dispatcher('b', sb.url);

    // Submitted through both servers at once, in batches of 100.
    const submit = async (url: string, from: number) => {
      const requests = Array.from({ length: 100 }, (_, i) => ({
        name: `scale-${from + i}`,
        command: ['true'],
        vcpus: 0.25,
        ram: '32MiB',
      }));
      const r = await fetch(`${url}/v1/requests/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ requests }),
      });
      expect(r.status, await r.clone().text()).toBeLessThan(300);
    };
    await Promise.all(Array.from({ length: N / 100 }, (_, k) => submit(urls[k % 2]!, k * 100)));

    const count = async (sql: string) => Number((await db.pool.query(sql)).rows[0].n);
    const final = () => count(`SELECT count(*) AS n FROM container_requests WHERE state = 'Final'`);
    await until(async () => (await final()) >= N / 4, 120_000, `${N / 4} requests to finish`);
    da.child.kill('SIGKILL');
    await da.exited;
    await until(async () => (await final()) === N, 150_000, `all ${N} requests to finish`);
    const elapsed = Date.now() - started;

    // Exactly once: one container per request, Complete, started once; both dispatchers took part.
    expect(await count(`SELECT count(*) AS n FROM container_requests`)).toBe(N);
    expect(
      (
        await db.pool.query(
          `SELECT outcome, attempts, count(*)::int AS n FROM container_requests GROUP BY 1, 2`,
        )
      ).rows,
    ).toEqual([{ outcome: 'success', attempts: 1, n: N }]);
    expect((await db.pool.query(`SELECT state, count(*)::int AS n FROM containers GROUP BY 1`)).rows).toEqual(
      [{ state: 'Complete', n: N }],
    );
    expect(await count(`SELECT count(*) AS n FROM container_events WHERE message LIKE 'Running%'`)).toBe(N);
    const byTag = (
      await db.pool.query<{ tag: string; n: number }>(
        `SELECT n.dispatcher_tag AS tag, count(*)::int AS n FROM containers c JOIN nodes n ON n.id = c.node_id
           GROUP BY 1 ORDER BY 1`,
      )
    ).rows;
    expect(byTag.map((r) => r.tag)).toEqual(['a', 'b']);
    expect(db2.output()).not.toMatch(/pass failed/);
    console.log(`scale-out: ${N} containers, submit to all done in ${(elapsed / 1000).toFixed(1)} s`, byTag);
  }, 180_000);
});
