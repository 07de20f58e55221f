// The history behind the snapshot's `estimates` (wait_for_running, scheduler/durations.ts): how long the
// containers of each step ran and how long instances took to boot, as this dispatcher observed them pass
// after pass. The simulator runs the real dispatcher, so it learns the same way from its own history.
//
// A container runs from its start (the queue's started_at; else the pass that started it; else its agent's
// measured wall time, or the first pass that sees it Running) to the first pass that no longer lists it;
// an instance boots from its creation until it became ready (its stateSince when a pass first sees it
// ready). Only the last SAMPLES of each are kept: recent behaviour is the estimate.
import { FanOuts } from './fan-outs.js';
import { estimateMs, runKey } from './scheduler/durations.js';
import type { Plan, RunEstimates, Snapshot, SnapshotContainer, SnapshotInstance } from './scheduler/types.js';

/** How many recent run times per step, and recent boots, an estimate is the median of. */
export const SAMPLES = 32;

interface Started {
  key: string;
  at: number;
}

/** A bounded list of recent durations and its median, recomputed only when it changed. */
class Recent {
  private readonly values: number[] = [];
  private next = 0;
  private cached: number | null | undefined;

  push(ms: number): void {
    if (this.values.length < SAMPLES) this.values.push(ms);
    else this.values[this.next] = ms;
    this.next = (this.next + 1) % SAMPLES;
    this.cached = undefined;
  }

  estimate(): number | null {
    if (this.cached === undefined) this.cached = estimateMs(this.values);
    return this.cached;
  }
}

export class RunHistory {
  /** Running containers with a name, by id: their step and when they started. */
  private running = new Map<string, Started>();
  private readonly runs = new Map<string, Recent>();
  private readonly boots = new Recent();
  /** Arrivals per end of each step (boot_ahead). */
  private readonly fanOuts = new FanOuts();
  /** Instances seen booting, by id. */
  private readonly booting = new Set<string>();
  /**
   * Each instance id with the last observeBoots call that saw it (mark >> 1) and whether it was fresh then
   * (mark & 1): no set of every id is built each pass.
   */
  private readonly seenBy = new Map<string, number>();
  private calls = 0;
  private lastContainers: readonly SnapshotContainer[] | null = null;
  /** The last containers seen had a name: runs can be learnt. */
  private named = false;
  /** Containers were started since the estimates were built. */
  private stale = false;
  /** The run-time estimate of each step; null: to be rebuilt (a run ended). */
  private steps: Record<string, number> | null = null;
  private current: RunEstimates | undefined;

  /** Takes in a pass's snapshot and sets its estimates (none while nothing is known). */
  fill(snap: Snapshot, anyNamed = true): void {
    const e = this.observe(snap.containers, snap.instances, snap.now.getTime(), anyNamed);
    if (e !== undefined) snap.estimates = e;
  }

  /**
   * Takes in one pass's view and returns the estimates for its snapshot: the same object as last time
   * when nothing changed (the incremental planner compares it by reference), undefined while nothing is
   * known. `anyNamed` false says no container has a name: with nothing running and no fan-out pending there
   * is nothing to learn from them, and they are not walked.
   */
  observe(
    containers: readonly SnapshotContainer[],
    instances: readonly SnapshotInstance[],
    now: number,
    anyNamed = true,
  ): RunEstimates | undefined {
    let changed = this.observeBoots(instances);
    if (containers !== this.lastContainers) {
      this.lastContainers = containers;
      if (!anyNamed && this.running.size === 0 && !this.fanOuts.pending) this.named = false;
      else changed = this.observeRuns(containers, now) || changed;
    }
    if (changed || this.stale) {
      this.current = this.build();
      this.stale = false;
    }
    return this.current;
  }

