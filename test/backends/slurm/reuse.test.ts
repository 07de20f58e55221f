// Allocation reuse against a real SLURM (one node of 2 CPUs): a job SLURM started runs, after its own
// container, the next container of this dispatcher that fits its allocation and whose own job has not started
// (docs/SLURM.md, "One allocation, several containers"). Fewer jobs start than containers run, each container
// finishes exactly once, an allocation takes them in Berth's order and never one bigger than itself; a moved
// container is cancelled like any other, and its superseded pending job is scancelled.
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { RunningSlurmDispatcher } from '../../../src/backends/slurm/service.js';
import { isLive } from '../../../src/backends/slurm/squeue.js';
import { MOVE_INDEX } from '../../../src/store/transitions/move.js';
import { until } from '../../helpers/cli.js';
import { itIf } from '../../helpers/needs.js';
import { slurmTestsUnavailable, slurmWorld, submit, type ContainerView, type SlurmWorld } from './harness.js';

const missing = slurmTestsUnavailable();
const test = itIf(missing);

let w: SlurmWorld;

beforeAll(async () => {
  if (missing) return;
  w = await slurmWorld({ nodes: [{ name: 'pair', cpus: 2, realMemoryMiB: 2048 }] });
}, 120_000);

afterAll(async () => {
  await w?.stop();
});

const MOVED = 'moved to the allocation of SLURM job';

/**
 * Submits the specs while no dispatcher runs, then starts one: its first pass locks and submits them all, in
 * Berth's order, one sbatch at a time (so nodes are bound in that order too). Stopped after `fn`.
 */
async function withDispatcher<T>(
  specs: Record<string, unknown>[],
  fn: (ids: string[], d: RunningSlurmDispatcher) => Promise<T>,
): Promise<T> {
  const ids: string[] = [];
  for (const s of specs) ids.push((await submit(w, s)).container);
  const d = await w.dispatcher({ submit_concurrency: 1 });
  try {
    return await fn(ids, d);
  } finally {
    await d.stop();
  }
}

const get = (id: string) => w.api<ContainerView>('GET', `/v1/containers/${id}`);
const done = (c: ContainerView) => c.state === 'Complete' || c.state === 'Cancelled';
const query = async <R>(sql: string, params: unknown[]) =>
  (await w.server.store.ctx.pool.query(sql, params)).rows as R[];
/** The move events of these containers, in the order they happened. */
const moves = (ids: string[]) =>
  query<{ container_id: string; message: string }>(
    `SELECT container_id, message FROM container_events WHERE container_id = ANY($1) AND message LIKE $2
     ORDER BY at, id`,
    [ids, `%${MOVED}%`],
  );

