// The incremental pass (issue 12): on random sequences of changes, IncrementalPlanner gives exactly the
// plan a full pass gives (same actions, same statuses, same bytes), and it does reuse its last plan when
// nothing but the clock moved. Between full passes it keeps the waiting containers' facts and queue order
// (kept.ts) and merges what changed into them: arrivals (some queued at the same time as a waiting
// container, before or after it by id, of another owner), removals, state and priority changes, several
// scattered changes at once, a reordered list, every container a new object (the view's full reload), and
// more changes than it merges (it sorts again).
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
  | { kind: 'arrivals'; count: number }
  | { kind: 'lock'; index: number }
  | { kind: 'tie'; index: number; before: boolean; owner: string }
  | { kind: 'many'; indices: number[]; priority: number }
  | { kind: 'reverse' }
  | { kind: 'reload' }
  | { kind: 'flood'; count: number };

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
  { arbitrary: fc.record({ kind: fc.constant('lock' as const), index: fc.nat() }), weight: 2 },
  {
    arbitrary: fc.record({
      kind: fc.constant('tie' as const),
      index: fc.nat(),
      before: fc.boolean(),
      owner: fc.constantFrom('', 'alice', 'carol'),
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('many' as const),
      indices: fc.array(fc.nat(), { minLength: 2, maxLength: 12 }),
      priority: fc.constantFrom(1, 2, 4),
    }),
    weight: 2,
  },
  { arbitrary: fc.constant({ kind: 'reverse' as const }), weight: 1 },
  { arbitrary: fc.constant({ kind: 'reload' as const }), weight: 1 },
  {
    // More changes than the planner merges (kept.ts matchLists' max): it sorts them all again.
    arbitrary: fc.record({ kind: fc.constant('flood' as const), count: fc.constantFrom(70, 90) }),
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
    case 'lock': {
      // A waiting container taken (Locked, no instance yet) or given back (Queued): a new object in place.
      const k = s.containers.findIndex(
        (c, i) => i >= step.index % Math.max(1, s.containers.length) && c.state !== 'Running',
      );
      if (k < 0) return s;
      const c = s.containers[k]!;
      const containers = [...s.containers];
      containers[k] =
        c.state === 'Queued'
          ? { ...c, state: 'Locked', instance: null }
          : { ...c, state: 'Queued', instance: null };
      return {
        ...s,
        containers,
        instances: s.instances.map((i) =>
          i.containers.includes(c.id) ? { ...i, containers: i.containers.filter((id) => id !== c.id) } : i,
        ),
      };
    }
    case 'tie': {
      // An arrival queued at the same moment as a container already there, at its priority: the id decides.
      if (s.containers.length === 0) return s;
      const like = s.containers[step.index % s.containers.length]!;
      const id = `${step.before ? '0' : 'z'}${like.id}-${arrived++}`;
      const c = ctr(id, {
        queuedAt: like.queuedAt,
        priority: Math.max(1, like.priority),
        owner: step.owner,
        vcpus: like.vcpus,
        ram: like.ram,
      });
      return { ...s, containers: [...s.containers, c] };
    }
    case 'many': {
      // Scattered changes in one pass: new priorities, one container gone, one arrived.
      if (s.containers.length === 0) return s;
      const containers = [...s.containers];
      for (const i of step.indices) {
        const k = i % containers.length;
        containers[k] = { ...containers[k]!, priority: step.priority };
      }
      const gone = containers.splice(step.indices[0]! % containers.length, 1)[0]!;
      containers.push(
        ctr(`m${arrived++}`, { priority: step.priority, queuedAt: new Date(s.now.getTime() - 60_000) }),
      );
      return {
        ...s,
        containers,
        instances: s.instances.map((i) =>
          i.containers.includes(gone.id)
            ? { ...i, containers: i.containers.filter((id) => id !== gone.id) }
            : i,
        ),
      };
    }
    case 'reverse':
      return { ...s, containers: [...s.containers].reverse() };
    case 'reload':
      return { ...s, containers: s.containers.map((c) => ({ ...c })) };
    case 'flood': {
      const containers = [...s.containers];
      for (let i = 0; i < step.count; i++)
        containers.push(
          ctr(`f${arrived++}`, {
            priority: 1 + (i % 3),
            queuedAt: new Date(s.now.getTime() - (i % 5) * 60_000),
            owner: i % 2 === 0 ? 'alice' : 'bob',
          }),
        );
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
    let merged = 0;
    let sorted = 0;
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
        merged += planner.queueCounts.merged;
        sorted += planner.queueCounts.sorted;
      }),
      { numRuns: 300, seed: 11 },
    );
    // The sequences do exercise the reuse path (else this test would only compare full passes), the
    // merge of changes into the kept queue order, and sorting again when too much changed.
    expect(reused).toBeGreaterThan(100);
    expect(merged).toBeGreaterThan(1000);
    expect(sorted).toBeGreaterThan(400);
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
