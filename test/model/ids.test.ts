import { describe, expect, it } from 'vitest';
import { firstContainerId, isId, newId } from '../../src/model/ids.js';

describe('newId', () => {
  it('gives well-formed ids that never repeat, across refills of its random pool', () => {
    // 3,000 ids at one instant: more than two refills of the pool (1,024 ids each), all with the same time part.
    const ids = Array.from({ length: 3000 }, () => newId('c', 1_700_000_000_000));
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(isId('c', id)).toBe(true);
    expect(new Set(ids.map((id) => id.slice(0, 11))).size).toBe(1);
  });

  it('never repeats in a burst: ids made in one millisecond sort in the order they were made', () => {
    // 100,000 ids at one instant (a batched submission makes 1,000 in about a millisecond): with a random
    // tail each, a duplicate among them was likely (about 15 %), and their order was random.
    const ids = Array.from({ length: 100_000 }, () => newId('r', 1_700_000_000_500));
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.every((id, i) => i === 0 || ids[i - 1]! < id)).toBe(true);
    // The next millisecond starts afresh, after all of them.
    expect(newId('r', 1_700_000_000_501) > ids[ids.length - 1]!).toBe(true);
  });

  it('orders ids by their time', () => {
    const earlier = newId('r', 1_700_000_000_000);
    const later = newId('r', 1_700_000_000_001);
    expect(earlier < later).toBe(true);
  });
});

describe('firstContainerId', () => {
  it("is a container id with its request's time and tail: distinct per request, ordered as the requests", () => {
    const requests = Array.from({ length: 1000 }, (_, i) => newId('r', 1_700_000_000_000 + (i >> 4)));
    const firsts = requests.map(firstContainerId);
    for (const [i, id] of firsts.entries()) {
      expect(isId('c', id)).toBe(true);
      expect(id.slice(2)).toBe(requests[i]!.slice(2));
    }
    expect(new Set(firsts).size).toBe(firsts.length);
    const byTime = (ids: string[]) => ids.map((id) => id.slice(2, 11));
    expect(byTime([...firsts].sort())).toEqual(byTime([...requests].sort()));
  });
});
