// SimQueue: the store's container and node semantics, in memory (src/store/containers.ts, finish.ts).
import { describe, expect, it } from 'vitest';
import { seededRng } from '../../src/model/clock.js';
import { SimQueue, type SimRequestSpec } from '../../src/sim/queue.js';
import { ConflictError, ForbiddenError, UnauthorizedError } from '../../src/store/errors.js';

const D = 'd1';

function setup(maxDispatchAttempts = 10) {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const ended: string[] = [];
  const assigned: string[] = [];
  const q = new SimQueue({
    now: () => now,
    rng: seededRng(1),
    maxDispatchAttempts,
    observer: {
      ended: (c) => ended.push(`${c.id}:${c.state}`),
      assigned: (n, c) => assigned.push(`${c.id}@${n}`),
    },
  });
  const spec = (id: string, extra: Partial<SimRequestSpec> = {}): SimRequestSpec => ({
    id,
    vcpus: 1,
    ram: 1,
    scratch: 0,
    gpus: 0,
    preemptible: false,
    priority: 500,
    durationMs: 1000,
    exitCode: 0,
    ...extra,
  });
  return { q, spec, ended, assigned, advance: (ms: number) => (now += ms), now: () => new Date(now) };
}

async function runningOnNode(s: ReturnType<typeof setup>, id: string) {
  const { nodeId, bootstrapSecret } = await s.q.createNode('t', 'c', 'tag');
  await s.q.bindNode(nodeId, 'i-1');
  s.q.registerNode(nodeId, bootstrapSecret, 10_000, true);
  expect(await s.q.lock([id], D)).toEqual([id]);
  expect(await s.q.assign([{ id, instance: 'i-1', node: nodeId }], D)).toEqual([{ id, ok: true }]);
  const c = s.q.get(id);
  s.q.start(id, nodeId, c.generation);
  return { nodeId, gen: c.generation };
}

