// The pass's view of the instances: which count against limits, which can take work (slots), and which
// must be shut down whatever the queue holds (drain, unconfigured type, boot timeout).
import { formatDuration } from '../../model/units.js';
import { isEndingInstanceState, type InstanceType } from '../../model/types.js';
import { compareSlots, type Slot } from './capacity.js';
import { typeCapacity, type Res } from './resources.js';
import type { Limits } from './limits.js';
import type { Snapshot, SnapshotContainer, SnapshotInstance } from './types.js';

/** A shutdown decided by the scheduler. */
export interface Shutdown {
  instance: string;
  reason: string;
}

/** Result of looking at the pool before placing anything. */
export interface PoolView {
  /** Slots in preference order (capacity.ts); the pass's own (it changes them). */
  slots: Slot[];
  /** Instances whose assigned containers stay assigned (live and not being shut down). */
  readonly keeps: ReadonlySet<string>;
  readonly shutdowns: readonly Shutdown[];
  /** The snapshot instance behind each existing slot. */
  readonly instanceOf: ReadonlyMap<string, SnapshotInstance>;
  /**
   * The view stays the same while the clock is at most this (ms) and nothing else changes: the earliest
   * boot deadline of a booting instance (Infinity: none), or -Infinity when a shutdown's reason says how
   * long an instance has been booting (it changes with the clock). The kept view (kept-pool.ts) reads it.
   */
  readonly stableUntil: number;
}

/** Whether `c` is assigned to its instance: Locked with an instance, or Running. */
export function isAssigned(c: SnapshotContainer): c is SnapshotContainer & { instance: string } {
  return c.instance !== null && c.state !== 'Queued';
}

/** Containers assigned to each instance (isAssigned). */
export function assignments(containers: readonly SnapshotContainer[]): Map<string, SnapshotContainer[]> {
  const m = new Map<string, SnapshotContainer[]>();
  for (const c of containers) {
    if (!isAssigned(c)) continue;
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
): PoolView {
  const now = snap.now.getTime();
  const { config } = snap;
  const slots: Slot[] = [];
  const keeps = new Set<string>();
  const shutdowns: Shutdown[] = [];
  const instanceOf = new Map<string, SnapshotInstance>();
  let stableUntil = Infinity;
  for (const inst of kept.instances(snap.instances)) {
    if (inst.state === 'gone') continue;
    const type = typesByName.get(inst.type);
    // Chosen for shutdown but not yet gone: the cloud may still bill it (DESIGN §6.3).
    limits.add(inst.type, type?.price ?? 0);
    if (isEndingInstanceState(inst.state)) continue;
    const mine = assigned.get(inst.id) ?? [];
    // Ids the instance reports that the snapshot does not describe: their usage is unknown, so the
    // instance takes no new work rather than risk over-committing it.
    const opaque = unknownIds(inst.containers, mine);
    const empty = mine.length === 0 && opaque === 0;
    const held = inst.idleBehavior === 'hold';
    // Read only for booting instances: a Date of each instance, every pass, was a tenth of this walk.
    const booting = !held && inst.state === 'booting';
    const bootDeadline = booting ? inst.stateSince.getTime() + config.bootTimeoutMs : 0;
    if (booting && now > bootDeadline) {
      stableUntil = -Infinity;
      shutdowns.push({
        instance: inst.id,
        reason:
          `booting for ${formatDuration(now - inst.stateSince.getTime())} without registering ` +
          `(boot_timeout=${formatDuration(config.bootTimeoutMs)})`,
      });
      continue;
    }
    if (booting) {
      until(bootDeadline + 1);
      stableUntil = Math.min(stableUntil, bootDeadline);
    }
    keeps.add(inst.id);
    if (type === undefined || inst.idleBehavior === 'drain') {
      if (empty && !held)
        shutdowns.push({
          instance: inst.id,
          reason: type === undefined ? `type ${inst.type} is no longer configured` : 'draining and empty',
        });
      continue;
    }
    if (held || opaque > 0) continue;
    instanceOf.set(inst.id, inst);
    slots.push(slotOf(inst, type, typeIndex.get(type.name)!, config.ramOverhead, mine));
  }
  return { slots: kept.slots(slots), keeps, shutdowns, instanceOf, stableUntil };
}

/**
 * Whether viewPool gives a live instance (not gone, not ending) a slot: not past its boot deadline (then it
 * is shut down), of a configured type, neither held nor draining, and no container id it reports unknown.
 * The kept view (kept-pool.ts updateSlots) asks it of a changed record.
 */
export function takesWork(
  inst: SnapshotInstance,
  type: InstanceType | undefined,
  mine: readonly SnapshotContainer[],
  now: number,
  bootTimeoutMs: number,
): boolean {
  if (type === undefined || inst.idleBehavior === 'hold' || inst.idleBehavior === 'drain') return false;
  if (inst.state === 'booting' && now > inst.stateSince.getTime() + bootTimeoutMs) return false;
  return unknownIds(inst.containers, mine) === 0;
}

/** The slot of an instance that takes work (viewPool), with `mine` assigned to it. */
export function slotOf(
  inst: SnapshotInstance,
  type: InstanceType,
  typeIndex: number,
  ramOverhead: number,
  mine: readonly SnapshotContainer[],
): Slot {
  return {
    id: inst.id,
    type,
    typeIndex,
    state: inst.state,
    ready: inst.state === 'idle' || inst.state === 'running',
    free: freeOn(type, ramOverhead, mine),
    count: mine.length,
    occupants: mine.length,
    createFor: null,
    bin: null,
    used: false,
    reservedBelow: 0,
  };
}

/**
 * The two orders of the pool view, kept across passes (issue 12): the instances by id and the slots in
 * `compareSlots` order. A fresh PoolOrder (a pass from scratch) gives the same result; a kept one only
 * makes the sorts cheap. The incremental planner (incremental.ts) keeps one for the dispatcher's passes.
 */
export class PoolOrder {
  private readonly byId = new KeptSort<SnapshotInstance>(compareIds);
  private readonly bySlot = new KeptSort<Slot>(compareSlots);

  /** `list` sorted by id. */
  instances(list: readonly SnapshotInstance[]): SnapshotInstance[] {
    return this.byId.sort(list);
  }

  /** `list` (in id order) sorted by `compareSlots`. */
  slots(list: readonly Slot[]): Slot[] {
    return this.bySlot.sort(list);
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
/** What an instance of `type` has free with `mine` assigned to it (a slot's `free` as viewPool makes it). */
export function freeOn(type: InstanceType, ramOverhead: number, mine: readonly SnapshotContainer[]): Res {
  const free = typeCapacity(type, ramOverhead);
  for (const c of mine) {
    free.mcpu -= Math.round(c.vcpus * 1000);
    free.ram -= c.ram;
    free.scratch -= c.scratch;
    free.gpus -= c.gpus;
  }
  return free;
}

/** How many of `ids` no container of `mine` has (no closure per id: this runs for every instance, every pass). */
export function unknownIds(ids: readonly string[], mine: readonly SnapshotContainer[]): number {
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
