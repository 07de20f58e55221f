// Free capacity on instances and the search for a place (DESIGN §6.2 rule 3).
//
// Instances that can take work become "slots", ordered once by preference: ready (idle/running) before
// booting/unknown, busier before emptier (so empty ones can be shut down), then id; instances planned in
// this pass come last. Each shape keeps a cursor into its own list of slots. Free capacity only shrinks
// during a pass (a planned instance grows, but only while it can still take more), so a slot too full for
// a shape stays too full: the cursor never moves back and the search over all containers of a shape costs
// O(slots + placements), not O(containers × slots). The one exception, giving capacity back when a
// lower-priority container is unlocked (rule 5), resets every cursor.
import type { InstanceType } from '../../model/types.js';
import { growTarget, type Bin } from './bins.js';
import type { Shape } from './fitting.js';
import type { Limits } from './limits.js';
import { fits, type Res } from './resources.js';
import type { SchedulerConfig } from './types.js';

/** An instance that can take new work, existing or planned in this pass. */
export interface Slot {
  id: string;
  type: InstanceType;
  /** The type's position in the pass's sorted type list. */
  typeIndex: number;
  /** 'idle' | 'running' | 'booting' | 'unknown' for existing instances, 'new' for planned ones. */
  state: string;
  /** The agent is up: containers can be started on it now. */
  ready: boolean;
  /** What its current type still offers. */
  free: Res;
  /** Containers on it (existing and placed in this pass). */
  count: number;
  /** Containers on it when the pass began (the share rule's chance of being left alone on it). */
  occupants: number;
  /** For an instance planned in this pass: the containers its create action is for. */
  createFor: string[] | null;
  /** For an instance planned in this pass: what it holds and the types it may grow into (bins.ts). */
  bin: Bin | null;
  /** Something was placed on it in this pass (so it is not idle any more). */
  used: boolean;
  /**
   * Drained for the head of the queue (rule 5, heads.ts): containers of a priority below this one get no
   * place on it (0: not drained).
   */
  reservedBelow: number;
}

/** Where a container can go: a slot, and the type a planned slot grows into to take it (-1: as it is). */
export interface Room {
  slot: Slot;
  growTo: number;
}

interface Cursor {
  shape: Shape;
  list: Slot[];
  pos: number;
}

/** The pass's view of all slots, with per-shape cursors. */
export class Capacity {
  private readonly cursors = new Map<string, Cursor>();
  /**
   * Bumped whenever a cursor may find room again (a slot added, the cursors reset): while it is the same, a
   * shape that find() found no room for still has none, at that priority or a lower one (placement.ts).
   */
  epoch = 0;
  /**
   * Each slot's type index, or -1 for a planned one (any shape may use it: mayUse), side by side: a
   * shape's list is filtered from these without reading the slots (10k slots × each shape of a pass was a
   * tenth of a pass after a small change).
   */
  private readonly typeOf: number[];

  constructor(
    readonly slots: Slot[],
    private readonly maxPerInstance: number,
    private readonly sortedTypes: InstanceType[],
    private readonly ramOverhead: number,
    private readonly limits: Limits,
    private readonly shareRule: SchedulerConfig['shareRule'],
    private readonly packing: SchedulerConfig['batchPacking'],
  ) {
    this.typeOf = slots.map(typeOfSlot);
  }

  private cursor(shape: Shape): Cursor {
    let cur = this.cursors.get(shape.key);
    if (cur === undefined) {
      // mayUse(shape, slot) for every slot, in slot order.
      const list: Slot[] = [];
      const usable = shape.usableByIndex;
      const typeOf = this.typeOf;
      for (let i = 0; i < typeOf.length; i++) {
        const t = typeOf[i]!;
        if (t < 0 || usable[t] === 1) list.push(this.slots[i]!);
      }
      cur = { shape, list, pos: 0 };
      this.cursors.set(shape.key, cur);
    }
    return cur;
  }

  /**
   * Whether the slot may take the shape at this priority, room aside: its type (within max_price_factor,
   * unless `anyType`: a borrower's, opportunistic.ts), the cap, a head's reservation.
   */
  mayTake(slot: Slot, shape: Shape, priority: number, anyType = false): boolean {
    return (
      priority >= slot.reservedBelow &&
      (this.maxPerInstance === 0 || slot.count < this.maxPerInstance) &&
      (anyType || shape.usableByIndex[slot.typeIndex] === 1)
    );
  }

