// sortById (scheduler/id-order.ts) keeps the last call's order and merges in what is new: on random
// sequences of pool changes (instances gone, new ones at the end, reordered lists, repeated ids) it gives
// exactly what a stable sort by id gives, item for item.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareIds, sortById, sortStats } from '../../src/dispatch/scheduler/id-order.js';

interface Item {
  id: string;
  n: number;
}

type Change =
  | { kind: 'drop'; at: number; count: number }
  | { kind: 'add'; ids: number[] }
  | { kind: 'swap'; a: number; b: number }
  | { kind: 'repeat'; at: number }
  | { kind: 'same' };

const changeArb: fc.Arbitrary<Change> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('drop' as const), at: fc.nat(), count: fc.nat(5) }), weight: 3 },
  {
    arbitrary: fc.record({
      kind: fc.constant('add' as const),
      ids: fc.array(fc.nat(5000), { maxLength: 6 }),
    }),
    weight: 3,
  },
  { arbitrary: fc.record({ kind: fc.constant('swap' as const), a: fc.nat(), b: fc.nat() }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('repeat' as const), at: fc.nat() }), weight: 1 },
  { arbitrary: fc.constant({ kind: 'same' as const }), weight: 2 },
);

/** Ids like the simulator's and the dispatcher's (not in id order when in creation order). */
function idOf(k: number): string {
  return k % 7 === 0 ? `pending-${k}` : `sim-i-${k}`;
}

function apply(list: Item[], ch: Change, serial: { n: number }): Item[] {
  const next = [...list];
  switch (ch.kind) {
    case 'drop':
      if (next.length > 0) next.splice(ch.at % next.length, ch.count);
      break;
    case 'add':
      for (const k of ch.ids)
        if (!next.some((x) => x.id === idOf(k))) next.push({ id: idOf(k), n: serial.n++ });
      break;
    case 'swap':
      if (next.length > 1) {
        const a = ch.a % next.length;
        const b = ch.b % next.length;
        [next[a], next[b]] = [next[b]!, next[a]!];
      }
      break;
    case 'repeat':
      if (next.length > 0) next.push({ id: next[ch.at % next.length]!.id, n: serial.n++ });
      break;
    case 'same':
      break;
  }
  return next;
}

describe('sortById', () => {
  it('gives what a stable sort by id gives, on random sequences of pool changes', () => {
    fc.assert(
      fc.property(
        fc.array(fc.nat(5000), { maxLength: 40 }),
        fc.array(changeArb, { minLength: 1, maxLength: 30 }),
        (start, changes) => {
          const serial = { n: 0 };
          let list = apply([], { kind: 'add', ids: start }, serial);
          for (const ch of changes) {
            list = apply(list, ch, serial);
            const got = sortById(list);
            const want = [...list].sort(compareIds);
            expect(got.map((x) => x.n)).toEqual(want.map((x) => x.n));
            expect(got).not.toBe(list);
          }
        },
      ),
      { seed: 12, numRuns: 300 },
    );
  });

  it('keeps the order across a thousand-instance pool that changes a little each pass', () => {
    const serial = { n: 0 };
    let list = apply([], { kind: 'add', ids: Array.from({ length: 1000 }, (_, i) => i + 1) }, serial);
    sortById(list);
    const before = { ...sortStats };
    for (let pass = 0; pass < 20; pass++) {
      list = apply(list, { kind: 'drop', at: pass * 37, count: 2 }, serial);
      list = apply(list, { kind: 'add', ids: [2000 + pass, 3000 + pass] }, serial);
      expect(sortById(list).map((x) => x.id)).toEqual([...list].sort(compareIds).map((x) => x.id));
    }
    // Every one of these passes merged: none sorted the whole pool.
    expect(sortStats.merged - before.merged).toBe(20);
    expect(sortStats.full - before.full).toBe(0);
  });
});
