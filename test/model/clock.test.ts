// longTimers: delays past what a Node timer honours are waited out in steps (issue 10 item 3); sleepUnless,
// the one cancellable wait (the dispatcher's loop, the agent, berth logs -f).
import { describe, expect, it } from 'vitest';
import { longTimers, sleepUnless, type Timers } from '../../src/model/clock.js';

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

describe('sleepUnless', () => {
  /** Resolves to whether `p` settled (after the microtasks already queued ran). */
  const settled = async (p: Promise<void>) => {
    let done = false;
    void p.then(() => (done = true));
    for (let i = 0; i < 5; i++) await Promise.resolve();
    return done;
  };

  it('resolves when its timer fires, and not before', async () => {
    const { base, armed, fireLast } = fakeBase();
    const p = sleepUnless(60, new AbortController().signal, base);
    expect(armed.map((t) => t.ms)).toEqual([60]);
    expect(await settled(p)).toBe(false);
    fireLast();
    expect(await settled(p)).toBe(true);
  });

  it('an abort ends it at once, clears its timer and resolves (never rejects)', async () => {
    const { base, armed } = fakeBase();
    const stop = new AbortController();
    const p = sleepUnless(60, stop.signal, base);
    expect(await settled(p)).toBe(false);
    stop.abort(new Error('stop'));
    await expect(p).resolves.toBeUndefined();
    expect(armed[0]!.cleared).toBe(true);
  });

  it('an already aborted signal resolves at once without arming a timer', async () => {
    const { base, armed } = fakeBase();
    await expect(sleepUnless(60, AbortSignal.abort(), base)).resolves.toBeUndefined();
    expect(armed).toEqual([]);
  });
});
