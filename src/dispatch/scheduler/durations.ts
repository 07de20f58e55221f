// Duration-aware reuse (issue 14, `wait_for_running`): a waiting container that fits an instance expected
// to free up before a new instance could boot waits for it instead of causing a create. The run-time
// estimate of a container is the median of the recent run times of its step (its request name without the
// task's number); the boot estimate the median of recent boots. The dispatcher keeps that history
// (../run-history.ts) and hands the estimates over in the snapshot; this file owns the estimate and the
// rule, both pure.
import type { Slot } from './capacity.js';
import type { Shape } from './fitting.js';
import type { Pass } from './pass.js';
import { add, containerNeed, fits, subtract, type Res } from './resources.js';
import type { SchedulerConfig, SnapshotContainer } from './types.js';

/**
 * The step a request name belongs to: the name without a trailing task number or argument list, so that
 * "individuals_ID0000012" and "individuals_ID0000013" share a history ("individuals"), as do
 * "FASTQC (sample1)" and "FASTQC (sample2)". A name that is nothing but a number is its own step.
 */
export function runKey(name: string): string {
  const key = name
    .replace(/\s*\([^()]*\)$/, '')
    .replace(/[-_.:\s]*(ID)?\d+$/i, '')
    .trim();
  return key === '' ? name : key;
}

/** The estimate from past durations (ms): their median (the lower middle one), or null with no history. */
export function estimateMs(samples: readonly number[]): number | null {
  if (samples.length === 0) return null;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[(sorted.length - 1) >> 1]!;
}

/**
 * Whether the dispatcher learns run times by request name (run-history.ts), and so needs the names in its
 * snapshot: wait_for_running, boot_ahead, boot_budget and end_aligned `history` read the estimates
 * (warm_pool reads their boot time).
 */
export function learnsRunTimes(
  c: Pick<SchedulerConfig, 'waitForRunning' | 'bootAhead' | 'bootBudget' | 'endAligned' | 'warmPool'>,
): boolean {
  return (
    c.waitForRunning || c.bootAhead > 0 || c.bootBudget > 0 || c.endAligned === 'history' || c.warmPool > 0
  );
}

/** Whether the snapshot's containers carry their own expected run time (end_aligned other than `off`). */
export function readsExpectedRuns(c: Pick<SchedulerConfig, 'endAligned'>): boolean {
  return c.endAligned !== 'off';
}

/** The run time expected of a container: its step's median (ms), or Infinity when unknown. */
export function expectedRunMs(c: SnapshotContainer, steps: Record<string, number>): number {
  return c.name === undefined ? Infinity : (steps[runKey(c.name)] ?? Infinity);
}

/** Room that frees up at a time (a Running container's expected end), or is taken over an interval. */
interface Change {
  at: number;
  need: Res;
}

/** An existing instance's expected room over the next boot time: what frees up and what waiters took. */
interface Timeline {
  slot: Slot;
  /** Expected ends of its Running containers within the horizon, by time. */
  frees: Change[];
  /** Waiters of this pass: from `at` to `until` (Infinity when their run time is unknown). */
  taken: (Change & { until: number })[];
}

/**
 * The room on existing instances expected to free up before a new instance could boot (boot estimate −
 * wait_margin): the Running containers expected to end by then, less what waiting containers already took
 * in this pass. A waiter whose run time is known gives its room back when it is expected to end, so short
 * tasks queue on a busy instance one after the other rather than boot one each. A container past its
 * expected end frees nothing any more (nothing is known of it): a wrong estimate costs a waiter at most
 * what it waited.
 */
export class Freeing {
  private readonly lines: Timeline[] = [];
  /** By shape key: the shortest run time that found nothing (a longer one cannot find more this pass). */
  private readonly failed = new Map<string, number>();

  private constructor(
    private readonly pass: Pass,
    private readonly horizon: number,
    private readonly steps: Record<string, number>,
  ) {}

