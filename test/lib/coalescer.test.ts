import { describe, expect, it } from 'vitest';
import { Coalescer } from '../../src/lib/coalescer.js';

/** A send that records its batches and resolves each one when the test says so. */
function held() {
  const calls: { items: number[]; done: (out?: string[]) => void; fail: (e: Error) => void }[] = [];
  const send = (items: number[]) =>
    new Promise<string[]>((resolve, reject) =>
      calls.push({ items, done: (out) => resolve(out ?? items.map((i) => `r${i}`)), fail: reject }),
    );
  return { calls, send };
}

/** Lets pending immediates and promise callbacks run. */
const turn = () => new Promise((r) => setImmediate(r));

describe('Coalescer', () => {
  it('items of one turn go in one call; what arrives meanwhile goes in the next, all together', async () => {
    const h = held();
    const c = new Coalescer(h.send, { maxItems: 100, maxInFlight: 1 });
    const first = [1, 2, 3].map((i) => c.submit(i));
    await turn();
    expect(h.calls.map((x) => x.items)).toEqual([[1, 2, 3]]);
    const later = [4, 5].map((i) => c.submit(i));
    await turn();
    const more = c.submit(6);
    await turn();
    expect(h.calls).toHaveLength(1); // the first call is still running
    h.calls[0]!.done();
    expect(await Promise.all(first)).toEqual(['r1', 'r2', 'r3']);
    await turn();
    expect(h.calls.map((x) => x.items)).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    h.calls[1]!.done();
    expect(await Promise.all([...later, more])).toEqual(['r4', 'r5', 'r6']);
    expect(c.stats).toEqual({ calls: 2, items: 6 });
  });

  it('at most maxItems per call and maxInFlight calls at once', async () => {
    const h = held();
    const c = new Coalescer(h.send, { maxItems: 2, maxInFlight: 2 });
    const all = [1, 2, 3, 4, 5].map((i) => c.submit(i));
    await turn();
    await turn();
    expect(h.calls.map((x) => x.items)).toEqual([
      [1, 2],
      [3, 4],
    ]);
    h.calls[0]!.done();
    await turn();
    await turn();
    expect(h.calls.map((x) => x.items)).toEqual([[1, 2], [3, 4], [5]]);
    h.calls[1]!.done();
    h.calls[2]!.done();
    expect(await Promise.all(all)).toEqual(['r1', 'r2', 'r3', 'r4', 'r5']);
  });

  it('a call weighs at most maxWeight; an item heavier than that goes alone', async () => {
    const h = held();
    const c = new Coalescer(h.send, { maxItems: 100, maxInFlight: 3, maxWeight: 10 }, (i) => i);
    const all = [4, 5, 2, 30, 1].map((i) => c.submit(i));
    await turn();
    await turn();
    await turn();
    expect(h.calls.map((x) => x.items)).toEqual([[4, 5], [2], [30]]);
    h.calls.forEach((x) => x.done());
    await turn();
    await turn();
    expect(h.calls.map((x) => x.items)).toEqual([[4, 5], [2], [30], [1]]);
    h.calls[3]!.done();
    expect(await Promise.all(all)).toEqual(['r4', 'r5', 'r2', 'r30', 'r1']);
  });

  it('a failed call fails its own items only; the next call goes out', async () => {
    const h = held();
    const c = new Coalescer(h.send, { maxItems: 10, maxInFlight: 1 });
    const a = c.submit(1);
    await turn();
    const b = c.submit(2);
    h.calls[0]!.fail(new Error('connection lost'));
    await expect(a).rejects.toThrow('connection lost');
    await turn();
    h.calls[1]!.done();
    expect(await b).toBe('r2');
    const wrong = c.submit(3);
    await turn();
    h.calls[2]!.done([]);
    await expect(wrong).rejects.toThrow(/0 answers for 1 items/);
  });
});
