// `npm run bench -- snapshot-read [--queued N] [--reps R] [--json]`: the dispatcher's full snapshot read
// (PgQueue.containers() and changes() from no cursor) with N Queued containers, with and without the
// request names (`PgQueue`'s `names`: only wait_for_running's run-time estimates read them), alternated
// in one run on one embedded PostgreSQL; the median milliseconds of each, and PostgreSQL's execution time of
// the containers() statement alone (EXPLAIN ANALYZE: no rows sent).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { PgQueue, snapshotSql, type PgQueueOptions } from '../src/dispatch/pg-queue.js';
import { normalizeRequest } from '../src/model/request.js';
import { createPool } from '../src/store/db.js';
import { startEmbedded } from '../src/store/embedded.js';
import { migrate } from '../src/store/migrate.js';
import { Store } from '../src/store/store.js';
import { benchArgs, opt } from './args.js';

const OPTIONS = {
  queued: opt.int(100_000, 'Queued containers'),
  reps: opt.int(7, 'reads of each kind'),
  json: opt.flag('print JSON'),
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function run(argv: string[]): Promise<number> {
  const args = benchArgs('snapshot-read', argv, OPTIONS);
  const say = (s: string) => !args.json && console.error(s);
  const home = mkdtempSync(join(tmpdir(), 'berth-snapshot-read-'));
  const pg = await startEmbedded({ dataDir: join(home, 'pgdata') });
  const pool = createPool(pg.url, 4);
  try {
    await migrate(pool);
    const store = new Store(pool);
    say(`submitting ${args.queued} containers…`);
    for (let n = 0; n < args.queued; n += 1000)
      await store.requests.create(
        'bench',
        Array.from({ length: Math.min(1000, args.queued - n) }, (_, i) =>
          normalizeRequest({ name: `step (${n + i})`, command: ['true'], vcpus: 1, ram: '1GiB' }),
        ),
      );
    await pool.query('VACUUM ANALYZE');
    const now = new Date();
    const kinds: Record<string, PgQueueOptions> = {
      names: { names: true },
      'run limits': { runLimits: true },
      plain: {},
    };
    const queues = Object.fromEntries(
      Object.entries(kinds).map(([kind, o]) => [kind, new PgQueue(store, pg.url, o)]),
    );
    const ms: Record<string, number[]> = {};
    const time = async (key: string, read: () => Promise<unknown>) => {
      const t0 = performance.now();
      await read();
      (ms[key] ??= []).push(performance.now() - t0);
    };
    for (let r = 0; r <= args.reps; r++)
      for (const [kind, q] of Object.entries(queues)) {
        // The first round warms the caches and the plans: not counted.
        if (r === 0) {
          await q.containers('d', now);
          await q.changes('d', now, null);
          continue;
        }
        await time(`containers() ${kind}`, () => q.containers('d', now));
        await time(`changes(null) ${kind}`, () => q.changes('d', now, null));
        // PostgreSQL's own time for the containers() statement, without sending the rows.
        const plan = await pool.query(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${snapshotSql(kinds[kind]!).considered}`,
          ['d', now],
        );
        (ms[`server ${kind}`] ??= []).push(plan.rows[0]['QUERY PLAN'][0]['Execution Time'] as number);
      }
    const result = Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, +median(v).toFixed(1)]));
    if (args.json) console.log(JSON.stringify({ queued: args.queued, reps: args.reps, ms: result }, null, 2));
    else for (const [k, v] of Object.entries(result)) console.log(`${k.padEnd(24)} ${v} ms (median)`);
    return 0;
  } finally {
    await pool.end();
    await pg.stop();
    rmSync(home, { recursive: true, force: true });
  }
}