describe('SimQueue', () => {
  it('locks only Queued, runnable, priority > 0 containers, once', async () => {
    const s = setup();
    s.q.submit(s.spec('a'));
    s.q.submit(s.spec('z', { priority: 0 }));
    expect(await s.q.lock(['a', 'z', 'nope'], D)).toEqual(['a']);
    expect(await s.q.lock(['a'], 'd2')).toEqual([]);
    const snap = await s.q.containers(D, s.now());
    expect(snap.map((c) => [c.id, c.state, c.lockCount])).toEqual([['a', 'Locked', 1]]);
    // Another dispatcher sees neither a (locked by d1) nor z (priority 0).
    expect(await s.q.containers('d2', s.now())).toEqual([]);
  });

  it('unlock only by the holder; the max_dispatch_attempts-th unlock cancels perm', async () => {
    const s = setup(2);
    s.q.submit(s.spec('a'));
    await s.q.lock(['a'], D);
    expect(await s.q.unlock([{ id: 'a', reason: 'x' }], 'd2')).toEqual([
      { id: 'a', ok: false, reason: 'container a is locked by d1, not by d2' },
    ]);
    expect(s.q.get('a').state).toBe('Locked');
    expect(await s.q.unlock([{ id: 'a', reason: 'x' }], D)).toEqual([{ id: 'a', ok: true }]);
    expect(s.q.get('a').state).toBe('Queued');
    await s.q.lock(['a'], D);
    await s.q.unlock([{ id: 'a', reason: 'again' }], D);
    expect(s.q.get('a').state).toBe('Cancelled');
    // perm failure: retried as a new container (attempt 2 of 3)
    expect(s.q.get('a#2').state).toBe('Queued');
  });

  it('agents need the current lock generation; a stale one is refused', async () => {
    const s = setup();
    s.q.submit(s.spec('a'));
    const { nodeId, gen } = await runningOnNode(s, 'a');
    expect(s.q.get('a').state).toBe('Running');
    expect(() => s.q.complete('a', 'n-other', gen, 0)).toThrow(ForbiddenError);
    expect(() => s.q.complete('a', nodeId, gen - 1, 0)).toThrow(ConflictError);
    s.q.complete('a', nodeId, gen, 0);
    expect(s.q.get('a').state).toBe('Complete');
    expect(s.q.outcomes()).toEqual({ success: 1, failed: 0, cancelled: 0, open: 0 });
    expect(s.q.activeCount).toBe(0);
    expect(() => s.q.complete('a', nodeId, gen, 0)).toThrow(ConflictError);
  });

  it('a non-zero exit is retried up to container_count_max', async () => {
    const s = setup();
    s.q.submit(s.spec('a', { exitCode: 1, containerCountMax: 2 }));
    let r = await runningOnNode(s, 'a');
    s.q.complete('a', r.nodeId, r.gen, 1);
    expect(s.q.get('a#2').attempt).toBe(2);
    r = await runningOnNode(s, 'a#2');
    s.q.complete('a#2', r.nodeId, r.gen, 1);
    expect(s.q.outcomes()).toEqual({ success: 0, failed: 1, cancelled: 0, open: 0 });
  });

  it('failNode: Locked back to Queued, Running cancelled temp and retried after a backoff', async () => {
    const s = setup();
    s.q.submit(s.spec('run'));
    s.q.submit(s.spec('wait'));
    const { nodeId } = await runningOnNode(s, 'run');
    await s.q.lock(['wait'], D);
    await s.q.assign([{ id: 'wait', instance: 'i-1', node: nodeId }], D);
    await s.q.failNode(nodeId, 'no ping');
    expect(s.q.get('wait').state).toBe('Queued');
    expect(s.q.get('run').state).toBe('Cancelled');
    const retry = s.q.get('run#2');
    expect(retry.runAfter! - s.now().getTime()).toBeGreaterThanOrEqual(8000);
    expect(retry.queuedAt).toBe(s.q.get('run').queuedAt);
    // Not runnable until the backoff passed.
    expect((await s.q.containers(D, s.now())).map((c) => c.id)).toEqual(['wait']);
    s.advance(20_000);
    expect((await s.q.containers(D, s.now())).map((c) => c.id).sort()).toEqual(['run#2', 'wait']);
    // A failed node cannot register again, and is listed as failed.
    expect((await s.q.nodes('c', 'tag', s.now()))[0]!.state).toBe('failed');
  });

  it('nodes: lastPingAt follows the ping interval and stops with the agent', async () => {
    const s = setup();
    const { nodeId, bootstrapSecret } = await s.q.createNode('t', 'c', 'tag');
    expect((await s.q.nodes('c', 'tag', s.now()))[0]).toMatchObject({
      state: 'registered',
      lastPingAt: null,
    });
    expect(() => s.q.registerNode(nodeId, 'wrong', 10_000, true)).toThrow(UnauthorizedError);
    const t0 = s.now().getTime();
    s.q.registerNode(nodeId, bootstrapSecret, 10_000, true);
    expect(() => s.q.registerNode(nodeId, bootstrapSecret, 10_000, true)).toThrow(UnauthorizedError);
    s.advance(25_000);
    expect((await s.q.nodes('c', 'tag', s.now()))[0]!.lastPingAt!.getTime()).toBe(t0 + 20_000);
    s.q.stopPings(nodeId);
    s.advance(100_000);
    expect((await s.q.nodes('c', 'tag', s.now()))[0]).toMatchObject({
      state: 'idle',
      lastPingAt: new Date(t0 + 20_000),
    });
  });

  it('assign tells a registered node at once; cancel by another dispatcher is refused', async () => {
    const s = setup();
    s.q.submit(s.spec('a'));
    const { nodeId, bootstrapSecret } = await s.q.createNode('t', 'c', 'tag');
    s.q.registerNode(nodeId, bootstrapSecret, 10_000, true);
    await s.q.lock(['a'], D);
    await s.q.assign([{ id: 'a', instance: 'i-1', node: nodeId }], D);
    expect(s.assigned).toEqual([`a@${nodeId}`]);
    const item = { id: 'a', failureClass: 'user' as const, reason: 'x' };
    expect(await s.q.cancel([item], 'd2')).toMatchObject([{ id: 'a', ok: false }]);
    expect(await s.q.cancel([item], D)).toEqual([{ id: 'a', ok: true }]);
    expect(s.ended).toEqual(['a:Cancelled']);
    expect(s.q.outcomes().cancelled).toBe(1);
  });

  it('release and a lost dispatcher give back unplaced locks only', async () => {
    const s = setup();
    s.q.submit(s.spec('a'));
    s.q.submit(s.spec('b'));
    await s.q.heartbeat('old', 'c', 'tag', s.now(), 60_000);
    await s.q.lock(['a', 'b'], 'old');
    await s.q.assign([{ id: 'b', instance: 'i-1', node: null }], 'old');
    s.advance(120_000);
    await s.q.heartbeat(D, 'c', 'tag', s.now(), 60_000);
    expect(s.q.get('a').state).toBe('Queued');
    expect(s.q.get('b').state).toBe('Locked');
  });

  it('changes(): a cursor it no longer keeps (or never gave) is refused, so the caller reloads', async () => {
    const s = setup();
    s.q.submit(s.spec('a'));
    const first = await s.q.changes(D, s.now(), null);
    expect(first.upserts.map((c) => c.id)).toEqual(['a']);
    await expect(s.q.changes(D, s.now(), { position: '999', now: s.now() })).rejects.toThrow(/reload/);
    // Thousands of changes read by the only dispatcher: the log is trimmed, an old cursor is gone.
    let cursor = first.cursor;
    for (let i = 0; i < 3000; i++) {
      s.q.submit(s.spec(`b${i}`));
      cursor = (await s.q.changes(D, s.now(), cursor)).cursor;
    }
    await expect(s.q.changes(D, s.now(), first.cursor)).rejects.toThrow(/older than this queue keeps/);
    expect((await s.q.changes(D, s.now(), cursor)).upserts).toEqual([]);
  });
});
