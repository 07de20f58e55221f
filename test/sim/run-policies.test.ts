// Policies through the same harness: fifo's head-of-line blocking, and the cost lower bound against
// every policy on small random workloads.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { POLICIES } from '../../src/sim/policies.js';
import { runSimulation, type SimJob } from '../../src/sim/run.js';
import { GiB, job, smallConfig } from './helpers.js';

function startOf(records: { id: string; start: number | null; arrival: number }[], id: string): number {
  const r = records.find((c) => c.id === id)!;
  return (r.start! - r.arrival) / 1000;
}

describe('policies', () => {
  // One 4-vcpu type and at most one instance. A (2 vcpus) runs for 1000 s; B (4 vcpus) cannot fit beside
  // it and the limit forbids a second instance; C (1 vcpu) fits in A's spare room.
  const hol = [
    job('A', 0, 1000, { vcpus: 2 }),
    job('B', 100, 100, { vcpus: 4 }),
    job('C', 200, 100, { vcpus: 1 }),
  ];
  const holConfig = () =>
    smallConfig({
      catalog: [{ name: 't4', vcpus: 4, ram: '16GiB', scratch: '100GiB', price: 3.6 }],
      scheduler: { idle_timeout: '60s', max_instances: 1 },
    });

  it('fifo blocks behind the head of the queue; berth does not', async () => {
    const berth = await runSimulation({ jobs: hol, config: holConfig(), seed: 1, policy: 'berth' });
    const fifo = await runSimulation({ jobs: hol, config: holConfig(), seed: 1, policy: 'fifo' });
    for (const r of [berth, fifo]) expect(r.stats.requests).toMatchObject({ success: 3, open: 0 });
    // berth starts C at once on A's instance.
    expect(startOf(berth.record.containers, 'C')).toBe(0);
    // fifo: C waits until B could start, after A ended (t = 60 s boot + 1000 s).
    expect(startOf(fifo.record.containers, 'C')).toBeGreaterThanOrEqual(1060 - 200);
    expect(fifo.report.wait.mean!).toBeGreaterThan(berth.report.wait.mean! + 250);
  });

  it('one-per-instance never packs', async () => {
    const jobs = [job('a', 0, 300), job('b', 0, 300), job('c', 100, 50)];
    const r = await runSimulation({ jobs, config: smallConfig(), seed: 1, policy: 'one-per-instance' });
    const perInstance = new Map<string, number>();
    for (const c of r.record.containers)
      perInstance.set(c.instance!, (perInstance.get(c.instance!) ?? 0) + 1);
    // Each instance runs its containers one after another: no two overlap on one instance.
    for (const inst of perInstance.keys()) {
      const spans = r.record.containers
        .filter((c) => c.instance === inst)
        .map((c) => [c.start!, c.end!] as const)
        .sort((x, y) => x[0] - y[0]);
      for (let i = 1; i < spans.length; i++) expect(spans[i]![0]).toBeGreaterThanOrEqual(spans[i - 1]![1]);
    }
  });

  it('the cost lower bound is never above any policy’s cost', async () => {
    const jobArb = fc.record({
      arrival: fc.integer({ min: 0, max: 3600 }),
      duration: fc.integer({ min: 1, max: 3600 }),
      vcpus: fc.constantFrom(0.5, 1, 2, 3, 4),
      ramGiB: fc.constantFrom(0.5, 1, 2, 4, 8, 16),
    });
    const catalog = [
      { name: 'c2', vcpus: 2, ram: '4GiB', scratch: '100GiB', price: 0.09 },
      { name: 'g4', vcpus: 4, ram: '16GiB', scratch: '100GiB', price: 0.2 },
      { name: 'm2', vcpus: 2, ram: '16GiB', scratch: '100GiB', price: 0.13 },
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.array(jobArb, { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 0, max: 1000 }),
        async (raw, seed) => {
          const jobs: SimJob[] = raw
            .map((j, i) => job(`j${i}`, j.arrival, j.duration, { vcpus: j.vcpus, ram: j.ramGiB * GiB }))
            .sort((a, b) => a.arrival - b.arrival);
          const config = smallConfig({ catalog, boot_time: { kind: 'uniform', min: '30s', max: '90s' } });
          for (const policy of POLICIES) {
            const { report, stats } = await runSimulation({ jobs, config, seed, policy });
            expect(stats.requests.success).toBe(jobs.length);
            expect(report.cost.lowerBound).toBeLessThanOrEqual(report.cost.total + 1e-6);
          }
        },
      ),
      { numRuns: 25 },
    );
  });
});
