// The incremental pass (issue 12): a planner that remembers its last pass. plan() is a pure function of
// the snapshot, so a pass whose snapshot did not change gives the plan it gave last time — unless only
// the clock moved far enough to flip a decision (an idle timeout, a boot timeout, a billing window, a rate
// limit: the plan's validUntil). Such a pass costs a comparison of the snapshot's parts, not a walk over
// the queue: the dispatcher's container view (../container-view.ts) hands over the same container
// objects, and the same array, when nothing changed. Any change, or any doubt, runs the full pass, with
// what the planner keeps across passes (kept.ts): the waiting containers' facts and queue order, into which
// it merges the containers that arrived, changed or left instead of reading and sorting them all again. A
// property test (test/dispatch/incremental.test.ts) checks that both give the same plan as a pass from
// scratch, byte for byte, on random sequences of changes.
import { plan as fullPlan } from './plan.js';
import { KeptPass, sameList } from './kept.js';
import type { KeptPool } from './kept-pool.js';
import type { CloudState, Plan, SchedulerConfig, Snapshot, SnapshotInstance } from './types.js';

/** Counts of what the planner did, for tests and benchmarks. */
export interface PlannerStats {
  full: number;
  reused: number;
}

export class IncrementalPlanner {
  private last: { snap: Snapshot; plan: Plan } | null = null;
  readonly stats: PlannerStats = { full: 0, reused: 0 };
  /** What full passes keep for the next (kept.ts). */
  private readonly kept = new KeptPass();

  constructor(private readonly planner: (s: Snapshot, kept?: KeptPass) => Plan = fullPlan) {}

  plan(snap: Snapshot): Plan {
    const last = this.last;
    if (last !== null && reusable(last.snap, last.plan, snap)) {
      this.stats.reused++;
      // The snapshot kept is the newest: its parts are the ones the next pass compares by reference.
      this.last = { snap, plan: last.plan };
      return last.plan;
    }
    this.stats.full++;
    const p = this.planner(snap, this.kept);
    this.last = { snap, plan: p };
    return p;
  }

  /**
   * Full passes that merged the changed waiting containers into the kept queue order, and those that read
   * and sorted them all (kept.ts), for tests and benchmarks.
   */
  get queueCounts(): { merged: number; sorted: number } {
    return { ...this.kept.counts };
  }

  /**
   * Full passes that grouped the assigned containers anew or updated the groups, that built the pool view
   * or reused it, and that settled every container or the changed ones (kept-pool.ts), for tests and
   * benchmarks.
   */
  get poolCounts(): KeptPool['counts'] {
    return { ...this.kept.pool.counts };
  }

  /** Forgets the last pass: the next one is a full pass. */
  reset(): void {
    this.last = null;
  }
}

/** Whether `p`, planned for `before`, is what a full pass over `now` would give. */
function reusable(before: Snapshot, p: Plan, now: Snapshot): boolean {
  const t = now.now.getTime();
  // Shutdown reasons say how long an instance has been idle or booting: they change with the clock.
  if (t < before.now.getTime() || t >= p.validUntil) return false;
  if (p.actions.some((a) => a.op === 'shutdown')) return false;
  return (
    sameList(before.containers, now.containers) &&
    sameList(before.instances, now.instances, sameInstance) &&
    sameList(before.instanceTypes, now.instanceTypes, (a, b) => a === b || sameFields(a, b)) &&
    sameList(before.arrivals, now.arrivals, (a, b) => a === b || sameFields(a, b)) &&
    sameConfig(before.config, now.config) &&
    // The estimates' owner (run-history.ts) hands over the same object while nothing changed.
    before.estimates === now.estimates &&
    sameCloud(before.cloud, now.cloud)
  );
}

/** Shallow equality of plain records whose values are primitives, Dates or lists of primitives. */
function sameFields(a: object, b: object): boolean {
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const keys = Object.keys(x);
  if (keys.length !== Object.keys(y).length) return false;
  return keys.every((k) => sameValue(x[k], y[k]));
}

function sameValue(u: unknown, v: unknown): boolean {
  if (u === v) return true;
  if (u instanceof Date && v instanceof Date) return u.getTime() === v.getTime();
  if (Array.isArray(u) && Array.isArray(v)) return sameList(u, v, sameValue);
  if (typeof u === 'object' && typeof v === 'object' && u !== null && v !== null) return sameFields(u, v);
  return false;
}

function sameInstance(a: SnapshotInstance, b: SnapshotInstance): boolean {
  return a === b || sameFields(a, b);
}

function sameConfig(a: SchedulerConfig, b: SchedulerConfig): boolean {
  return a === b || sameFields(a, b);
}

function sameCloud(a: CloudState, b: CloudState): boolean {
  return a === b || sameFields(a, b);
}
