// The layout of a status group's parts (migrations 210, 224), and what a write of a group must send.
// A group's members are split by a hash of their id into `parts` parts, a power of two of ~64 members
// each, and a reader finds a container's part by `hashtext(id) & (parts - 1)`. Each member's queue
// position and count of higher-priority containers ahead are stored less the group's two bases
// (position_base, higher_ahead_base): when the head of a long queue moves, every position moves by the
// same amount, so the bases move and the parts stay. The writer (pg-queue.ts setWaiting) keeps what it
// wrote (WrittenGroups) and sends only the parts that changed and the members that moved to another
// group: a pass in which the head left and one container arrived writes the group's row and two parts,
// not the whole queue. hashText is PostgreSQL's hashtext (src/common/hashfn.c hash_bytes, Bob Jenkins'
// lookup3, little-endian) on the id's UTF-8 bytes, as it hashes text under a deterministic collation; a
// test compares it with the server's on random ids.
import type { StoredGroup } from './ports.js';

/** Members a part holds at most, on average. */
const PART_MEMBERS = 64;

/** The parts of a group of `members` members: the least power of two with ≤ 64 members a part. */
export function statusParts(members: number): number {
  let parts = 1;
  while (parts * PART_MEMBERS < members) parts *= 2;
  return parts;
}

/** lookup3's mix() and final() as steps over h = [a, b, c]: the rotation of each step. */
const MIX = [4, 6, 8, 16, 19, 4];
const FINAL = [14, 11, 25, 16, 4, 14, 24];

const rot = (x: number, k: number): number => (x << k) | (x >>> (32 - k));

/** PostgreSQL's hashtext(s) as an unsigned 32-bit number (hash_bytes over s's UTF-8 bytes). */
export function hashText(s: string): number {
  const k = Buffer.from(s, 'utf8');
  // Int32Array: every sum wraps at 32 bits, as uint32 arithmetic does in C.
  const h = new Int32Array(3).fill(0x9e3779b9 + k.length + 3923095);
  let i = 0;
  for (; k.length - i >= 12; i += 12) {
    for (let w = 0; w < 3; w++) h[w]! += k.readInt32LE(i + 4 * w);
    // mix(a, b, c): step t is x -= z; x ^= rot(z, r); z += y, with x, y, z = a, b, c turned t times.
    for (let t = 0; t < MIX.length; t++) {
      const [x, y, z] = [t % 3, (t + 1) % 3, (t + 2) % 3];
      h[x]! -= h[z]!;
      h[x]! ^= rot(h[z]!, MIX[t]!);
      h[z]! += h[y]!;
    }
  }
  // The last 11 bytes: byte n into a (n < 4), b (n < 8) or c, shifted by its place in that word; c's lowest
  // byte is left for the length, which is in the seed.
  for (let n = 0; n < k.length - i; n++) h[n >> 2]! += k[i + n]! << (n < 8 ? 8 * (n & 3) : 8 * (n - 7));
  // final(a, b, c): step t is x ^= z; x -= rot(z, r), with x, z = c, b turned t times.
  for (let t = 0; t < FINAL.length; t++) {
    const [x, z] = [(t + 2) % 3, (t + 1) % 3];
    h[x]! ^= h[z]!;
    h[x]! -= rot(h[z]!, FINAL[t]!);
  }
  return h[2]! >>> 0;
}

/**
 * The value that occurs most often (the lowest of those tied), or undefined for none: the slot most of a
 * status group's members held (status-writer.ts), the shift most of them share (the bases, below).
 */
export function mostCommon(values: Iterable<number>): number | undefined {
  const counts = new Map<number, number>();
  let best: number | undefined;
  let most = 0;
  for (const v of values) {
    const c = (counts.get(v) ?? 0) + 1;
    counts.set(v, c);
    if (c > most || (c === most && v < best!)) [best, most] = [v, c];
  }
  return best;
}

/** One part of a group as stored: members in queue order, their positions and counts less the bases. */
export interface PartRow {
  part: number;
  members: string[];
  positions: number[];
  higherAhead: number[];
}

/** A group's row as stored. */
export interface GroupRow {
  slot: number;
  reason: string;
  parts: number;
  positionBase: number;
  higherAheadBase: number;
}

/** What a group's write sends: its row, the parts that changed, and its members that point elsewhere. */
export interface GroupWrite {
  row: GroupRow;
  parts: PartRow[];
  repointed: string[];
}

interface Written {
  row: GroupRow;
  byPart: PartRow[];
}

/** Members whose shift since the last write is counted to choose the bases (any choice is correct). */
const SAMPLE = 1024;

/**
 * What one dispatcher's status groups hold in the database, as its writes left them, so that a write
 * sends what differs. Forgotten (clear()) when a write fails: the next one then writes everything.
 */
export class WrittenGroups {
  private readonly bySlot = new Map<number, Written>();
  /** The slot each container's pointer names (absent: none, or unknown). */
  private readonly pointer = new Map<string, number>();
  private readonly hashes = new Map<string, number>();

