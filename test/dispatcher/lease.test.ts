// Dispatcher leases on PostgreSQL (DESIGN §3.5): one live dispatcher per cluster/tag; a dispatcher whose
// heartbeat is older than dispatcher_lost_after loses its unplaced locks to the queue; a graceful stop
// releases them at once.
import { afterAll, describe, expect, it } from 'vitest';
import { PgQueue } from '../../src/dispatch/pg-queue.js';
import { ManualClock, seededRng } from '../../src/model/clock.js';
import { normalizeRequest } from '../../src/model/request.js';
import { Store } from '../../src/store/store.js';
import { testDb } from '../helpers/db.js';

const queues: PgQueue[] = [];
afterAll(async () => {
  for (const q of queues) await q.release('x', new Date(0)).catch(() => {});
});

async function setup() {
  const db = await testDb();
  const clock = new ManualClock('2026-01-01T00:00:00Z');
  const store = new Store(db.pool, { clock, rng: seededRng(3) });
  const queue = () => {
    const q = new PgQueue(store, db.url);
    queues.push(q);
    return q;
  };
  const submit = async (n: number) =>
    (
      await store.requests.create(
        'alice',
        Array.from({ length: n }, () => normalizeRequest({ command: ['true'] })),
      )
    ).map((r) => r.container_id!);
  return { db, clock, store, queue, submit };
}

describe('dispatcher lease', () => {
  it('a second live dispatcher for the same cluster/tag is refused; the first one stopping lets it in', async () => {
    const { clock, queue } = await setup();
    const a = queue();
    const b = queue();
    expect(await a.heartbeat('c/t', 'c', 't', clock.now(), 60_000)).toBe(true);
    expect(await b.heartbeat('c/t', 'c', 't', clock.now(), 60_000)).toBe(false);
    await a.release('c/t', clock.now());
    expect(await b.heartbeat('c/t', 'c', 't', clock.now(), 60_000)).toBe(true);
  });

  it("a lost dispatcher's unplaced locks go back to the queue; placed ones stay", async () => {
    const { clock, store, queue, submit } = await setup();
    const [c1, c2] = await submit(2);
    const lost = queue();
    expect(await lost.heartbeat('c/old', 'c', 'old', clock.now(), 60_000)).toBe(true);
    expect((await lost.lock([c1!, c2!], 'c/old')).sort()).toEqual([c1, c2].sort());
    const { node } = await store.nodes.create({
      cluster: 'c',
      dispatcherTag: 'old',
      instanceId: 'i-1',
      instanceType: 't',
    });
    expect(await lost.assign([{ id: c2!, instance: 'i-1', node: node.id }], 'c/old')).toEqual([
      { id: c2, ok: true },
    ]);

    const other = queue();
    clock.advance(30_000);
    await other.heartbeat('c/new', 'c', 'new', clock.now(), 60_000);
    expect((await store.containers.get(c1!)).state).toBe('Locked'); // not lost yet
    clock.advance(31_000);
    await other.heartbeat('c/new', 'c', 'new', clock.now(), 60_000);
    const back = await store.containers.get(c1!);
    expect(back).toMatchObject({ state: 'Queued', locked_by: null });
    expect((await store.containers.get(c2!)).state).toBe('Locked'); // placed on an instance: its agent may still run it
    // the old lock token is revoked: the new dispatcher can lock it
    expect(await other.lock([c1!], 'c/new')).toEqual([c1]);
  });

  it('a graceful release requeues its unplaced locks at once', async () => {
    const { clock, store, queue, submit } = await setup();
    const [c1] = await submit(1);
    const q = queue();
    await q.heartbeat('c/t', 'c', 't', clock.now(), 60_000);
    await q.lock([c1!], 'c/t');
    await q.release('c/t', clock.now());
    expect((await store.containers.get(c1!)).state).toBe('Queued');
  });
});
