// The queue contract (issue 12 deliverable 2): the same cases, with the same expected outcomes, against
// both implementations of the dispatcher's queue port: PostgreSQL (PgQueue over the store's transitions)
// and the simulator's in-memory queue. The simulator's cost and wait figures are only as good as this
// agreement. Refusal reasons are compared as text: both sides take them from src/model/transitions.ts.
import { describe, expect, it } from 'vitest';
import { seededRng } from '../../src/model/clock.js';
import { tempBackoffMs } from '../../src/model/retry.js';
import { DISPATCHER, placed, running, SUBJECTS, T0, type Subject } from './subjects.js';

const D = DISPATCHER;
const OTHER = 'c/other';

/** The request's next attempt is Queued and runnable now, and it spent neither an attempt nor a temp retry. */
async function retriedAtOnce(s: Subject, request: string, was: string) {
  const retry = await s.current(request);
  expect(retry).not.toBe(was);
  expect(await s.container(retry)).toMatchObject({ state: 'Queued', runAfter: null, attempt: 2 });
  expect(await s.request(request)).toMatchObject({ final: false, attempts: 0, tempFailures: 0 });
  expect(await ids(s)).toContain(retry);
}

const ids = async (s: Subject, dispatcher = D) =>
  (await s.queue.containers(dispatcher, s.clock.now())).map((c) => c.id).sort();

