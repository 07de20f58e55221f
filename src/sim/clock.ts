// A discrete-event virtual clock for the simulator and tests: time moves only when the next event runs.
// Events sit in a binary heap ordered by (time, insertion order), so ties run first-scheduled-first and a
// run is reproducible; schedule and next are O(log n). Cancellation is lazy (the entry is skipped when
// it reaches the top), which keeps cancel O(1).
import type { Clock } from '../model/clock.js';

/** A scheduled event that can be cancelled before it runs. */
export interface EventHandle {
  /** Prevents the event from running; a no-op if it already ran. */
  cancel(): void;
  /** The virtual time (ms since the epoch) the event is due. */
  readonly at: number;
}

/** Something that can run a callback at a virtual time: what the sim cloud needs from a clock. */
export interface EventScheduler extends Clock {
  /** The current virtual time in ms since the epoch. */
  nowMs(): number;
  /** Runs `fn` when virtual time reaches `at` (ms since the epoch, or a Date); past times run next. */
  schedule(at: number | Date, fn: () => void): EventHandle;
}

interface Entry {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

function before(a: Entry, b: Entry): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

/** The simulator's clock: implements Clock (now) and EventScheduler (schedule) on virtual time. */
export class VirtualClock implements EventScheduler {
  private t: number;
  private seq = 0;
  private heap: Entry[] = [];
  private live = 0;

  constructor(start: Date | string | number = '2026-01-01T00:00:00Z') {
    this.t = typeof start === 'number' ? start : new Date(start).getTime();
    if (!Number.isFinite(this.t)) throw new Error(`clock start: expected a time, got ${String(start)}`);
  }

  now(): Date {
    return new Date(this.t);
  }

  nowMs(): number {
    return this.t;
  }

  /** Number of events still due (cancelled ones excluded). */
  get pending(): number {
    return this.live;
  }

  schedule(at: number | Date, fn: () => void): EventHandle {
    const ms = typeof at === 'number' ? at : at.getTime();
    if (!Number.isFinite(ms)) throw new Error(`schedule: expected a finite time, got ${String(at)}`);
    // An event in the past runs at the current time: time never goes backwards.
    const entry: Entry = { at: Math.max(ms, this.t), seq: this.seq++, fn, cancelled: false };
    this.push(entry);
    this.live++;
    return {
      at: entry.at,
      cancel: () => {
        if (!entry.cancelled) {
          entry.cancelled = true;
          this.live--;
        }
      },
    };
  }

  /** Schedules `fn` to run `ms` after the current virtual time. */
  after(ms: number, fn: () => void): EventHandle {
    return this.schedule(this.t + ms, fn);
  }

  /** Time of the next due event, or null when none is left. */
  peek(): number | null {
    this.dropCancelled();
    return this.heap.length === 0 ? null : this.heap[0]!.at;
  }

  /** Advances to the next event and runs it; false when there is none. */
  next(): boolean {
    this.dropCancelled();
    const top = this.pop();
    if (top === undefined) return false;
    this.live--;
    // Mark as run so a late cancel() on its handle does not corrupt the live count.
    top.cancelled = true;
    this.t = top.at;
    top.fn();
    return true;
  }

  /**
   * Runs every event due at or before `until` (including ones those events schedule), then sets the
   * clock to `until`. Returns the number of events run.
   */
  runUntil(until: number | Date): number {
    const limit = typeof until === 'number' ? until : until.getTime();
    let n = 0;
    for (let at = this.peek(); at !== null && at <= limit; at = this.peek()) {
      this.next();
      n++;
    }
    if (limit > this.t) this.t = limit;
    return n;
  }

  /** Advances the clock by `ms`, running the events due in between. */
  advance(ms: number): number {
    return this.runUntil(this.t + ms);
  }

  /** Runs events until none is left or `maxEvents` have run (a guard against self-rescheduling loops). */
  runAll(maxEvents = Number.MAX_SAFE_INTEGER): number {
    let n = 0;
    while (n < maxEvents && this.next()) n++;
    return n;
  }

  private dropCancelled(): void {
    while (this.heap.length > 0 && this.heap[0]!.cancelled) this.pop();
  }

  private push(e: Entry): void {
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(e, h[p]!)) break;
      h[i] = h[p]!;
      i = p;
    }
    h[i] = e;
  }

  private pop(): Entry | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (top === undefined || last === undefined || h.length === 0) return top;
    let i = 0;
    const n = h.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && before(h[r]!, h[l]!) ? r : l;
      if (!before(h[c]!, last)) break;
      h[i] = h[c]!;
      i = c;
    }
    h[i] = last;
    return top;
  }
}
