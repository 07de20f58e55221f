// `npm run bench -- slurm-move [--locked N] [--reps R] [--json]`: the SLURM move statement
// (src/store/transitions/move.ts) with N containers Locked to nodes whose jobs have not started, placed as the
// slurm dispatcher places them (allocationOf, recordAllocations, lock, assign, bind), and one started
// allocation asking for the next. Prints PostgreSQL's plan and execution time (EXPLAIN ANALYZE, in a
// transaction rolled back: nothing moves) and the median of R executions, each rolled back.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseSlurmConfig } from '../src/backends/slurm/config.js';
import { recordAllocations } from '../src/backends/slurm/queue.js';
import { allocationOf } from '../src/backends/slurm/sbatch.js';
import { normalizeRequest } from '../src/model/request.js';
import { statesFrom } from '../src/model/transitions.js';
import { createPool } from '../src/store/db.js';
import { startEmbedded } from '../src/store/embedded.js';
import { migrate } from '../src/store/migrate.js';
import { Store } from '../src/store/store.js';
import {
  MOVE_SQL,
  prepareAllocationMoves,
  SLURM_JOB_INSTANCE_PREFIX,
} from '../src/store/transitions/move.js';
import { benchArgs, opt } from './args.js';

const OPTIONS = {
  locked: opt.int(10_000, 'Locked containers waiting for their jobs'),
  reps: opt.int(21, 'executions timed (each rolled back)'),
  json: opt.flag('print JSON'),
};

const GIB = 1024 ** 3;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function run(argv: string[]): Promise<number> {
  const args = benchArgs('slurm-move', argv, OPTIONS);
  const say = (s: string) => !args.json && console.error(s);
  const home = mkdtempSync(join(tmpdir(), 'berth-slurm-move-'));
  const pg = await startEmbedded({ dataDir: join(home, 'pgdata') });
  const pool = createPool(pg.url, 8);
  try {
    await migrate(pool);
    await prepareAllocationMoves(pool); // as the SLURM dispatcher's setup does
    const store = new Store(pool);
    const cfg = parseSlurmConfig({ cluster: 'bench', reuse_allocation: {} });
    const holder = `bench/${cfg.tag}`;
    let job = 1000;
    /** Containers placed on nodes bound to jobs; `vcpus` each (the asker's is larger: all fit it). */
    const place = async (count: number, vcpus: number) => {
      const reqs = await store.requests.create(
        'bench',
        Array.from({ length: count }, (_, i) =>
          normalizeRequest({ command: ['true'], vcpus, ram: '1GiB', priority: 1 + (i % 900) }),
        ),
      );
      const ids = reqs.map((r) => r.container_id!);
      const locks = await store.containers.lock(ids, holder);
      const placed = [];
      for (const l of locks) {
        const { node, bootstrapSecret } = await store.nodes.create({
          cluster: 'bench',
          dispatcherTag: cfg.tag,
          instanceId: null,
          instanceType: 'slurm',
        });
        const a = allocationOf(
          { id: l.id, vcpus, ram: GIB, scratch: 0, gpus: 0, instanceTypes: null, maxRunTimeMs: null },
          cfg,
        );
        if (!a.ok) throw new Error(a.reason);
        await recordAllocations(pool, [{ node: node.id, allocation: a.allocation }], cfg);
        const instance = `${SLURM_JOB_INSTANCE_PREFIX}${job++}`;
        await store.containers.assign(l.id, holder, instance, node.id);
        await store.nodes.bind(node.id, instance);
        placed.push({ id: l.id, token: l.token, node: node.id, secret: bootstrapSecret });
      }
      return placed;
    };
    say(`placing ${args.locked} Locked containers…`);
    for (let n = 0; n < args.locked; n += 500) await place(Math.min(500, args.locked - n), 1);
    // The asker: its job started, ran its container and reported it.
    const [asker] = await place(1, 4);
    await store.nodes.register(asker!.node, asker!.secret, {});
    await store.containers.start(asker!.id, asker!.node, asker!.token);
    await store.containers.complete(asker!.id, asker!.node, asker!.token, {
      exitCode: 0,
      oomKilled: false,
      usage: null,
    });
    await pool.query('VACUUM ANALYZE');
    const params = [new Date(), asker!.node, statesFrom('start'), SLURM_JOB_INSTANCE_PREFIX];
    const c = await pool.connect();
    const ms: number[] = [];
    let plan = '';
    try {
      for (let r = 0; r <= args.reps; r++) {
        await c.query('BEGIN');
        const t0 = performance.now();
        const moved = await c.query(MOVE_SQL, params);
        const t = performance.now() - t0;
        await c.query('ROLLBACK');
        if (moved.rowCount !== 1) throw new Error(`moved ${moved.rowCount} containers, expected 1`);
        if (r > 0) ms.push(t); // the first warms the caches
      }
      await c.query('BEGIN');
      plan = (await c.query(`EXPLAIN (ANALYZE, BUFFERS) ${MOVE_SQL}`, params)).rows
        .map((row: Record<string, string>) => row['QUERY PLAN'])
        .join('\n');
      await c.query('ROLLBACK');
    } finally {
      c.release();
    }
    const out = { locked: args.locked, median_ms: Number(median(ms).toFixed(2)), plan };
    if (args.json) console.log(JSON.stringify(out));
    else console.log(`${plan}\n\nmove with ${args.locked} Locked containers: median ${out.median_ms} ms`);
    return 0;
  } finally {
    await pool.end();
    await pg.stop();
    rmSync(home, { recursive: true, force: true });
  }
}
