// Where the dispatcher's status texts go (DESIGN §6.2 rule 7, SEAMS §3): containers that do not wait in
// the queue (placed, unlocked, cancelled) get their own text; waiting ones are stored by group, one row
// per reason with its members in queue order (migration 060), so the text with the queue position is
// made when read. Only what changed since the last write is written: a pass that changed nothing writes
// nothing, and a pass over 10k containers waiting for one reason writes one group.
//
// Writes run beside the passes, one at a time (issue 12): a pass offers its statuses and goes on. A write
// of a long queue's group still costs a fraction of a second (the group is compared and its changed parts
// sent: ~0.1 s at 100k waiting, docs/PERFORMANCE.md), and a pass that waited for it would leave the freed
// slots idle meanwhile. A write starts at most every status_interval, and no sooner
// after the last one ended than twice as long as that one took, so that statuses take at most a third of
// the database's time for one connection however long the queue: at a million waiting they are seconds old.
// Offers that come while a write runs or too soon are dropped; the next pass offers newer ones.
import type { DispatchQueue, StoredGroup } from './ports.js';
import type { Statuses, WaitingGroup } from './scheduler/statuses.js';
import { align, mostCommon, mostCounted } from './status-parts.js';

/** Most own texts written at once (the rest follow in later writes). */
const MAX_OWN_WRITES = 5_000;

/** Members of a group whose last slot is looked up to choose the last group it is paired with. */
const SLOT_SAMPLE = 16;

/** After a write that took d, the next starts no sooner than SPACING × d after it ended. */
const SPACING = 2;

export class StatusWriter {
  private lastOwn = new Map<string, string>();
  /** The groups last written, by slot. */
  private lastGroups = new Map<number, StoredGroup>();
  /** The slot of each of lastGroups' members (kept as they change: slotted()). */
  private slotOf = new Map<string, number>();
  /** The statuses last written in full (a reused plan hands the same object over). */
  private lastStatuses: Statuses | null = null;
  /** Whether this process wrote the groups yet (the first write drops groups a previous run left). */
  private groupsWritten = false;

  /** The write in flight, if any. */
  private writing: Promise<void> | null = null;
  /** When the next write may start (ms): status_interval after the last, and SPACING × its duration. */
  private nextAt = -Infinity;
  /** Writes that started, for tests and benchmarks. */
  writes = 0;

  constructor(
    private readonly queue: Pick<DispatchQueue, 'setStatuses' | 'setWaiting'>,
    private readonly dispatcherId: string,
    private readonly intervalMs: number,
    /** The application clock (ms): a write's duration spaces the next. */
    private readonly clock: () => number,
    /** A write failed (the next offer writes again); it never rejects a pass. */
    private readonly onError: (err: unknown, at: Date) => void,
  ) {}

  /**
   * Offers a pass's statuses: written now, in the background, unless a write is in flight, the last one
   * is too recent (file comment), or they are the ones written last (a reused plan).
   */
  offer(st: Statuses, now: Date): void {
    if (this.writing !== null || st === this.lastStatuses || now.getTime() < this.nextAt) return;
    const start = this.clock();
    this.writes++;
    this.writing = this.save(st)
      .catch((err: unknown) => {
        this.onError(err, now);
        return true;
      })
      .then((wrote) => {
        // A pass whose statuses needed no write does not hold the next one back.
        if (wrote) {
          const end = this.clock();
          this.nextAt = Math.max(start + this.intervalMs, end + SPACING * Math.max(0, end - start));
        }
        this.writing = null;
      });
  }

  /** Resolves when no write is in flight (never rejects). */
  async flushed(): Promise<void> {
    while (this.writing !== null) await this.writing;
  }

