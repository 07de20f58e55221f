import { beforeAll, describe, expect, it } from 'vitest';
import { CONTAINER_STATES, type ContainerState } from '../../src/model/types.js';
import { ConflictError, ForbiddenError } from '../../src/store/errors.js';
import type { Store } from '../../src/store/store.js';
import { Transitions } from '../../src/store/transitions/index.js';
import { dump, submit, testStore } from '../helpers/store.js';

let store: Store;
const D = 'd-dispatcher00001';

beforeAll(async () => {
  ({ store } = await testStore());
});

/** Drives a fresh container into `state` through legal transitions; returns its id and lock token. */
async function containerIn(
  state: ContainerState,
): Promise<{ id: string; token: string | null; nodeId: string }> {
  const req = await submit(store);
  const id = req.container_id!;
  const { node } = await store.nodes.create({
    cluster: 'c',
    dispatcherTag: 't',
    instanceId: `i-${id}`,
    instanceType: 't1',
  });
  if (state === 'Queued') return { id, token: null, nodeId: node.id };
  if (state === 'Cancelled') {
    await store.containers.cancel(id, { kind: 'system' }, 'perm', 'test');
    return { id, token: null, nodeId: node.id };
  }
  const [lock] = await store.containers.lock([id], D);
  await store.containers.assign(id, D, `i-${id}`, node.id);
  if (state === 'Locked') return { id, token: lock!.token, nodeId: node.id };
  await store.containers.start(id, node.id, lock!.token);
  if (state === 'Running') return { id, token: lock!.token, nodeId: node.id };
  await store.containers.complete(id, node.id, lock!.token, { exitCode: 0, oomKilled: false, usage: null });
  return { id, token: lock!.token, nodeId: node.id };
}

/** Attempts the transition `from → to` the way its actor would. */
async function attempt(
  c: { id: string; token: string | null; nodeId: string },
  to: ContainerState,
): Promise<void> {
  const token = c.token ?? '1.invalid';
  switch (to) {
    case 'Queued':
      await store.containers.unlock(c.id, D, 'test');
      return;
    case 'Locked': {
      const got = await store.containers.lock([c.id], D);
      if (got.length === 0) throw new ConflictError(`container ${c.id} is not Queued`);
      return;
    }
    case 'Running':
      await store.containers.start(c.id, c.nodeId, token);
      return;
    case 'Complete':
      await store.containers.complete(c.id, c.nodeId, token, { exitCode: 0, oomKilled: false, usage: null });
      return;
    case 'Cancelled':
      await store.containers.cancel(c.id, { kind: 'system' }, 'perm', 'test');
      return;
  }
}

/**
 * Every ordered pair of distinct states, written out by hand from DESIGN §3.2 (not derived from the table
 * the code enforces): `true` for the seven legal transitions, else how the store refuses the attempt.
 * The refusal names the transition, or the reason the actor may not act (a node the container is not
 * assigned to; a lock that is not granted because the container is not Queued).
 */
const notAssigned = [ForbiddenError, /is not assigned to node/] as const;
const notQueued = [ConflictError, /is not Queued/] as const;
const illegal = (from: ContainerState, to: ContainerState) =>
  [ConflictError, new RegExp(`illegal transition for container \\S+: ${from} → ${to}$`)] as const;
type Expected = true | readonly [typeof ConflictError | typeof ForbiddenError, RegExp];
const SPEC: [ContainerState, ContainerState, Expected][] = [
  ['Queued', 'Locked', true],
  ['Queued', 'Running', notAssigned],
  ['Queued', 'Complete', notAssigned],
  ['Queued', 'Cancelled', true],
  ['Locked', 'Queued', true],
  ['Locked', 'Running', true],
  ['Locked', 'Complete', illegal('Locked', 'Complete')],
  ['Locked', 'Cancelled', true],
  ['Running', 'Queued', illegal('Running', 'Queued')],
  ['Running', 'Locked', notQueued],
  ['Running', 'Complete', true],
  ['Running', 'Cancelled', true],
  ['Complete', 'Queued', illegal('Complete', 'Queued')],
  ['Complete', 'Locked', notQueued],
  ['Complete', 'Running', illegal('Complete', 'Running')],
  ['Complete', 'Cancelled', [ConflictError, /has already finished \(Complete\)$/]],
  ['Cancelled', 'Queued', illegal('Cancelled', 'Queued')],
  ['Cancelled', 'Locked', notQueued],
  ['Cancelled', 'Running', notAssigned],
  ['Cancelled', 'Complete', notAssigned],
];

