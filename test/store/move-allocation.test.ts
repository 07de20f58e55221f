// The store's move transition (src/store/transitions/move.ts): a SLURM job's node that ran its container
// takes the next Locked container of its dispatcher whose own job has not started and fits what is left of
// its allocation, in one statement; of two callers for one row exactly one wins.
import { beforeAll, describe, expect, it } from 'vitest';
import { parseSlurmConfig } from '../../src/backends/slurm/config.js';
import { recordAllocations } from '../../src/backends/slurm/queue.js';
import { allocationOf } from '../../src/backends/slurm/sbatch.js';
import { statesFrom } from '../../src/model/transitions.js';
import type { ManualClock } from '../../src/model/clock.js';
import type { Store } from '../../src/store/store.js';
import {
  MOVE_INDEX,
  MOVE_SQL,
  prepareAllocationMoves,
  SLURM_JOB_INSTANCE_PREFIX,
} from '../../src/store/transitions/move.js';
import { submit, testStore } from '../helpers/store.js';

let store: Store;
let clock: ManualClock;
const GIB = 1024 ** 3;
const MIN = 60_000;

beforeAll(async () => {
  ({ store, clock } = await testStore());
});

let jobSeq = 1000;

interface Spec {
  vcpus?: number;
  ram?: number;
  priority?: number;
  maxRunTimeMs?: number | null;
  instanceTypes?: string[] | null;
  /** More of the request (image, command, env...). */
  more?: Record<string, unknown>;
}

/**
 * A container placed the way the slurm dispatcher places it: locked by `cluster/default`, its node recorded
 * with the allocation of its job (allocationOf, the sbatch options' owner), assigned and bound to a job.
 */
async function placed(cluster: string, s: Spec = {}, reuse: Record<string, unknown> = {}) {
  const cfg = parseSlurmConfig({ cluster, features: { big: 'bigmem' }, reuse_allocation: reuse });
  const holder = `${cluster}/${cfg.tag}`;
  const req = await submit(store, 'alice', {
    vcpus: s.vcpus ?? 1,
    ram: s.ram ?? GIB,
    priority: s.priority ?? 500,
    ...(s.maxRunTimeMs ? { max_run_time: `${s.maxRunTimeMs / 1000}s` } : {}),
    ...(s.instanceTypes ? { instance_types: s.instanceTypes } : {}),
    ...s.more,
  });
  const id = req.container_id!;
  const { node, bootstrapSecret } = await store.nodes.create({
    cluster,
    dispatcherTag: cfg.tag,
    instanceId: null,
    instanceType: 'slurm',
  });
  const a = allocationOf(
    {
      id,
      vcpus: s.vcpus ?? 1,
      ram: s.ram ?? GIB,
      scratch: 0,
      gpus: 0,
      instanceTypes: s.instanceTypes ?? null,
      maxRunTimeMs: s.maxRunTimeMs ?? null,
    },
    cfg,
  );
  if (!a.ok) throw new Error(a.reason);
  await recordAllocations(store.ctx.pool, [{ node: node.id, allocation: a.allocation }], cfg);
  const [lock] = await store.containers.lock([id], holder);
  const job = String(jobSeq++);
  await store.containers.assign(id, holder, `slurm-job-${job}`, node.id);
  await store.nodes.bind(node.id, `slurm-job-${job}`);
  return { id, token: lock!.token, node: node.id, secret: bootstrapSecret, job };
}

/** A job that started, ran its container and reported it: its node asks for the next one. */
async function finished(cluster: string, s: Spec = {}, reuse: Record<string, unknown> = {}) {
  const p = await placed(cluster, s, reuse);
  await store.nodes.register(p.node, p.secret, {});
  await store.containers.start(p.id, p.node, p.token);
  await store.containers.complete(p.id, p.node, p.token, { exitCode: 0, oomKilled: false, usage: null });
  return p;
}

const state = async (id: string) =>
  (await store.ctx.pool.query(`SELECT state, node_id FROM containers WHERE id = $1`, [id])).rows[0];

