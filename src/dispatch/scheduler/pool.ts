// The pass's view of the instances: which count against limits, which can take work (slots), and which
// must be shut down whatever the queue holds (drain, unconfigured type, boot timeout).
import { formatDuration } from '../../model/units.js';
import type { InstanceType } from '../../model/types.js';
import { compareSlots, type Slot } from './capacity.js';
import { typeCapacity } from './resources.js';
import type { Limits } from './limits.js';
import type { Snapshot, SnapshotContainer, SnapshotInstance } from './types.js';

/** A shutdown decided by the scheduler. */
export interface Shutdown {
  instance: string;
  reason: string;
}

/** Result of looking at the pool before placing anything. */
export interface PoolView {
  /** Slots in preference order (capacity.ts). */
  slots: Slot[];
  /** Instances whose assigned containers stay assigned (live and not being shut down). */
  keeps: Set<string>;
  shutdowns: Shutdown[];
  /** Live instances (not shutdown/gone), for limits and the warm pool. */
  liveCount: number;
  /** The snapshot instance behind each existing slot. */
  instanceOf: Map<string, SnapshotInstance>;
}

/** Containers assigned to each instance (Locked with an instance, or Running). */
export function assignments(containers: SnapshotContainer[]): Map<string, SnapshotContainer[]> {
  const m = new Map<string, SnapshotContainer[]>();
  for (const c of containers) {
    if (c.instance === null || c.state === 'Queued') continue;
    const list = m.get(c.instance);
    if (list === undefined) m.set(c.instance, [c]);
    else list.push(c);
  }
  return m;
}

export function viewPool(
  snap: Snapshot,
  typesByName: Map<string, InstanceType>,
  typeIndex: Map<string, number>,
  assigned: Map<string, SnapshotContainer[]>,
  limits: Limits,
  until: (at: number) => void,
  kept: PoolOrder = new PoolOrder(),
  keptSlots: KeptSlots = new KeptSlots(),
): PoolView {
  const now = snap.now.getTime();
  const { config } = snap;
  // Slots built in this pass; the kept ones are listed by keptSlots.
  const fresh: KeptSlot[] = [];
  const keeps = new Set<string>();
  const shutdowns: Shutdown[] = [];
  const instanceOf = new Map<string, SnapshotInstance>();
  let liveCount = 0;
  keptSlots.begin(snap.instanceTypes, config.ramOverhead);
  for (const inst of kept.instances(snap.instances)) {
    if (inst.state === 'gone') continue;
    const type = typesByName.get(inst.type);
    // Chosen for shutdown but not yet gone: the cloud may still bill it (DESIGN §6.3).
    limits.add(inst.type, type?.price ?? 0);
    if (inst.state === 'shutdown' || inst.state === 'destroy_pending') continue;
    liveCount++;
    const mine = assigned.get(inst.id) ?? NONE;
    // The last pass's view of this instance, while its record and its containers are the same.
    const known = keptSlots.get(inst, mine);
    // Ids the instance reports that the snapshot does not describe: their usage is unknown, so the
    // instance takes no new work rather than risk over-committing it.
    const opaque = known?.opaque ?? unknownIds(inst.containers, mine);
    const empty = mine.length === 0 && opaque === 0;
    const held = inst.idleBehavior === 'hold';
    // Read only for booting instances: a Date of each instance, every pass, was a tenth of this walk.
    const booting = !held && inst.state === 'booting';
    const bootDeadline = booting ? inst.stateSince.getTime() + config.bootTimeoutMs : 0;
    if (booting && now > bootDeadline) {
      shutdowns.push({
        instance: inst.id,
        reason:
          `booting for ${formatDuration(now - inst.stateSince.getTime())} without registering ` +
          `(boot_timeout=${formatDuration(config.bootTimeoutMs)})`,
      });
      continue;
    }
    if (booting) until(bootDeadline + 1);
    keeps.add(inst.id);
    if (type === undefined || inst.idleBehavior === 'drain') {
      if (empty && !held)
        shutdowns.push({
          instance: inst.id,
          reason: type === undefined ? `type ${inst.type} is no longer configured` : 'draining and empty',
        });
      continue;
    }
    if (held || opaque > 0) {
      if (known === undefined) keptSlots.set(inst, mine, opaque, null);
      continue;
    }
    instanceOf.set(inst.id, inst);
    if (known?.slot != null) {
      keptSlots.list(known);
      continue;
    }
    const free = typeCapacity(type, config.ramOverhead);
    for (const c of mine) {
      free.mcpu -= Math.round(c.vcpus * 1000);
      free.ram -= c.ram;
      free.scratch -= c.scratch;
      free.gpus -= c.gpus;
    }
    const slot: Slot = {
      id: inst.id,
      type,
      typeIndex: typeIndex.get(type.name)!,
      state: inst.state,
      ready: inst.state === 'idle' || inst.state === 'running',
      free,
      count: mine.length,
      occupants: mine.length,
      createFor: null,
      bin: null,
      used: false,
      reservedBelow: 0,
    };
    fresh.push(keptSlots.set(inst, mine, opaque, slot));
  }
  const slots = keptSlots.end(fresh);
  return { slots, keeps, shutdowns, liveCount, instanceOf };
}

const NONE: SnapshotContainer[] = [];

interface KeptSlot {
  inst: SnapshotInstance;
  mine: readonly SnapshotContainer[];
  opaque: number;
  /** Null: the instance takes no new work (held, or opaque containers). */
  slot: Slot | null;
  /** The last pass that saw the instance. */
  seen: number;
  /** The last pass that listed its slot. */
  listed: number;
}

