// Slots kept across passes (issue 12, scheduler/pool.ts KeptSlots): on seeded random sequences of changes, a
// pass given what the last passes kept plans exactly what a pass from scratch plans (same bytes), and it
// does hand kept slots over (else this would only compare passes from scratch). Unchanged records keep
// their objects between passes, as the dispatcher's views do.
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KeptPass } from '../../src/dispatch/scheduler/kept.js';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { Plan, Snapshot } from '../../src/dispatch/scheduler/types.js';
import { planToJson } from '../../src/dispatch/snapshot-json.js';
import { snapshotArb } from './arbitraries.js';
import { applyPlan, ctr, GiB, inst, snap, type } from './builders.js';

type Step =
  | { kind: 'act' }
  | { kind: 'clock'; ms: number }
  | { kind: 'arrive'; vcpus: number; priority: number }
  | { kind: 'leave'; index: number }
  | { kind: 'behavior'; index: number; idleBehavior: 'run' | 'hold' | 'drain' }
  | { kind: 'types' }
  | { kind: 'limit'; maxInstances: number | null };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: fc.constant({ kind: 'act' as const }), weight: 6 },
  {
    arbitrary: fc.record({ kind: fc.constant('clock' as const), ms: fc.constantFrom(1000, 61_000, 700_000) }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('arrive' as const),
      vcpus: fc.constantFrom(0.5, 1, 2),
      priority: fc.constantFrom(1, 3, 5),
    }),
    weight: 3,
  },
  { arbitrary: fc.record({ kind: fc.constant('leave' as const), index: fc.nat() }), weight: 2 },
  {
    arbitrary: fc.record({
      kind: fc.constant('behavior' as const),
      index: fc.nat(),
      idleBehavior: fc.constantFrom('run' as const, 'hold' as const, 'drain' as const),
    }),
    weight: 1,
  },
  { arbitrary: fc.constant({ kind: 'types' as const }), weight: 1 },
  {
    // A global limit: the head of the queue gets instances drained for it (heads.ts writes slots too).
    arbitrary: fc.record({ kind: fc.constant('limit' as const), maxInstances: fc.constantFrom(null, 1, 2) }),
    weight: 2,
  },
);

/** `after` with the objects of `before` whose fields did not change. */
function intern<T extends { id: string }>(before: readonly T[], after: T[]): T[] {
  const old = new Map(before.map((x) => [x.id, x]));
  return after.map((x) => {
    const o = old.get(x.id);
    return o !== undefined && isDeepStrictEqual(o, x) ? o : x;
  });
}

let n = 0;

function next(s: Snapshot, step: Step, last: Plan): Snapshot {
  const now = new Date(s.now.getTime() + 1000);
  switch (step.kind) {
    case 'act': {
      let after: Snapshot;
      try {
        after = applyPlan(s, last, { stepMs: 1000, bootMs: 30_000 }, { n: 1000 + n++ });
      } catch {
        return s; // a race the real store refuses (incremental.test.ts): the world stays as it was
      }
      return {
        ...after,
        containers: intern(s.containers, after.containers),
        instances: intern(s.instances, after.instances),
      };
    }
    case 'clock':
      return { ...s, now: new Date(s.now.getTime() + step.ms) };
    case 'arrive':
      return {
        ...s,
        now,
        containers: [
          ...s.containers,
          ctr(`x${n++}`, { vcpus: step.vcpus, priority: step.priority, ram: GiB, queuedAt: now }),
        ],
      };
    case 'leave': {
      if (s.containers.length === 0) return s;
      const gone = s.containers[step.index % s.containers.length]!;
      return {
        ...s,
        containers: s.containers.filter((c) => c !== gone),
        instances: s.instances.map((i) =>
          i.containers.includes(gone.id)
            ? { ...i, containers: i.containers.filter((id) => id !== gone.id) }
            : i,
        ),
      };
    }
    case 'behavior': {
      if (s.instances.length === 0) return s;
      const k = step.index % s.instances.length;
      const instances = [...s.instances];
      instances[k] = { ...instances[k]!, idleBehavior: step.idleBehavior };
      return { ...s, instances };
    }
    case 'limit':
      return { ...s, config: { ...s.config, maxInstances: step.maxInstances } };
    case 'types':
      // The same types in a new list (a configuration reload): nothing kept may be handed over.
      return { ...s, instanceTypes: s.instanceTypes.map((t) => ({ ...t })) };
  }
}

describe('slots kept across passes', () => {
  it('plan what a pass from scratch plans on random sequences of changes', () => {
    let reused = 0;
    fc.assert(
      fc.property(snapshotArb, fc.array(stepArb, { minLength: 1, maxLength: 30 }), (first, steps) => {
        const kept = new KeptPass();
        let s = first;
        let last = plan(s, kept);
        expect(planToJson(last)).toBe(planToJson(plan(structuredClone(s))));
        for (const step of steps) {
          s = next(s, step, last);
          last = plan(s, kept);
          expect(planToJson(last)).toBe(planToJson(plan(structuredClone(s))));
        }
        reused += kept.slots.reused;
      }),
      { numRuns: 400, seed: 12 },
    );
    expect(reused).toBeGreaterThan(1000);
  });

  it('does not hand over a slot drained for the head of the queue once the head is gone', () => {
    // max_instances 1: the 8-vcpu head cannot get its instance, so i-0 is drained for it (heads.ts) and
    // the priority-1 container behind it waits. With the head gone, it goes on i-0.
    const running = ctr('r', { state: 'Running', instance: 'i-0', vcpus: 0.5 });
    const low = ctr('low', { vcpus: 0.5 });
    const first = snap({
      config: { maxInstances: 1 },
      types: [type('t2', 2, 4, 0.2), type('t8', 8, 16, 0.8)],
      instances: [inst('i-0', 't2', 'running')],
      containers: [running, ctr('head', { priority: 5, vcpus: 8 }), low],
    });
    const kept = new KeptPass();
    expect(plan(first, kept).status.get('low')).toMatch(/head/);
    // The same instance record and containers (a new list without the head): i-0's slot is kept, if clean.
    const second = { ...first, containers: [running, low] };
    const p = plan(second, kept);
    expect(planToJson(p)).toBe(planToJson(plan(structuredClone(second))));
    expect(p.actions).toContainEqual({ op: 'start', container: 'low', instance: 'i-0' });
  });
});