  /** The freeing room of the pass, or null when the rule is off or no boot time is known. */
  static of(pass: Pass): Freeing | null {
    const est = pass.snap.estimates;
    if (!pass.config.waitForRunning || est === undefined || est.bootMs === null) return null;
    const window = est.bootMs - pass.config.waitMarginMs;
    if (window <= 0) return null;
    const f = new Freeing(pass, pass.now + window, est.steps);
    const byId = new Map<string, Change[]>();
    for (const c of pass.snap.containers) {
      if (c.state !== 'Running' || c.instance === null) continue;
      const end = est.endsAt[c.id];
      if (end === undefined || end <= pass.now) continue;
      if (end > f.horizon) {
        pass.until(end - window);
        continue;
      }
      pass.until(end);
      const list = byId.get(c.instance);
      const change = { at: end, need: containerNeed(c) };
      if (list === undefined) byId.set(c.instance, [change]);
      else list.push(change);
    }
    // In the slots' preference order, like the search for room (capacity.ts); planned slots have no history.
    for (const slot of pass.capacity.slots) {
      const frees = slot.bin === null ? byId.get(slot.id) : undefined;
      if (frees !== undefined) f.lines.push({ slot, frees: frees.sort((a, b) => a.at - b.at), taken: [] });
    }
    return f;
  }

  /** The run time expected of a container: its step's median, or Infinity when unknown. */
  runMs(c: SnapshotContainer): number {
    return expectedRunMs(c, this.steps);
  }

  /**
   * An instance the container may wait for, its room taken from the earliest time it frees up; null when
   * none frees up in time. The instance must be one it may use (type within max_price_factor, caps,
   * reservations).
   */
  claim(c: SnapshotContainer, shape: Shape): Slot | null {
    const run = this.runMs(c);
    const failedAt = this.failed.get(shape.key);
    if (this.lines.length === 0 || (failedAt !== undefined && run >= failedAt)) return null;
    const cap = this.pass.capacity;
    for (const line of this.lines) {
      if (!cap.mayTake(line.slot, shape, c.priority)) continue;
      const at = this.earliest(line, shape.need, run);
      if (at === null) continue;
      line.taken.push({ at, until: at + run, need: shape.need });
      return line.slot;
    }
    this.failed.set(shape.key, Math.min(run, failedAt ?? Infinity));
    return null;
  }

  /** The earliest time within the horizon from which the need fits on the line for `run` ms, or null. */
  private earliest(line: Timeline, need: Res, run: number): number | null {
    const room = roomOver(line);
    const starts: number[] = [];
    for (const x of line.frees) if (x.at <= this.horizon) starts.push(x.at);
    for (const x of line.taken) if (x.until <= this.horizon) starts.push(x.until);
    starts.sort((a, b) => a - b);
    const takenAt = line.taken.map((x) => x.at).sort((a, b) => a - b);
    for (const t of starts) {
      // Room at t, then at every later start of another waiter while this one would still run.
      if (!fits(need, room(t))) continue;
      let ok = true;
      for (let j = firstAfter(takenAt, t); ok && j < takenAt.length && takenAt[j]! < t + run; j++)
        ok = fits(need, room(takenAt[j]!));
      if (ok) return t;
    }
    return null;
  }
}

/**
 * The room on the line at any time, as a function: free now, plus what has freed up, less what waiters
 * hold then (from their start, until their end). It changes only at those times, so it is summed once per
 * call, in time order, and read by a binary search: a search for room no longer sums the line again at
 * every point it checks (with hundreds of waiters on an instance that was most of a pass: boot_budget's
 * queues of short tasks).
 */
function roomOver(line: Timeline): (t: number) => Res {
  const changes: { at: number; need: Res; sign: 1 | -1 }[] = [];
  for (const x of line.frees) changes.push({ at: x.at, need: x.need, sign: 1 });
  for (const x of line.taken) {
    changes.push({ at: x.at, need: x.need, sign: -1 });
    if (x.until !== Infinity) changes.push({ at: x.until, need: x.need, sign: 1 });
  }
  changes.sort((a, b) => a.at - b.at);
  const times: number[] = [];
  const rooms: Res[] = [];
  const room = { ...line.slot.free };
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i]!;
    if (c.sign === 1) add(room, c.need);
    else subtract(room, c.need);
    if (i + 1 === changes.length || changes[i + 1]!.at !== c.at) {
      times.push(c.at);
      rooms.push({ ...room });
    }
  }
  const free = line.slot.free;
  return (t) => {
    // The last change at or before t.
    const i = firstAfter(times, t) - 1;
    return i < 0 ? free : rooms[i]!;
  };
}

/** The index of the first of the ascending `xs` greater than `t` (xs.length when none is). */
function firstAfter(xs: readonly number[], t: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * How long a boot takes, for boot_budget and warm_pool: the measured median, else boot_estimate (a median
 * of 0 ms, creation and readiness stamped alike, counts as none measured).
 */
export function bootTimeMs(pass: Pass): number {
  const measured = pass.snap.estimates?.bootMs ?? null;
  return measured !== null && measured > 0 ? measured : pass.config.bootEstimateMs;
}
