// Paired ends (pair_ends, src/dispatch/scheduler/paired.ts) on hand-computed snapshots: containers queued
// at the same moment go longest expected run time first, so that each instance created for two of them
// holds two that end together, and the bill is what the longer of each pair runs.
import { describe, expect, it } from 'vitest';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { Plan, SchedulerConfig, SnapshotContainer } from '../../src/dispatch/scheduler/types.js';
import { ctr, inst, NOW, snap, type } from './builders.js';

const MIN = 60_000;
// One type: 2 vcpus at 0.2 $/h, so an instance takes two 1-vcpu containers and nothing grows.
const T2 = type('t2', 2, 4, 0.2);
const AT = new Date(NOW.getTime() - 5_000);
const fanOut = (runs: (number | undefined)[], at: (i: number) => Date = () => AT) =>
  runs.map((m, i) =>
    ctr(`c${i}`, { queuedAt: at(i), ...(m === undefined ? {} : { expectedRunMs: m * MIN }) }),
  );
const world = (containers: SnapshotContainer[], config: Partial<SchedulerConfig> = {}) =>
  plan(
    snap({
      config: { waitForRunning: false, endAligned: 'expected', pairEnds: true, ...config },
      types: [T2],
      containers,
    }),
  );
/** The containers each created instance is for, in create order. */
const creates = (p: Plan) => p.actions.flatMap((a) => (a.op === 'create' ? [a.for] : []));
/** What the created instances bill when each lives as long as its longest container (no boot): $. */
const bill = (p: Plan, containers: SnapshotContainer[]) =>
  creates(p).reduce((sum, ids) => {
    const life = Math.max(...ids.map((id) => containers.find((c) => c.id === id)!.expectedRunMs!));
    return sum + (0.2 * life) / 3_600_000;
  }, 0);

describe('pair_ends (pure planner)', () => {
  // Queued together, expected 10, 60, 10 and 60 min. Queue order pairs c0+c1 and c2+c3: two instances
  // alive 60 min each, 2 × 0.2 $/h × 1 h = 0.40 $. Longest first pairs c1+c3 (60 min: 0.20 $) and c0+c2
  // (10 min: 0.2 × 10/60 = 0.0333 $): 0.2333 $.
  const cs = fanOut([10, 60, 10, 60]);

  it('pairs the two 60-min containers on one new instance and the two 10-min ones on another', () => {
    const p = world(cs);
    expect(creates(p)).toEqual([
      ['c1', 'c3'],
      ['c0', 'c2'],
    ]);
    expect(bill(p, cs)).toBeCloseTo(0.2 + 0.2 / 6, 9);
  });

  it('off: queue order pairs each long container with a short one (0.40 $)', () => {
    const p = world(cs, { pairEnds: false });
    expect(creates(p)).toEqual([
      ['c0', 'c1'],
      ['c2', 'c3'],
    ]);
    expect(bill(p, cs)).toBeCloseTo(0.4, 9);
  });

  it('does nothing when end_aligned is off (no expected run times are read)', () => {
    expect(creates(world(cs, { endAligned: 'off' }))).toEqual([
      ['c0', 'c1'],
      ['c2', 'c3'],
    ]);
  });

  it('never passes a container queued earlier: only containers queued at the same moment are reordered', () => {
    // c0 (10 min) was queued a second before the others: it keeps its place and pairs with the longest
    // of the rest; among c1..c3 (60, 10, 60 min), longest first.
    const xs = fanOut([10, 60, 10, 60], (i) => (i === 0 ? new Date(AT.getTime() - 1000) : AT));
    expect(creates(world(xs))).toEqual([
      ['c0', 'c1'],
      ['c3', 'c2'],
    ]);
  });

  it('with end_aligned history, reads the step medians: two steps queued together are paired by step', () => {
    // c0, c2 are `short` (10 min by history), c1, c3 `long` (60 min): the same pairs and bill as above.
    const xs = ['short', 'long', 'short', 'long'].map((name, i) => ctr(`c${i}`, { queuedAt: AT, name }));
    const s = snap({
      // boot_budget off: the case is about pairing alone.
      config: { waitForRunning: false, endAligned: 'history', pairEnds: true, bootBudget: 0 },
      types: [T2],
      containers: xs,
    });
    s.estimates = { bootMs: null, endsAt: {}, steps: { short: 10 * MIN, long: 60 * MIN } };
    expect(creates(plan(s))).toEqual([
      ['c1', 'c3'],
      ['c0', 'c2'],
    ]);
    // end_aligned expected: step medians are not read, queue order stands.
    expect(creates(plan({ ...s, config: { ...s.config, endAligned: 'expected' } }))).toEqual([
      ['c0', 'c1'],
      ['c2', 'c3'],
    ]);
  });

  it('reorders only within a size: a 2-vcpu container queued among 1-vcpu ones keeps its place', () => {
    // An idle t2 (i-a) is free. Queue order a0 (10 min), big (2 vcpus, 90 min), a1 (60), a2 (10), a3 (60).
    // The 1-vcpu ones take their places (1st, 3rd, 4th, 5th) longest first: a1, big, a3, a0, a2. So a1
    // starts on i-a, big gets a new instance, a3 joins a1 on i-a, a0 + a2 share a new one. Sorted across
    // sizes, big (90 min) would come first and take i-a (which on KTH's first 2,000 jobs cost 0.34 %).
    const mins = [10, 90, 60, 10, 60];
    const ids = ['a0', 'big', 'a1', 'a2', 'a3'];
    const xs = ids.map((id, i) =>
      ctr(id, { queuedAt: AT, expectedRunMs: mins[i]! * MIN, vcpus: id === 'big' ? 2 : 1 }),
    );
    const p = plan(
      snap({
        config: { waitForRunning: false, endAligned: 'expected', pairEnds: true },
        types: [T2],
        instances: [inst('i-a', 't2', 'idle')],
        containers: xs,
      }),
    );
    const startedOnA = p.actions.flatMap((a) =>
      a.op === 'start' && a.instance === 'i-a' ? [a.container] : [],
    );
    expect(startedOnA.sort()).toEqual(['a1', 'a3']);
    expect(
      creates(p)
        .map((ids) => [...ids].sort())
        .sort(),
    ).toEqual([['a0', 'a2'], ['big']]);
  });

  it('keeps containers without an expected run time first, in queue order', () => {
    const xs = fanOut([10, undefined, 60, undefined]);
    expect(creates(world(xs))).toEqual([
      ['c1', 'c3'],
      ['c2', 'c0'],
    ]);
  });
});