describe('moving a Locked container into a started allocation', () => {
  it('takes the fitting container of highest priority, starts it with a new token, records the move', async () => {
    const asker = await finished('m1', { vcpus: 2, ram: 2 * GIB });
    const low = await placed('m1', { priority: 100 });
    const high = await placed('m1', { priority: 900 });
    const [order] = await store.containers.nextInAllocation(asker.node);
    expect(order).toMatchObject({ id: high.id, started: true });
    expect(await state(high.id)).toEqual({ state: 'Running', node_id: asker.node });
    expect(await state(low.id)).toEqual({ state: 'Locked', node_id: low.node });
    const events = await store.ctx.pool.query(
      `SELECT message FROM container_events WHERE container_id = $1`,
      [high.id],
    );
    expect(events.rows.map((r) => r.message)).toContainEqual(
      `Running on node ${asker.node}: moved to the allocation of SLURM job ${asker.job} (from node ${high.node}, whose job had not started)`,
    );
    // The old token (its own job's) is void; the new one reports.
    await expect(store.containers.start(high.id, high.node, high.token)).rejects.toThrow();
    await store.containers.complete(high.id, asker.node, order!.lock_token, {
      exitCode: 0,
      oomKilled: false,
      usage: null,
    });
    expect((await state(high.id)).state).toBe('Complete');
    // Then the next one, and then nothing.
    expect((await store.containers.nextInAllocation(asker.node)).map((o) => o.id)).toEqual([low.id]);
  });

  it("returns the moved container's whole start order, as a one-shot registration would read it", async () => {
    const asker = await finished('m9', { vcpus: 4, ram: 4 * GIB, maxRunTimeMs: 60 * MIN });
    const moved = await placed('m9', {
      vcpus: 2,
      ram: 2 * GIB,
      maxRunTimeMs: 30 * MIN,
      more: {
        image: 'debian:12',
        command: ['sh', '-c', 'echo $A'],
        env: { A: 'one' },
        secret_env: { S: 'two' },
        cwd: '/tmp',
        scratch: 3 * GIB,
      },
    });
    // Before the move, the order its own job's agent would have been given (with the old token).
    const before = await store.containers.startOrderFor(moved.node, moved.id);
    expect(before).not.toBeNull();
    const orders = await store.containers.nextInAllocation(asker.node);
    expect(orders).toHaveLength(1);
    const { lock_token, ...order } = orders[0]!;
    const { lock_token: oldToken, ...expected } = before!;
    expect(order).toEqual({ ...expected, started: true });
    expect(order).toMatchObject({
      id: moved.id,
      image: 'debian:12',
      command: ['sh', '-c', 'echo $A'],
      env: { A: 'one' },
      secret_env: { S: 'two' },
      cwd: '/tmp',
      vcpus: 2,
      ram: 2 * GIB,
      scratch: 3 * GIB,
      max_run_time_ms: 30 * MIN,
    });
    // A new lock generation: the token differs from the old one, and it is the one the store accepts.
    expect(lock_token).not.toBe(oldToken);
    await store.containers.complete(moved.id, asker.node, lock_token, {
      exitCode: 0,
      oomKilled: false,
      usage: null,
    });
    expect((await state(moved.id)).state).toBe('Complete');
  });

  it('runs nothing while its node still holds a container', async () => {
    const asker = await finished('m2', { vcpus: 2 });
    await placed('m2');
    await placed('m2');
    expect(await store.containers.nextInAllocation(asker.node)).toHaveLength(1);
    expect(await store.containers.nextInAllocation(asker.node)).toEqual([]);
  });

  it('takes nothing bigger than the allocation, of another constraint or dispatcher, or already started', async () => {
    const asker = await finished('m3', { vcpus: 2, ram: 2 * GIB, maxRunTimeMs: 20 * MIN });
    await placed('m3', { vcpus: 3 }); // more CPUs
    await placed('m3', { ram: 3 * GIB }); // more memory
    await placed('m3', { instanceTypes: ['big'] }); // a constraint the allocation was not given
    await placed('m3', { maxRunTimeMs: 25 * MIN }); // more than the 25 min allocation has left
    await placed('m3', {}); // no time limit: only an allocation without one takes it
    await placed('m3-other', { vcpus: 1, maxRunTimeMs: MIN }); // another dispatcher's
    const started = await placed('m3', { maxRunTimeMs: MIN });
    await store.nodes.register(started.node, started.secret, {}); // its own job started
    expect(await store.containers.nextInAllocation(asker.node)).toEqual([]);
    const fits = await placed('m3', { vcpus: 2, ram: 2 * GIB, maxRunTimeMs: 10 * MIN });
    expect((await store.containers.nextInAllocation(asker.node)).map((o) => o.id)).toEqual([fits.id]);
  });

  it('counts the time the allocation has left', async () => {
    const asker = await finished('m4', { maxRunTimeMs: 20 * MIN });
    await placed('m4', { maxRunTimeMs: 10 * MIN }); // needs 10 min and 20 s (kill grace, report)
    clock.advance(15 * MIN); // a 25 min allocation: 10 min left
    expect(await store.containers.nextInAllocation(asker.node)).toEqual([]);
    const shorter = await placed('m4', { maxRunTimeMs: 9 * MIN });
    expect((await store.containers.nextInAllocation(asker.node)).map((o) => o.id)).toEqual([shorter.id]);
  });

  it('stops at max_containers and max_time, and not at all with reuse off', async () => {
    const two = await finished('m5', {}, { max_containers: 2 });
    await placed('m5');
    await placed('m5');
    const [first] = await store.containers.nextInAllocation(two.node);
    await store.containers.complete(first!.id, two.node, first!.lock_token, {
      exitCode: 0,
      oomKilled: false,
      usage: null,
    });
    expect(await store.containers.nextInAllocation(two.node)).toEqual([]); // its own + one

    const old = await finished('m6', {}, { max_time: '10m' });
    await placed('m6');
    clock.advance(10 * MIN);
    expect(await store.containers.nextInAllocation(old.node)).toEqual([]);

    const off = await finished('m7', {}, { enabled: false });
    await placed('m7');
    expect(await store.containers.nextInAllocation(off.node)).toEqual([]);
  });

  it('of the container’s own job starting and an allocation taking it, exactly one wins', async () => {
    // Each order on its own: the start first (its agent registered too late to be seen), then the move.
    const a = await finished('order1');
    const first = await placed('order1');
    await store.containers.start(first.id, first.node, first.token);
    expect(await store.containers.nextInAllocation(a.node)).toEqual([]);
    const second = await placed('order1');
    expect(await store.containers.nextInAllocation(a.node)).toHaveLength(1);
    await expect(store.containers.start(second.id, second.node, second.token)).rejects.toThrow(
      /not assigned to node/,
    );
    // And at once.
    for (let round = 0; round < 15; round++) {
      const cluster = `race${round}`;
      const asker = await finished(cluster);
      const c = await placed(cluster);
      const [moved, started] = await Promise.allSettled([
        store.containers.nextInAllocation(asker.node),
        store.containers.start(c.id, c.node, c.token),
      ]);
      const tookIt = moved.status === 'fulfilled' && moved.value.length === 1;
      const startedIt = started.status === 'fulfilled';
      expect(tookIt !== startedIt).toBe(true);
      expect(await state(c.id)).toEqual({ state: 'Running', node_id: tookIt ? asker.node : c.node });
    }
  });

  it('of two allocations asking for one container, exactly one gets it', async () => {
    for (let round = 0; round < 15; round++) {
      const cluster = `two${round}`;
      const a = await finished(cluster);
      const b = await finished(cluster);
      const c = await placed(cluster);
      const got = await Promise.all([a, b].map((x) => store.containers.nextInAllocation(x.node)));
      expect(got.flat().map((o) => o.id)).toEqual([c.id]);
    }
  });

  /** The move's plan for `node`: every plan node (type, index name). */
  async function planOf(node: string): Promise<Record<string, unknown>[]> {
    await store.ctx.pool.query('ANALYZE containers');
    const r = await store.ctx.pool.query(`EXPLAIN (FORMAT JSON) ${MOVE_SQL}`, [
      clock.now(),
      node,
      statesFrom('start'),
      SLURM_JOB_INSTANCE_PREFIX,
    ]);
    const nodes: Record<string, unknown>[] = [];
    const walk = (n: Record<string, unknown>) => {
      nodes.push(n);
      for (const c of (n.Plans as Record<string, unknown>[] | undefined) ?? []) walk(c);
    };
    walk((r.rows[0]['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
    return nodes;
  }

  const indexExists = async () =>
    (await store.ctx.pool.query(`SELECT to_regclass($1) IS NOT NULL AS e`, [MOVE_INDEX])).rows[0].e;

  /** 40 Locked containers of alternating 4 and 1 CPUs, priorities 100..139, for an asker of 2 CPUs. */
  async function fortyPlaced(cluster: string) {
    const asker = await finished(cluster, { vcpus: 2 });
    for (let i = 0; i < 40; i++) await placed(cluster, { priority: 100 + i, vcpus: i % 2 === 0 ? 4 : 1 });
    return asker;
  }

  async function movedPriority(node: string) {
    const [order] = await store.containers.nextInAllocation(node);
    return (await store.ctx.pool.query(`SELECT priority FROM containers WHERE id = $1`, [order!.id])).rows[0];
  }

  it('the SLURM setup builds the index once, and again if a build died half way', async () => {
    expect(await indexExists()).toBe(false); // the migrations make none
    expect(await prepareAllocationMoves(store.ctx.pool)).toBe(true);
    expect(await prepareAllocationMoves(store.ctx.pool)).toBe(false);
    // A CREATE INDEX CONCURRENTLY that died leaves an invalid index: built again, not taken as done.
    await store.ctx.pool.query(`UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass($1)`, [
      MOVE_INDEX,
    ]);
    expect(await prepareAllocationMoves(store.ctx.pool)).toBe(true);
    const valid = await store.ctx.pool.query(
      `SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)`,
      [MOVE_INDEX],
    );
    expect(valid.rows).toEqual([{ indisvalid: true }]);
  });

  it('with the index, walks the Locked containers in order and stops at the first that fits (no sort of them all)', async () => {
    await prepareAllocationMoves(store.ctx.pool);
    const asker = await fortyPlaced('plan');
    const nodes = await planOf(asker.node);
    expect(nodes.map((n) => n['Index Name'])).toContain(MOVE_INDEX);
    expect(nodes.map((n) => n['Node Type'])).not.toContain('Sort');
    // And it takes the first that fits: the highest priority among those of 1 CPU.
    expect(await movedPriority(asker.node)).toEqual({ priority: 139 });
  });

  it('without a SLURM dispatcher set up there is no move index, and the move takes the same container', async () => {
    // As on a database where no SLURM dispatcher ever started (the migrations make none: checked above).
    await store.ctx.pool.query(`DROP INDEX ${MOVE_INDEX}`);
    const asker = await fortyPlaced('noindex');
    expect((await planOf(asker.node)).map((n) => n['Index Name'])).not.toContain(MOVE_INDEX);
    // The highest priority among those of 1 CPU.
    expect(await movedPriority(asker.node)).toEqual({ priority: 139 });
  });
});
