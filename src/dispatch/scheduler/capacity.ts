// Free capacity on instances and the search for a place (DESIGN §6.2 rule 3).
//
// Instances that can take work become "slots", ordered once by preference: ready (idle/running) before
// booting/unknown, busier before emptier (so empty ones can be shut down), then id; instances created in
// this pass come last. Each shape keeps a cursor into its own list of usable slots. Free capacity only
// shrinks during a pass, so a slot too full for a shape stays too full: the cursor never moves back and
// the search over all containers of a shape costs O(slots + placements), not O(containers × slots).
// The one exception, giving capacity back when a lower-priority container is unlocked (rule 5), resets
// every cursor.
import type { InstanceType } from '../../model/types.js';
import type { Shape } from './fitting.js';
import { fits, type Res } from './resources.js';

/** An instance that can take new work, existing or created in this pass. */
export interface Slot {
  id: string;
  type: InstanceType;
  /** The type's position in the pass's sorted type list. */
  typeIndex: number;
  /** 'idle' | 'running' | 'booting' | 'unknown' for existing instances, 'new' for planned ones. */
  state: string;
  /** The agent is up: containers can be started on it now. */
  ready: boolean;
  free: Res;
  /** Containers on it (existing and placed in this pass). */
  count: number;
  /** For an instance planned in this pass: the containers its create action is for. */
  createFor: string[] | null;
  /** Something was placed on it in this pass (so it is not idle any more). */
  used: boolean;
}

interface Cursor {
  shape: Shape;
  list: Slot[];
  pos: number;
}

/** The pass's view of all slots, with per-shape cursors. */
export class Capacity {
  private readonly cursors = new Map<string, Cursor>();

  constructor(
    readonly slots: Slot[],
    private readonly maxPerInstance: number,
  ) {}

  private cursor(shape: Shape): Cursor {
    let cur = this.cursors.get(shape.key);
    if (cur === undefined) {
      cur = { shape, list: this.slots.filter((s) => shape.usableByIndex[s.typeIndex] === 1), pos: 0 };
      this.cursors.set(shape.key, cur);
    }
    return cur;
  }

  hasRoom(slot: Slot, need: Res): boolean {
    return (this.maxPerInstance === 0 || slot.count < this.maxPerInstance) && fits(need, slot.free);
  }

  /** The most preferred slot with room for the shape, or null. */
  find(shape: Shape): Slot | null {
    const cur = this.cursor(shape);
    while (cur.pos < cur.list.length) {
      const s = cur.list[cur.pos]!;
      if (this.hasRoom(s, shape.need)) return s;
      cur.pos++;
    }
    return null;
  }

  /** Adds a slot planned in this pass; it goes last in every list that can use it. */
  addPlanned(slot: Slot): void {
    this.slots.push(slot);
    for (const cur of this.cursors.values())
      if (cur.shape.usableByIndex[slot.typeIndex] === 1) cur.list.push(slot);
  }

  /** Capacity was given back: every slot may fit again. */
  resetCursors(): void {
    for (const cur of this.cursors.values()) cur.pos = 0;
  }
}

/** Preference order for existing slots (see the file comment). */
export function compareSlots(a: Slot, b: Slot): number {
  if (a.ready !== b.ready) return a.ready ? -1 : 1;
  return b.count - a.count || a.free.ram - b.free.ram || a.free.mcpu - b.free.mcpu || (a.id < b.id ? -1 : 1);
}
