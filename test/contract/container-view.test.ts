// The dispatcher's container view (src/dispatch/container-view.ts) fed by changes(), against both queues:
// after any sequence of submissions, locks, assignments, starts, exits, cancels and run_after passing, the
// view kept by applying the changes equals a whole read, and a read in which nothing changed hands out
// the same array (what the incremental planner compares by reference).
import { describe, expect, it } from 'vitest';
import { ContainerView } from '../../src/dispatch/container-view.js';
import type { ChangeCursor, DispatchQueue } from '../../src/dispatch/ports.js';
import type { SnapshotContainer } from '../../src/dispatch/scheduler/types.js';
import { seededRng } from '../../src/model/clock.js';
import { randomTransition, SUBJECTS } from './subjects.js';

const D = 'c/t';
const OTHER = 'c/other';
/** No periodic whole read: every read after the first is incremental. */
const NEVER = Number.MAX_SAFE_INTEGER;
const WINDOW_MS = 600_000;

const sorted = (cs: readonly SnapshotContainer[]) => [...cs].sort((a, b) => a.id.localeCompare(b.id));

/** Each instance's container ids in list order, regrouped from scratch (what the view keeps). */
function groups(cs: readonly SnapshotContainer[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const c of cs)
    if (c.instance) (out.get(c.instance) ?? out.set(c.instance, []).get(c.instance)!).push(c.id);
  return out;
}

/** A whole read, as a dispatcher just started would make it. */
async function wholeRead(queue: DispatchQueue, dispatcher: string, now: Date) {
  return new ContainerView(WINDOW_MS).read(queue, dispatcher, now, NEVER);
}

describe.each(SUBJECTS)('the container view fed by changes() on the %s queue', (_name, make) => {
  it('equals a whole read after every step of a random sequence (seeded)', async () => {
    const s = await make({ maxDispatchAttempts: 3 });
    const rng = seededRng(23);
    const pick = <T>(xs: T[]) => xs[Math.floor(rng() * xs.length)]!;
    const views = new Map([D, OTHER].map((d) => [d, new ContainerView(WINDOW_MS)]));
    const nodes = [await s.node('i-1'), await s.node('i-2')];
    const requests: string[] = [];
    let sameArrays = 0;
    const lastGroups = new Map([D, OTHER].map((d) => [d, new Map<string, string[]>()]));
    const wholeReads = new Map([D, OTHER].map((d) => [d, 1]));
    // OTHER's queue reports every considered container again with each change (the contract allows
    // repeats; PostgreSQL makes them while an older transaction is open): repeats must change nothing.
    const repeating: Pick<DispatchQueue, 'changes'> = {
      async changes(d, now, since) {
        const ch = await s.queue.changes(d, now, since);
        if (since !== null) ch.upserts.push(...(await s.queue.containers(d, now)));
        return ch;
      },
    };
    const queueOf = (d: string) => (d === OTHER ? repeating : s.queue);
    for (let step = 0; step < 150; step++) {
      const ids = await Promise.all(requests.map((r) => s.current(r)));
      const op = requests.length < 4 ? 0 : Math.floor(rng() * 11);
      const d = pick([D, OTHER]);
      const id = ids.length > 0 ? pick(ids) : '';
      const node = pick(nodes);
      if (op === 0)
        requests.push(
          await s.submit({
            runAfterMs: rng() < 0.3 ? rng() * 200_000 : undefined,
            priority: rng() < 0.1 ? 0 : 1 + Math.floor(rng() * 3),
          }),
        );
      // op 9, 10: locked and placed at once (containers gather on the instances, and leave them).
      else if (op >= 9) await s.queue.lockAssign([{ id, instance: node, node }], d);
      // op 7: the clock moves; op 8: nothing happens between two reads.
      else if (!(await randomTransition(s, rng, op, id, d, node)) && op === 7)
        s.clock.advance(rng() * 60_000);
      const dispatcher = pick([D, OTHER]);
      const view = views.get(dispatcher)!;
      const now = s.clock.now();
      // Now and then a whole read (the periodic reload): the groups are rebuilt from it.
      const whole = rng() < 0.1;
      if (whole) wholeReads.set(dispatcher, wholeReads.get(dispatcher)! + 1);
      const got = await view.read(queueOf(dispatcher), dispatcher, now, whole ? 0 : NEVER);
      expect(sorted(got)).toEqual(sorted(await wholeRead(s.queue, dispatcher, now)));
      // The instance → containers map kept from the changes equals a regrouping of the list, and every
      // instance whose group changed is reported touched.
      const g = groups(got);
      const was = lastGroups.get(dispatcher)!;
      const touched = view.takeTouched();
      for (const inst of new Set([...g.keys(), ...was.keys()])) {
        expect(view.containersOf(inst)).toEqual(g.get(inst) ?? []);
        if (JSON.stringify(g.get(inst) ?? []) !== JSON.stringify(was.get(inst) ?? []))
          expect(touched.has(inst)).toBe(true);
      }
      lastGroups.set(dispatcher, g);
      expect(view.anyNamed).toBe(got.some((c) => c.name !== undefined));
      expect(sorted(got)).toEqual(sorted(await s.queue.containers(dispatcher, now)));
      // Read again with nothing changed: the very same array.
      const again = await view.read(queueOf(dispatcher), dispatcher, now, NEVER);
      expect(again).toBe(got);
      if (op === 8 && step > 0) sameArrays++;
    }
    for (const [d, v] of views) {
      expect(v.reads.full).toBe(wholeReads.get(d));
      expect(v.reads.failed).toBe(0);
    }
    expect(sameArrays).toBeGreaterThan(0);
  });

  it('reads whole on start, every fullReloadPasses reads, and at once after a failed incremental read', async () => {
    const s = await make();
    await s.submit();
    let failNext = false;
    const sinces: (ChangeCursor | null)[] = [];
    const queue: Pick<DispatchQueue, 'changes'> = {
      changes: (d, now, since) => {
        sinces.push(since);
        if (failNext && since !== null) {
          failNext = false;
          return Promise.reject(new Error('cursor gap'));
        }
        return s.queue.changes(d, now, since);
      },
    };
    const v = new ContainerView(WINDOW_MS);
    for (let i = 0; i < 7; i++) await v.read(queue, D, s.clock.now(), 3);
    // Whole, 3 incremental, whole, 2 incremental.
    expect(sinces.map((c) => c === null)).toEqual([true, false, false, false, true, false, false]);
    expect(v.reads).toEqual({ full: 2, incremental: 5, failed: 0 });

    const before = await v.read(queue, D, s.clock.now(), 3); // the third incremental read
    const id = await s.current(await s.submit());
    failNext = true;
    sinces.length = 0;
    const after = await v.read(queue, D, s.clock.now(), NEVER);
    expect(sinces.map((c) => c === null)).toEqual([false, true]);
    expect(v.reads.failed).toBe(1);
    expect(after.map((c) => c.id)).toContain(id);
    expect(sorted(after)).toEqual(sorted(await s.queue.containers(D, s.clock.now())));
    // The containers that did not change kept their objects across the whole read.
    const old = before[0]!;
    expect(after.find((c) => c.id === old.id)).toBe(old);
  });
});