describe.each(SUBJECTS)('the %s queue', (_name, make) => {
  describe('lock', () => {
    it('only Queued containers with priority > 0 whose run_after passed; each once', async () => {
      const s = await make();
      const a = await s.current(await s.submit());
      const zero = await s.current(await s.submit({ priority: 0 }));
      const later = await s.current(await s.submit({ runAfterMs: 60_000 }));
      expect(await ids(s)).toEqual([a]);
      expect(await s.queue.lock([a, zero, later, 'nope'], D)).toEqual([a]);
      expect(await s.queue.lock([a], OTHER)).toEqual([]);
      expect(await s.container(a)).toMatchObject({ state: 'Locked', lockedBy: D, lockCount: 1 });
      expect(await ids(s, OTHER)).toEqual([]);
      s.clock.advance(60_000);
      expect(await s.queue.lock([later, zero], OTHER)).toEqual([later]);
      expect(await s.container(zero)).toMatchObject({ state: 'Queued', lockCount: 0 });
    });
  });

  describe('unlock', () => {
    it('by the holder only: back to Queued, lockable again, lock_count kept', async () => {
      const s = await make();
      const id = await s.current(await s.submit());
      await s.queue.lock([id], D);
      expect(await s.queue.unlock([{ id, reason: 'x' }], OTHER)).toEqual([
        { id, ok: false, reason: `container ${id} is locked by ${D}, not by ${OTHER}` },
      ]);
      expect(await s.queue.unlock([{ id, reason: 'no room' }], D)).toEqual([{ id, ok: true }]);
      expect(await s.container(id)).toMatchObject({ state: 'Queued', lockedBy: null, lockCount: 1 });
      expect(await s.queue.unlock([{ id, reason: 'again' }], D)).toEqual([
        { id, ok: false, reason: `illegal transition for container ${id}: Queued → Queued` },
      ]);
      expect(await s.queue.lock([id], OTHER)).toEqual([id]);
      expect((await s.container(id)).lockCount).toBe(2);
    });

    it('the max_dispatch_attempts-th unlock cancels perm, and the request retries (perm counts)', async () => {
      const s = await make({ maxDispatchAttempts: 2 });
      const r = await s.submit({ containerCountMax: 2 });
      const id = await s.current(r);
      await s.queue.lock([id], D);
      await s.queue.unlock([{ id, reason: 'no room' }], D);
      await s.queue.lock([id], D);
      expect(await s.queue.unlock([{ id, reason: 'still no room' }], D)).toEqual([{ id, ok: true }]);
      expect(await s.container(id)).toMatchObject({
        state: 'Cancelled',
        failureClass: 'perm',
        reason: 'locked and unlocked 2 times (max_dispatch_attempts=2); last: still no room',
      });
      const retry = await s.current(r);
      expect(await s.container(retry)).toMatchObject({ state: 'Queued', attempt: 2, lockCount: 0 });
      expect(await s.request(r)).toMatchObject({ final: false, attempts: 1 });
    });
  });

  describe('assign', () => {
    it('a Locked container the dispatcher holds; refused otherwise, per item', async () => {
      const s = await make();
      const [ia, ib, iq] = [
        await s.current(await s.submit()),
        await s.current(await s.submit()),
        await s.current(await s.submit()),
      ];
      await s.queue.lock([ia], D);
      await s.queue.lock([ib], OTHER);
      const node = await s.node('i-1');
      const items = [ia, ib, iq, 'nope'].map((id) => ({ id, instance: 'i-1', node }));
      expect(await s.queue.assign(items, D)).toEqual([
        { id: ia, ok: true },
        { id: ib, ok: false, reason: `container ${ib} is locked by ${OTHER}, not by ${D}` },
        { id: iq, ok: false, reason: `container ${iq} is Queued; only a Locked container can be assigned` },
        { id: 'nope', ok: false, reason: 'container nope not found' },
      ]);
      expect(await s.container(ia)).toMatchObject({ state: 'Locked', instance: 'i-1' });
      expect(await s.container(ib)).toMatchObject({ state: 'Locked', instance: null });
    });

    it('onto a node that failed meanwhile, or an unknown one: refused; still Locked by the holder, unplaced', async () => {
      const s = await make();
      const [id, other] = [await s.current(await s.submit()), await s.current(await s.submit())];
      await s.queue.lock([id, other], D);
      const [node, live] = [await s.node('i-1'), await s.node('i-2')];
      await s.queue.failNode(node, 'no ping for 90s');
      const items = [
        { id, instance: 'i-1', node },
        { id: other, instance: 'i-9', node: 'n-unknown' },
      ];
      expect(await s.queue.assign(items, D)).toEqual([
        { id, ok: false, reason: `node ${node} was declared failed; container ${id} is not placed on it` },
        { id: other, ok: false, reason: `node n-unknown is unknown; container ${other} is not placed on it` },
      ]);
      for (const c of [id, other])
        expect(await s.container(c)).toMatchObject({
          state: 'Locked',
          lockedBy: D,
          lockCount: 1,
          instance: null,
        });
      // Failing the node again finds nothing of it; the next pass places it elsewhere.
      await s.queue.failNode(node, 'again');
      expect((await s.container(id)).state).toBe('Locked');
      expect(await s.queue.assign([{ id, instance: 'i-2', node: live }], D)).toEqual([{ id, ok: true }]);
    });
  });

  describe('lockAssign (lock and assign in one step)', () => {
    it('locks and places what may be locked: the same container as lock then assign, and its agent starts it', async () => {
      const s = await make();
      const [one, two] = [await s.current(await s.submit()), await s.current(await s.submit())];
      const node = await s.node('i-1');
      expect(await s.queue.lockAssign([{ id: one, instance: 'i-1', node }], D)).toEqual([one]);
      await s.queue.lock([two], D);
      await s.queue.assign([{ id: two, instance: 'i-1', node }], D);
      const view = await s.container(one);
      expect(view).toMatchObject({ state: 'Locked', lockedBy: D, lockCount: 1, instance: 'i-1' });
      expect(view).toEqual(await s.container(two));
      expect(await s.start(one, node)).toEqual({ id: one, ok: true });
      expect(await s.container(one)).toMatchObject({ state: 'Running', instance: 'i-1' });
    });

    it('a container that changed since the snapshot is untouched (taken, cancelled, withdrawn, later, unknown)', async () => {
      const s = await make();
      const [taken, cancelled, withdrawn, later, requeued] = [
        await s.current(await s.submit()),
        await s.current(await s.submit()),
        await s.current(await s.submit({ priority: 0 })),
        await s.current(await s.submit({ runAfterMs: 60_000 })),
        await s.current(await s.submit()),
      ];
      await s.queue.lock([taken], OTHER);
      await s.queue.cancel([{ id: cancelled, failureClass: 'user', reason: 'gone' }], D);
      await s.queue.lock([requeued], OTHER);
      await s.queue.unlock([{ id: requeued, reason: 'no room' }], OTHER);
      const node = await s.node('i-1');
      const untouched = [taken, cancelled, withdrawn, later];
      const before = await Promise.all(untouched.map((id) => s.container(id)));
      const items = [...untouched, requeued, 'nope'].map((id) => ({ id, instance: 'i-1', node }));
      expect(await s.queue.lockAssign(items, D)).toEqual([requeued]);
      expect(await Promise.all(untouched.map((id) => s.container(id)))).toEqual(before);
      expect(await s.container(taken)).toMatchObject({ state: 'Locked', lockedBy: OTHER, instance: null });
      expect(await s.container(requeued)).toMatchObject({ state: 'Locked', lockCount: 2, instance: 'i-1' });
    });

    it('onto a node that failed meanwhile, or an unknown one: not locked, still Queued, no lock spent', async () => {
      const s = await make();
      const [id, other] = [await s.current(await s.submit()), await s.current(await s.submit())];
      const [node, live] = [await s.node('i-1'), await s.node('i-2')];
      await s.queue.failNode(node, 'no ping for 90s');
      const before = await s.container(id);
      const items = [
        { id, instance: 'i-1', node },
        { id: other, instance: 'i-9', node: 'n-unknown' },
      ];
      expect(await s.queue.lockAssign(items, D)).toEqual([]);
      expect(await s.container(id)).toEqual(before);
      expect(await s.container(id)).toMatchObject({ state: 'Queued', lockedBy: null, lockCount: 0 });
      expect(await s.container(other)).toMatchObject({ state: 'Queued', lockCount: 0, instance: null });
      expect(await ids(s)).toEqual([id, other].sort());
      // The next pass places it on a live node.
      expect(await s.queue.lockAssign([{ id, instance: 'i-2', node: live }], D)).toEqual([id]);
      expect(await s.container(id)).toMatchObject({ state: 'Locked', lockCount: 1, instance: 'i-2' });
    });

    it("places as many as it is given on one instance (capacity is the scheduler's); the first item of an id wins", async () => {
      const s = await make();
      const ids = [
        await s.current(await s.submit()),
        await s.current(await s.submit()),
        await s.current(await s.submit()),
      ];
      const [n1, n2] = [await s.node('i-1'), await s.node('i-2')];
      const items = [
        ...ids.map((id) => ({ id, instance: 'i-1', node: n1 })),
        { id: ids[0]!, instance: 'i-2', node: n2 },
      ];
      expect((await s.queue.lockAssign(items, D)).sort()).toEqual([...ids].sort());
      for (const id of ids)
        expect(await s.container(id)).toMatchObject({ state: 'Locked', lockCount: 1, instance: 'i-1' });
      expect((await s.start(ids[0]!, n2)).ok).toBe(false);
      expect(await s.start(ids[0]!, n1)).toEqual({ id: ids[0], ok: true });
    });
  });

  describe('the agent: start and complete', () => {
    it('only the assigned node, with the current token; an exit 0 ends the request', async () => {
      const s = await make();
      const r = await s.submit();
      const { id, node } = await placed(s, r);
      const other = await s.node('i-2');
      expect(await s.start(id, other)).toEqual({
        id,
        ok: false,
        reason: `container ${id} is not assigned to node ${other}`,
      });
      expect(await s.start(id, node, { staleToken: true })).toEqual({
        id,
        ok: false,
        reason: `stale lock token for container ${id}: it was unlocked, cancelled or re-locked since`,
      });
      expect(await s.container(id)).toMatchObject({ state: 'Locked' });
      expect(await s.start(id, node)).toEqual({ id, ok: true });
      expect(await s.complete(id, node, 0)).toEqual({ id, ok: true });
      expect(await s.container(id)).toMatchObject({ state: 'Complete' });
      expect(await s.request(r)).toEqual({ final: true, outcome: 'success', attempts: 1, tempFailures: 0 });
      expect(await s.complete(id, node, 0)).toEqual({
        id,
        ok: false,
        reason: `illegal transition for container ${id}: Complete → Complete`,
      });
    });

    it('a start from a node declared failed is refused, as a stale token is; the container is unchanged', async () => {
      const s = await make();
      const { id, node } = await placed(s, await s.submit());
      const before = await s.container(id);
      await s.markFailed(node);
      expect(await s.start(id, node)).toEqual({
        id,
        ok: false,
        reason: `node ${node} was declared failed; it may not start container ${id}`,
      });
      expect(await s.container(id)).toEqual(before);
    });

    it('a Locked container cannot complete, and a token from before an unlock is stale', async () => {
      const s = await make();
      const r = await s.submit();
      const { id, node } = await placed(s, r);
      expect(await s.complete(id, node, 0)).toMatchObject({ ok: false });
      await s.queue.unlock([{ id, reason: 'x' }], D);
      expect(await s.start(id, node)).toEqual({
        id,
        ok: false,
        reason: `container ${id} is not assigned to node ${node}`,
      });
    });

    it('a non-zero exit retries up to container_count_max, keeping the queue time; then failed', async () => {
      const s = await make();
      const r = await s.submit({ containerCountMax: 2 });
      const first = await running(s, r);
      s.clock.advance(5_000);
      await s.complete(first.id, first.node, 3);
      const retry = await s.current(r);
      expect(retry).not.toBe(first.id);
      expect(await s.container(retry)).toMatchObject({
        state: 'Queued',
        attempt: 2,
        queuedAt: T0,
        runAfter: null,
      });
      expect(await s.request(r)).toMatchObject({ final: false, attempts: 1 });
      const second = await running(s, r, 'i-2');
      await s.complete(second.id, second.node, 3);
      expect(await s.request(r)).toEqual({ final: true, outcome: 'failed', attempts: 2, tempFailures: 0 });
    });

    it('an OOM kill with ram_retry_factor retries with ram × factor, capped by the largest type', async () => {
      const GiB = 1024 ** 3;
      const s = await make({ largestRam: 3 * GiB });
      const r = await s.submit({ ram: GiB, ramRetryFactor: 2, containerCountMax: 4 });
      const first = await running(s, r);
      await s.complete(first.id, first.node, 137, true);
      const second = await s.current(r);
      expect(await s.container(second)).toMatchObject({ state: 'Queued', attempt: 2, ram: 2 * GiB });
      const c2 = await running(s, r, 'i-2');
      await s.complete(c2.id, c2.node, 137, true);
      // 4 GiB would not fit any type: the largest one's 3 GiB.
      const third = await s.current(r);
      expect(await s.container(third)).toMatchObject({ attempt: 3, ram: 3 * GiB });
      const c3 = await running(s, r, 'i-3');
      await s.complete(c3.id, c3.node, 137, true);
      // At the cap: retried as it is.
      expect(await s.container(await s.current(r))).toMatchObject({ attempt: 4, ram: 3 * GiB });
    });

    it('no growth without ram_retry_factor, nor after a non-OOM failure', async () => {
      const GiB = 1024 ** 3;
      const s = await make({ largestRam: 8 * GiB });
      const plain = await s.submit({ ram: GiB });
      const a = await running(s, plain);
      await s.complete(a.id, a.node, 137, true);
      expect(await s.container(await s.current(plain))).toMatchObject({ attempt: 2, ram: GiB });
      const factor = await s.submit({ ram: GiB, ramRetryFactor: 2 });
      const b = await running(s, factor, 'i-2');
      await s.complete(b.id, b.node, 1, false);
      expect(await s.container(await s.current(factor))).toMatchObject({ attempt: 2, ram: GiB });
    });

    it('retry_on_failure false: a non-zero exit is final at once', async () => {
      const s = await make();
      const r = await s.submit({ retryOnFailure: false });
      const c = await running(s, r);
      await s.complete(c.id, c.node, 1);
      expect(await s.request(r)).toEqual({ final: true, outcome: 'failed', attempts: 1, tempFailures: 0 });
    });
  });

  describe('cancel', () => {
    it("by a dispatcher: its own, or a Queued one nobody holds; never another's", async () => {
      const s = await make();
      const [q, mine, theirs] = [await s.submit(), await s.submit(), await s.submit()];
      const [iq, im, it_] = [await s.current(q), await s.current(mine), await s.current(theirs)];
      await s.queue.lock([im], D);
      await s.queue.lock([it_], OTHER);
      const item = (id: string) => ({ id, failureClass: 'user' as const, reason: 'no longer wanted' });
      expect(await s.queue.cancel([iq, im, it_].map(item), D)).toEqual([
        { id: iq, ok: true },
        { id: im, ok: true },
        { id: it_, ok: false, reason: `container ${it_} is locked by ${OTHER}, not by ${D}` },
      ]);
      expect(await s.container(iq)).toMatchObject({
        state: 'Cancelled',
        failureClass: 'user',
        reason: 'no longer wanted',
      });
      expect(await s.request(q)).toEqual({ final: true, outcome: 'cancelled', attempts: 0, tempFailures: 0 });
      expect(await s.container(it_)).toMatchObject({ state: 'Locked' });
      expect(await s.queue.cancel([item(iq)], D)).toEqual([
        { id: iq, ok: false, reason: `container ${iq} has already finished (Cancelled)` },
      ]);
    });

    it('retryable: false ends the request at once, whatever attempts are left', async () => {
      const s = await make();
      const r = await s.submit({ containerCountMax: 5 });
      const c = await s.current(r);
      const reason = 'needs 1 gpus; largest configured type has 0';
      expect(await s.queue.cancel([{ id: c, failureClass: 'perm', reason, retryable: false }], D)).toEqual([
        { id: c, ok: true },
      ]);
      expect(await s.request(r)).toEqual({ final: true, outcome: 'failed', attempts: 1, tempFailures: 0 });
      expect(await s.current(r)).toBe(c);
    });

    it('perm counts against container_count_max; temp retries after a backoff, bounded by max_temp_retries', async () => {
      const s = await make();
      const perm = await s.submit({ containerCountMax: 3 });
      const a = await s.current(perm);
      await s.queue.cancel([{ id: a, failureClass: 'perm', reason: 'bad image' }], D);
      expect(await s.request(perm)).toMatchObject({ final: false, attempts: 1, tempFailures: 0 });
      expect(await s.container(await s.current(perm))).toMatchObject({
        state: 'Queued',
        runAfter: null,
        attempt: 2,
      });

      const temp = await s.submit({ maxTempRetries: 1 });
      const c = await running(s, temp);
      expect(await s.queue.cancel([{ id: c.id, failureClass: 'temp', reason: 'preempted' }], D)).toEqual([
        { id: c.id, ok: true },
      ]);
      const retry = await s.current(temp);
      // The same seeded randomness on both sides: the same backoff (DESIGN §3.3: base 10 s, jittered).
      const backoff = tempBackoffMs(1, seededRng(7));
      expect(await s.container(retry)).toMatchObject({
        state: 'Queued',
        runAfter: T0 + backoff,
        queuedAt: T0,
      });
      expect(await ids(s)).not.toContain(retry);
      expect(await s.queue.lock([retry], D)).toEqual([]);
      s.clock.advance(backoff);
      expect(await ids(s)).toContain(retry);
      const again = await running(s, temp, 'i-2');
      await s.queue.cancel([{ id: again.id, failureClass: 'temp', reason: 'preempted again' }], D);
      expect(await s.request(temp)).toMatchObject({ final: true, outcome: 'failed', tempFailures: 2 });
    });

    it('a reclaimed cancel (a vacated borrower) is retried at once and spends neither attempts nor temp retries', async () => {
      const s = await make();
      const r = await s.submit({ maxTempRetries: 0 });
      const c = await running(s, r);
      const item = { id: c.id, failureClass: 'temp' as const, reason: 'vacated: i-1', reclaimed: true };
      expect(await s.queue.cancel([item], D)).toEqual([{ id: c.id, ok: true }]);
      await retriedAtOnce(s, r, c.id);
    });

    it("the agent's reclaim of a borrower (claimed back) is retried at once, spending neither attempts nor temp retries", async () => {
      const s = await make();
      const r = await s.submit({ maxTempRetries: 0, containerCountMax: 1 });
      const c = await running(s, r);
      const other = await s.node('i-2');
      expect((await s.reclaim(c.id, other, 'memory claimed back')).ok).toBe(false);
      expect(await s.reclaim(c.id, c.node, 'memory claimed back')).toEqual({ id: c.id, ok: true });
      expect(await s.container(c.id)).toMatchObject({
        state: 'Cancelled',
        failureClass: 'temp',
        reason: 'reclaimed: memory claimed back',
      });
      await retriedAtOnce(s, r, c.id);
    });

    it("a temp retry waits for the request's own run_after when that is later than the backoff", async () => {
      const s = await make();
      const r = await s.submit({ runAfterMs: 3_600_000 });
      s.clock.advance(3_600_000);
      const c = await running(s, r);
      s.clock.set(new Date(T0));
      await s.queue.cancel([{ id: c.id, failureClass: 'temp', reason: 'lost' }], D);
      expect((await s.container(await s.current(r))).runAfter).toBe(T0 + 3_600_000);
    });
  });

  describe('node failure', () => {
    it('its Locked containers go back to the queue; its Running ones are cancelled temp and retried', async () => {
      const s = await make();
      const [w, r] = [await s.submit(), await s.submit()];
      const run = await running(s, r);
      const wait = await s.current(w);
      await s.queue.lock([wait], D);
      await s.queue.assign([{ id: wait, instance: 'i-1', node: run.node }], D);
      await s.queue.failNode(run.node, 'no ping for 90s');
      expect(await s.container(wait)).toMatchObject({ state: 'Queued', lockCount: 1, instance: null });
      expect(await s.container(run.id)).toMatchObject({
        state: 'Cancelled',
        failureClass: 'temp',
        reason: `node ${run.node} failed: no ping for 90s`,
      });
      expect(await s.request(r)).toMatchObject({ final: false, tempFailures: 1 });
      expect(await ids(s)).toEqual([wait]);
      const states = async () => [await s.container(wait), await s.container(run.id)];
      const before = await states();
      await s.queue.failNode(run.node, 'again');
      expect(await states()).toEqual(before);
      expect((await s.queue.nodes('c', 't', s.clock.now())).find((n) => n.id === run.node)?.state).toBe(
        'failed',
      );
    });

    it('a requeue by node failure counts against max_dispatch_attempts like an unlock', async () => {
      const s = await make({ maxDispatchAttempts: 1 });
      const r = await s.submit();
      const p = await placed(s, r);
      await s.queue.failNode(p.node, 'disk full');
      expect(await s.container(p.id)).toMatchObject({
        state: 'Cancelled',
        failureClass: 'perm',
        reason: `locked and unlocked 1 times (max_dispatch_attempts=1); last: node ${p.node} failed before starting it (disk full)`,
      });
    });
  });

  describe('dispatchers', () => {
    it("a lost dispatcher's unplaced locks go back to the queue; placed ones stay; release does the same", async () => {
      const s = await make();
      const [a, b, c] = [await s.submit(), await s.submit(), await s.submit()];
      const [ia, ib, ic] = [await s.current(a), await s.current(b), await s.current(c)];
      await s.queue.heartbeat(OTHER, 'c', 'other', s.clock.now(), 60_000);
      await s.queue.lock([ia, ib], OTHER);
      const node = await s.node('i-9', 'c', 'other');
      await s.queue.assign([{ id: ib, instance: 'i-9', node }], OTHER);
      await s.queue.heartbeat(D, 'c', 't', s.clock.now(), 60_000);
      s.clock.advance(60_000);
      await s.queue.heartbeat(D, 'c', 't', s.clock.now(), 60_000);
      expect((await s.container(ia)).state).toBe('Locked'); // not lost yet
      s.clock.advance(1);
      await s.queue.heartbeat(D, 'c', 't', s.clock.now(), 60_000);
      expect(await s.container(ia)).toMatchObject({ state: 'Queued', lockedBy: null });
      expect(await s.container(ib)).toMatchObject({ state: 'Locked', lockedBy: OTHER, instance: 'i-9' });

      await s.queue.lock([ia, ic], D);
      await s.queue.release(D, s.clock.now());
      expect(await s.container(ia)).toMatchObject({ state: 'Queued', lockCount: 2 });
      expect(await s.container(ic)).toMatchObject({ state: 'Queued', lockCount: 1 });
    });

    it('containers(): runnable Queued ones, and what this dispatcher holds with its instance', async () => {
      const s = await make();
      const [a, b, c] = [await s.submit(), await s.submit(), await s.submit()];
      const p = await running(s, a);
      const ib = await s.current(b);
      await s.queue.lock([ib], OTHER);
      const ic = await s.current(c);
      const mine = await s.queue.containers(D, s.clock.now());
      expect(mine.map((x) => [x.id, x.state, x.instance, x.lockCount]).sort()).toEqual(
        [
          [p.id, 'Running', 'i-1', 1],
          [ic, 'Queued', null, 0],
        ].sort(),
      );
    });
  });
});
