// `npm run bench -- peer [--json] [--jobs N] [--workers N]`: Berth's container lifecycle through the store
// beside graphile-worker's job lifecycle (add, fetch, complete), on one embedded PostgreSQL in one run, and
// the ratio. Both in the batched shape each recommends: graphile-worker's jobs are added in bulk
// (`addJobs`, 1,000 per call) and run by its worker pool (`concurrency` workers, a local queue of 500,
// batched completions: https://worker.graphile.org/docs/performance#batching); Berth's
// containers are submitted in bulk (1,000 per call), locked and placed a pass at a time in one statement
// (lockAssign, as the dispatcher's act step does for a ready instance; `--separate`: a lock statement then
// an assign statement, the shape before), and started and completed by `--workers` agents whose reports go through
// the store's group commit (as the API sends them). Each side: N items, from the first add to the last
// completion, on its own database of the same server. Each side's cost per item is printed too: the server's WAL
// bytes (pg_current_wal_lsn before and after) and the CPU of PostgreSQL's processes and of this one.
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Logger, makeWorkerUtils, run as runWorker, runMigrations } from 'graphile-worker';
import { normalizeRequest } from '../src/model/request.js';
import { createPool, withDatabase } from '../src/store/db.js';
import { startEmbedded } from '../src/store/embedded.js';
import { migrate } from '../src/store/migrate.js';
import { Store } from '../src/store/store.js';
import { cpuSample, printIndexUse, printProfile, topStatements, type CpuSample } from './store-profile.js';
import { benchArgs, opt } from './args.js';

const OPTIONS = {
  json: opt.flag('print JSON'),
  jobs: opt.int(20_000, 'jobs and containers', 1000),
  workers: opt.int(32, 'workers and agents'),
  profile: opt.flag("restart PostgreSQL with pg_stat_statements and print the Berth phase's profile"),
  separate: opt.flag("lock, then assign, in two statements (the dispatcher's shape before lockAssign)"),
};

const BATCH = 1000;
/** Jobs the worker pool fetches (and locks) at once: its docs' advice for many fast jobs. */
const GRAPHILE_LOCAL_QUEUE = 500;

/**
 * graphile-worker: add `n` no-op jobs in bulk (addJobs, 1,000 per call), run them with `concurrency`
 * workers and its batching on (a local queue the pool fetches into, batched completions); jobs/s.
 */
async function graphile(url: string, n: number, concurrency: number): Promise<number> {
  await runMigrations({ connectionString: url, logger: quiet });
  const utils = await makeWorkerUtils({ connectionString: url, logger: quiet });
  const t0 = performance.now();
  let done = 0;
  let allDone!: () => void;
  const finished = new Promise<void>((r) => (allDone = r));
  const runner = await runWorker({
    connectionString: url,
    concurrency,
    noHandleSignals: true,
    pollInterval: 100,
    logger: quiet,
    preset: { worker: { localQueue: { size: GRAPHILE_LOCAL_QUEUE }, completeJobBatchDelay: 0 } },
    taskList: {
      noop: async () => {
        if (++done === n) allDone();
      },
    },
  });
  for (let added = 0; added < n; added += BATCH)
    await utils.addJobs(
      Array.from({ length: Math.min(BATCH, n - added) }, () => ({ identifier: 'noop', payload: {} })),
    );
  await finished;
  const rate = n / ((performance.now() - t0) / 1000);
  await runner.stop();
  await utils.release();
  return rate;
}

/** Berth: submit `n` containers in bulk, lock and assign them a pass at a time, start and complete them
 * from `agents` concurrent agents through the group commit; lifecycles/s. */