  private observeBoots(instances: readonly SnapshotInstance[]): boolean {
    let changed = false;
    const call = ++this.calls;
    for (const i of instances) {
      // The last call that saw it, twice over, plus 1 if it was fresh then (a repeated id is fresh or not
      // as its first copy in the call was).
      const mark = this.seenBy.get(i.id);
      const last = mark === undefined ? 0 : mark >> 1;
      // New since the last call (not at the first: those may have been ready for long), or seen booting.
      const fresh = last === call ? (mark! & 1) === 1 : call > 1 && last !== call - 1;
      this.seenBy.set(i.id, call * 2 + (fresh ? 1 : 0));
      const booting = i.state === 'booting' || i.state === 'unknown';
      const ready = i.state === 'idle' || i.state === 'running';
      if (booting) this.booting.add(i.id);
      else if (ready && (fresh || this.booting.has(i.id))) {
        // Ready since stateSince: the boot took from its creation until then, whenever a pass saw it.
        this.boots.push(Math.max(0, i.stateSince.getTime() - i.createdAt.getTime()));
        changed = true;
      }
      if (!booting) this.booting.delete(i.id);
    }
    for (const id of this.booting) if (this.seenBy.get(id)! >> 1 !== call) this.booting.delete(id);
    // Ids gone for good are forgotten now and then: the map stays about the size of the pool.
    if (this.seenBy.size > 2 * instances.length + 1024)
      for (const [id, mark] of this.seenBy) if (mark >> 1 !== call) this.seenBy.delete(id);
    return changed;
  }

  private observeRuns(containers: readonly SnapshotContainer[], now: number): boolean {
    let changed = false;
    const next = new Map<string, Started>();
    const requeued = new Set<string>();
    let named = false;
    for (const c of containers) {
      if (c.name !== undefined) named = true;
      if (c.state === 'Queued') {
        // Given back before it ran (or interrupted): its time says nothing of its step's run time.
        if (this.running.size > 0 && this.running.has(c.id)) requeued.add(c.id);
        continue;
      }
      const known = this.running.get(c.id);
      const at = c.startedAt?.getTime();
      if (known !== undefined) {
        if (at !== undefined && at !== known.at) {
          known.at = at;
          changed = true;
        }
        next.set(c.id, known);
      } else if (c.state === 'Running' && c.name !== undefined) {
        next.set(c.id, { key: runKey(c.name), at: at ?? now - (c.usage?.observedMs ?? 0) });
        changed = true;
      }
    }
    const ended: string[] = [];
    for (const [id, s] of this.running) {
      if (next.has(id) || requeued.has(id)) continue;
      ended.push(s.key);
      let r = this.runs.get(s.key);
      if (r === undefined) this.runs.set(s.key, (r = new Recent()));
      r.push(Math.max(0, now - s.at));
      this.steps = null;
      changed = true;
    }
    this.running = next;
    this.named = named;
    if (named || this.fanOuts.pending) changed = this.fanOuts.observe(now, ended, containers) || changed;
    return changed;
  }

  /**
   * The pass's starts: a container is taken to run from the pass that started it until its queue says
   * when it really started. Without this, a run that ends before the next pass (the simulator passes on
   * events only) would never be seen.
   */
  started(snap: Snapshot, plan: Plan): void {
    const ids = new Set<string>();
    for (const a of plan.actions) if (a.op === 'start') ids.add(a.container);
    // Without names (an SWF trace, a million anonymous jobs) there is nothing to learn: no walk.
    if (ids.size === 0 || !this.named) return;
    const now = snap.now.getTime();
    for (const c of snap.containers)
      if (ids.has(c.id) && c.name !== undefined && !this.running.has(c.id))
        this.running.set(c.id, { key: runKey(c.name), at: now });
    // The next pass's snapshot carries them (this pass has planned already).
    this.stale = true;
  }

  private build(): RunEstimates | undefined {
    const bootMs = this.boots.estimate();
    const endsAt: Record<string, number> = {};
    let any = bootMs !== null;
    for (const [id, s] of this.running) {
      const est = this.runs.get(s.key)?.estimate() ?? null;
      if (est === null) continue;
      endsAt[id] = s.at + est;
      any = true;
    }
    if (this.steps === null) {
      this.steps = {};
      for (const [key, r] of this.runs) {
        const est = r.estimate();
        if (est !== null) this.steps[key] = est;
      }
    }
    const fanOut = this.fanOuts.estimates();
    if (!any) return undefined;
    const e: RunEstimates = { bootMs, endsAt, steps: this.steps };
    if (Object.keys(fanOut).length > 0) e.fanOut = fanOut;
    return e;
  }
}
