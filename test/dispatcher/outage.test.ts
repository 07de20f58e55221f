// An outage of the database or the API, a stalled or suspended dispatcher, or a dispatcher restart never
// makes the dispatcher fail live agents (issue 10 item 2): node_lost_after counts only silence it watched
// (src/dispatch/node-watch.ts). Each test also shows the rule still fails a node that stays silent after
// the outage, so it is not "never fail". Real PostgreSQL queue, sim cloud, virtual clock.
import { describe, expect, it } from 'vitest';
import { withRateLimit } from '../../src/cloud/decorators/rate-limit.js';
import type { DispatchQueue } from '../../src/dispatch/ports.js';
import { systemClock } from '../../src/model/clock.js';
import { harness, type FakeAgent } from './harness.js';

/** The real queue, with its methods failing on demand ('*': all of them) as when the database is down. */
function faultyQueue(inner: DispatchQueue) {
  const down = new Set<string>();
  const queue = new Proxy(inner, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) =>
        down.has('*') || down.has(String(key))
          ? Promise.reject(new Error(`database unreachable (${String(key)})`))
          : (v as (...a: unknown[]) => unknown).apply(target, args);
    },
  });
  return { queue, down };
}

/**
 * Two containers running on two instances (one each), every agent having just pinged. Returns the agents
 * and the containers' ids.
 */
async function twoRunning(h: Awaited<ReturnType<typeof harness>>, d: ReturnType<typeof h.make>) {
  const ids = await h.submit({ vcpus: 1, ram: '1GiB' }, { vcpus: 1, ram: '1GiB' });
  await h.pass(d);
  await h.advance(30_000); // boot; the agents register
  await h.pass(d);
  await h.pingAll();
  for (const id of ids) expect(await h.state(id)).toBe('Running');
  const agents = [...h.agents.values()];
  expect(agents).toHaveLength(2);
  return { ids, a: agents[0]!, b: agents[1]! };
}

async function ping(h: Awaited<ReturnType<typeof harness>>, agent: FakeAgent) {
  await h.store.nodes.ping(agent.nodeId, 'busy');
}

const lost = (h: Awaited<ReturnType<typeof harness>>) =>
  h.events.filter((e) => e.kind === 'node-lost').map((e) => (e as { node: string }).node);

/**
 * After the outage, passes every 10 s: agent a pings again and its container completes once; b stays
 * silent and is lost once node_lost_after has passed since the outage ended, not before.
 */
async function afterOutage(
  h: Awaited<ReturnType<typeof harness>>,
  d: ReturnType<typeof h.make>,
  r: Awaited<ReturnType<typeof twoRunning>>,
) {
  expect(lost(h)).toEqual([]);
  for (const id of r.ids) expect(await h.state(id)).toBe('Running');
  for (let s = 10; s <= 70; s += 10) {
    await h.advance(10_000);
    await ping(h, r.a);
    await h.pass(d);
    expect(lost(h), `${s} s after the outage`).toEqual(s <= 60 ? [] : [r.b.nodeId]);
  }
  // a's container completes, once; b's is retried (temp), as for any lost node.
  const [ca] = [...r.a.running.keys()] as [string];
  const [cb] = [...r.b.running.keys()] as [string];
  await h.store.containers.complete(ca, r.a.nodeId, r.a.running.get(ca)!, {
    exitCode: 0,
    oomKilled: false,
    usage: null,
  });
  const done = await h.store.containers.get(ca);
  expect(done).toMatchObject({ state: 'Complete', exit_code: 0 });
  const req = await h.store.requests.get(done.request_id);
  expect(req).toMatchObject({ outcome: 'success', attempts: 1, temp_failures: 0 });
  expect(await h.store.containers.get(cb)).toMatchObject({ state: 'Cancelled', failure_class: 'temp' });
}

