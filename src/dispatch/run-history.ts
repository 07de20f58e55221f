// The history behind the snapshot's `estimates` (wait_for_running, scheduler/durations.ts): how long the
// containers of each step ran and how long instances took to boot, as this dispatcher observed them pass
// after pass. The simulator runs the real dispatcher, so it learns the same way from its own history.
//
// A container runs from the first pass that sees it Running (or earlier, by its agent's measured wall
// time) to the first pass that no longer lists it Running; an instance boots from its creation to the
// first pass that sees it ready. Only the last SAMPLES of each are kept: recent behaviour is the estimate.
import { estimateMs, runKey } from './scheduler/durations.js';
import type { RunEstimates, Snapshot, SnapshotContainer, SnapshotInstance } from './scheduler/types.js';

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
  /** Instances seen before they were ready, by id: when they were created. */
  private readonly booting = new Map<string, number>();
  private lastContainers: readonly SnapshotContainer[] | null = null;
  private current: RunEstimates | undefined;

  /** Takes in a pass's snapshot and sets its estimates (none while nothing is known). */
  fill(snap: Snapshot): void {
    const e = this.observe(snap.containers, snap.instances, snap.now.getTime());
    if (e !== undefined) snap.estimates = e;
  }

  /**
   * Takes in one pass's view and returns the estimates for its snapshot: the same object as last time
   * when nothing changed (the incremental planner compares it by reference), undefined while nothing is
   * known.
   */
  observe(
    containers: readonly SnapshotContainer[],
    instances: readonly SnapshotInstance[],
    now: number,
  ): RunEstimates | undefined {
    let changed = this.observeBoots(instances, now);
    if (containers !== this.lastContainers) {
      this.lastContainers = containers;
      changed = this.observeRuns(containers, now) || changed;
    }
    if (changed) this.current = this.build();
    return this.current;
  }

  private observeBoots(instances: readonly SnapshotInstance[], now: number): boolean {
    let changed = false;
    const seen = new Set<string>();
    for (const i of instances) {
      seen.add(i.id);
      const created = this.booting.get(i.id);
      if (i.state === 'booting' || i.state === 'unknown') {
        if (created === undefined) this.booting.set(i.id, i.createdAt.getTime());
      } else if (created !== undefined) {
        this.booting.delete(i.id);
        if (i.state === 'idle' || i.state === 'running') {
          this.boots.push(Math.max(0, now - created));
          changed = true;
        }
      }
    }
    for (const id of this.booting.keys()) if (!seen.has(id)) this.booting.delete(id);
    return changed;
  }

  private observeRuns(containers: readonly SnapshotContainer[], now: number): boolean {
    let changed = false;
    const next = new Map<string, Started>();
    for (const c of containers) {
      if (c.state !== 'Running' || c.name === undefined) continue;
      const known = this.running.get(c.id);
      if (known !== undefined) next.set(c.id, known);
      else {
        next.set(c.id, { key: runKey(c.name), at: now - (c.usage?.observedMs ?? 0) });
        changed = true;
      }
    }
    for (const [id, s] of this.running) {
      if (next.has(id)) continue;
      let r = this.runs.get(s.key);
      if (r === undefined) this.runs.set(s.key, (r = new Recent()));
      r.push(Math.max(0, now - s.at));
      changed = true;
    }
    this.running = next;
    return changed;
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
    const steps: Record<string, number> = {};
    for (const [key, r] of this.runs) {
      const est = r.estimate();
      if (est !== null) steps[key] = est;
    }
    return any ? { bootMs, endsAt, steps } : undefined;
  }
}
