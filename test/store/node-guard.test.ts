// A node failure and a transition that targets the node, at the same moment (transitions/assign.ts
// LIVE_NODES): whichever commits first, no container ends up Locked or Running on the failed node. The
// contract suite (test/contract/queue.test.ts) has the sequential cases for both queues; this is the race
// only the store has. Each case holds one side open in a transaction and waits, by condition, until the
// other side blocks on it.
import type { PoolClient } from 'pg';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { lockAssign } from '../../src/store/transitions/lock.js';
import { startContainers } from '../../src/store/transitions/start.js';
import { submit, testStore } from '../helpers/store.js';

let store: Store;
const D = 'd-nodeguard';

beforeAll(async () => {
  ({ store } = await testStore());
});

// A failed case's open transaction commits and its client goes back to the pool.
afterEach(() => {
  for (const go of gates.splice(0)) go();
});

async function freshNode(): Promise<string> {
  const { node } = await store.nodes.create({
    cluster: 'c',
    dispatcherTag: 't',
    instanceId: null,
    instanceType: 't1',
  });
  return node.id;
}

const state = async (id: string) =>
  (
    await store.ctx.pool.query<{ state: string; node_id: string | null; lock_count: number }>(
      `SELECT state, node_id, lock_count FROM containers WHERE id = $1`,
      [id],
    )
  ).rows[0]!;

/** Runs `fn` in a transaction of its own client, committed when `fn` and then `release` resolve. */
async function heldOpen(fn: (c: PoolClient) => Promise<void>, release: Promise<void>): Promise<void> {
  const c = await store.ctx.pool.connect();
  try {
    await c.query('BEGIN');
    await fn(c);
    await release;
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK');
    throw err;
  } finally {
    c.release();
  }
}

/** Waits until some other session of this database waits for a row lock (deadline 20 s). */
async function someoneBlocked(): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const r = await store.ctx.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
    );
    if (r.rows[0]!.n > 0) return;
    if (Date.now() > deadline) throw new Error('no session blocked on a lock within 20 s');
    await new Promise((res) => setTimeout(res, 10));
  }
}

describe('a node failure racing with a transition that targets the node', () => {
  it('the failure commits first: a lockAssign that waited for it locks nothing (Queued, no lock spent)', async () => {
    const id = (await submit(store)).container_id!;
    const node = await freshNode();
    const { release, go } = gate();
    // The failure's first statement (src/store/nodes.ts), held open: the node row is updated, uncommitted.
    let updated = false;
    const failing = heldOpen(async (c) => {
      await c.query(`UPDATE nodes SET state = 'failed' WHERE id = $1`, [node]);
      updated = true;
    }, release);
    await waitFor(() => updated);
    const placing = lockAssign(store.ctx, store.ctx.pool, [{ id, instance: 'i-x', node }], D);
    await someoneBlocked();
    go();
    await failing;
    expect(await placing).toEqual([]);
    expect(await state(id)).toEqual({ state: 'Queued', node_id: null, lock_count: 0 });
  });

  it('the lockAssign commits first: the failure waits for it, then finds the container and requeues it', async () => {
    const id = (await submit(store)).container_id!;
    const node = await freshNode();
    const { release, go } = gate();
    let granted: string[] = [];
    const placing = heldOpen(async (c) => {
      granted = (await lockAssign(store.ctx, c, [{ id, instance: 'i-x', node }], D)).map((l) => l.id);
    }, release);
    // The lock and assign is made (uncommitted) before the failure starts.
    await waitFor(() => granted.length > 0);
    const failing = store.nodes.fail(node, 'no ping for 90s');
    await someoneBlocked();
    go();
    await placing;
    expect(await failing).toEqual({ requeued: [id], cancelled: [] });
    expect(await state(id)).toMatchObject({ state: 'Queued', node_id: null });
  });

  it('a start commits first: the failure waits for it, then cancels the container it started', async () => {
    const id = (await submit(store)).container_id!;
    const node = await freshNode();
    const [locked] = await lockAssign(store.ctx, store.ctx.pool, [{ id, instance: 'i-x', node }], D);
    const generation = locked!.lock_generation;
    const { release, go } = gate();
    let started = false;
    const starting = heldOpen(async (c) => {
      const [o] = await startContainers(store.ctx, c, [{ id, node, generation }]);
      started = o!.ok;
    }, release);
    await waitFor(() => started);
    const failing = store.nodes.fail(node, 'no ping for 90s');
    await someoneBlocked();
    go();
    await starting;
    expect(await failing).toEqual({ requeued: [], cancelled: [id] });
    expect((await state(id)).state).toBe('Cancelled');
  });
});

/** A promise `release` that resolves when `go` is called; afterEach calls every go, even after a failure. */
const gates: (() => void)[] = [];
function gate(): { release: Promise<void>; go: () => void } {
  let go!: () => void;
  const release = new Promise<void>((res) => (go = res));
  gates.push(go);
  return { release, go };
}

/** Waits for `cond` (set by a transaction's first statement) with a deadline of 20 s. */
async function waitFor(cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met within 20 s');
    await new Promise((res) => setTimeout(res, 5));
  }
}
