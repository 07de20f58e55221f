// The dispatcher's view of the containers it schedules, kept across passes (SEAMS §2), and the recent
// arrivals the scheduler's keep-warm decision reads (the snapshot's `arrivals`).
//
// A container that did not change keeps its object from pass to pass, and when nothing changed the view
// hands out the very same array: the incremental planner (scheduler/incremental.ts) then sees "nothing
// changed" by comparing references, without looking at a million containers. The view is read from the
// queue's changes() (SEAMS §2): whole on the first pass, every `fullReloadPasses` passes and after any
// error (a cursor the queue no longer answers for, a lost connection); in between, only what changed
// since the last read, so a pass in which nothing changed reads nothing but an empty answer.
import type { ChangeCursor, ContainerChanges, DispatchQueue } from './ports.js';
import { shapeOf } from './scheduler/fitting.js';
import type { ArrivalCount, SnapshotContainer } from './scheduler/types.js';

/** How the view was read, for tests and benchmarks. */
export interface ViewReads {
  /** Whole reads: the first, the periodic ones and those after an error. */
  full: number;
  /** Reads of what changed. */
  incremental: number;
  /** Incremental reads that failed and were replaced by a whole read. */
  failed: number;
}

interface Arrival {
  at: number;
  key: string;
}

/** The ids of an instance's containers when it has none. */
const NONE: string[] = Object.freeze([]) as unknown as string[];

export class ContainerView {
  private byId = new Map<string, SnapshotContainer>();
  private list: SnapshotContainer[] = [];
  /** Each held container's place in `list` (increasing; a new one gets the next number). */
  private order = new Map<string, number>();
  private nextOrder = 0;
  /**
   * The ids of each instance's containers, in list order, kept from the changes (not regrouped every
   * pass). Copy on write: an array handed out never changes (each is frozen: a push throws).
   */
  private byInstance = new Map<string, string[]>();
  /** Instances whose containers changed since takeTouched(). */
  private touched = new Set<string>();
  /** How many held containers have a name (run-history.ts learns only from those). */
  private named = 0;
  /** Containers seen arriving (by queue time) that may still be in the window, in no order. */
  private recent: Arrival[] = [];
  /** The earliest time in `recent`. */
  private oldest = Infinity;
  private readonly counts = new Map<string, ArrivalCount>();
  private arrivalList: ArrivalCount[] = [];
  private arrivalsChanged = true;
  /** Where the last read left the view; null: the next read is whole. */
  private cursor: ChangeCursor | null = null;
  /** Incremental reads since the last whole one. */
  private sinceFull = 0;
  readonly reads: ViewReads = { full: 0, incremental: 0, failed: 0 };

  /**
   * The containers of this pass, read from the queue (file comment): unchanged ones keep their objects,
   * and the array is the same one as last pass when nothing changed.
   */
  async read(
    queue: Pick<DispatchQueue, 'changes'>,
    dispatcherId: string,
    now: Date,
    fullReloadPasses: number,
  ): Promise<SnapshotContainer[]> {
    if (this.cursor !== null && this.sinceFull < fullReloadPasses) {
      try {
        const ch = await queue.changes(dispatcherId, now, this.cursor);
        this.sinceFull++;
        this.reads.incremental++;
        return this.apply(ch, now);
      } catch {
        // Any doubt: read the whole view now (if that fails too, the pass fails and the next one retries).
        this.reads.failed++;
      }
    }
    this.cursor = null;
    const ch = await queue.changes(dispatcherId, now, null);
    this.reads.full++;
    this.sinceFull = 0;
    this.cursor = ch.cursor;
    return this.replace(ch.upserts, now);
  }

