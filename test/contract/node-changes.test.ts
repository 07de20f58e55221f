// nodeChanges() (src/dispatch/ports.ts), against both queues: a view kept from its answers equals what
// nodes() lists (a ping alone is no change: a kept node's last ping is only known to be there or not), and
// its silent nodes are exactly the listed ones isSilent picks. One fixed sequence, and seeded random ones
// (register, bind, assign, start, finish, fail, drain, silence, time passing) checked after every step.
import { describe, expect, it } from 'vitest';
import { seededRng } from '../../src/model/clock.js';
import {
  FAILED_NODE_VISIBLE_MS,
  isSilent,
  type ChangeCursor,
  type NodeChanges,
  type NodeView,
} from '../../src/dispatch/ports.js';
import { randomTransition, SUBJECTS, type Subject } from './subjects.js';

const D = 'c/t';
const LOST_AFTER = 60_000;

/** What a kept view may know of a node. */
const project = (n: NodeView) =>
  `${n.id} ${n.instanceId} ${n.state} ${n.lastPingAt === null ? '-' : 'pinged'}`;

/** A view kept from nodeChanges(), checked against nodes() after each read. */
class Kept {
  readonly byId = new Map<string, NodeView>();
  cursor: ChangeCursor | null = null;

  apply(ch: NodeChanges): void {
    if (ch.full) this.byId.clear();
    for (const id of ch.removed) this.byId.delete(id);
    for (const n of ch.upserts) this.byId.set(n.id, n);
    this.cursor = ch.cursor;
  }

  async check(s: Subject, cluster = 'c', tag = 't'): Promise<NodeChanges> {
    const now = s.clock.now();
    const before = new Date(now.getTime() - LOST_AFTER);
    const ch = await s.queue.nodeChanges(cluster, tag, now, this.cursor, before);
    this.apply(ch);
    const listed = await s.queue.nodes(cluster, tag, now);
    expect([...this.byId.values()].map(project).sort()).toEqual(listed.map(project).sort());
    expect(ch.silent.map((n) => `${n.id} ${n.lastPingAt?.getTime()}`).sort()).toEqual(
      listed
        .filter((n) => isSilent(n, before.getTime()))
        .map((n) => `${n.id} ${n.lastPingAt?.getTime()}`)
        .sort(),
    );
    return ch;
  }
}

describe.each(SUBJECTS)('nodeChanges() on the %s queue', (_name, make) => {
  it("carries whether a node's agent can claim lent room back (reclaims; absent: false)", async () => {
    const s = await make();
    const yes = await s.node('i-r', 'c', 't', true);
    const no = await s.node('i-n', 'c', 't', false);
    const now = s.clock.now();
    const reclaims = (list: NodeView[]) => Object.fromEntries(list.map((n) => [n.id, n.reclaims === true]));
    expect(reclaims(await s.queue.nodes('c', 't', now))).toEqual({ [yes]: true, [no]: false });
    const ch = await s.queue.nodeChanges('c', 't', now, null, null);
    expect(reclaims(ch.upserts)).toEqual({ [yes]: true, [no]: false });
  });

  it('registrations, failures, the failed hour and silence, and nothing of another cluster', async () => {
    const s = await make();
    const kept = new Kept();
    expect((await kept.check(s)).full).toBe(true);
    expect(kept.byId.size).toBe(0);
    const a = await s.node('i-a');
    const b = await s.node('i-b');
    await s.node('i-x', 'other', 't');
    await kept.check(s);
    expect([...kept.byId.keys()].sort()).toEqual([a, b].sort());
    await s.queue.failNode(a, 'test');
    await kept.check(s);
    expect(kept.byId.get(a)?.state).toBe('failed');
    // b goes quiet; a fresh ping keeps nobody else silent.
    await s.silence(b);
    s.clock.advance(LOST_AFTER + 30_000);
    const c = await s.node('i-c');
    await s.ping(c);
    const ch = await kept.check(s);
    expect(ch.silent.map((n) => n.id)).toEqual([b]);
    // A failed node leaves the list an hour after it failed; a failed one is never silent.
    s.clock.advance(FAILED_NODE_VISIBLE_MS);
    await s.queue.failNode(b, 'lost');
    await s.ping(c);
    expect((await kept.check(s)).silent).toEqual([]);
    expect(kept.byId.has(a)).toBe(false);
    expect(kept.byId.has(b)).toBe(true);
  });

  it('a kept view equals nodes() after every step of seeded random sequences', async () => {
    for (const seed of [1, 2]) {
      const s = await make();
      const rng = seededRng(seed);
      const pick = <T>(xs: T[]): T | undefined => xs[Math.floor(rng() * xs.length)];
      const kept = new Kept();
      const nodes: string[] = [];
      const quiet = new Set<string>();
      const on = new Map<string, string>(); // container → the node it was placed on
      await kept.check(s);
      for (let step = 0; step < 120; step++) {
        const op = Math.floor(rng() * 9);
        const node = pick(nodes);
        const placed = pick([...on.keys()]);
        if (op === 0 || node === undefined) {
          if (nodes.length < 8) nodes.push(await s.node(`i-${step}`));
        } else if (op === 1) {
          const id = await s.current(await s.submit());
          if ((await s.queue.lockAssign([{ id, instance: `i-${node}`, node }], D)).length > 0)
            on.set(id, node);
        } else if (op === 2 && placed) await s.start(placed, on.get(placed)!);
        else if (op === 3 && placed) await s.complete(placed, on.get(placed)!, 0);
        else if (op === 4) await s.queue.failNode(node, 'random');
        else if (op === 5) await s.queue.drainNode(node).catch(() => {});
        else if (op === 6) {
          await s.silence(node);
          quiet.add(node);
        } else if (op === 7) {
          s.clock.advance(Math.floor(rng() * FAILED_NODE_VISIBLE_MS) / 4);
          for (const n of nodes) if (!quiet.has(n)) await s.ping(n).catch(() => {});
        } else if (placed) await randomTransition(s, rng, 1 + Math.floor(rng() * 6), placed, D, node);
        // Reads now and then: changes pile up between them, as between passes.
        if (rng() < 0.5) await kept.check(s);
      }
      await kept.check(s);
    }
  });
});
