// OrderedIds (src/dispatch/ordered-ids.ts) against a list kept in insertion order, after every step of
// seeded random sequences.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OrderedIds } from '../../src/dispatch/ordered-ids.js';

const stepArb = fc.oneof(
  fc.record({ op: fc.constant('add' as const), id: fc.nat({ max: 5 }) }),
  fc.record({ op: fc.constant('delete' as const), id: fc.nat({ max: 5 }) }),
  fc.record({ op: fc.constant('ask' as const), ids: fc.array(fc.nat({ max: 7 }), { maxLength: 8 }) }),
);

describe('OrderedIds', () => {
  it('gives any subset in the order the ids were first added since they were last deleted', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 80, size: 'max' }), (steps) => {
        const ids = new OrderedIds();
        let model: string[] = [];
        for (const s of steps) {
          if (s.op === 'add') {
            ids.add(`n${s.id}`);
            if (!model.includes(`n${s.id}`)) model.push(`n${s.id}`);
          } else if (s.op === 'delete') {
            ids.delete(`n${s.id}`);
            model = model.filter((x) => x !== `n${s.id}`);
          } else {
            const asked = new Set(s.ids.map((i) => `n${i}`));
            expect(ids.inOrder(asked)).toEqual(model.filter((x) => asked.has(x)));
          }
          for (const x of model) expect(ids.has(x)).toBe(true);
        }
      }),
      { numRuns: 300, seed: 3 },
    );
  });

  it('keeps the place of an id added again, and puts one deleted and added again last', () => {
    const ids = new OrderedIds();
    for (const id of ['a', 'b', 'c', 'a']) ids.add(id);
    expect(ids.inOrder(['c', 'b', 'a', 'x'])).toEqual(['a', 'b', 'c']);
    ids.delete('a');
    ids.add('a');
    expect(ids.inOrder(['c', 'b', 'a'])).toEqual(['b', 'c', 'a']);
  });
});
