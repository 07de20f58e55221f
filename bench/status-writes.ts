// `npm run bench -- status-writes [--json] [--queued N] [--passes K]`
//
// What a long queue's statuses cost the dispatcher's passes (issue 12; src/dispatch/status-writer.ts).
// N containers wait on one embedded PostgreSQL behind max_instances 1, so they wait for one reason: one
// status group of N members. Each of K rounds submits one container of a higher priority than all before
// it, which goes to the head of the queue: every waiting container's position moves by one, so the
// group's write rewrites all its parts (the expensive case: it happens whenever the head moves). The real
// Dispatcher and PgQueue, the simulated cloud (nothing boots), status_interval 0 (every pass may write).
// Two ways, one after the other, each on a database of its own:
// - `awaited`: `tick()`, the pass and its status write (what the service loop did before session 14);
// - `beside`: `tickAhead()`, as the service loop now runs: the pass, with the write in the background,
//   one at a time (a pass that comes while a write runs offers nothing).
// Printed: each way's pass wall time (median, max), how many status writes ran, and the median write.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { bootDataFor } from '../src/cloud/boot-data.js';
import { SimCloud } from '../src/cloud/sim/sim-cloud.js';
import { SCHEDULER_OPTIONS } from '../src/config/scheduler.js';
import { DISPATCHER_TIMERS } from '../src/dispatch/config.js';
import { Dispatcher } from '../src/dispatch/dispatcher.js';
import { PgQueue } from '../src/dispatch/pg-queue.js';
import { seededRng } from '../src/model/clock.js';
import { normalizeRequest } from '../src/model/request.js';
import { VirtualClock } from '../src/sim/clock.js';
import { createPool, withDatabase } from '../src/store/db.js';
import { startEmbedded } from '../src/store/embedded.js';
import { migrate } from '../src/store/migrate.js';
import { Store } from '../src/store/store.js';
import { benchArgs, opt } from './args.js';
import { BENCH_TYPE } from './ec2.js';

const BATCH = 1000;

interface Way {
  way: 'awaited' | 'beside';
  pass_median_ms: number;
  pass_max_ms: number;
  status_writes: number;
  write_median_ms: number | null;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : Math.round(s[s.length >> 1]! * 10) / 10;
};

async function measure(url: string, queued: number, passes: number, way: Way['way']): Promise<Way> {
  const pool = createPool(url, 10);
  try {
    await migrate(pool);
    const clock = new VirtualClock('2026-01-01T00:00:00Z');
    const store = new Store(pool, { clock, rng: seededRng(1) });
    const spec = (priority: number) =>
      normalizeRequest({ command: ['true'], vcpus: 1, ram: '1GiB', priority });
    for (let n = 0; n < queued; n += BATCH) {
      await store.requests.create(
        'bench',
        Array.from({ length: Math.min(BATCH, queued - n) }, () => spec(1)),
      );
      // Ids are the time and a random part: a millisecond of their own per batch, as a real clock gives.
      clock.runUntil(clock.nowMs() + 1);
    }
    const writes: number[] = [];
    const queue = new PgQueue(store, url);
    const timedQueue = Object.create(queue) as PgQueue;
    timedQueue.setWaiting = async (...args: Parameters<PgQueue['setWaiting']>) => {
      const t = performance.now();
      await queue.setWaiting(...args);
      writes.push(performance.now() - t);
    };
    const d = new Dispatcher({
      id: 'b/t',
      cluster: 'b',
      tag: 't',
      queue: timedQueue,
      driver: new SimCloud(clock, { seed: 1, bootTime: { kind: 'fixed', ms: 3_600_000 } }),
      clock,
      instanceTypes: [BENCH_TYPE],
      config: { ...SCHEDULER_OPTIONS.defaults(), maxInstances: 1 },
      ...DISPATCHER_TIMERS.parse({ status_interval: '0s' }),
      bootData: bootDataFor('sim:'),
    });
    await d.tick(); // the first pass writes the whole group
    writes.length = 0;
    const before = d.statusWrites;
    const times: number[] = [];
    for (let k = 0; k < passes; k++) {
      // One container ahead of all the others: every waiting container's position moves by one.
      await store.requests.create('bench', [spec(2 + k)]);
      clock.runUntil(clock.nowMs() + 1000);
      const t = performance.now();
      await (way === 'awaited' ? d.tick() : d.tickAhead());
      times.push(performance.now() - t);
    }
    await d.stop();
    return {
      way,
      pass_median_ms: median(times),
      pass_max_ms: Math.round(Math.max(...times)),
      status_writes: d.statusWrites - before,
      write_median_ms: writes.length === 0 ? null : median(writes),
    };
  } finally {
    await pool.end();
  }
}

export async function run(argv: string[]): Promise<number> {
  const a = benchArgs('status-writes', argv, {
    json: opt.flag('print JSON'),
    queued: opt.int(100_000, 'waiting containers (one status group)', 1),
    passes: opt.int(10, 'passes measured per way', 1),
  });
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-statuses-'));
  chmodSync(dir, 0o755); // as root, PostgreSQL runs as postgres and must reach it
  const pg = await startEmbedded({ dataDir: join(dir, 'pgdata') });
  const ways: Way[] = [];
  try {
    const admin = createPool(pg.url, 1);
    try {
      for (const way of ['awaited', 'beside'] as const) {
        if (!a.json) console.log(`${way}: ${a.queued} waiting, ${a.passes} passes…`);
        await admin.query(`CREATE DATABASE bench_statuses_${way}`);
        ways.push(await measure(withDatabase(pg.url, `bench_statuses_${way}`), a.queued, a.passes, way));
      }
    } finally {
      await admin.end();
    }
  } finally {
    await pg.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  if (a.json) console.log(JSON.stringify({ queued: a.queued, passes: a.passes, ways }));
  else
    for (const w of ways)
      console.log(
        `${w.way.padEnd(8)} pass median ${w.pass_median_ms} ms, max ${w.pass_max_ms} ms; ` +
          `${w.status_writes} status writes, median write ${w.write_median_ms ?? '-'} ms`,
      );
  return 0;
}
