// `npm run bench -- dispatch-creates [--json] [--containers N] [--concurrency 1,10,50] [--latency 50ms,1s]
// [--sync-interval 10s]`
//
// Creates per second through the whole dispatcher (issue 11 item 3): N containers that each need an
// instance of their own (max_containers_per_instance 1) are submitted to a PostgreSQL queue; the real
// Dispatcher, in the production pass loop, creates their instances through the ec2 driver against the
// emulated EC2 (moto behind the fault proxy, nothing booted), with the proxy adding a fixed API latency to
// every call. Measured: from the first RunInstances to the N-th instance recorded by the dispatcher, per
// max_concurrent_creates. max_concurrent_creates 1 is what the act loop did before creates ran in the
// background (one create awaited after the other).
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { bootDataFor } from '../src/cloud/boot-data.js';
import { withRateLimit } from '../src/cloud/decorators/rate-limit.js';
import type { Driver } from '../src/cloud/driver.js';
import { parseEc2Config } from '../src/cloud/ec2/config.js';
import { Ec2Driver } from '../src/cloud/ec2/driver.js';
import { Ec2Emulator, EMULATOR_CREDENTIALS } from '../src/cloud/ec2-emu/emulator.js';
import { SCHEDULER_OPTIONS } from '../src/config/scheduler.js';
import { DISPATCHER_TIMERS } from '../src/dispatch/config.js';
import { Dispatcher } from '../src/dispatch/dispatcher.js';
import { runPassLoop, type PassLoop } from '../src/dispatch/loop.js';
import { PgQueue } from '../src/dispatch/pg-queue.js';
import { systemClock } from '../src/model/clock.js';
import { normalizeRequest } from '../src/model/request.js';
import { createPool, withDatabase } from '../src/store/db.js';
import { startEmbedded } from '../src/store/embedded.js';
import { migrate } from '../src/store/migrate.js';
import { Store } from '../src/store/store.js';
import { BENCH_TYPE, EC2_OPTIONS } from './ec2.js';
import { benchArgs, opt } from './args.js';

interface Row {
  latencyMs: number;
  maxConcurrentCreates: number;
  instances: number;
  seconds: number;
  createsPerSecond: number;
  passes: number;
  /** Median time of one driver.create (RunInstances with the API latency, retries included). */
  medianCreateMs: number;
  /** Syncs (driver.list: DescribeInstances) and their median time: a pass that syncs starts no create until it is done. */
  lists: number;
  medianListMs: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : Math.round(s[s.length >> 1]!);
}

/** Times each call of `f` into `into`. */
async function timed<T>(into: number[], f: () => Promise<T>): Promise<T> {
  const t = performance.now();
  try {
    return await f();
  } finally {
    into.push(performance.now() - t);
  }
}