/**
 * The pool view's slots kept across passes (issue 12): an instance's slot is handed to the next pass
 * while its snapshot record (the same object: the dispatcher keeps records while no field changes), its
 * assigned containers (the same objects) and the type list are the same, and no pass wrote to it
 * (Capacity.write: a slot a pass places on, evicts from or drains is rebuilt by the next one). A pass
 * from scratch (a fresh KeptSlots) builds every slot and decides the same.
 */
export class KeptSlots {
  private readonly byId = new Map<string, KeptSlot>();
  private types: readonly unknown[] | null = null;
  private ramOverhead = NaN;
  private epoch = 0;
  private seen = 0;
  /** What the last pass wrote (Capacity.written): read at the next begin(), even if that pass threw. */
  private written: Set<Slot> | null = null;
  /** The last pass's slots in `compareSlots` order. */
  private sorted: KeptSlot[] = [];
  /** Instances whose kept view a pass used (for tests and benchmarks). */
  reused = 0;

  /** Starts a pass over the pool: forgets what the last pass wrote, or everything if the types moved. */
  begin(types: readonly unknown[], ramOverhead: number): void {
    if (types !== this.types || ramOverhead !== this.ramOverhead) {
      this.byId.clear();
      this.types = types;
      this.ramOverhead = ramOverhead;
    } else if (this.written !== null)
      for (const slot of this.written) if (this.byId.get(slot.id)?.slot === slot) this.byId.delete(slot.id);
    this.written = null;
    this.epoch++;
    this.seen = 0;
  }

  /** The kept view of the instance, if its record and containers are those it was built from. */
  get(inst: SnapshotInstance, mine: readonly SnapshotContainer[]): KeptSlot | undefined {
    const k = this.byId.get(inst.id);
    if (k === undefined || k.inst !== inst || !sameItems(k.mine, mine)) return undefined;
    k.seen = this.epoch;
    this.seen++;
    this.reused++;
    return k;
  }

  set(
    inst: SnapshotInstance,
    mine: readonly SnapshotContainer[],
    opaque: number,
    slot: Slot | null,
  ): KeptSlot {
    const k = { inst, mine, opaque, slot, seen: this.epoch, listed: this.epoch };
    this.byId.set(inst.id, k);
    this.seen++;
    return k;
  }

  /** The kept slot of `k` (from get()) is one of this pass's slots. */
  list(k: KeptSlot): void {
    k.listed = this.epoch;
  }

  /**
   * Ends the walk: this pass's slots in `compareSlots` order (a total order: ids are unique), the kept ones
   * in last pass's order (their fields are those they were sorted by), merged with the `fresh` ones sorted.
   * Drops the instances no longer seen once they are many.
   */
  end(fresh: KeptSlot[]): Slot[] {
    const epoch = this.epoch;
    const old = this.sorted.filter((k) => k.listed === epoch);
    fresh.sort((a, b) => compareSlots(a.slot!, b.slot!));
    const merged = new Array<KeptSlot>(old.length + fresh.length);
    let i = 0;
    let j = 0;
    for (let n = 0; n < merged.length; n++)
      merged[n] =
        j >= fresh.length || (i < old.length && compareSlots(old[i]!.slot!, fresh[j]!.slot!) < 0)
          ? old[i++]!
          : fresh[j++]!;
    this.sorted = merged;
    if (this.byId.size > 2 * this.seen + 64)
      for (const [id, k] of this.byId) if (k.seen !== epoch) this.byId.delete(id);
    return merged.map((k) => k.slot!);
  }

  /** The slots the pass is about to change are these (its Capacity.written). */
  watch(written: Set<Slot>): void {
    this.written = written;
  }
}

function sameItems<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * The instances by id, kept across passes (issue 12; the slots' order is kept by KeptSlots). A fresh
 * PoolOrder (a pass from scratch) gives the same result; a kept one only makes the sort cheap. The incremental planner (incremental.ts) keeps one for the dispatcher's passes.
 */
export class PoolOrder {
  private readonly byId = new KeptSort<SnapshotInstance>(compareIds);

  /** `list` sorted by id. */
  instances(list: readonly SnapshotInstance[]): SnapshotInstance[] {
    return this.byId.sort(list);
  }
}

function compareIds(a: SnapshotInstance, b: SnapshotInstance): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/**
 * A stable sort that remembers the permutation it gave. When the next list holds the same ids in the same
 * places, it starts from that permutation: a list whose order moved little costs about one comparison per
 * item instead of n log n. Any other list is sorted from its own order, as Array.sort would.
 */
export class KeptSort<T extends { id: string }> {
  private ids: string[] = [];
  private perm: number[] = [];

  constructor(private readonly compare: (a: T, b: T) => number) {}

  sort(items: readonly T[]): T[] {
    const n = items.length;
    let same = n === this.ids.length;
    for (let i = 0; same && i < n; i++) same = items[i]!.id === this.ids[i];
    let perm: number[];
    if (same) perm = this.perm;
    else {
      perm = new Array<number>(n);
      for (let i = 0; i < n; i++) perm[i] = i;
      this.ids = items.map((x) => x.id);
    }
    perm.sort((a, b) => this.compare(items[a]!, items[b]!) || a - b);
    this.perm = perm;
    const out = new Array<T>(n);
    for (let i = 0; i < n; i++) out[i] = items[perm[i]!]!;
    return out;
  }
}
/** How many of `ids` no container of `mine` has (no closure per id: this runs for every instance, every pass). */
function unknownIds(ids: readonly string[], mine: readonly SnapshotContainer[]): number {
  let unknown = 0;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    // Usually both list the same containers in the same order.
    if (i < mine.length && mine[i]!.id === id) continue;
    let found = false;
    for (let j = 0; j < mine.length && !found; j++) found = mine[j]!.id === id;
    if (!found) unknown++;
  }
  return unknown;
}
