// longTimers: delays past what a Node timer honours are waited out in steps (issue 10 item 3).
import { describe, expect, it } from 'vitest';
import { longTimers, type Timers } from '../../src/model/clock.js';

/** A base timer that records what was armed and fires on request (as Node's: max 100 ms here). */
function fakeBase() {
  const armed: { ms: number; fn: () => void; cleared: boolean }[] = [];
  const base: Timers = {
    setTimeout(fn, ms) {
      if (ms > 100) throw new Error(`armed ${ms} ms: past the base's limit`);
      const t = { ms, fn, cleared: false };
      armed.push(t);
      return t;
    },
    clearTimeout(h) {
      (h as { cleared: boolean }).cleared = true;
    },
  };
  const fireLast = () => {
    const t = armed[armed.length - 1]!;
    if (!t.cleared) t.fn();
  };
  return { base, armed, fireLast };
}

describe('longTimers', () => {
  it('arms steps of at most the limit until the whole delay passed, then fires once', () => {
    const { base, armed, fireLast } = fakeBase();
    let fired = 0;
    longTimers(base, 100).setTimeout(() => fired++, 250);
    fireLast();
    fireLast();
    expect(fired).toBe(0);
    fireLast();
    expect(fired).toBe(1);
    expect(armed.map((t) => t.ms)).toEqual([100, 100, 50]);
  });

  it('clearing in the middle of the chain stops it; NaN and negative delays fire at once', () => {
    const { base, armed, fireLast } = fakeBase();
    const timers = longTimers(base, 100);
    let fired = 0;
    const h = timers.setTimeout(() => fired++, 1000);
    fireLast();
    timers.clearTimeout(h);
    fireLast();
    expect(fired).toBe(0);
    expect(armed.length).toBe(2);
    expect(armed[1]!.cleared).toBe(true);
    timers.setTimeout(() => fired++, Number.NaN);
    timers.setTimeout(() => fired++, -5);
    expect(armed.slice(2).map((t) => t.ms)).toEqual([0, 0]);
  });

  it('Infinity never fires: it re-arms for ever', () => {
    const { base, armed, fireLast } = fakeBase();
    let fired = 0;
    longTimers(base, 100).setTimeout(() => fired++, Infinity);
    for (let i = 0; i < 50; i++) fireLast();
    expect(fired).toBe(0);
    expect(armed.length).toBe(51);
  });
});