describe('container state machine', () => {
  it('the spec table covers every ordered pair of states once', () => {
    const pairs = SPEC.map(([from, to]) => `${from}→${to}`);
    expect(new Set(pairs).size).toBe(pairs.length);
    expect(pairs.length).toBe(CONTAINER_STATES.length * (CONTAINER_STATES.length - 1));
  });

  it.each(SPEC)('%s → %s', async (from, to, expected) => {
    const c = await containerIn(from);
    expect((await store.containers.get(c.id)).state).toBe(from);
    if (expected === true) {
      await attempt(c, to);
      expect((await store.containers.get(c.id)).state).toBe(to);
    } else {
      const before = await dump(store);
      const err = await attempt(c, to).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(expected[0]);
      expect((err as Error).message).toMatch(expected[1]);
      expect(await dump(store)).toBe(before);
    }
  });

  it('refuses a start by a node the container is not assigned to, and a stale token after unlock', async () => {
    const c = await containerIn('Locked');
    const { node: other } = await store.nodes.create({
      cluster: 'c',
      dispatcherTag: 't',
      instanceId: 'i-other',
      instanceType: 't1',
    });
    const before = await dump(store);
    await expect(store.containers.start(c.id, other.id, c.token!)).rejects.toThrow(ForbiddenError);
    expect(await dump(store)).toBe(before);
    await store.containers.unlock(c.id, D, 'test');
    const [relock] = await store.containers.lock([c.id], D);
    await store.containers.assign(c.id, D, 'i-x', c.nodeId);
    const before2 = await dump(store);
    await expect(store.containers.start(c.id, c.nodeId, c.token!)).rejects.toThrow(/stale lock token/);
    expect(await dump(store)).toBe(before2);
    await store.containers.start(c.id, c.nodeId, relock!.token);
    expect((await store.containers.get(c.id)).state).toBe('Running');
  });

  it('a per-lock token granted or checked once is remembered; a forged one, or one for another container, is still refused', async () => {
    const [a, b] = [(await submit(store)).container_id!, (await submit(store)).container_id!];
    const [lock] = await store.containers.lock([a], D);
    const key = await store.transitions.lockKey();
    const forged = `${lock!.token.split('.')[0]}.${'A'.repeat(43)}`;
    // Twice each: the second answer comes from what the first remembered.
    for (let i = 0; i < 2; i++) {
      expect(store.transitions.generation(key, a, lock!.token)).toBe(1);
      expect(store.transitions.generation(key, a, forged)).toBeNull();
      expect(store.transitions.generation(key, b, lock!.token)).toBeNull();
      expect(store.transitions.generation(key, a, 42)).toBeNull();
    }
    // Another server's transitions, which granted nothing, check the token by its HMAC: the same answers.
    const other = new Transitions(store.ctx);
    expect(other.generation(key, a, lock!.token)).toBe(1);
    expect(other.generation(key, a, forged)).toBeNull();
  });

  it('only the lock holder unlocks', async () => {
    const c = await containerIn('Locked');
    await expect(store.containers.unlock(c.id, 'd-someoneelse0000', 'x')).rejects.toThrow(/locked by/);
    expect((await store.containers.get(c.id)).state).toBe('Locked');
  });

  it('increments lock_count on every lock and records events', async () => {
    const req = await submit(store);
    const id = req.container_id!;
    for (let i = 0; i < 3; i++) {
      await store.containers.lock([id], D);
      await store.containers.unlock(id, D, 'again');
    }
    expect((await store.containers.get(id)).lock_count).toBe(3);
    const events = await store.containerList.events(id);
    expect(events.map((e) => e.message.split(':')[0])).toEqual([
      'Queued',
      ...Array(3).fill(['Locked by dispatcher d-dispatcher00001', 'Queued']).flat(),
    ]);
  });

  it('lockAssign locks and places what may be locked, leaves the rest untouched, and its token starts it', async () => {
    const ok = await containerIn('Queued');
    const held = await containerIn('Locked');
    const withdrawn = (await submit(store, 'alice', { priority: 0 })).container_id!;
    const before = await dump(store);
    expect(
      await store.transitions.lockAssign([{ id: held.id, instance: 'i-x', node: ok.nodeId }], 'd-other'),
    ).toEqual([]);
    expect(
      await store.transitions.lockAssign([{ id: withdrawn, instance: 'i-x', node: ok.nodeId }], D),
    ).toEqual([]);
    expect(await dump(store)).toBe(before);
    const [granted, ...rest] = await store.transitions.lockAssign(
      [
        { id: ok.id, instance: `i-${ok.id}`, node: ok.nodeId },
        { id: ok.id, instance: 'i-twice', node: ok.nodeId },
      ],
      D,
    );
    expect(rest).toEqual([]);
    const c = await store.containers.get(ok.id);
    expect(c).toMatchObject({
      state: 'Locked',
      locked_by: D,
      instance_id: `i-${ok.id}`,
      node_id: ok.nodeId,
      lock_count: 1,
    });
    await store.containers.start(ok.id, ok.nodeId, granted!.token);
    expect((await store.containers.get(ok.id)).state).toBe('Running');
  });
});

