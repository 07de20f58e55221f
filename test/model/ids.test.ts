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
