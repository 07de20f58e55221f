// The pool view's structures kept across passes (issue 12) against the same ones computed from scratch,
// after every step of seeded random sequences of changes.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KeptSort } from '../../src/dispatch/scheduler/pool.js';

interface Item {
  id: string;
  key: number;
}

/** Ties on `key` are broken by id, as compareSlots does; equal ids (a duplicate) compare equal. */
function compare(a: Item, b: Item): number {
  return a.key - b.key || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

type Change =
  | { kind: 'key'; index: number; key: number }
  | { kind: 'add'; id: number; key: number; at: number }
  | { kind: 'remove'; index: number }
  | { kind: 'swap'; i: number; j: number }
  | { kind: 'duplicate'; index: number }
  | { kind: 'none' };

const changeArb: fc.Arbitrary<Change> = fc.oneof(
  fc.record({ kind: fc.constant('key' as const), index: fc.nat(), key: fc.integer({ min: 0, max: 2 }) }),
  fc.record({
    kind: fc.constant('add' as const),
    id: fc.nat({ max: 40 }),
    key: fc.integer({ min: 0, max: 6 }),
    at: fc.nat(),
  }),
  fc.record({ kind: fc.constant('remove' as const), index: fc.nat() }),
  fc.record({ kind: fc.constant('swap' as const), i: fc.nat(), j: fc.nat() }),
  fc.record({ kind: fc.constant('duplicate' as const), index: fc.nat() }),
  fc.constant({ kind: 'none' as const }),
);

/** The next list (new objects where an item changed, like a snapshot). */
function apply(list: Item[], c: Change): Item[] {
  const out = [...list];
  const n = out.length;
  switch (c.kind) {
    case 'key':
      if (n > 0) out[c.index % n] = { ...out[c.index % n]!, key: c.key };
      break;
    case 'add':
      out.splice(c.at % (n + 1), 0, { id: `i-${c.id}`, key: c.key });
      break;
    case 'remove':
      if (n > 0) out.splice(c.index % n, 1);
      break;
    case 'swap':
      if (n > 0) [out[c.i % n], out[c.j % n]] = [out[c.j % n]!, out[c.i % n]!];
      break;
    case 'duplicate':
      if (n > 0) out.push({ ...out[c.index % n]! });
      break;
    case 'none':
      break;
  }
  return out;
}

describe('KeptSort', () => {
  it('sorts every list as Array.sort does, after every change', () => {
    let kept = 0;
    fc.assert(
      fc.property(fc.array(changeArb, { minLength: 1, maxLength: 60, size: 'max' }), (changes) => {
        const sorter = new KeptSort<Item>(compare);
        let list: Item[] = [];
        for (const c of changes) {
          list = apply(list, c);
          const before = list.map((x) => x.id).join();
          if (c.kind === 'none' || c.kind === 'key') kept++;
          // Object identity too: the sorted list holds the items given, in Array.sort's stable order.
          const got = sorter.sort(list);
          const want = [...list].sort(compare);
          expect(got.length).toBe(want.length);
          got.forEach((x, i) => expect(x).toBe(want[i]));
          // The input is left as it was.
          expect(list.map((x) => x.id).join()).toBe(before);
        }
      }),
      { numRuns: 500, seed: 12 },
    );
    // The sequences do reach the kept path (same ids in the same places).
    expect(kept).toBeGreaterThan(500);
  });

  it('orders items that compare equal as they come, whatever the last order was', () => {
    const sorter = new KeptSort<Item>(compare);
    sorter.sort([
      { id: 'x', key: 2 },
      { id: 'x', key: 1 },
    ]);
    const now = [
      { id: 'x', key: 1 },
      { id: 'x', key: 1 },
    ];
    const got = sorter.sort(now);
    expect(got[0]).toBe(now[0]);
    expect(got[1]).toBe(now[1]);
  });
});