describe('concurrency', () => {
  it('8 concurrent lockers over 1,000 queued containers lock each exactly once', async () => {
    const { store: s } = await testStore();
    const specs = Array.from({ length: 1000 }, () => ({ command: ['true'] }));
    const { normalizeRequest } = await import('../../src/model/request.js');
    await s.requests.create(
      'bob',
      specs.map((x) => normalizeRequest(x)),
    );
    const lockers = Array.from({ length: 8 }, async (_, i) => {
      const mine: string[] = [];
      for (;;) {
        const got = await s.containers.lockNext(`d-locker${String(i).padStart(9, '0')}`, 25);
        if (got.length === 0) return mine;
        mine.push(...got.map((g) => g.id));
      }
    });
    const results = await Promise.all(lockers);
    const all = results.flat();
    expect(all.length).toBe(1000);
    expect(new Set(all).size).toBe(1000);
    expect(results.filter((r) => r.length > 0).length).toBeGreaterThan(1);
    const counts = await s.ctx.pool.query(
      `SELECT state, count(*)::int AS n, max(lock_count) AS m FROM containers GROUP BY state`,
    );
    expect(counts.rows).toEqual([{ state: 'Locked', n: 1000, m: 1 }]);
  });

  it('concurrent lock() of the same ids grants each id once', async () => {
    const { store: s } = await testStore();
    const { normalizeRequest } = await import('../../src/model/request.js');
    const reqs = await s.requests.create(
      'bob',
      Array.from({ length: 200 }, () => normalizeRequest({ command: ['true'] })),
    );
    const ids = reqs.map((r) => r.container_id!);
    const grants = await Promise.all(
      Array.from({ length: 8 }, (_, i) => s.containers.lock(ids, `d-same${String(i).padStart(11, '0')}`)),
    );
    const granted = grants.flat().map((g) => g.id);
    expect(granted.sort()).toEqual([...ids].sort());
  });

  it('two racing completions of one container: exactly one wins', async () => {
    for (let round = 0; round < 10; round++) {
      const c = await containerIn('Running');
      const results = await Promise.allSettled([
        store.containers.complete(c.id, c.nodeId, c.token!, { exitCode: 0, oomKilled: false, usage: null }),
        store.containers.complete(c.id, c.nodeId, c.token!, { exitCode: 1, oomKilled: false, usage: null }),
      ]);
      expect(results.filter((r) => r.status === 'fulfilled').length).toBe(1);
      const rejected = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(rejected.reason).toBeInstanceOf(ConflictError);
      const events = await store.containerList.events(c.id);
      expect(events.filter((e) => e.message.startsWith('Complete')).length).toBe(1);
    }
  });

  it('a completion racing a cancel: exactly one wins', async () => {
    for (let round = 0; round < 10; round++) {
      const c = await containerIn('Running');
      const [complete, cancel] = await Promise.allSettled([
        store.containers.complete(c.id, c.nodeId, c.token!, { exitCode: 0, oomKilled: false, usage: null }),
        store.containers.cancel(c.id, { kind: 'user', owner: null }, 'user', 'race'),
      ]);
      // A completion that comes after the cancel is the agent's report within the cancel grace: it
      // records the exit on the Cancelled container and changes no state (see cancel-grace.test.ts).
      const completed = complete.status === 'fulfilled' && !complete.value.afterCancel;
      expect([completed, cancel.status === 'fulfilled'].filter(Boolean).length).toBe(1);
      expect((await store.containers.get(c.id)).state).toBe(completed ? 'Complete' : 'Cancelled');
    }
  });
});