export async function run(args: string[]): Promise<number> {
  const a = benchArgs('dispatch-creates', args, {
    ...EC2_OPTIONS,
    containers: opt.int(100, 'containers submitted per run (one instance each)'),
    'sync-interval': opt.text('10s', "the dispatcher's sync_interval"),
  });
  const { json, containers, concurrency: levels, latency: latencies } = a;
  // The dispatcher's sync_interval (default 10 s): a pass that syncs awaits DescribeInstances before it
  // starts any create, so at a high API latency the syncs are part of what is measured.
  const timers = DISPATCHER_TIMERS.parse({ sync_interval: a['sync-interval'] });
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-creates-'));
  chmodSync(dir, 0o755); // as root, PostgreSQL runs as postgres and must reach it
  const pg = await startEmbedded({ dataDir: join(dir, 'pgdata') });
  let emu: Ec2Emulator | null = null;
  const rows: Row[] = [];
  try {
    let db = 0;
    for (const latencyMs of latencies) {
      for (const level of levels) {
        // An emulator of its own per row: moto's DescribeInstances filters every instance it ever held,
        // terminated ones included, so a sync gets slower with every row run before on the same moto.
        emu = await Ec2Emulator.start({ boot: false });
        const { subnets, ami } = await emu.defaults();
        const ec2 = new Ec2Driver({
          config: parseEc2Config({ endpoint: emu.endpoint, subnets: subnets.slice(0, 3), ami }),
          credentials: EMULATOR_CREDENTIALS,
        });
        // A database of its own per row: the same queue, nodes and lease every time.
        const name = `bench${++db}`;
        const admin = createPool(pg.url, 1);
        await admin.query(`CREATE DATABASE ${name}`);
        await admin.end();
        const url = withDatabase(pg.url, name);
        const pool = createPool(url, 10);
        await migrate(pool);
        const store = new Store(pool);
        await store.requests.create(
          'bench',
          Array.from({ length: containers }, () =>
            normalizeRequest({ command: ['true'], vcpus: 1, ram: '1GiB' }),
          ),
        );
        emu.setFaults({ latency: `${latencyMs}ms` });
        let first: number | null = null;
        let last = 0;
        let created = 0;
        const createMs: number[] = [];
        const listMs: number[] = [];
        const driver: Driver = {
          create: (t, tags, boot) => {
            first ??= performance.now();
            return timed(createMs, () => ec2.create(t, tags, boot));
          },
          list: (f) => timed(listMs, () => ec2.list(f)),
          destroy: (id) => ec2.destroy(id),
          setTags: (id, tags) => ec2.setTags(id, tags),
        };
        let allCreated!: () => void;
        const done = new Promise<void>((r) => (allCreated = r));
        let loop: PassLoop | null = null;
        const d = new Dispatcher({
          id: 'bench/t',
          cluster: 'bench',
          tag: 't',
          queue: new PgQueue(store, url),
          driver: withRateLimit(driver, { clock: systemClock, maxConcurrentCreates: level }),
          clock: systemClock,
          instanceTypes: [BENCH_TYPE],
          config: { ...SCHEDULER_OPTIONS.defaults(), maxContainersPerInstance: 1, maxInstances: null },
          ...timers,
          bootData: bootDataFor('http://127.0.0.1:9'),
          maxConcurrentCreates: level,
          onOperationDone: () => loop?.poke(),
          onEvent: (e) => {
            if (e.kind === 'error' || e.kind === 'create-failed' || e.kind === 'node-lost')
              console.error(JSON.stringify(e));
            if (e.kind !== 'instance-created') return;
            created++;
            last = performance.now();
            if (created === containers) allCreated();
          },
        });
        let passes = 0;
        loop = runPassLoop({
          tick: () => (passes++, d.tick()),
          notifier: null,
          intervalMs: 1000,
          onLeaseLost: () => allCreated(),
          onPassFailed: (err) => console.error(`pass failed: ${err.message}`),
        });
        await done;
        await loop.stop();
        await d.stop();
        const seconds = (last - (first ?? last)) / 1000;
        const row: Row = {
          latencyMs,
          maxConcurrentCreates: level,
          instances: created,
          seconds: Math.round(seconds * 100) / 100,
          createsPerSecond: Math.round((created / Math.max(seconds, 1e-3)) * 10) / 10,
          passes,
          medianCreateMs: median(createMs),
          lists: listMs.length,
          medianListMs: median(listMs),
        };
        rows.push(row);
        if (!json)
          console.log(
            `latency ${latencyMs} ms, max_concurrent_creates ${level}: ${row.createsPerSecond} creates/s (${created} instances in ${row.seconds} s, ${passes} passes; create median ${row.medianCreateMs} ms; ${row.lists} syncs, median ${row.medianListMs} ms)`,
          );
        await pool.end();
        ec2.close();
        await emu.stop();
        emu = null;
      }
    }
  } finally {
    await emu?.stop();
    await pg.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  if (json) console.log(JSON.stringify({ bench: 'dispatch-creates', rows }, null, 2));
  return 0;
}
