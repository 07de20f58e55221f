import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bucketMax, percentile, round, unionLength } from '../../src/sim/report/stats.js';

describe('report stats', () => {
  it('percentile is nearest-rank', () => {
    const xs = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    expect([percentile(xs, 50), percentile(xs, 90), percentile(xs, 99), percentile(xs, 100)]).toEqual([
      5, 9, 10, 10,
    ]);
    expect(percentile([7], 1)).toBe(7);
    expect(percentile([], 50)).toBeNull();
  });

  it('round gives stable decimals and no negative zero', () => {
    expect(round(0.1 + 0.2, 6)).toBe(0.3);
    expect(Object.is(round(-0.0000001, 3), 0)).toBe(true);
  });

  it('unionLength merges overlapping and touching intervals', () => {
    expect(
      unionLength([
        [5, 10],
        [0, 2],
        [8, 12],
        [12, 13],
        [3, 3],
      ]),
    ).toBe(2 + 8);
  });

  it('property: unionLength equals the count of covered unit cells', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 20 }))),
        (xs) => {
          const intervals = xs.map(([a, len]): [number, number] => [a, a + len]);
          const cells = new Set<number>();
          for (const [a, b] of intervals) for (let t = a; t < b; t++) cells.add(t);
          expect(unionLength(intervals)).toBe(cells.size);
        },
      ),
    );
  });

  it('bucketMax: max level per bucket; simultaneous changes net out; earlier changes set the start level', () => {
    // Up at -5 (before the window: level 1 on entry), 0 and 10; down at 10 (a replacement at one
    // instant: no spike to 3) and twice at 25.
    expect(bucketMax([10, -5, 0], [25, 10, 25], 0, 40, 4)).toEqual([2, 2, 2, 0]);
    // Downs not yet happened stay out; an empty series is all zero.
    expect(bucketMax([0, 5], [15], 0, 20, 2)).toEqual([2, 2]);
    expect(bucketMax([], [], 0, 10, 3)).toEqual([0, 0, 0]);
  });
});