describe('events and clock', () => {
  it('every transition records its event at the application clock, the requeues of release, a lost dispatcher and a failed node too', async () => {
    const { store: s, clock, db } = await testStore();
    const { PgQueue } = await import('../../src/dispatch/pg-queue.js');
    const q = new PgQueue(s, db.url);
    const ids = await Promise.all(Array.from({ length: 4 }, async () => (await submit(s)).container_id!));
    const [a, b, c, d] = ids as [string, string, string, string];
    await q.heartbeat('c/old', 'c', 'old', clock.now(), 60_000);
    const { node } = await s.nodes.create({
      cluster: 'c',
      dispatcherTag: 'old',
      instanceId: 'i-1',
      instanceType: 't',
    });
    clock.advance(1_000);
    await q.lock([a, b, c, d], 'c/old');
    await q.assign(
      [
        { id: c, instance: 'i-1', node: node.id },
        { id: d, instance: 'i-1', node: node.id },
      ],
      'c/old',
    );
    clock.advance(1_000);
    await s.containers.start(d, node.id, await s.containers.tokenFor(d));
    clock.advance(1_000);
    await q.release('c/old', clock.now()); // a and b go back
    await q.lock([a], 'c/old');
    clock.advance(120_000);
    await q.heartbeat('c/new', 'c', 'new', clock.now(), 60_000); // c/old is lost: a goes back
    clock.advance(1_000);
    await s.nodes.fail(node.id, 'disk full'); // c back to the queue, d cancelled temp and retried
    // read as `berth show` reads them (the submission's event is given by the read, not stored)
    const all = (await s.ctx.pool.query('SELECT id FROM containers')).rows.map((r) => r.id as string);
    const events = {
      rows: (
        await Promise.all(
          all.map(async (id) =>
            (await s.containerList.events(id)).map((e) => ({
              container_id: id,
              at: e.at,
              message: e.message,
            })),
          ),
        )
      ).flat(),
    };
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    for (const e of events.rows) {
      expect(e.at.getTime()).toBeGreaterThanOrEqual(t0);
      expect(e.at.getTime()).toBeLessThanOrEqual(clock.now().getTime());
    }
    const of = (id: string) => events.rows.filter((e) => e.container_id === id).map((e) => e.message);
    expect(of(a)).toEqual([
      'Queued: submitted',
      'Locked by dispatcher c/old',
      'Queued: released by dispatcher c/old (stopping)',
      'Locked by dispatcher c/old',
      'Queued: dispatcher c/old lost its lease (no heartbeat)',
    ]);
    expect(of(c)).toEqual([
      'Queued: submitted',
      'Locked by dispatcher c/old',
      `assigned to instance i-1 (node ${node.id})`,
      `Queued: node ${node.id} failed before starting it (disk full)`,
    ]);
    expect(of(d).slice(-3)).toMatchObject([
      `Running on node ${node.id}`,
      `Cancelled: cancelled (temp): node ${node.id} failed: disk full`,
      expect.stringMatching(/^retried as c-\S+ after a backoff until 2026-01-01T00:02:/),
    ]);
    // Each state change has its event, stamped when it happened: the last one is the clock's now.
    const last = await s.ctx.pool.query(
      `SELECT max(at) AS at FROM container_events WHERE container_id = $1`,
      [c],
    );
    expect(last.rows[0].at).toEqual(clock.now());
    expect((await s.containers.get(a)).updated_at).toEqual(new Date(t0 + 123_000));
  });
});
