// The two implementations of the dispatcher's queue port (src/dispatch/ports.ts), behind one test-facing
// shape, so one set of contract cases runs against both: PostgreSQL (PgQueue over the store) and the
// simulator's in-memory queue (SimQueue). What the port does not cover (submitting, the agent's
// reports, reading a container back) is here too, as each side does it.
import { expect } from 'vitest';
import { PgQueue } from '../../src/dispatch/pg-queue.js';
import type { DispatchQueue, ItemOutcome } from '../../src/dispatch/ports.js';
import { ManualClock, seededRng } from '../../src/model/clock.js';
import { normalizeRequest } from '../../src/model/request.js';
import { reclaimedReason } from '../../src/model/retry.js';
import type { ContainerState, FailureClass } from '../../src/model/types.js';
import type { SimNodes } from '../../src/sim/nodes.js';
import { SimQueue } from '../../src/sim/queue.js';
import { Store } from '../../src/store/store.js';
import type { Db } from '../../src/store/db.js';
import { testDb, type TestDb } from '../helpers/db.js';

export const T0 = Date.parse('2026-01-01T00:00:00Z');

/** The dispatcher the contract cases lock and place for (its cluster `c`, tag `t`: node()'s defaults). */
export const DISPATCHER = 'c/t';

/** What a request asks for, in the terms both queues share. */
export interface RequestArgs {
  priority?: number;
  containerCountMax?: number;
  maxTempRetries?: number;
  retryOnFailure?: boolean;
  /** "Do not start before" (ms after T0). */
  runAfterMs?: number;
  /** Bytes (default 1 GiB). */
  ram?: number;
  ramRetryFactor?: number;
}

/** A container as both queues can tell it. */
export interface ContainerView {
  state: ContainerState;
  attempt: number;
  lockCount: number;
  lockedBy: string | null;
  instance: string | null;
  failureClass: FailureClass | null;
  /** Why it was cancelled (null otherwise). */
  reason: string | null;
  queuedAt: number;
  runAfter: number | null;
  /** The ram this attempt asks for (bytes). */
  ram: number;
}

export interface RequestView {
  final: boolean;
  outcome: 'success' | 'failed' | 'cancelled' | null;
  attempts: number;
  tempFailures: number;
}

/** One queue implementation under test. */
export interface Subject {
  queue: DispatchQueue;
  clock: ManualClock;
  /** Submits a request; returns its handle (not a container id: attempts get their own ids). */
  submit(args?: RequestArgs): Promise<string>;
  /** The request's current container (its latest attempt). */
  current(request: string): Promise<string>;
  container(id: string): Promise<ContainerView>;
  request(request: string): Promise<RequestView>;
  /** A node for an instance, its agent registered. */
  /** `reclaims`: its agent says it can claim lent room back (the ping's `reclaims`; default false). */
  node(instance: string, cluster?: string, tag?: string, reclaims?: boolean): Promise<string>;
  /** The agent of `node` pings now (the simulator's agents ping on their own: nothing to do). */
  ping(node: string): Promise<void>;
  /** The agent of `node` stops pinging (PostgreSQL: pings come only from ping(), nothing to do). */
  silence(node: string): Promise<void>;
  /**
   * Marks `node` failed as a node failure racing with its agent's report leaves it for a moment: the node
   * row says failed, what it holds is not requeued yet (failNode does both at once).
   */
  markFailed(node: string): Promise<void>;
  /** The agent of `node` reports a start / an exit, holding the container's current per-lock token. */
  start(id: string, node: string, opts?: { staleToken?: boolean }): Promise<ItemOutcome>;
  complete(id: string, node: string, exitCode: number, oomKilled?: boolean): Promise<ItemOutcome>;
  /**
   * The agent of `node` gives back an opportunistic container whose capacity was claimed back (the real
   * agent's report: a temp cancel, reclaimed, reason `reclaimed: <why>`; the simulator's requeueFrozen).
   */
  reclaim(id: string, node: string, why: string): Promise<ItemOutcome>;
  /** The status text `berth why` shows for a container (the store's, or the simulator's). */
  status(id: string): Promise<string | null>;
  /** The database (PostgreSQL only), for cases that reach under the store. */
  db?: Db;
}

export type SubjectFactory = (opts?: {
  maxDispatchAttempts?: number;
  /** The largest ram an offered instance type holds (PostgreSQL: a live dispatcher's published view). */
  largestRam?: number;
}) => Promise<Subject>;

/** Runs `fn` and answers as a batched transition does: refused (with the error's message) or ok. */
async function asOutcome(id: string, fn: () => Promise<unknown> | unknown): Promise<ItemOutcome> {
  try {
    await fn();
    return { id, ok: true };
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'conflict' || code === 'not_found' || code === 'forbidden')
      return { id, ok: false, reason: (err as Error).message };
    throw err;
  }
}