  /** What writing `g` must send (nothing is recorded until written() is called). */
  plan(g: StoredGroup): { write: GroupWrite; next: Written } {
    const last = this.bySlot.get(g.slot);
    const n = g.members.length;
    const parts = statusParts(n);
    let positionBase = 0;
    let higherAheadBase = 0;
    if (last !== undefined) {
      // The bases move by the shift most members share: their stored values stay.
      const [dp, dh] = this.modeShifts(g, last);
      positionBase = last.row.positionBase + dp;
      higherAheadBase = last.row.higherAheadBase + dh;
    }
    const byPart: PartRow[] = Array.from({ length: parts }, (_, part) => ({
      part,
      members: [],
      positions: [],
      higherAhead: [],
    }));
    const repointed: string[] = [];
    for (let i = 0; i < n; i++) {
      const id = g.members[i]!;
      const p = byPart[this.hash(id) & (parts - 1)]!;
      p.members.push(id);
      p.positions.push(g.positions[i]! - positionBase);
      p.higherAhead.push(g.higherAhead[i]! - higherAheadBase);
      if (this.pointer.get(id) !== g.slot) repointed.push(id);
    }
    const same = last !== undefined && last.row.parts === parts;
    const changed = same ? byPart.filter((p) => !samePart(p, last.byPart[p.part]!)) : byPart;
    const row = { slot: g.slot, reason: g.reason, parts, positionBase, higherAheadBase };
    return { write: { row, parts: changed, repointed }, next: { row, byPart } };
  }

  /**
   * The shifts of position and of higher-priority count most of a sample of `g`'s members share since
   * `last` (0 when none of them was in it). Each sampled member is found in its part of the last write.
   */
  private modeShifts(g: StoredGroup, last: Written): [number, number] {
    const step = Math.max(1, Math.floor(g.members.length / SAMPLE));
    const mask = last.row.parts - 1;
    const dp: number[] = [];
    const dh: number[] = [];
    for (let i = 0; i < g.members.length; i += step) {
      const id = g.members[i]!;
      const part = last.byPart[this.hash(id) & mask]!;
      const j = part.members.indexOf(id);
      if (j < 0) continue;
      dp.push(g.positions[i]! - (part.positions[j]! + last.row.positionBase));
      dh.push(g.higherAhead[i]! - (part.higherAhead[j]! + last.row.higherAheadBase));
    }
    return [mostCommon(dp) ?? 0, mostCommon(dh) ?? 0];
  }

  /** Records a successful write: plan()'s groups were written, and the slots not in `slots` were dropped. */
  written(plans: { write: GroupWrite; next: Written }[], slots: readonly number[]): void {
    const kept = new Set(slots);
    const dropped = [...this.bySlot.keys()].filter((slot) => !kept.has(slot));
    for (const slot of dropped) this.bySlot.delete(slot);
    // A dropped group's members lose their pointer (ON DELETE SET NULL).
    if (dropped.length > 0)
      for (const [id, slot] of this.pointer) if (!kept.has(slot)) this.pointer.delete(id);
    for (const { write, next } of plans) {
      this.bySlot.set(next.row.slot, next);
      for (const id of write.repointed) this.pointer.set(id, next.row.slot);
    }
    // Ids no group holds any more (a container that left the queue keeps its pointer: its text is then
    // its own) are forgotten now and then, so that the maps do not grow without bound over a long run.
    let members = 0;
    for (const w of this.bySlot.values()) for (const p of w.byPart) members += p.members.length;
    if (this.pointer.size > 2 * members + 1024 || this.hashes.size > 2 * members + 1024) {
      const held = new Set<string>();
      for (const w of this.bySlot.values())
        for (const p of w.byPart) for (const id of p.members) held.add(id);
      for (const id of [...this.pointer.keys()]) if (!held.has(id)) this.pointer.delete(id);
      for (const id of [...this.hashes.keys()]) if (!held.has(id)) this.hashes.delete(id);
    }
  }

  /** Containers given a text of their own: their pointer is cleared (setStatuses). */
  unpointed(ids: Iterable<string>): void {
    for (const id of ids) this.pointer.delete(id);
  }

  /** Forgets everything: the next write of each group sends all of it. */
  clear(): void {
    this.bySlot.clear();
    this.pointer.clear();
  }

  private hash(id: string): number {
    let h = this.hashes.get(id);
    if (h === undefined) this.hashes.set(id, (h = hashText(id)));
    return h;
  }
}

function samePart(a: PartRow, b: PartRow): boolean {
  const n = a.members.length;
  if (n !== b.members.length) return false;
  for (let i = 0; i < n; i++)
    if (
      a.members[i] !== b.members[i] ||
      a.positions[i] !== b.positions[i] ||
      a.higherAhead[i] !== b.higherAhead[i]
    )
      return false;
  return true;
}
