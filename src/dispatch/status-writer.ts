// Where the dispatcher's status texts go (DESIGN §6.2 rule 7, SEAMS §3): containers that do not wait in
// the queue (placed, unlocked, cancelled) get their own text; waiting ones are stored by group, one row
// per reason with its members in queue order (migration 060), so the text with the queue position is
// made when read. Only what changed since the last write is written: a pass that changed nothing writes
// nothing, and a pass over 10k containers waiting for one reason writes one group. Writes are spaced by
// status_interval.
import type { DispatchQueue, StoredGroup } from './ports.js';
import type { Statuses, WaitingGroup } from './scheduler/statuses.js';

/** Most own texts written at once (the rest follow in later writes). */
const MAX_OWN_WRITES = 5_000;

export class StatusWriter {
  private lastOwn = new Map<string, string>();
  /** The groups last written, by slot. */
  private lastGroups = new Map<number, StoredGroup>();
  /** The statuses last written in full (a reused plan hands the same object over). */
  private lastStatuses: Statuses | null = null;
  private lastWrite = -Infinity;
  /** Whether this process wrote the groups yet (the first write drops groups a previous run left). */
  private groupsWritten = false;

  constructor(
    private readonly queue: Pick<DispatchQueue, 'setStatuses' | 'setWaiting'>,
    private readonly dispatcherId: string,
    private readonly intervalMs: number,
  ) {}

  async save(st: Statuses, now: Date): Promise<void> {
    if (st === this.lastStatuses || now.getTime() - this.lastWrite < this.intervalMs) return;
    const own = new Map<string, string>();
    let capped = false;
    for (const [id, s] of st.own) {
      if (this.lastOwn.get(id) === s) continue;
      if (own.size >= MAX_OWN_WRITES) {
        capped = true;
        break;
      }
      own.set(id, s);
    }
    const groups = this.slotted(st.groups());
    const changed = groups.filter((g) => !sameGroup(this.lastGroups.get(g.slot), g));
    const reasonsMoved = this.slotsDiffer(groups);
    if (own.size > 0) {
      await this.queue.setStatuses(own);
      for (const [id, s] of own) this.lastOwn.set(id, s);
    }
    if (changed.length > 0 || reasonsMoved) {
      await this.queue.setWaiting(
        this.dispatcherId,
        changed,
        groups.map((g) => g.slot),
      );
      this.lastGroups = new Map(groups.map((g) => [g.slot, g]));
      this.groupsWritten = true;
    }
    // Forget containers no longer given a text, so the map does not grow without bound.
    if (this.lastOwn.size > 2 * st.own.size + MAX_OWN_WRITES) {
      for (const id of [...this.lastOwn.keys()]) if (!st.own.has(id)) this.lastOwn.delete(id);
    }
    if (!capped) this.lastStatuses = st;
    if (own.size > 0 || changed.length > 0 || reasonsMoved) this.lastWrite = now.getTime();
  }

  /**
   * Gives each group a slot, so that as few containers as possible change rows: largest group first,
   * each takes the slot its first member held at the last write whose slot is still free (a reason whose
   * text changed, as when the container at the head moves, keeps its row), else the lowest free one.
   */
  private slotted(groups: WaitingGroup[]): StoredGroup[] {
    const slotOf = new Map<string, number>();
    for (const [slot, g] of this.lastGroups) for (const id of g.members) slotOf.set(id, slot);
    const taken = new Set<number>();
    const slots = new Array<number | undefined>(groups.length);
    const bySize = groups
      .map((_, i) => i)
      .sort((i, j) => groups[j]!.members.length - groups[i]!.members.length);
    for (const i of bySize) {
      for (const id of groups[i]!.members) {
        const slot = slotOf.get(id);
        if (slot !== undefined && !taken.has(slot)) {
          taken.add(slot);
          slots[i] = slot;
          break;
        }
      }
    }
    let free = 0;
    return groups.map((g, i) => {
      let slot = slots[i];
      if (slot === undefined) {
        while (taken.has(free)) free++;
        slot = free;
        taken.add(slot);
      }
      return { ...g, slot };
    });
  }

  /** Whether the slots in use differ from those last written (or nothing was written yet). */
  private slotsDiffer(groups: StoredGroup[]): boolean {
    if (!this.groupsWritten) return true;
    if (groups.length !== this.lastGroups.size) return true;
    return groups.some((g) => !this.lastGroups.has(g.slot));
  }
}

function sameGroup(a: StoredGroup | undefined, b: StoredGroup): boolean {
  return (
    a !== undefined &&
    a.reason === b.reason &&
    sameNumbers(a.positions, b.positions) &&
    sameNumbers(a.higherAhead, b.higherAhead) &&
    a.members.length === b.members.length &&
    a.members.every((id, i) => id === b.members[i])
  );
}

function sameNumbers(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