  /**
   * Whether the slot can take the shape, for a container of this priority, as it is (no growth).
   * `accepted`: the slot's instance was created for this container, so the expected share rule does not
   * judge it again (placement.ts; never through a cursor, which must not depend on the container).
   */
  hasRoom(slot: Slot, shape: Shape, priority: number, accepted: boolean): boolean {
    return (
      this.mayTake(slot, shape, priority) &&
      (this.shareRule !== 'expected' || accepted || slot.bin !== null || expectedShareOk(slot, shape)) &&
      fits(shape.need, slot.free)
    );
  }

  /**
   * Where the shape can go on the slot, or null. A planned slot may grow when `grow` allows it;
   * `alikeBehind` counts the containers of the shape still waiting behind this one (bins.ts).
   */
  roomOn(
    slot: Slot,
    shape: Shape,
    priority: number,
    accepted: boolean,
    grow: boolean,
    alikeBehind = 0,
  ): Room | null {
    if (this.hasRoom(slot, shape, priority, accepted)) return { slot, growTo: -1 };
    if (!grow || slot.bin === null || this.packing === 'off') return null;
    if (this.maxPerInstance !== 0 && slot.count >= this.maxPerInstance) return null;
    const alike = this.packing === 'boots' ? alikeBehind : 0;
    const to = growTarget(slot, shape, alike, this.sortedTypes, this.ramOverhead, this.limits);
    return to < 0 ? null : { slot, growTo: to };
  }

  /** The most preferred place with room for the shape, or null. */
  find(shape: Shape, priority: number, grow: boolean, alikeBehind = 0): Room | null {
    const cur = this.cursor(shape);
    while (cur.pos < cur.list.length) {
      const room = this.roomOn(cur.list[cur.pos]!, shape, priority, false, grow, alikeBehind);
      if (room !== null) return room;
      cur.pos++;
    }
    return null;
  }

  /** Adds a slot planned in this pass; it goes last in every list that can use it. */
  addPlanned(slot: Slot): void {
    this.slots.push(slot);
    this.epoch++;
    this.typeOf.push(typeOfSlot(slot));
    for (const cur of this.cursors.values()) if (mayUse(cur.shape, slot)) cur.list.push(slot);
  }

  /** Capacity was given back: every slot may fit again. */
  resetCursors(): void {
    this.epoch++;
    for (const cur of this.cursors.values()) cur.pos = 0;
  }
}

/**
 * The share rule as the scheduler applies it (share_rule: expected): on an existing instance a container
 * is charged its share of the price, plus the rest of the price weighted by the chance that it is the last
 * one left there, 1/(k + 1) with k containers on it when the pass began. It may go there when that is
 * within max_price_factor of its cheapest type's price. The containers an instance was created for are
 * not judged again when it is ready (its price was accepted for them when it was planned: bins.ts);
 * judging them by an empty instance's whole price left them locked for hours while more instances were
 * created for them. Booting instances are judged like ready ones, so that no container waits for an
 * instance it would refuse once ready. Charging the bare share let one-core jobs keep 96-core instances
 * alive for hours after the job they shared them with had ended: +26% cost on the KTH trace, +29% on
 * lublin (docs/performance/sim.md).
 */
function expectedShareOk(slot: Slot, shape: Shape): boolean {
  const share = shape.shareByIndex[slot.typeIndex]!;
  const expected = share + (slot.type.price - share) / (slot.occupants + 1);
  return expected <= shape.maxPrice * (1 + 1e-9);
}

/** Whether a shape could ever use the slot: its type, or for a planned slot any type it may grow into. */
function mayUse(shape: Shape, s: Slot): boolean {
  return s.bin !== null || shape.usableByIndex[s.typeIndex] === 1;
}

/** What mayUse reads of a slot: its type index, or -1 for a planned slot (its type may still change). */
function typeOfSlot(s: Slot): number {
  return s.bin !== null ? -1 : s.typeIndex;
}

/** Preference order for existing slots (see the file comment). */
export function compareSlots(a: Slot, b: Slot): number {
  if (a.ready !== b.ready) return a.ready ? -1 : 1;
  return b.count - a.count || a.free.ram - b.free.ram || a.free.mcpu - b.free.mcpu || (a.id < b.id ? -1 : 1);
}
