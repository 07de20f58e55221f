// The simulator's side of opportunistic containers (src/sim/opportunistic.ts): the usage the scheduler
// sees for a running container, and a guaranteed container growing back into what it lent.
import { describe, expect, it } from 'vitest';
import { seededRng } from '../../src/model/clock.js';
import { ClaimBack, opportunisticFields, traceUse } from '../../src/sim/opportunistic.js';
import { SimQueue, type SimRequestSpec } from '../../src/sim/queue.js';
import { type } from '../dispatch/builders.js';

const GiB = 1024 ** 3;
const D = 'd1';

async function world() {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const q = new SimQueue({ now: () => now, rng: seededRng(1), maxDispatchAttempts: 10 });
  const { nodeId, bootstrapSecret } = await q.createNode('t4', 'c', 'tag');
  await q.bindNode(nodeId, 'i-1');
  q.registerNode(nodeId, bootstrapSecret, 10_000, true);
  const run = async (id: string, extra: Partial<SimRequestSpec>) => {
    q.submit({
      id,
      vcpus: 1,
      ram: GiB,
      scratch: 0,
      gpus: 0,
      preemptible: false,
      priority: 500,
      durationMs: 3_600_000,
      exitCode: 0,
      ...extra,
    });
    await q.lock([id], D);
    await q.assign([{ id, instance: 'i-1', node: nodeId }], D);
    q.start(id, nodeId, q.get(id).generation);
    return q.get(id);
  };
  return { q, nodeId, run, advance: (ms: number) => (now += ms), now: () => new Date(now) };
}

describe('opportunistic containers in the simulator', () => {
  it("a running container's view carries its trace use, measured since it started", async () => {
    const w = await world();
    await w.run('g', { vcpus: 4, ram: 16 * GiB, use: { vcpus: 1, ram: 2 * GiB } });
    w.advance(60_000);
    w.q.sampled('g');
    const [g] = await w.q.containers(D, w.now());
    expect(g!.usage).toEqual({ ram: 2 * GiB, vcpus: 1, observedMs: 60_000 });
  });

  it('a growth that overcommits the instance requeues borrowers, largest first, until it fits', async () => {
    const w = await world();
    const t4 = type('t4', 4, 16, 0.8);
    const g = await w.run('g', { vcpus: 2, ram: 12 * GiB, use: { vcpus: 1, ram: 2 * GiB } });
    const small = await w.run('o1', { opportunistic: true, ram: 2 * GiB, use: { vcpus: 0.5, ram: GiB } });
    const large = await w.run('o2', { opportunistic: true, ram: 8 * GiB, use: { vcpus: 0.5, ram: 6 * GiB } });
    const claim = new ClaimBack(w.q);
    // Before growing it all fits (2 + 1 + 6 GiB of 16): nothing to take back.
    claim.grew(t4, 0, w.nodeId, [g, small, large]);
    expect(claim.stats).toMatchObject({ grew: 1, claimsBack: 0, requeued: 0 });
    g.grown = true; // now 12 GiB of its own: 12 + 1 + 6 > 16, and without o2 it fits
    claim.grew(t4, 0, w.nodeId, [g, small, large]);
    expect(claim.stats).toMatchObject({ grew: 2, claimsBack: 1, requeued: 1, guaranteedShort: 0 });
    expect(w.q.get('o2')).toMatchObject({ state: 'Cancelled', failureClass: 'temp' });
    expect(w.q.get('o1').state).toBe('Running');
    expect(w.q.get('g').state).toBe('Running');
    // Reclaimed, as the real agent reports it: retried at once, spending neither an attempt nor a temp retry.
    expect(w.q.get('o2').reason).toBe('reclaimed: a guaranteed container claimed its capacity back');
    const retry = w.q.get(w.q.get('o2').request.current);
    expect(retry).toMatchObject({ attempt: 2, state: 'Queued', runAfter: null });
    expect(retry.request).toMatchObject({ attempts: 0, tempFailures: 0 });
  });

  it('a guaranteed container that cannot fit even alone is counted short (the guarantee broken)', async () => {
    const w = await world();
    const g1 = await w.run('g1', { vcpus: 4, ram: 16 * GiB, use: { vcpus: 1, ram: 2 * GiB } });
    const g2 = await w.run('g2', { vcpus: 1, ram: 4 * GiB, use: { vcpus: 1, ram: 4 * GiB } });
    g1.grown = true;
    const claim = new ClaimBack(w.q);
    claim.grew(type('t4', 4, 16, 0.8), 0, w.nodeId, [g1, g2]);
    expect(claim.stats).toMatchObject({ claimsBack: 1, requeued: 0, guaranteedShort: 1 });
  });

  it('trace use stays within the request; the opportunistic draw is seeded and needs a use', () => {
    const job = { vcpus: 2, ram: 4 * GiB, duration: 100_000, usage: { cpuSeconds: 500, peakRam: 8 * GiB } };
    expect(traceUse(job)).toEqual({ vcpus: 2, ram: 4 * GiB });
    expect(traceUse({ ...job, usage: { cpuSeconds: null, peakRam: GiB } })).toBeUndefined();
    const o = { fraction: 0.5, claimProbability: 0.5 };
    const draw = (seed: number) => {
      const rng = seededRng(seed);
      return Array.from({ length: 200 }, () => opportunisticFields(1000, { vcpus: 1, ram: 1 }, o, rng));
    };
    const a = draw(3);
    expect(a).toEqual(draw(3));
    const n = a.filter((f) => f.opportunistic).length;
    expect(n).toBeGreaterThan(70);
    expect(n).toBeLessThan(130);
    // Guaranteed ones grow at a point inside their run, or never.
    for (const f of a.filter((x) => !x.opportunistic))
      expect(f.growAtMs === null || (f.growAtMs! >= 0 && f.growAtMs! < 1000)).toBe(true);
    expect(opportunisticFields(1000, undefined, o, seededRng(3))).toEqual({});
  });
});
