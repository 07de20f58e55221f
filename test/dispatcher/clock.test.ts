// One clock (issue 9): every time that decides something in the dispatcher's queue is the application's
// clock, in SQL too. The tests run with the clock at 2026-01-01, far from the machine's own date, so a
// comparison with the database's now() shows up as a failure.
import { describe, expect, it } from 'vitest';
import { PgQueue } from '../../src/dispatch/pg-queue.js';
import { FAILED_NODE_VISIBLE_MS, type DispatchQueue } from '../../src/dispatch/ports.js';
import { ManualClock, seededRng } from '../../src/model/clock.js';
import { SimQueue } from '../../src/sim/queue.js';
import { Store } from '../../src/store/store.js';
import { testDb } from '../helpers/db.js';
import { harness } from './harness.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const MIN = 60_000;

/** A queue with one node that failed at T0, from either implementation of the port. */
type Setup = () => Promise<{ queue: DispatchQueue; nodeId: string }>;

const pg: Setup = async () => {
  const db = await testDb();
  const store = new Store(db.pool, { clock: new ManualClock(new Date(T0)), rng: seededRng(5) });
  const { nodeId } = await new PgQueue(store, db.url).createNode('small', 'c', 't');
  await store.nodes.fail(nodeId, 'declared itself failed');
  return { queue: new PgQueue(store, db.url), nodeId };
};

const sim: Setup = async () => {
  const queue = new SimQueue({ now: () => T0, rng: seededRng(5), maxDispatchAttempts: 10, observer: {} });
  const { nodeId } = await queue.createNode('small', 'c', 't');
  await queue.failNode(nodeId, 'declared itself failed');
  return { queue, nodeId };
};

describe.each([
  ['PostgreSQL', pg],
  ['simulator', sim],
])('the %s queue lists a failed node for an hour of the application clock', (_name, setup) => {
  it('shown as failed until FAILED_NODE_VISIBLE_MS after it failed, then no more', async () => {
    const { queue, nodeId } = await setup();
    expect(FAILED_NODE_VISIBLE_MS).toBe(60 * MIN);
    const at = async (ms: number) =>
      (await queue.nodes('c', 't', new Date(T0 + ms))).map((n) => [n.id, n.state]);
    expect(await at(0)).toEqual([[nodeId, 'failed']]);
    expect(await at(59 * MIN)).toEqual([[nodeId, 'failed']]);
    expect(await at(61 * MIN)).toEqual([]);
  });
});

describe('dispatcher on PostgreSQL at 2026-01-01', () => {
  it('a node that declares itself failed: its container is retried and its instance shut down for it', async () => {
    const h = await harness();
    const { d, id, agent } = await h.oneRunning();
    await h.store.nodes.fail(agent.nodeId, 'disk full');
    await h.advance(1_000); // well inside node_lost_after: only the failed state tells
    await h.pass(d);
    expect(h.events.filter((e) => e.kind === 'instance-shutdown')).toMatchObject([
      { instance: agent.instanceId, reason: 'its node failed' },
    ]);
    expect(h.cloud.get(agent.instanceId)!.state).toBe('terminated');
    expect(await h.store.containers.get(id)).toMatchObject({ state: 'Cancelled', failure_class: 'temp' });
    expect(h.events.filter((e) => e.kind === 'error')).toEqual([]);
  });

  it('a graceful release writes the application clock, not the database clock', async () => {
    const h = await harness();
    const d = h.make();
    const [id] = (await h.submit({ vcpus: 1, ram: '1GiB' })) as [string];
    await h.pass(d); // locked, instance booting
    expect(await h.state(id)).toBe('Locked');
    await h.advance(5_000);
    await d.stop();
    const c = await h.store.containers.get(id);
    expect(c.state).toBe('Queued');
    expect(c.updated_at).toEqual(h.clock.now());
    const r = await h.db.pool.query(`SELECT stopped_at FROM dispatchers WHERE id = 'c1/t1'`);
    expect(r.rows[0].stopped_at).toEqual(h.clock.now());
  });
});