  /** Writes what changed since the last write; whether anything was written. */
  private async save(st: Statuses): Promise<boolean> {
    const own = new Map<string, string>();
    let capped = false;
    for (const [id, s] of st.ownEntries()) {
      if (this.lastOwn.get(id) === s) continue;
      if (own.size >= MAX_OWN_WRITES) {
        capped = true;
        break;
      }
      own.set(id, s);
    }
    const { groups, track } = this.slotted(st.groups());
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
      track();
      this.lastGroups = new Map(groups.map((g) => [g.slot, g]));
      this.groupsWritten = true;
    }
    // Forget containers no longer given a text, so the map does not grow without bound.
    if (this.lastOwn.size > 2 * st.ownSize() + MAX_OWN_WRITES) {
      const given = new Set<string>();
      for (const [id] of st.ownEntries()) given.add(id);
      for (const id of [...this.lastOwn.keys()]) if (!given.has(id)) this.lastOwn.delete(id);
    }
    if (!capped) this.lastStatuses = st;
    return own.size > 0 || changed.length > 0 || reasonsMoved;
  }

  /**
   * Gives each group a slot, so that as few containers as possible change rows: largest group first,
   * each takes the free slot most of its members held at the last write (a reason whose text changed, as
   * when the container at the head moves, keeps its row), else the lowest free one. Not the slot of its
   * first member: when a new container takes the head, the old head joins the long group behind it, and
   * the long group would take the old head's slot, repointing every member (~4 s at 100k waiting).
   *
   * Without a lookup per member: a group is paired (align()) with the last group most of a sample of its
   * members were in, and only members not paired are looked up. `track()`, once the groups are written,
   * brings slotOf up to date from the same pairing, touching only members that left, came or moved.
   */
  private slotted(groups: WaitingGroup[]): { groups: StoredGroup[]; track: () => void } {
    const taken = new Set<number>();
    const slots = new Array<number | undefined>(groups.length);
    /** Each group's last group (its slot) and where each member was in it (-1: not paired). */
    const pairs = new Array<{ slot: number | undefined; from: Int32Array }>(groups.length);
    const bySize = groups
      .map((_, i) => i)
      .sort((i, j) => groups[j]!.members.length - groups[i]!.members.length);
    for (const i of bySize) {
      const { members } = groups[i]!;
      const slot = this.likelySlot(members);
      const from =
        slot === undefined
          ? new Int32Array(members.length).fill(-1)
          : align(members, this.lastGroups.get(slot)!.members, (id) => this.slotOf.get(id) === slot);
      pairs[i] = { slot, from };
      // Paired members held `slot`; the others are looked up.
      const counts = new Map<number, number>();
      let paired = 0;
      for (let k = 0; k < members.length; k++) {
        if (from[k]! >= 0) {
          paired++;
          continue;
        }
        const held = this.slotOf.get(members[k]!);
        if (held !== undefined && !taken.has(held)) counts.set(held, (counts.get(held) ?? 0) + 1);
      }
      if (paired > 0 && !taken.has(slot!)) counts.set(slot!, (counts.get(slot!) ?? 0) + paired);
      const best = mostCounted(counts);
      if (best !== undefined) {
        taken.add(best);
        slots[i] = best;
      }
    }
    let free = 0;
    const stored = groups.map((g, i) => {
      let slot = slots[i];
      if (slot === undefined) {
        while (taken.has(free)) free++;
        slot = free;
        taken.add(slot);
      }
      return { ...g, slot };
    });
    const track = () => {
      // A group that kept the slot it was paired with keeps its paired members' entries; every other
      // member of the last groups is forgotten, then every member not kept is entered.
      const keeper = new Map<number, number>();
      stored.forEach((g, i) => {
        if (pairs[i]!.slot === g.slot) keeper.set(g.slot, i);
      });
      for (const [slot, last] of this.lastGroups) {
        const i = keeper.get(slot);
        if (i === undefined) {
          for (const id of last.members) this.slotOf.delete(id);
          continue;
        }
        let kept = 0;
        for (const j of pairs[i]!.from) {
          if (j < 0) continue;
          for (; kept < j; kept++) this.slotOf.delete(last.members[kept]!);
          kept = j + 1;
        }
        for (; kept < last.members.length; kept++) this.slotOf.delete(last.members[kept]!);
      }
      stored.forEach((g, i) => {
        const { slot, from } = pairs[i]!;
        g.members.forEach((id, k) => {
          if (slot !== g.slot || from[k]! < 0) this.slotOf.set(id, g.slot);
        });
      });
    };
    return { groups: stored, track };
  }

  /** The slot most of a sample of `members` held at the last write (undefined: none of them was written). */
  private likelySlot(members: readonly string[]): number | undefined {
    const step = Math.max(1, Math.floor(members.length / SLOT_SAMPLE));
    const held: number[] = [];
    for (let k = 0; k < members.length; k += step) {
      const slot = this.slotOf.get(members[k]!);
      if (slot !== undefined) held.push(slot);
    }
    return mostCommon(held);
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