async function berth(
  url: string,
  n: number,
  agents: number,
  separate: boolean,
  sample: () => CpuSample | null,
): Promise<{ rate: number; perCommit: number; cpu: CpuSample | null }> {
  const pool = createPool(url, 20);
  await migrate(pool);
  const store = new Store(pool);
  const { node, bootstrapSecret } = await store.nodes.create({
    cluster: 'b',
    dispatcherTag: 'b',
    instanceId: 'i-peer',
    instanceType: 't',
  });
  await store.nodes.register(node.id, bootstrapSecret, {});
  const spec = normalizeRequest({ command: ['true'], vcpus: 1, ram: '1GiB' });
  const [c0, i0] = [store.reports.stats.calls, store.reports.stats.items];
  const t0 = performance.now();
  // The agents take what the dispatcher assigned, as a node's agent takes its start orders.
  const assigned: { id: string; token: string }[] = [];
  let waiting: (() => void)[] = [];
  const wakeAll = () => {
    const w = waiting;
    waiting = [];
    for (const f of w) f();
  };
  let dispatched = false;
  const agent = async () => {
    for (;;) {
      const c = assigned.pop();
      if (c === undefined) {
        if (dispatched) return;
        await new Promise<void>((r) => waiting.push(r));
        continue;
      }
      const base = { id: c.id, node: node.id, token: c.token };
      const end = { state: 'Complete' as const, exitCode: 0, oomKilled: false, usage: null };
      const [s] = await store.reports.send([{ ...base, kind: 'start' }]);
      const [e] = await store.reports.send([{ ...base, kind: 'end', end }]);
      if (!s!.ok || !e!.ok) throw new Error(`lifecycle of ${c.id} refused`);
    }
  };
  const dispatcher = async () => {
    for (let submitted = 0; submitted < n;) {
      const reqs = await store.requests.create(
        'peer',
        Array.from({ length: Math.min(BATCH, n - submitted) }, () => spec),
      );
      submitted += reqs.length;
      const place = (id: string) => ({ id, instance: 'i-peer', node: node.id });
      let locks;
      if (separate) {
        locks = await store.containers.lock(
          reqs.map((r) => r.container_id!),
          'peer/d',
        );
        const placed = await store.transitions.assign(
          locks.map((l) => place(l.id)),
          'peer/d',
        );
        if (placed.some((o) => !o.ok)) throw new Error('an assignment was refused');
      } else
        locks = await store.transitions.lockAssign(
          reqs.map((r) => place(r.container_id!)),
          'peer/d',
        );
      if (locks.length !== reqs.length) throw new Error('a lock was refused');
      assigned.push(...locks);
      wakeAll();
    }
    dispatched = true;
    wakeAll();
  };
  await Promise.all([dispatcher(), ...Array.from({ length: agents }, agent)]);
  const rate = n / ((performance.now() - t0) / 1000);
  const perCommit = (store.reports.stats.items - i0) / Math.max(1, store.reports.stats.calls - c0);
  // Before the pool ends: its backends' CPU is theirs while they live (an exiting one's may be in neither count).
  const cpu = sample();
  await pool.end();
  return { rate, perCommit, cpu };
}

/** graphile-worker's logger, silent. */
const quiet = new Logger(() => () => {});

