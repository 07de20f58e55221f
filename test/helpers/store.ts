// A Store on a fresh test database, with a manual clock and seeded randomness.
import { ManualClock, seededRng } from '../../src/model/clock.js';
import { normalizeRequest, type RequestInput } from '../../src/model/request.js';
import { Store } from '../../src/store/store.js';
import { testDb } from './db.js';

export async function testStore(options: { maxDispatchAttempts?: number } = {}) {
  const db = await testDb();
  const clock = new ManualClock('2026-01-01T00:00:00Z');
  const store = new Store(db.pool, { clock, rng: seededRng(42) });
  if (options.maxDispatchAttempts !== undefined)
    await store.settings.setMaxDispatchAttempts(options.maxDispatchAttempts);
  return { store, clock, db };
}

/** Submits one request for `owner` and returns it. */
export async function submit(store: Store, owner = 'alice', input: RequestInput = {}) {
  const [req] = await store.requests.create(owner, [normalizeRequest({ command: ['echo', 'hi'], ...input })]);
  return req!;
}

/** The dispatcher that runContainer locks for. */
export const TEST_DISPATCHER = 'd-dispatcher00001';

/** Locks, assigns and starts a container on a node of its own; returns what the agent needs to end it. */
export async function runContainer(store: Store, containerId: string) {
  const { node } = await store.nodes.create({
    cluster: 'c',
    dispatcherTag: 't',
    instanceId: `i-${containerId}`,
    instanceType: 't1',
  });
  const [lock] = await store.containers.lock([containerId], TEST_DISPATCHER);
  if (!lock) throw new Error(`could not lock ${containerId}`);
  await store.containers.assign(containerId, TEST_DISPATCHER, `i-${containerId}`, node.id);
  await store.containers.start(containerId, node.id, lock.token);
  return { nodeId: node.id, token: lock.token };
}

/** A snapshot of every row that a refused operation must leave unchanged. */
export async function dump(store: Store): Promise<string> {
  const q = async (sql: string) => (await store.ctx.pool.query(sql)).rows;
  return JSON.stringify({
    requests: await q('SELECT * FROM container_requests ORDER BY id'),
    containers: await q('SELECT * FROM containers ORDER BY id'),
    events: await q('SELECT count(*) FROM container_events'),
    logs: await q('SELECT count(*) FROM log_chunks'),
    nodes: await q('SELECT * FROM nodes ORDER BY id'),
    tokens: await q('SELECT id, revoked_at FROM tokens ORDER BY id'),
  });
}
