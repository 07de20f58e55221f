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
 * snapshot: wait_for_running, boot_ahead, boot_budget and end_aligned `history` read the estimates.
 */
export function learnsRunTimes(
  c: Pick<SchedulerConfig, 'waitForRunning' | 'bootAhead' | 'bootBudget' | 'endAligned'>,
): boolean {
  return c.waitForRunning || c.bootAhead > 0 || c.bootBudget > 0 || c.endAligned === 'history';
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
    const starts = [...line.frees.map((x) => x.at), ...line.taken.map((x) => x.until)]
      .filter((t) => t <= this.horizon)
      .sort((a, b) => a - b);
    for (const t of starts) {
      // Room at t, then at every later start of another waiter while this one would still run.
      const points = [t, ...line.taken.map((x) => x.at).filter((a) => a > t && a < t + run)];
      if (points.every((p) => fits(need, this.roomAt(line, p)))) return t;
    }
    return null;
  }

  /** The room on the line at a time: free now, plus what has freed up, less what waiters hold then. */
  private roomAt(line: Timeline, t: number): Res {
    const room = { ...line.slot.free };
    for (const x of line.frees) if (x.at <= t) add(room, x.need);
    for (const x of line.taken) if (x.at <= t && t < x.until) subtract(room, x.need);
    return room;
  }
}
