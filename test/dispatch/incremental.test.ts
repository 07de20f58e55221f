// The incremental pass (issue 12): on random sequences of changes, IncrementalPlanner gives exactly the
// plan a full pass gives (same actions, same statuses, same bytes), and it does reuse its last plan when
// nothing but the clock moved.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IncrementalPlanner } from '../../src/dispatch/scheduler/incremental.js';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { Snapshot } from '../../src/dispatch/scheduler/types.js';
import { planToJson } from '../../src/dispatch/snapshot-json.js';
import { snapshotArb } from './arbitraries.js';
import { applyPlan, ctr, GiB, NOW, snap, withArrival, withoutContainer } from './builders.js';

/** One change between two passes. Parts that do not change keep their objects, as the dispatcher's view does. */
type Step =
  | { kind: 'clock'; ms: number }
  | { kind: 'act' }
  | { kind: 'arrive'; vcpus: number; priority: number }
  | { kind: 'leave'; index: number }
  | { kind: 'priority'; index: number; priority: number }
  | { kind: 'limit'; maxInstances: number | null }
  | { kind: 'factor'; maxPriceFactor: number }
  | { kind: 'rate'; forMs: number | null }
  | { kind: 'arrivals'; count: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    arbitrary: fc.record({
      kind: fc.constant('clock' as const),
      ms: fc.constantFrom(0, 1000, 30_000, 61_000, 700_000),
    }),
    weight: 5,
  },
  { arbitrary: fc.constant({ kind: 'act' as const }), weight: 3 },
  {
    arbitrary: fc.record({
      kind: fc.constant('arrive' as const),
      vcpus: fc.constantFrom(0.5, 1, 2),
      priority: fc.constantFrom(1, 3, 5),
    }),
    weight: 2,
  },
  { arbitrary: fc.record({ kind: fc.constant('leave' as const), index: fc.nat() }), weight: 1 },
  {
    arbitrary: fc.record({
      kind: fc.constant('priority' as const),
      index: fc.nat(),
      priority: fc.constantFrom(0, 2, 9),
    }),
    weight: 1,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('limit' as const), maxInstances: fc.constantFrom(null, 1, 3) }),
    weight: 1,
  },
  {
    // What shapes depend on (the planner keeps its shapes across passes while it is the same: kept.ts).
    arbitrary: fc.record({
      kind: fc.constant('factor' as const),
      maxPriceFactor: fc.constantFrom(1, 1.5, 4),
    }),
    weight: 1,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('rate' as const), forMs: fc.constantFrom(null, 20_000) }),
    weight: 1,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('arrivals' as const), count: fc.constantFrom(0, 30) }),
    weight: 1,
  },
);

let arrived = 0;

/** The next snapshot: `s` changed by one step. */
function next(s: Snapshot, step: Step, last: ReturnType<typeof plan>): Snapshot {
  switch (step.kind) {
    case 'clock':
      return { ...s, now: new Date(s.now.getTime() + step.ms) };
    case 'act':
      try {
        return applyPlan(s, last, { stepMs: 1000, bootMs: 30_000 }, { n: 1000 + arrived++ });
      } catch {
        // The simulated agents started a container the plan unlocks (a race the real store refuses): the
        // world stays as it was.
        return s;
      }
    case 'arrive':
      return withArrival(s, `x${arrived++}`, step.vcpus, step.priority);
    case 'leave':
      return withoutContainer(s, step.index);
    case 'priority': {
      if (s.containers.length === 0) return s;
      const k = step.index % s.containers.length;
      const containers = [...s.containers];
      containers[k] = { ...containers[k]!, priority: step.priority };
      return { ...s, containers };
    }
    case 'limit':
      return { ...s, config: { ...s.config, maxInstances: step.maxInstances } };
    case 'factor':
      return { ...s, config: { ...s.config, maxPriceFactor: step.maxPriceFactor } };
    case 'rate':
      return {
        ...s,
        cloud: {
          ...s.cloud,
          rateLimitedUntil: step.forMs === null ? null : new Date(s.now.getTime() + step.forMs),
        },
      };
    case 'arrivals':
      return {
        ...s,
        arrivals:
          step.count === 0
            ? []
            : [
                {
                  vcpus: 1,
                  ram: GiB,
                  scratch: 0,
                  gpus: 0,
                  preemptible: false,
                  instanceTypes: null,
                  count: step.count,
                },
              ],
      };
  }
}

describe('incremental pass', () => {
  it('gives the same plan as a full pass on random sequences of changes', () => {
    let reused = 0;
    fc.assert(
      fc.property(snapshotArb, fc.array(stepArb, { minLength: 1, maxLength: 25 }), (first, steps) => {
        const planner = new IncrementalPlanner();
        let s = first;
        let last = planner.plan(s);
        expect(planToJson(last)).toBe(planToJson(plan(structuredClone(s))));
        for (const step of steps) {
          s = next(s, step, last);
          last = planner.plan(s);
          expect(planToJson(last)).toBe(planToJson(plan(structuredClone(s))));
        }
        reused += planner.stats.reused;
      }),
      { numRuns: 300, seed: 11 },
    );
    // The sequences do exercise the reuse path (else this test would only compare full passes).
    expect(reused).toBeGreaterThan(100);
  });

  it('reuses the last plan when only the clock moved, and not past a timeout', () => {
    const planner = new IncrementalPlanner();
    const s = snap({
      containers: [ctr('a')],
      cloud: { rateLimitedUntil: new Date(NOW.getTime() + 10_000) },
    });
    const p = planner.plan(s);
    expect(p.actions).toEqual([]);
    expect(p.validUntil).toBe(NOW.getTime() + 10_000);
    expect(planner.plan({ ...s, now: new Date(NOW.getTime() + 5000) })).toBe(p);
    expect(planner.stats).toEqual({ full: 1, reused: 1 });
    // The rate limit ends at +10 s: a full pass, which creates the instance.
    const after = planner.plan({ ...s, now: new Date(NOW.getTime() + 10_000) });
    expect(planner.stats).toEqual({ full: 2, reused: 1 });
    expect(after.actions.map((x) => x.op)).toEqual(['lock', 'create']);
    // A changed container (a new object) is a change.
    planner.plan({ ...s, containers: [{ ...s.containers[0]! }], now: new Date(NOW.getTime() + 10_000) });
    expect(planner.stats).toEqual({ full: 3, reused: 1 });
  });
});
