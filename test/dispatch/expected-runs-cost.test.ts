// What pair_ends and end_aligned (paired.ts, aligned.ts; both on by default) cost a pass, counted rather
// than timed: reads of the containers' fields, through getters. Without any expected run time neither rule
// can change a decision, and at a million waiting containers every read of a container in queue order is a
// cache miss (docs/performance/scheduler.md, "Session 12"): so with none expected, pair_ends reads nothing,
// and expected run times are looked up once per container, in the containers' (memory) order.
import { describe, expect, it } from 'vitest';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { SchedulerConfig, SnapshotContainer } from '../../src/dispatch/scheduler/types.js';
import { ctr, NOW, snap, type } from './builders.js';

const MIN = 60_000;
const T2 = type('t2', 2, 4, 0.2);

/**
 * 60 fan-outs of 5 containers (one moment and priority each), listed in an order other than the queue's,
 * `estimated` of them (by index in that list) with an expected run time of 10 + index minutes.
 */
function fanOuts(estimated: readonly number[] = []): SnapshotContainer[] {
  const out: SnapshotContainer[] = [];
  for (let g = 0; g < 60; g++)
    for (let k = 0; k < 5; k++) {
      const i = out.length;
      out.push(
        ctr(`g${g}-${k}`, {
          queuedAt: new Date(NOW.getTime() - 600_000 + ((g * 37) % 60) * 1000),
          priority: 1 + (g % 3),
          ...(estimated.includes(i) ? { expectedRunMs: (10 + i) * MIN } : {}),
        }),
      );
    }
  return out;
}

/** Makes each read of `field` on the containers append the container's id to `log`. */
function countReads(cs: SnapshotContainer[], field: keyof SnapshotContainer, log: string[]): void {
  for (const c of cs) {
    const value = c[field];
    Object.defineProperty(c, field, {
      enumerable: value !== undefined,
      get: () => {
        log.push(c.id);
        return value;
      },
    });
  }
}

/** Plans the containers (a limit of 3 new instances: most of them wait) with the field's reads logged. */
function reads(
  containers: SnapshotContainer[],
  field: keyof SnapshotContainer,
  config: Partial<SchedulerConfig> = {},
): string[] {
  const cs = containers.map((c) => ({ ...c }));
  const log: string[] = [];
  countReads(cs, field, log);
  plan(snap({ config: { maxInstances: 3, ...config }, types: [T2], containers: cs }));
  return log;
}

describe('expected run times cost nothing when none is known (counted reads)', () => {
  it('pair_ends reads no container when none has an expected run time', () => {
    const cs = fanOuts();
    // Every rule but pair_ends reads `state` as often either way; grouping by moment read it twice a
    // container (and the queue time too).
    expect(reads(cs, 'state', { pairEnds: true }).length).toBe(
      reads(cs, 'state', { pairEnds: false }).length,
    );
    expect(reads(cs, 'queuedAt', { pairEnds: true }).length).toBe(cs.length);
  });

  it('with two containers expected, pair_ends reads only their two fan-outs', () => {
    const cs = fanOuts([7, 151]);
    const extra =
      reads(cs, 'state', { pairEnds: true }).length - reads(cs, 'state', { pairEnds: false }).length;
    // Each of the two groups of 5: at most one comparison with each other member and one past each end,
    // two containers read per comparison.
    expect(extra).toBeGreaterThan(0);
    expect(extra).toBeLessThanOrEqual(2 * 2 * (5 + 1));
  });

  it('looks each expected run time up once, in the containers’ order, when none is known', () => {
    const cs = fanOuts();
    expect(reads(cs, 'expectedRunMs')).toEqual(cs.map((c) => c.id));
  });

  it('with two known, reads the others’ once, in the containers’ order, and only those two again', () => {
    const cs = fanOuts([7, 151]);
    const log = reads(cs, 'expectedRunMs');
    expect(log.slice(0, cs.length)).toEqual(cs.map((c) => c.id));
    expect(new Set(log.slice(cs.length))).toEqual(new Set(['g1-2', 'g30-1']));
  });

  it('reads none with end_aligned off', () => {
    expect(reads(fanOuts([7]), 'expectedRunMs', { endAligned: 'off' })).toEqual([]);
  });
});
