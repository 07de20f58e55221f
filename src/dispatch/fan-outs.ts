// The history behind the snapshot's `estimates.fanOut` (boot_ahead, scheduler/ahead.ts): how many
// containers arrived, per end of a container of each step, as this dispatcher saw them pass after pass.
// A workflow engine submits a task's children when it ends, so the containers that arrive in the pass that
// sees some containers end, and in the passes of the next FAN_OUT_WINDOW_MS, are counted as theirs, shared
// evenly among the containers that ended. A step's estimate is the mean over its last SAMPLES ends (a step
// whose last container alone brings the fan-in gets 1/N per end: the sum over its N ends is right), and
// the shape of its most recent arrivals.
import { meanPerEnd } from './scheduler/ahead.js';
import { shapeOf } from './scheduler/fitting.js';
import type { ContainerShape, FanOut, SnapshotContainer } from './scheduler/types.js';

/** How long after some containers ended new arrivals are counted as theirs. */
export const FAN_OUT_WINDOW_MS = 10_000;
/** How many recent ends of a step its estimate is the mean of. */
export const FAN_OUT_SAMPLES = 32;

/** The ends of one pass and what arrived after them. */
interface Batch {
  at: number;
  keys: string[];
  count: number;
  shape: ContainerShape | null;
}

interface Step {
  values: number[];
  next: number;
  shape: ContainerShape | null;
}

export class FanOuts {
  private open: Batch | null = null;
  private readonly steps = new Map<string, Step>();
  private lastNow: number | null = null;
  private cached: Record<string, FanOut> | null = null;

  /** Some ends wait for their arrivals to be counted. */
  get pending(): boolean {
    return this.open !== null;
  }

  /**
   * Takes in one pass: the steps of the containers that ended since the last pass (one entry per
   * container) and the pass's containers (those first queued since the last pass are the arrivals).
   * Returns whether the estimates changed.
   */
  observe(now: number, ended: readonly string[], containers: readonly SnapshotContainer[]): boolean {
    const since = this.lastNow;
    this.lastNow = now;
    if (since === null || (ended.length === 0 && this.open === null)) return false;
    let count = 0;
    let shape: ContainerShape | null = null;
    for (const c of containers) {
      const q = c.queuedAt.getTime();
      if (c.state !== 'Queued' || q <= since || q > now) continue;
      count++;
      shape ??= shapeOf(c);
    }
    let changed = false;
    if (ended.length > 0) {
      changed = this.close();
      this.open = { at: now, keys: [...ended], count, shape };
    } else if (this.open !== null && now - this.open.at <= FAN_OUT_WINDOW_MS) {
      this.open.count += count;
      this.open.shape ??= shape;
    } else changed = this.close();
    return changed;
  }

  /** The estimate of every step with a known arrival shape; the same object while nothing changed. */
  estimates(): Record<string, FanOut> {
    if (this.cached === null) {
      this.cached = {};
      for (const [key, s] of this.steps) {
        const perEnd = meanPerEnd(s.values);
        if (perEnd !== null && s.shape !== null) this.cached[key] = { perEnd, shape: s.shape };
      }
    }
    return this.cached;
  }

  /** Records the open batch as one sample per ended container; whether there was one. */
  private close(): boolean {
    const b = this.open;
    this.open = null;
    if (b === null) return false;
    const perEnd = b.count / b.keys.length;
    for (const key of b.keys) {
      let s = this.steps.get(key);
      if (s === undefined) this.steps.set(key, (s = { values: [], next: 0, shape: null }));
      if (s.values.length < FAN_OUT_SAMPLES) s.values.push(perEnd);
      else s.values[s.next] = perEnd;
      s.next = (s.next + 1) % FAN_OUT_SAMPLES;
      if (b.shape !== null) s.shape = b.shape;
    }
    this.cached = null;
    return true;
  }
}