  /** Applies what changed since the last read. */
  private apply(ch: ContainerChanges, now: Date): SnapshotContainer[] {
    let changed = false;
    for (const id of ch.removed) {
      const known = this.byId.get(id);
      if (known === undefined) continue;
      this.byId.delete(id);
      this.order.delete(id);
      if (known.name !== undefined) this.named--;
      if (known.instance) this.detach(known.instance, id);
      changed = true;
    }
    for (const row of ch.upserts) {
      const known = this.byId.get(row.id);
      if (known === undefined) {
        this.arrived(row, now.getTime());
        if (row.name !== undefined) this.named++;
        this.order.set(row.id, this.nextOrder++);
        if (row.instance) this.attach(row.instance, row.id);
      } else if (same(known, row)) continue;
      else if (known.instance !== row.instance) {
        if (known.instance) this.detach(known.instance, row.id);
        if (row.instance) this.attach(row.instance, row.id);
      }
      if (known !== undefined)
        this.named += Number(row.name !== undefined) - Number(known.name !== undefined);
      // A container already held keeps its place in the list (a Map keeps its keys' first insertion order).
      this.byId.set(row.id, row);
      changed = true;
    }
    this.cursor = ch.cursor;
    if (changed) this.list = [...this.byId.values()];
    return this.list;
  }

  /** The containers of this pass, from the queue's full list: unchanged ones keep their objects. */
  private replace(rows: SnapshotContainer[], now: Date): SnapshotContainer[] {
    let changed = rows.length !== this.list.length;
    const next = new Map<string, SnapshotContainer>();
    const out = new Array<SnapshotContainer>(rows.length);
    this.named = 0;
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i]!;
      if (row.name !== undefined) this.named++;
      const known = this.byId.get(row.id);
      let c = row;
      if (known === undefined) this.arrived(row, now.getTime());
      else if (same(known, row)) c = known;
      if (c !== this.list[i]) changed = true;
      next.set(c.id, c);
      out[i] = c;
    }
    this.byId = next;
    if (changed) {
      this.list = out;
      this.regroup();
    }
    return this.list;
  }

  /** Whether any container held has a name. */
  get anyNamed(): boolean {
    return this.named > 0;
  }

  /** The ids of the containers on `instance` (Locked with it, or Running), in list order. */
  containersOf(instance: string): string[] {
    return this.byInstance.get(instance) ?? NONE;
  }

  /** The instances whose containers changed since the last call (and forgets them). */
  takeTouched(): Set<string> {
    const t = this.touched;
    this.touched = new Set();
    return t;
  }

  /** After a whole read: places and groups from the list; instances whose group differs are touched. */
  private regroup(): void {
    this.order = new Map(this.list.map((c, i) => [c.id, i]));
    this.nextOrder = this.list.length;
    const next = new Map<string, string[]>();
    for (const c of this.list)
      if (c.instance) (next.get(c.instance) ?? next.set(c.instance, []).get(c.instance)!).push(c.id);
    for (const inst of this.byInstance.keys()) if (!next.has(inst)) this.touched.add(inst);
    const kept = new Map<string, string[]>();
    for (const [inst, ids] of next) {
      const was = this.byInstance.get(inst);
      if (was !== undefined && was.length === ids.length && was.every((id, i) => id === ids[i]))
        kept.set(inst, was);
      else {
        kept.set(inst, Object.freeze(ids) as string[]);
        this.touched.add(inst);
      }
    }
    this.byInstance = kept;
  }

  private detach(instance: string, id: string): void {
    const ids = this.byInstance.get(instance)?.filter((x) => x !== id) ?? [];
    if (ids.length === 0) this.byInstance.delete(instance);
    else this.byInstance.set(instance, Object.freeze(ids) as string[]);
    this.touched.add(instance);
  }

  /** Adds `id` to its instance's group at its place in the list. */
  private attach(instance: string, id: string): void {
    const ids = [...(this.byInstance.get(instance) ?? NONE)];
    const at = this.order.get(id)!;
    let i = ids.length;
    while (i > 0 && this.order.get(ids[i - 1]!)! > at) i--;
    ids.splice(i, 0, id);
    this.byInstance.set(instance, Object.freeze(ids) as string[]);
    this.touched.add(instance);
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
      n = { ...shapeOf(c), count: 0 };
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
    a.reclaimedFrom?.instance === b.reclaimedFrom?.instance &&
    a.reclaimedFrom?.at === b.reclaimedFrom?.at &&
    sameList(a.instanceTypes, b.instanceTypes)
  );
}

function sameList(a: string[] | null, b: string[] | null): boolean {
  if (a === b) return true;
  if (a === null || b === null || a.length !== b.length) return false;
  return a.every((x, i) => x === b[i]);
}