export async function run(argv: string[]): Promise<number> {
  const args = benchArgs('peer', argv, OPTIONS);
  const say = (s: string) => !args.json && console.error(s);
  const home = mkdtempSync(join(tmpdir(), 'berth-peer-'));
  say('starting the embedded PostgreSQL…');
  let pg = await startEmbedded({ dataDir: join(home, 'pgdata') });
  try {
    if (args.profile) {
      // pg_stat_statements must be loaded when PostgreSQL starts: stop, preload it, start again.
      await pg.stop();
      appendFileSync(
        join(pg.dataDir, 'postgresql.conf'),
        `\nshared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = 'all'\n`,
      );
      pg = await startEmbedded({ dataDir: join(home, 'pgdata') });
    }
    const admin = createPool(pg.url, 1);
    await admin.query('CREATE DATABASE peer_berth');
    await admin.query('CREATE DATABASE peer_graphile');
    await admin.end();
    // WAL (the server's, both databases: one phase runs at a time) and CPU of each side, per item.
    const wal = createPool(pg.url, 1);
    const lsn = async () =>
      (await wal.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]!.l;
    const walSince = async (from: string) =>
      (
        await wal.query<{ d: number }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::float8 AS d', [
          from,
        ])
      ).rows[0]!.d / args.jobs;
    const cpuPer = (a: CpuSample, b: CpuSample) => ({
      postgres: +(((b.postgres - a.postgres) / args.jobs) * 1e3).toFixed(4),
      node: +(((b.bench - a.bench) / args.jobs) * 1e3).toFixed(4),
    });
    say(`graphile-worker: ${args.jobs} jobs, concurrency ${args.workers}…`);
    const [gLsn, gCpu] = [await lsn(), cpuSample(null, pg.pid)];
    const g = await graphile(withDatabase(pg.url, 'peer_graphile'), args.jobs, args.workers);
    const gCost = {
      wal_bytes: Math.round(await walSince(gLsn)),
      cpu_ms: cpuPer(gCpu, cpuSample(null, pg.pid)),
    };
    say(`  ${g.toFixed(0)} jobs/s`);
    say(`Berth: ${args.jobs} containers, ${args.workers} agents…`);
    const stats = args.profile ? createPool(withDatabase(pg.url, 'peer_berth'), 1) : null;
    if (stats) {
      await stats.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      await topStatements(stats, 0);
    }
    const [bLsn, before] = [await lsn(), cpuSample(null, pg.pid)];
    const b = await berth(withDatabase(pg.url, 'peer_berth'), args.jobs, args.workers, args.separate, () =>
      cpuSample(null, pg.pid),
    );
    const bCost = { wal_bytes: Math.round(await walSince(bLsn)), cpu_ms: cpuPer(before, b.cpu!) };
    await wal.end();
    if (stats) {
      printProfile(say, 'Berth', args.jobs, before, b.cpu!, await topStatements(stats, 12));
      await printIndexUse(say, stats);
      await stats.end();
    }
    say(`  ${b.rate.toFixed(0)} lifecycles/s (${b.perCommit.toFixed(1)} reports per commit)`);
    const result = {
      items: args.jobs,
      workers: args.workers,
      berth_lock_assign: args.separate ? 'separate' : 'one statement',
      graphile_worker_jobs_per_s: Math.round(g),
      berth_lifecycles_per_s: Math.round(b.rate),
      berth_reports_per_commit: +b.perCommit.toFixed(1),
      ratio: +(b.rate / g).toFixed(3),
      // Per job / per lifecycle: the server's WAL, PostgreSQL's CPU and this process's (graphile-worker's
      // worker pool, or Berth's store and the agents' loop), all under whatever else the machine ran.
      graphile_worker_per_job: gCost,
      berth_per_lifecycle: bCost,
      targets: { berth_lifecycles_per_s: 2000, ratio: 0.25 },
    };
    if (args.json) console.log(JSON.stringify(result, null, 2));
    else {
      console.log(`graphile-worker jobs/s:   ${result.graphile_worker_jobs_per_s}`);
      console.log(`Berth lifecycles/s:       ${result.berth_lifecycles_per_s} (target ≥ 2,000)`);
      console.log(`ratio Berth / graphile:   ${result.ratio} (target ≥ 0.25)`);
      const cost = (c: typeof gCost) =>
        `WAL ${c.wal_bytes} B, CPU PostgreSQL ${c.cpu_ms.postgres} ms, Node ${c.cpu_ms.node} ms`;
      console.log(`per graphile-worker job:  ${cost(gCost)}`);
      console.log(`per Berth lifecycle:      ${cost(bCost)}`);
    }
    return 0;
  } finally {
    await pg.stop();
    rmSync(home, { recursive: true, force: true });
  }
}
