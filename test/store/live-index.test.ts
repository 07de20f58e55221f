// The Locked and Running containers are in one partial index, containers_live (node_id, locked_by)
// (migration 230): the reads by node use its first column, the reads by holder its second. A dispatcher's
// snapshot must read what it holds through that index, not by a scan of every container.
import { beforeAll, describe, expect, it } from 'vitest';
import { snapshotSql } from '../../src/dispatch/pg-queue.js';
import { normalizeRequest } from '../../src/model/request.js';
import { NODE_CONTAINERS_SQL } from '../../src/store/nodes.js';
import type { Store } from '../../src/store/store.js';
import { testStore } from '../helpers/store.js';

let store: Store;
const nodes: string[] = [];

/**
 * A statement's plan as "index: its index condition" for each index it reads, and "seq scan of T" for a
 * table read whole.
 */
async function plan(sql: string, params: unknown[]): Promise<string[]> {
  const r = await store.ctx.pool.query(`EXPLAIN (FORMAT JSON) ${sql}`, params);
  const found: string[] = [];
  const walk = (n: Record<string, unknown>) => {
    if (typeof n['Index Name'] === 'string') found.push(`${n['Index Name']}: ${String(n['Index Cond'])}`);
    if (n['Node Type'] === 'Seq Scan') found.push(`seq scan of ${String(n['Relation Name'])}`);
    for (const c of (n.Plans as Record<string, unknown>[] | undefined) ?? []) walk(c);
  };
  walk((r.rows[0]['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
  return found;
}

beforeAll(async () => {
  ({ store } = await testStore());
  const spec = normalizeRequest({ command: ['true'] });
  const ids: string[] = [];
  for (let i = 0; i < 20; i++)
    ids.push(
      ...(
        await store.requests.create(
          'bob',
          Array.from({ length: 1000 }, () => spec),
        )
      ).map((r) => r.container_id!),
    );
  for (let i = 0; i < 4; i++)
    nodes.push(
      (
        await store.nodes.create({
          cluster: 'c',
          dispatcherTag: 't',
          instanceId: `i-${i}`,
          instanceType: 't1',
        })
      ).node.id,
    );
  // Two dispatchers hold 200 containers each, placed on the four nodes; most of the table is elsewhere.
  for (const [d, from] of [
    ['d-a', 0],
    ['d-b', 200],
  ] as const) {
    const locked = await store.transitions.lock(ids.slice(from, from + 200), d);
    await store.transitions.assign(
      locked.map((l, i) => ({ id: l.id, instance: `i-${i % 4}`, node: nodes[i % 4]! })),
      d,
    );
  }
  await store.ctx.pool.query(`UPDATE containers SET state = 'Complete' WHERE id = ANY($1)`, [
    ids.slice(400, 15000),
  ]);
  await store.ctx.pool.query('ANALYZE containers');
});

describe('containers_live', () => {
  it("serves the dispatcher snapshot's read of what it holds (its second column)", async () => {
    const held = snapshotSql({}).considered.split('UNION ALL')[1]!;
    expect(held).toMatch(/locked_by = \$1/);
    // the holder is the index's condition, not a filter of the rows read
    const used = await plan(held, ['d-a']);
    expect(used).toContain("containers_live: (locked_by = 'd-a'::text)");
    expect(used).not.toContain('seq scan of containers');
    const r = await store.ctx.pool.query(held, ['d-a']);
    expect(r.rows).toHaveLength(200);
  });

  it("serves a node's read of its containers (its first column)", async () => {
    const work = await store.containers.workFor(nodes[1]!, []);
    expect(work.start).toHaveLength(100);
    // a failed node's containers, read as nodes.ts reads them
    const used = await plan(NODE_CONTAINERS_SQL, [nodes[1]]);
    expect(used).toEqual([`containers_live: (node_id = '${nodes[1]}'::text)`]);
  });
});