/** PostgreSQL: a Store with a manual clock, on one database per test file, emptied for each subject. */
export function pgSubjects(): SubjectFactory {
  let db: TestDb | null = null;
  return async (opts = {}) => {
    db ??= await testDb();
    await db.pool.query(
      `TRUNCATE container_requests, containers, container_events, log_chunks, nodes, tokens, dispatchers, settings CASCADE`,
    );
    const clock = new ManualClock(new Date(T0));
    const store = new Store(db.pool, { clock, rng: seededRng(7) });
    if (opts.maxDispatchAttempts !== undefined)
      await store.settings.setMaxDispatchAttempts(opts.maxDispatchAttempts);
    if (opts.largestRam !== undefined)
      await db.pool.query(
        `INSERT INTO dispatchers (id, cluster, tag, started_at, heartbeat_at, view) VALUES ('other/x', 'other', 'x', $1, $1, $2)`,
        [new Date(T0), { instance_types: [{ name: 'big', ram: opts.largestRam }], limits: {} }],
      );
    // With the request names, as the simulator's queue lists them.
    const queue = new PgQueue(store, db.url, { names: true });
    const tokens = new Map<string, string>(); // container id → the token its agent started it with
    return {
      queue,
      clock,
      db: db.pool,
      async submit(a = {}) {
        const [r] = await store.requests.create('alice', [
          normalizeRequest({
            command: ['true'],
            priority: a.priority ?? 500,
            container_count_max: a.containerCountMax ?? 3,
            max_temp_retries: a.maxTempRetries ?? 10,
            retry_on_failure: a.retryOnFailure ?? true,
            ...(a.ram !== undefined ? { ram: a.ram } : {}),
            ...(a.ramRetryFactor !== undefined ? { ram_retry_factor: a.ramRetryFactor } : {}),
            ...(a.runAfterMs !== undefined ? { run_after: new Date(T0 + a.runAfterMs).toISOString() } : {}),
          }),
        ]);
        return r!.id;
      },
      async current(request) {
        return (await store.requests.get(request)).container_id!;
      },
      async status(id) {
        return (await store.containers.get(id)).scheduling_status;
      },
      async container(id) {
        const c = await store.containers.get(id);
        return {
          state: c.state,
          attempt: c.attempt,
          lockCount: c.lock_count,
          lockedBy: c.locked_by,
          instance: c.instance_id,
          failureClass: c.failure_class,
          reason: c.state === 'Cancelled' ? c.runtime_status : null,
          queuedAt: c.queued_at.getTime(),
          runAfter: c.run_after?.getTime() ?? null,
          ram: Number(c.ram),
        };
      },
      async request(request) {
        const r = await store.requests.get(request);
        return {
          final: r.state === 'Final',
          outcome: r.outcome,
          attempts: r.attempts,
          tempFailures: r.temp_failures,
        };
      },
      async node(instance, cluster = 'c', tag = 't', reclaims = false) {
        const { nodeId, bootstrapSecret } = await queue.createNode('small', cluster, tag);
        await queue.bindNode(nodeId, instance);
        await store.nodes.register(nodeId, bootstrapSecret, {});
        if (reclaims) await store.nodes.ping(nodeId, 'idle', null, true);
        return nodeId;
      },
      async ping(node) {
        await store.nodes.ping(node, 'idle');
      },
      async silence() {},
      async markFailed(node) {
        await db!.pool.query(`UPDATE nodes SET state = 'failed' WHERE id = $1`, [node]);
      },
      async start(id, node, o = {}) {
        // The token its node would be handed; a made-up one for a container that is not locked.
        let t = await store.containers.tokenFor(id).catch(() => '0.none');
        tokens.set(id, t);
        if (o.staleToken) t = `${Number(t.split('.')[0]) - 1}.${t.split('.')[1]}`;
        return asOutcome(id, () => store.containers.start(id, node, t));
      },
      async complete(id, node, exitCode, oomKilled = false) {
        const t = tokens.get(id) ?? '0.none';
        return asOutcome(id, () =>
          store.containers.complete(id, node, t, { exitCode, oomKilled, usage: null }),
        );
      },
      async reclaim(id, node, why) {
        const token = tokens.get(id) ?? '0.none';
        return asOutcome(id, () =>
          store.containers.cancel(id, { kind: 'node', nodeId: node, token }, 'temp', reclaimedReason(why), {
            reclaimed: true,
          }),
        );
      },
    };
  };
}

