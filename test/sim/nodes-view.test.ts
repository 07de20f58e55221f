// SimNodes.list hands out the same view of a node while nothing in it moved (no copy per pass), and a new
// one as soon as its state, instance or last ping does.
import { describe, expect, it } from 'vitest';
import { SimNodes } from '../../src/sim/nodes.js';

describe('SimNodes.list views', () => {
  it('keeps a node view until the node changes, and always shows its current fields', () => {
    let now = 1_000_000;
    const nodes = new SimNodes(() => now);
    const a = nodes.create('c', 't');
    const b = nodes.create('c', 't');
    const first = nodes.list('c', 't');
    expect(first.map((v) => v.state)).toEqual(['registered', 'registered']);
    expect(first.map((v) => v.lastPingAt)).toEqual([null, null]);
    expect(nodes.list('c', 't')).toEqual(first);
    expect(nodes.list('c', 't')[0]).toBe(first[0]);

    nodes.register(a.nodeId, a.bootstrapSecret, 10_000, true);
    const registered = nodes.list('c', 't');
    expect(registered[0]).not.toBe(first[0]);
    expect(registered[0]).toMatchObject({ state: 'idle', lastPingAt: new Date(now), reclaims: true });
    expect(registered[1]).toBe(first[1]);

    // Within one ping interval the last ping is the same: the same view.
    now += 9_999;
    expect(nodes.list('c', 't')[0]).toBe(registered[0]);
    // The next ping moves it.
    now += 1;
    const pinged = nodes.list('c', 't')[0]!;
    expect(pinged).not.toBe(registered[0]);
    expect(pinged.lastPingAt).toEqual(new Date(now));

    nodes.find(a.nodeId).instanceId = 'i-1';
    expect(nodes.list('c', 't')[0]).toMatchObject({ instanceId: 'i-1', state: 'idle' });
    nodes.fail(nodes.find(b.nodeId));
    expect(nodes.list('c', 't')[1]).toMatchObject({ id: b.nodeId, state: 'failed', lastPingAt: null });
  });
});
