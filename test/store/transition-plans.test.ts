// The batched transitions by id read their containers through the primary key, whatever the statistics
// say: with the guard's states visible, the planner may scan a partial index of every Locked/Running
// container of a node or a dispatcher (or of every Queued one) once per item (transitions/outcome.ts HIDDEN).
import { beforeAll, describe, expect, it } from 'vitest';
import { normalizeRequest } from '../../src/model/request.js';
import { statesFrom } from '../../src/model/transitions.js';
import type { Store } from '../../src/store/store.js';
import { ASSIGN_SQL } from '../../src/store/transitions/assign.js';
import { END_ALONE_SQL, END_SQL } from '../../src/store/transitions/end.js';
import { LOCK_ASSIGN_SQL, LOCK_IDS_SQL } from '../../src/store/transitions/lock.js';
import { START_SQL } from '../../src/store/transitions/start.js';
import { submit, testStore } from '../helpers/store.js';

let store: Store;
const D = 'd-plans';
let node = '';
let ids: string[] = [];

beforeAll(async () => {
  ({ store } = await testStore());
  const made = await store.nodes.create({
    cluster: 'c',
    dispatcherTag: 't',
    instanceId: 'i-p',
    instanceType: 't1',
  });
  node = made.node.id;
  // Statistics taken while the partial indexes are nearly empty, then a burst the planner has not seen.
  ids = [(await submit(store)).container_id!];
  await store.ctx.pool.query('ANALYZE containers');
  const spec = normalizeRequest({ command: ['true'] });
  const more = await store.requests.create(
    'alice',
    Array.from({ length: 300 }, () => spec),
  );
  ids.push(...more.map((r) => r.container_id!));
  const locked = await store.transitions.lock(ids.slice(0, 200), D);
  await store.transitions.assign(
    locked.map((l) => ({ id: l.id, instance: 'i-p', node })),
    D,
  );
});

/**
 * The index names of a statement's plan for these parameters (EXPLAIN without ANALYZE runs nothing); without
 * parameters, its generic plan (what a named statement runs after its first five), and "seq scan of T" for a
 * table read whole.
 */
async function indexes(sql: string, params?: unknown[]): Promise<string[]> {
  const r = await store.ctx.pool.query(
    `EXPLAIN (FORMAT JSON${params ? '' : ', GENERIC_PLAN'}) ${sql}`,
    params,
  );
  const found: string[] = [];
  const walk = (n: Record<string, unknown>) => {
    if (typeof n['Index Name'] === 'string') found.push(n['Index Name']);
    if (n['Node Type'] === 'Seq Scan') found.push(`seq scan of ${String(n['Relation Name'])}`);
    for (const c of (n.Plans as Record<string, unknown>[] | undefined) ?? []) walk(c);
  };
  walk((r.rows[0]['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
  return found;
}

/** The partial indexes a batch by id must not scan: every Locked/Running (or Queued) container. */
const WHOLE_SETS = ['containers_live', 'containers_queue'];

describe('transitions by id read containers by id', () => {
  it('start, assign and lock by ids scan no partial index of a whole set of containers', async () => {
    const now = new Date();
    const batch = ids.slice(0, 32);
    const plans = {
      start: await indexes(START_SQL, [
        now,
        batch,
        batch.map(() => node),
        batch.map(() => 1),
        statesFrom('start'),
      ]),
      assign: await indexes(ASSIGN_SQL, [
        D,
        now,
        batch,
        batch.map(() => 'i-p'),
        batch.map(() => node),
        statesFrom('assign'),
      ]),
      lock: await indexes(LOCK_IDS_SQL, [D, now, statesFrom('lock'), ids.slice(200, 232)]),
    };
    for (const [name, used] of Object.entries(plans))
      for (const whole of WHOLE_SETS) expect(used, `${name} uses ${whole}`).not.toContain(whole);
  });

  it("the lifecycle's named statements, planned generically, read containers and requests by primary key", async () => {
    // A table of some size, its statistics taken: a generic plan is chosen by its estimated cost.
    const spec = normalizeRequest({ command: ['true'] });
    for (let i = 0; i < 20; i++)
      await store.requests.create(
        'bob',
        Array.from({ length: 1000 }, () => spec),
      );
    await store.ctx.pool.query('ANALYZE containers, container_requests');
    const named = { start: START_SQL, lockAssign: LOCK_ASSIGN_SQL, end: END_SQL, endAlone: END_ALONE_SQL };
    for (const [name, sql] of Object.entries(named)) {
      const used = await indexes(sql);
      expect(used, name).toContain('containers_pkey');
      for (const whole of [...WHOLE_SETS, 'seq scan of containers', 'seq scan of container_requests'])
        expect(used, `${name} uses ${whole}`).not.toContain(whole);
    }
  });
});
