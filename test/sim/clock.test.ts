import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../src/sim/clock.js';

describe('VirtualClock', () => {
  it('runs events in time order, ties in scheduling order, and moves now() to each event', () => {
    const c = new VirtualClock(0);
    const seen: string[] = [];
    c.schedule(30, () => seen.push(`c@${c.nowMs()}`));
    c.schedule(10, () => seen.push(`a@${c.nowMs()}`));
    c.schedule(10, () => seen.push(`b@${c.nowMs()}`));
    expect(c.pending).toBe(3);
    expect(c.runAll()).toBe(3);
    expect(seen).toEqual(['a@10', 'b@10', 'c@30']);
    expect(c.pending).toBe(0);
  });

  it('runUntil runs only due events (including ones they schedule) and sets the time', () => {
    const c = new VirtualClock('2026-01-01T00:00:00Z');
    const t0 = c.nowMs();
    const seen: number[] = [];
    c.after(100, () => {
      seen.push(c.nowMs() - t0);
      c.after(50, () => seen.push(c.nowMs() - t0));
    });
    c.after(500, () => seen.push(c.nowMs() - t0));
    expect(c.runUntil(t0 + 200)).toBe(2);
    expect(seen).toEqual([100, 150]);
    expect(c.nowMs()).toBe(t0 + 200);
    expect(c.now()).toEqual(new Date(t0 + 200));
    expect(c.peek()).toBe(t0 + 500);
  });

  it('cancelled events never run and are not counted', () => {
    const c = new VirtualClock(0);
    let ran = false;
    const h = c.schedule(10, () => (ran = true));
    h.cancel();
    h.cancel();
    expect(c.pending).toBe(0);
    expect(c.next()).toBe(false);
    expect(ran).toBe(false);
  });

  it('an event scheduled in the past runs at the current time: time never goes back', () => {
    const c = new VirtualClock(1000);
    let at = -1;
    c.schedule(5, () => (at = c.nowMs()));
    c.runAll();
    expect(at).toBe(1000);
  });

  it('refuses a non-finite time with a clear message', () => {
    const c = new VirtualClock(0);
    expect(() => c.schedule(Number.NaN, () => {})).toThrow(/expected a finite time/);
  });

  it('property: any schedule/cancel mix runs the survivors sorted by (time, order)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 50 }), fc.boolean()), { maxLength: 200 }),
        (items) => {
          const c = new VirtualClock(0);
          const ran: number[] = [];
          items.forEach(([at, cancel], i) => {
            const h = c.schedule(at, () => ran.push(i));
            if (cancel) h.cancel();
          });
          c.runAll();
          const expected = items
            .map(([at, cancel], i) => ({ at, cancel, i }))
            .filter((x) => !x.cancel)
            .sort((a, b) => a.at - b.at || a.i - b.i)
            .map((x) => x.i);
          expect(ran).toEqual(expected);
        },
      ),
    );
  });
});
