// The dispatcher's view of the containers it schedules, kept across passes (SEAMS §2), and the recent
// arrivals the scheduler's keep-warm decision reads (the snapshot's `arrivals`).
//
// A container that did not change keeps its object from pass to pass, and when nothing changed the view
// hands out the very same array: the incremental planner (scheduler/incremental.ts) then sees "nothing
// changed" by comparing references, without looking at a million containers. Today the queue returns the
// full list every pass (`containers()`), which the view compares row by row with what it holds; the
// store's `changes()` (SEAMS §2, when it lands) will hand over only what changed.
import type { ArrivalCount, SnapshotContainer } from './scheduler/types.js';

interface Arrival {
  at: number;
  key: string;
}

export class ContainerView {
  private byId = new Map<string, SnapshotContainer>();
  private list: SnapshotContainer[] = [];
  /** Containers seen arriving (by queue time) that may still be in the window, in no order. */
  private recent: Arrival[] = [];
  /** The earliest time in `recent`. */
  private oldest = Infinity;
  private readonly counts = new Map<string, ArrivalCount>();
  private arrivalList: ArrivalCount[] = [];
  private arrivalsChanged = true;

  /** The containers of this pass, from the queue's full list: unchanged ones keep their objects. */
  replace(rows: SnapshotContainer[], now: Date): SnapshotContainer[] {
    let changed = rows.length !== this.list.length;
    const next = new Map<string, SnapshotContainer>();
    const out = new Array<SnapshotContainer>(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i]!;
      const known = this.byId.get(row.id);
      let c = row;
      if (known === undefined) this.arrived(row, now.getTime());
      else if (same(known, row)) c = known;
      if (c !== this.list[i]) changed = true;
      next.set(c.id, c);
      out[i] = c;
    }
    this.byId = next;
    if (changed) this.list = out;
    return this.list;
  }

  constructor(private readonly windowMs: number) {}

  /** Containers first queued within the last arrival window, by shape (the same array while unchanged). */
  arrivals(now: Date): ArrivalCount[] {
    const from = now.getTime() - this.windowMs;
    if (this.oldest < from) {
      const keep: Arrival[] = [];
      this.oldest = Infinity;
      for (const a of this.recent) {
        if (a.at >= from) {
          keep.push(a);
          this.oldest = Math.min(this.oldest, a.at);
        } else {
          const n = this.counts.get(a.key)!;
          n.count--;
          if (n.count === 0) this.counts.delete(a.key);
        }
      }
      this.recent = keep;
      this.arrivalsChanged = true;
    }
    if (this.arrivalsChanged) {
      this.arrivalList = [...this.counts.values()].map((a) => ({ ...a }));
      this.arrivalsChanged = false;
    }
    return this.arrivalList;
  }

  /** When the arrivals change next with no new container: the oldest leaves the window (ms), or Infinity. */
  arrivalsChangeAt(): number {
    // An arrival at t is in the window until t + window inclusive.
    return this.oldest + this.windowMs + 1;
  }

  /** Counts a container the view has not seen before, by the time it was queued. */
  private arrived(c: SnapshotContainer, now: number): void {
    const at = Math.min(c.queuedAt.getTime(), now);
    if (at < now - this.windowMs) return;
    const key = `${c.vcpus}|${c.ram}|${c.scratch}|${c.gpus}|${c.preemptible ? 1 : 0}|${c.instanceTypes?.join(',') ?? '*'}`;
    let n = this.counts.get(key);
    if (n === undefined) {
      n = {
        vcpus: c.vcpus,
        ram: c.ram,
        scratch: c.scratch,
        gpus: c.gpus,
        preemptible: c.preemptible,
        instanceTypes: c.instanceTypes,
        count: 0,
      };
      this.counts.set(key, n);
    }
    n.count++;
    this.recent.push({ at, key });
    this.oldest = Math.min(this.oldest, at);
    this.arrivalsChanged = true;
  }
}

/** Whether two rows describe the same container in the same state (every field the scheduler reads). */
function same(a: SnapshotContainer, b: SnapshotContainer): boolean {
  return (
    a.state === b.state &&
    a.priority === b.priority &&
    a.queuedAt.getTime() === b.queuedAt.getTime() &&
    a.vcpus === b.vcpus &&
    a.ram === b.ram &&
    a.scratch === b.scratch &&
    a.gpus === b.gpus &&
    a.preemptible === b.preemptible &&
    a.instance === b.instance &&
    a.lockCount === b.lockCount &&
    a.owner === b.owner &&
    (a.spotInterruptions ?? 0) === (b.spotInterruptions ?? 0) &&
    (a.opportunistic ?? false) === (b.opportunistic ?? false) &&
    a.usage?.ram === b.usage?.ram &&
    a.usage?.vcpus === b.usage?.vcpus &&
    a.usage?.observedMs === b.usage?.observedMs &&
    sameList(a.instanceTypes, b.instanceTypes)
  );
}

function sameList(a: string[] | null, b: string[] | null): boolean {
  if (a === b) return true;
  if (a === null || b === null || a.length !== b.length) return false;
  return a.every((x, i) => x === b[i]);
}