describe('outages do not fail live nodes', () => {
  it('the database down for 2 minutes (passes fail): no node is failed when it is back', async () => {
    const h = await harness();
    const { queue, down } = faultyQueue(h.queue);
    const d = h.make({ queue });
    const r = await twoRunning(h, d);
    down.add('*');
    for (let i = 0; i < 12; i++) {
      await h.advance(10_000); // the agents cannot ping either: the API answers 503
      await expect(d.tick()).rejects.toThrow(/database unreachable/);
    }
    down.clear();
    await h.pass(d); // 120 s since the last pings, but none of it watched
    await afterOutage(h, d, r);
  });

  it('the API down for 2 minutes (its health check fails): no node is failed when it is back', async () => {
    const h = await harness();
    let apiUp = true;
    const d = h.make({ apiHealth: async () => apiUp });
    const r = await twoRunning(h, d);
    apiUp = false;
    for (let i = 0; i < 12; i++) {
      await h.advance(10_000); // the database is fine, the passes succeed, the agents cannot ping
      await h.pass(d);
    }
    expect(lost(h)).toEqual([]);
    apiUp = true;
    await h.advance(2_000);
    await h.pass(d);
    await afterOutage(h, d, r);
  });

  it('a stalled or suspended dispatcher (passes 90 s apart) fails no node for the gap', async () => {
    const h = await harness();
    const d = h.make({ maxPassGapMs: 30_000 });
    const r = await twoRunning(h, d);
    await h.advance(90_000); // the machine slept: no pass, no ping
    await h.pass(d);
    await afterOutage(h, d, r);
  });

  it('a dispatcher started again after 5 minutes down (berth up restarted) adopts its live agents', async () => {
    const h = await harness();
    const r = await twoRunning(h, h.make());
    await h.advance(300_000); // berth up (API and dispatcher) down: nobody could ping
    const d2 = h.make();
    await h.pass(d2);
    expect([...d2.instances.values()].map((i) => i.state).sort()).toEqual(['running', 'running']);
    await afterOutage(h, d2, r);
  });

  it('without an outage a node silent for node_lost_after is lost (the passes watched all of it)', async () => {
    const h = await harness();
    let apiUp = true;
    const d = h.make({ maxPassGapMs: 30_000, apiHealth: async () => apiUp });
    const r = await twoRunning(h, d);
    for (let i = 0; i < 7; i++) {
      await h.advance(10_000);
      await ping(h, r.a);
      await h.pass(d);
    }
    expect(lost(h)).toEqual([r.b.nodeId]);
    apiUp = false; // (the probe is consulted: down, nothing more is judged)
    await h.advance(70_000);
    await h.pass(d);
    expect(lost(h)).toEqual([r.b.nodeId]);
  });
});

describe('a node whose instance is gone is failed', () => {
  it('an instance that died while no dispatcher ran: the next dispatcher fails its node, its container is retried', async () => {
    const h = await harness();
    const [id] = await h.submit({ vcpus: 1, ram: '1GiB' });
    const d1 = h.make();
    await h.pass(d1);
    await h.advance(30_000);
    await h.pass(d1);
    await h.pingAll();
    expect(await h.state(id!)).toBe('Running');
    const [agent] = [...h.agents.values()];
    h.cloud.kill(agent!.instanceId); // the machine died while berth up was down
    const d2 = h.make();
    await h.pass(d2);
    expect(lost(h)).toEqual([agent!.nodeId]);
    expect(await h.store.containers.get(id!)).toMatchObject({ state: 'Cancelled', failure_class: 'temp' });
  });

  it('shutdownAll destroys every instance even when a rate limit refuses some destroys at first', async () => {
    const h = await harness();
    const d = h.make();
    await twoRunning(h, d);
    await d.stop();
    // One call at a time in the bucket: the second destroy of the two is refused, and no pass follows a
    // stop to retry it (a `berth up` with more instances than the burst left agents running).
    const d2 = h.make({ driver: withRateLimit(h.cloud, { clock: systemClock, opsPerSecond: 50, burst: 1 }) });
    await h.pass(d2);
    expect(await d2.shutdownAll('berth up is stopping')).toBe(2);
    expect(h.cloud.live).toBe(0);
  });

  it('shutdownAll destroys every instance even when the database cannot record it; the node is failed once it is back', async () => {
    const h = await harness();
    const { queue, down } = faultyQueue(h.queue);
    const d = h.make({ queue });
    const r = await twoRunning(h, d);
    down.add('failNode');
    expect(await d.shutdownAll('berth up is stopping')).toBe(2);
    expect(h.cloud.live).toBe(0); // destroyed, whatever the database said
    expect(h.events.filter((e) => e.kind === 'error' && e.op === 'failNode')).toHaveLength(2);
    for (const id of r.ids) expect(await h.state(id)).toBe('Running'); // not recorded yet
    down.clear();
    await h.advance(10_000); // the next sync finds the instances gone
    await h.pass(d);
    expect(lost(h).sort()).toEqual([r.a.nodeId, r.b.nodeId].sort());
    for (const id of r.ids)
      expect(await h.store.containers.get(id)).toMatchObject({ state: 'Cancelled', failure_class: 'temp' });
  });
});