/** The simulator's queue, on the same manual clock and the same seed. */
export function simSubjects(): SubjectFactory {
  return async (opts = {}) => {
    const clock = new ManualClock(new Date(T0));
    const queue = new SimQueue({
      now: () => clock.now().getTime(),
      rng: seededRng(7),
      maxDispatchAttempts: opts.maxDispatchAttempts ?? 10,
      largestRam: opts.largestRam ?? null,
    });
    let n = 0;
    const gens = new Map<string, number>();
    const first = new Map<string, string>(); // request handle → its first container
    return {
      queue,
      clock,
      async submit(a = {}) {
        const id = `r${++n}`;
        queue.submit({
          id,
          vcpus: 1,
          ram: a.ram ?? 1024 ** 3,
          ramRetryFactor: a.ramRetryFactor ?? null,
          scratch: 0,
          gpus: 0,
          preemptible: false,
          priority: a.priority ?? 500,
          durationMs: 1000,
          exitCode: 0,
          containerCountMax: a.containerCountMax ?? 3,
          maxTempRetries: a.maxTempRetries ?? 10,
          retryOnFailure: a.retryOnFailure ?? true,
          ...(a.runAfterMs !== undefined ? { runAfter: T0 + a.runAfterMs } : {}),
        });
        first.set(id, id);
        return id;
      },
      async current(request) {
        return queue.get(first.get(request)!).request.current;
      },
      async status(id) {
        return queue.statusText(id);
      },
      async container(id) {
        const c = queue.get(id);
        return {
          state: c.state,
          attempt: c.attempt,
          lockCount: c.lockCount,
          lockedBy: c.lockedBy,
          instance: c.state === 'Queued' ? null : c.instance,
          failureClass: c.failureClass,
          reason: c.state === 'Cancelled' ? c.reason : null,
          queuedAt: c.queuedAt,
          runAfter: c.runAfter,
          ram: c.ram,
        };
      },
      async request(request) {
        const r = queue.get(first.get(request)!).request;
        return { final: r.final, outcome: r.outcome, attempts: r.attempts, tempFailures: r.tempFailures };
      },
      async node(instance, cluster = 'c', tag = 't', reclaims = false) {
        const { nodeId, bootstrapSecret } = await queue.createNode('small', cluster, tag);
        await queue.bindNode(nodeId, instance);
        queue.registerNode(nodeId, bootstrapSecret, 10_000, reclaims);
        return nodeId;
      },
      async ping() {},
      async silence(node) {
        queue.stopPings(node);
      },
      async markFailed(node) {
        // The node table alone (failNode would requeue what the node holds too).
        const nodes = (queue as unknown as { nodeTable: SimNodes }).nodeTable;
        nodes.fail(nodes.find(node));
      },
      async start(id, node, o = {}) {
        const gen = queue.get(id).generation;
        gens.set(id, gen);
        return asOutcome(id, () => queue.start(id, node, o.staleToken ? gen - 1 : gen));
      },
      async complete(id, node, exitCode, oomKilled = false) {
        return asOutcome(id, () => queue.complete(id, node, gens.get(id) ?? -1, exitCode, oomKilled));
      },
      async reclaim(id, node, why) {
        return asOutcome(id, () => queue.requeueFrozen(id, node, gens.get(id) ?? -1, why));
      },
    };
  };
}

/** The request's container Locked by DISPATCHER and placed on a fresh node of instance `instance`. */
export async function placed(s: Subject, request: string, instance = 'i-1') {
  const id = await s.current(request);
  expect(await s.queue.lock([id], DISPATCHER)).toEqual([id]);
  const node = await s.node(instance);
  expect(await s.queue.assign([{ id, instance, node }], DISPATCHER)).toEqual([{ id, ok: true }]);
  return { id, node };
}

/** The request's container Running on a fresh node. */
export async function running(s: Subject, request: string, instance = 'i-1') {
  const p = await placed(s, request, instance);
  expect(await s.start(p.id, p.node)).toEqual({ id: p.id, ok: true });
  return p;
}

/** Both implementations, for describe.each. */
export const SUBJECTS: [string, SubjectFactory][] = [
  ['PostgreSQL', pgSubjects()],
  ['simulator', simSubjects()],
];

/**
 * One transition of the seeded random sequences (changes.test.ts, container-view.test.ts) on container
 * `id` by dispatcher `d`, node `node`: op 1 lock, 2 unlock, 3 assign, 4 start, 5 complete, 6 cancel.
 * Returns false for any other op (the caller's own steps).
 */
export async function randomTransition(
  s: Subject,
  rng: () => number,
  op: number,
  id: string,
  d: string,
  node: string,
): Promise<boolean> {
  if (op === 1) await s.queue.lock([id], d);
  else if (op === 2) await s.queue.unlock([{ id, reason: 'test' }], d);
  else if (op === 3) await s.queue.assign([{ id, instance: node, node }], d);
  else if (op === 4) await s.start(id, node);
  else if (op === 5) await s.complete(id, node, rng() < 0.5 ? 0 : 1);
  else if (op === 6) {
    const failureClass = (['temp', 'perm', 'user'] as const)[Math.floor(rng() * 3)]!;
    await s.queue.cancel([{ id, failureClass, reason: 'x' }], d);
  } else return false;
  return true;
}
