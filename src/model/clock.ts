// Time and randomness are injected everywhere decisions depend on them, so tests and the simulator
// control both (STYLE: no sleeping, no Math.random in decisions).

/** A source of the current time. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** A clock that only moves when told to (tests). */
export class ManualClock implements Clock {
  private t: number;
  constructor(start: Date | string = '2026-01-01T00:00:00Z') {
    this.t = new Date(start).getTime();
  }
  now(): Date {
    return new Date(this.t);
  }
  advance(ms: number): void {
    this.t += ms;
  }
  set(t: Date | string): void {
    this.t = new Date(t).getTime();
  }
}

/** A random number generator returning floats in [0, 1). */
export type Rng = () => number;

/** A small, fast, seedable generator (mulberry32): the same seed gives the same sequence. */
export function seededRng(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a hash of a string (32 bits): turns a stream's name into part of its seed. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * One named random stream of a seeded run: the same seed and name give the same sequence, and streams
 * of different names are independent, so drawing more from one never shifts another's draws.
 */
export function namedRng(seed: number, name: string): Rng {
  return seededRng((seed ^ fnv1a(name)) >>> 0);
}

/** Timer functions, injectable so tests can drive them. */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/**
 * The longest delay a Node timer honours: a longer one fires after 1 ms (with only a warning), so a
 * max_run_time of 597 hours or more killed its container at once (issue 10 item 3).
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Timers over `base` that take any delay: a delay past `maxMs` is waited out in steps of at most `maxMs`
 * (re-armed until the rest is short enough); Infinity never fires. Every timer that takes a duration from a
 * user or an operator goes through these (systemTimers).
 */
export function longTimers(base: Timers, maxMs = MAX_TIMER_MS): Timers {
  interface Handle {
    current: unknown;
  }
  return {
    setTimeout(fn, ms) {
      const h: Handle = { current: null };
      const arm = (left: number): void => {
        const step = Math.min(left, maxMs);
        h.current = base.setTimeout(() => (left > maxMs ? arm(left - maxMs) : fn()), step);
      };
      arm(Number.isNaN(ms) ? 0 : Math.max(0, ms));
      return h;
    },
    clearTimeout(h) {
      if (h) base.clearTimeout((h as Handle).current);
    },
  };
}

/** Node's own timers (up to MAX_TIMER_MS). */
export const nodeTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** The real timers, taking any delay. */
export const systemTimers: Timers = longTimers(nodeTimers);

/** Resolves after `ms` (any length; see longTimers). */
export function sleep(ms: number, timers: Timers = systemTimers): Promise<void> {
  return new Promise((resolve) => timers.setTimeout(resolve, ms));
}

/**
 * The one cancellable wait: resolves after `ms` (any length), or at once when `signal` aborts (also when it
 * already has); never rejects, and leaves no timer behind. A caller that must stop on abort follows it with
 * `signal.throwIfAborted()`.
 */
export function sleepUnless(ms: number, signal?: AbortSignal, timers: Timers = systemTimers): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = timers.setTimeout(done, ms);
    function done() {
      timers.clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
