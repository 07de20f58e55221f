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

/** The part a member's id falls in, as the reader finds it: hashtext(id) & (parts - 1). */
export function partOf(id: string, parts: number): number {
  return hashText(id) & (parts - 1);
}

const rot = (x: number, k: number): number => (x << k) | (x >>> (32 - k));

/** PostgreSQL's hashtext(s) as an unsigned 32-bit number (hash_bytes over s's UTF-8 bytes). */
export function hashText(s: string): number {
  const k = Buffer.from(s, 'utf8');
  let len = k.length;
  let a = (0x9e3779b9 + len + 3923095) | 0;
  let b = a;
  let c = a;
  let i = 0;
  const word = (j: number) => k[j]! | (k[j + 1]! << 8) | (k[j + 2]! << 16) | (k[j + 3]! << 24);
  while (len >= 12) {
    a = (a + word(i)) | 0;
    b = (b + word(i + 4)) | 0;
    c = (c + word(i + 8)) | 0;
    // mix(a, b, c)
    a = (a - c) | 0;
    a ^= rot(c, 4);
    c = (c + b) | 0;
    b = (b - a) | 0;
    b ^= rot(a, 6);
    a = (a + c) | 0;
    c = (c - b) | 0;
    c ^= rot(b, 8);
    b = (b + a) | 0;
    a = (a - c) | 0;
    a ^= rot(c, 16);
    c = (c + b) | 0;
    b = (b - a) | 0;
    b ^= rot(a, 19);
    a = (a + c) | 0;
    c = (c - b) | 0;
    c ^= rot(b, 4);
    b = (b + a) | 0;
    i += 12;
    len -= 12;
  }
  // The last 11 bytes, each added where hash_bytes's fall-through switch adds it (the lowest byte of c is
  // left for the length, which is already in the seed).
  if (len >= 11) c = (c + (k[i + 10]! << 24)) | 0;
  if (len >= 10) c = (c + (k[i + 9]! << 16)) | 0;
  if (len >= 9) c = (c + (k[i + 8]! << 8)) | 0;
  if (len >= 8) b = (b + (k[i + 7]! << 24)) | 0;
  if (len >= 7) b = (b + (k[i + 6]! << 16)) | 0;
  if (len >= 6) b = (b + (k[i + 5]! << 8)) | 0;
  if (len >= 5) b = (b + k[i + 4]!) | 0;
  if (len >= 4) a = (a + (k[i + 3]! << 24)) | 0;
  if (len >= 3) a = (a + (k[i + 2]! << 16)) | 0;
  if (len >= 2) a = (a + (k[i + 1]! << 8)) | 0;
  if (len >= 1) a = (a + k[i]!) | 0;
  // final(a, b, c)
  c ^= b;
  c = (c - rot(b, 14)) | 0;
  a ^= c;
  a = (a - rot(c, 11)) | 0;
  b ^= a;
  b = (b - rot(a, 25)) | 0;
  c ^= b;
  c = (c - rot(b, 16)) | 0;
  a ^= c;
  a = (a - rot(c, 4)) | 0;
  b ^= a;
  b = (b - rot(a, 14)) | 0;
  c ^= b;
  c = (c - rot(b, 24)) | 0;
  return c >>> 0;
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
  /** Members whose pointer this write sets. */
  repointed: string[];
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
    return { write: { row, parts: changed, repointed }, next: { row, byPart, repointed } };
  }

  /**
   * The shifts of position and of higher-priority count most of a sample of `g`'s members share since
   * `last` (0 when none of them was in it). Each sampled member is found in its part of the last write.
   */
  private modeShifts(g: StoredGroup, last: Written): [number, number] {
    const n = g.members.length;
    const step = Math.max(1, Math.floor(n / SAMPLE));
    const mask = last.row.parts - 1;
    const counts = [new Map<number, number>(), new Map<number, number>()];
    const best: [number, number] = [0, 0];
    const most = [0, 0];
    const count = (k: 0 | 1, d: number) => {
      const c = (counts[k]!.get(d) ?? 0) + 1;
      counts[k]!.set(d, c);
      if (c > most[k]! || (c === most[k]! && d < best[k])) [best[k], most[k]] = [d, c];
    };
    for (let i = 0; i < n; i += step) {
      const id = g.members[i]!;
      const part = last.byPart[this.hash(id) & mask]!;
      const j = part.members.indexOf(id);
      if (j < 0) continue;
      count(0, g.positions[i]! - (part.positions[j]! + last.row.positionBase));
      count(1, g.higherAhead[i]! - (part.higherAhead[j]! + last.row.higherAheadBase));
    }
    return best;
  }

  /** Records a successful write: `groups` were written, and the slots not in `slots` were dropped. */
  written(next: Written[], slots: readonly number[]): void {
    const kept = new Set(slots);
    const dropped = [...this.bySlot.keys()].filter((slot) => !kept.has(slot));
    for (const slot of dropped) this.bySlot.delete(slot);
    // A dropped group's members lose their pointer (ON DELETE SET NULL).
    if (dropped.length > 0)
      for (const [id, slot] of this.pointer) if (!kept.has(slot)) this.pointer.delete(id);
    for (const w of next) {
      this.bySlot.set(w.row.slot, w);
      for (const id of w.repointed) this.pointer.set(id, w.row.slot);
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