describe('slurm backend: one allocation, several containers', () => {
  test(
    '12 short containers on 2 CPUs: fewer jobs start than containers run, each finishes once, in Berth order',
    { timeout: 300_000 },
    async () => {
      const prio = [900, 500, 100];
      const specs = Array.from({ length: 12 }, (_, i) => ({
        name: `reuse-${i}`,
        priority: prio[i % 3],
        command: ['sh', '-c', `echo ran-${i}`],
        max_run_time: '5m',
      }));
      const since = new Date();
      await withDispatcher(specs, async (ids) => {
        // The dispatcher's setup built the move's index (a database without SLURM has none).
        expect(await query('SELECT to_regclass($1) IS NOT NULL AS built', [MOVE_INDEX])).toEqual([
          { built: true },
        ]);
        for (const id of ids) await w.container(id, done, 240_000, 'finished');
        for (const [i, id] of ids.entries()) {
          const c = await get(id);
          expect(c, id).toMatchObject({ state: 'Complete', exit_code: 0 });
          expect(c.usage?.wall_ms, id).toBeGreaterThan(0);
          const logs = await w.cli(['logs', id]);
          expect(logs.stdout).toBe(`ran-${i}\n`);
          // Exactly once: one attempt of its request, started once.
          const req = await w.api<{ container_id: string; state: string }>(
            'GET',
            `/v1/requests/${c.request_id}`,
          );
          expect(req.container_id).toBe(id);
          const starts = await query<{ n: string }>(
            `SELECT count(*) AS n FROM container_events WHERE container_id = $1 AND message LIKE 'Running on node%'`,
            [id],
          );
          expect(Number(starts[0]!.n), id).toBe(1);
        }
        // The jobs that started are the node records an agent registered on.
        const started = await query<{ n: string }>(
          `SELECT count(*) AS n FROM nodes WHERE cluster = 'test' AND registered_at IS NOT NULL AND created_at >= $1`,
          [since],
        );
        const moved = await moves(ids);
        expect(Number(started[0]!.n), `${started[0]!.n} jobs started`).toBeLessThan(ids.length);
        expect(moved.length).toBeGreaterThan(0);
        // Each allocation took the best of what waited: the priorities one job took never rise (two jobs
        // asking at once may take a band's last and the next band's first in either order, never skip a band).
        const priority = new Map(ids.map((id, i) => [id, prio[i % 3]!]));
        const byJob = new Map<string, number[]>();
        for (const m of moved) {
          const job = /SLURM job (\d+)/.exec(m.message)![1]!;
          byJob.set(job, [...(byJob.get(job) ?? []), priority.get(m.container_id)!]);
        }
        for (const [job, taken] of byJob)
          expect(taken, `job ${job}: ${JSON.stringify(moved)}`).toEqual([...taken].sort((a, b) => b - a));
        const order = moved.map((m) => priority.get(m.container_id)!);
        if (order.includes(100) && order.includes(900))
          expect(order.lastIndexOf(900), JSON.stringify(moved)).toBeLessThan(order.indexOf(100));
        // Every superseded job is gone: nothing of these containers is left in SLURM.
        await until(
          async () => !(await w.jobs()).some((j) => isLive(j) && ids.includes(j.name)),
          60_000,
          'no live job of these containers',
        );
      });
    },
  );

  test('a container bigger than the asking allocation is not taken', { timeout: 240_000 }, async () => {
    await withDispatcher(
      [
        { name: 'small-a', priority: 900, command: ['sh', '-c', 'echo a'], max_run_time: '5m' },
        { name: 'small-b', priority: 900, command: ['sh', '-c', 'echo b'], max_run_time: '5m' },
        { name: 'big', priority: 500, vcpus: 2, command: ['sh', '-c', 'echo big'], max_run_time: '5m' },
      ],
      async (ids) => {
        for (const id of ids) await w.container(id, done, 180_000, 'finished');
        for (const id of ids) expect((await get(id)).state).toBe('Complete');
        // The big one ran in its own job (the one named after it), not in a 1-CPU allocation.
        expect(await moves([ids[2]!])).toEqual([]);
        const big = await get(ids[2]!);
        const own = (await w.jobs()).find((j) => `slurm-job-${j.id}` === big.instance_id);
        expect(own?.name).toBe(ids[2]);
      },
    );
  });

  test(
    'a moved running container is cancelled as any other; its superseded pending job is scancelled',
    { timeout: 240_000 },
    async () => {
      await withDispatcher(
        [
          { name: 'quick-a', priority: 900, command: ['sleep', '5'], max_run_time: '15m' },
          { name: 'quick-b', priority: 900, command: ['sleep', '5'], max_run_time: '15m' },
          { name: 'long-1', priority: 500, command: ['sleep', '600'], max_run_time: '15m' },
          { name: 'long-2', priority: 500, command: ['sleep', '600'], max_run_time: '15m' },
          { name: 'long-3', priority: 500, command: ['sleep', '600'], max_run_time: '15m' },
        ],
        async (ids) => {
          const [, , l1, l2, l3] = ids as [string, string, string, string, string];
          // The quick ones' jobs take two of the long ones (the 2 CPUs are theirs), the third waits. (Their 5 s
          // outlast the five sbatch calls: the long ones' jobs are known by then.)
          const running = await until(
            async () => {
              const r = (await moves([l1, l2, l3])).map((m) => m.container_id);
              return r.length === 2 ? r : null;
            },
            120_000,
            'two long containers moved',
          );
          const moved = running[0]!;
          const c = await w.container(moved, (x) => x.state === 'Running', 30_000, 'moved one running');
          const why = await w.cli(['why', moved]);
          expect(why.stdout).toContain(`Running on instance ${c.instance_id}`);
          // Its own job, still pending, is scancelled as superseded.
          await until(
            async () => !(await w.jobs()).some((j) => j.name === moved && isLive(j)),
            30_000,
            'its own pending job scancelled',
          );
          const r = await w.cli(['cancel', moved]);
          expect(r.code, r.stderr).toBe(0);
          await w.container(moved, (x) => x.state === 'Cancelled', 30_000, 'cancelled');
          expect(await get(moved)).toMatchObject({ state: 'Cancelled', failure_class: 'user' });
          // Its agent stopped it and took the third long one into the same allocation.
          const third = [l1, l2, l3].find((id) => !running.includes(id))!;
          const t = await w.container(third, (x) => x.state === 'Running', 60_000, 'third running');
          expect(t.instance_id).toBe(c.instance_id);
          const cancel = await w.cli(['cancel', ...running.slice(1), third]);
          expect(cancel.code, cancel.stderr).toBe(0);
          for (const id of ids) await w.container(id, done, 60_000, 'finished');
          await until(
            async () => !(await w.jobs()).some((j) => isLive(j) && ids.includes(j.name)),
            60_000,
            'every job ended',
          );
        },
      );
    },
  );
});
