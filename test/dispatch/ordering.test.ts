// Queue order (rule 1) against a plain comparator sort, including the packed fast path (buckets of 64
// or more containers) and containers queued within the same second.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AheadCounter, queueOrder } from '../../src/dispatch/scheduler/ordering.js';
import { seededRng } from '../../src/model/clock.js';
import type { SnapshotContainer } from '../../src/dispatch/scheduler/types.js';
import { ctr, NOW } from './builders.js';

function reference(cs: SnapshotContainer[]): string[] {
  return [...cs]
    .sort(
      (a, b) =>
        (a.state === 'Locked' ? 0 : 1) - (b.state === 'Locked' ? 0 : 1) ||
        b.priority - a.priority ||
        a.queuedAt.getTime() - b.queuedAt.getTime() ||
        (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    )
    .map((c) => c.id);
}

describe('queueOrder', () => {
  it('orders Locked first, then priority descending, queue time ascending, id', () => {
    const cs = [
      ctr('q-low', { priority: 1, queuedAt: new Date(0) }),
      ctr('q-high-late', { priority: 5, queuedAt: new Date(2000) }),
      ctr('q-high-b', { priority: 5, queuedAt: new Date(1000) }),
      ctr('q-high-a', { priority: 5, queuedAt: new Date(1000) }),
      ctr('locked-low', { state: 'Locked', priority: 1, queuedAt: new Date(9000) }),
    ];
    expect(queueOrder(cs).map((c) => c.id)).toEqual([
      'locked-low',
      'q-high-a',
      'q-high-b',
      'q-high-late',
      'q-low',
    ]);
  });

  it('matches a comparator sort on random queues, large buckets and same-second ties included', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            locked: fc.boolean(),
            priority: fc.integer({ min: 1, max: 3 }),
            // Milliseconds within a few seconds: many same-second and some exact ties.
            ms: fc.integer({ min: 0, max: 4000 }),
            id: fc.integer({ min: 0, max: 10_000 }),
          }),
          { maxLength: 400 },
        ),
        (rows) => {
          const seen = new Set<string>();
          const cs = rows
            .map((r) =>
              ctr(`c${r.id}`, {
                state: r.locked ? 'Locked' : 'Queued',
                priority: r.priority,
                queuedAt: new Date(NOW.getTime() + r.ms),
              }),
            )
            .filter((c) => !seen.has(c.id) && seen.add(c.id));
          expect(queueOrder(cs).map((c) => c.id)).toEqual(reference(cs));
        },
      ),
      { numRuns: 200, seed: 3 },
    );
  });

  it('matches it on long runs of one exact time and on spans of millennia (keys packed by the second)', () => {
    const ids = fc.sample(fc.integer({ min: 0, max: 1_000_000 }), { numRuns: 300, seed: 5 });
    const unique = [...new Set(ids)];
    // 100+ containers queued in the same millisecond: a run longer than the insertion sort takes.
    const sameMs = unique.slice(0, 120).map((id) => ctr(`s${id}`, { queuedAt: NOW }));
    expect(queueOrder(sameMs).map((c) => c.id)).toEqual(reference(sameMs));
    // Times thousands of years apart: millisecond keys would not stay exact, so keys are seconds and
    // containers within one second are ordered by their exact time, then id.
    const spans = [-3e14, 0, 3e14];
    const wide = unique
      .slice(120, 300)
      .map((id, i) =>
        ctr(`w${id}`, { queuedAt: new Date(spans[i % 3]! + (i % 20) * 1000 + (id % 7) * 100) }),
      );
    expect(queueOrder(wide).map((c) => c.id)).toEqual(reference(wide));
  });
});

describe('AheadCounter', () => {
  it('counts strictly higher priorities added so far', () => {
    const a = new AheadCounter();
    for (const p of [5, 5, 3, 1000, 0]) a.add(p);
    expect([a.higherThan(5), a.higherThan(4), a.higherThan(0), a.higherThan(1000)]).toEqual([1, 3, 4, 0]);
  });

  it("the count of one at the lowest priority so far (O(1)) is the tree's: seeded queues, mostly in priority order", () => {
    const rng = seededRng(5);
    for (let run = 0; run < 20; run++) {
      const a = new AheadCounter();
      const seen: number[] = [];
      let p = 1 + Math.floor(rng() * 1200); // beyond the tree's top too
      for (let i = 0; i < 500; i++) {
        // Mostly descending, with ties and some out of order (and negative, fractional).
        const r = rng();
        if (r < 0.3) p -= Math.floor(rng() * 5);
        else if (r < 0.4) p = Math.floor(rng() * 1100) - 5 + (rng() < 0.2 ? 0.5 : 0);
        const clamp = (x: number) => Math.min(Math.max(Math.floor(x), 0), 1001);
        const want = seen.filter((q) => clamp(q) > clamp(p)).length;
        expect(a.higherThan(p), `run ${run} i ${i}`).toBe(want);
        a.add(p);
        seen.push(p);
      }
    }
  });
});
