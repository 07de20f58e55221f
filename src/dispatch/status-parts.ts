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
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return mostCounted(counts);
}

/** mostCommon's choice from values already counted (value → how many times it occurs). */
export function mostCounted(counts: ReadonlyMap<number, number>): number | undefined {
  let best: number | undefined;
  let most = 0;
  for (const [v, c] of counts) if (c > most || (c === most && v < best!)) [best, most] = [v, c];
  return best;
}

/**
 * Where each of `next`'s ids is in `prev` (-1: not found there): two lists of a status group's members in
 * queue order, this write's and an earlier one's. Ids in the same place pair as they come, without a
 * lookup; past one that differs, an id that `inPrev` says may be in `prev` is looked for further on (the
 * ones passed over left or moved), unless the id after it is the one `prev` has here (it alone moved
 * ahead). Paired indices increase, so the pairs keep their order. Looking ahead costs at most about twice
 * prev's length in all; past that, ids not in place are left unpaired, which is never wrong (an unpaired
 * member is looked up and its part compared), only slower. So a write after the head left, some were
 * placed and some arrived costs one pass over the two lists plus a lookup for each id that differs.
 */
export function align(
  next: readonly string[],
  prev: readonly string[],
  inPrev: (id: string) => boolean,
): Int32Array {
  const from = new Int32Array(next.length).fill(-1);
  const m = prev.length;
  let budget = 2 * m + 64;
  let j = 0;
  for (let i = 0; i < next.length; i++) {
    const id = next[i]!;
    if (j < m && prev[j] === id) {
      from[i] = j++;
      continue;
    }
    if (budget <= 0 || (j < m && next[i + 1] === prev[j]) || !inPrev(id)) continue;
    const end = Math.min(m, j + 1 + budget);
    let k = j + 1;
    while (k < end && prev[k] !== id) k++;
    budget -= k - j;
    if (k < end) {
      from[i] = k;
      j = k + 1;
    }
  }
  return from;
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
  /** The group as planned: its members, positions and counts. */
  members: readonly string[];
  positions: readonly number[];
  higherAhead: readonly number[];
  /** hashText of each member, as members. */
  hashes: Uint32Array;
  /**
   * Ids whose pointer left this slot (cleared by setStatuses, or set to another group's) since this was
   * written: its only members whose pointer may not name its slot (maybe others too: they are not
   * members, and never read here).
   */
  lost: Set<string>;
}

/** A group's write as planned: what it sends, what it leaves, and how many of `lost` the plan saw. */
export interface GroupPlan {
  write: GroupWrite;
  next: Written;
  seen: number;
}

/** Members whose shift since the last write is counted to choose the bases (any choice is correct). */
const SAMPLE = 1024;

/**
 * What one dispatcher's status groups hold in the database, as its writes left them, so that a write
 * sends what differs. Forgotten (clear()) when a write fails: the next one then writes everything.
 *
 * A write's Node work is one pass over the group's lists, without a lookup per member: the group is
 * paired with the last one written in its slot (align()), and a member in its place takes its hash from
 * there (each written group keeps its members' hashes: the one place they are kept), its pointer is known
 * to name the slot (unless it is in the last write's `lost`), and its part is compared by its two numbers
 * only. Members not paired are hashed and looked up, and their parts, and the parts of members that left,
 * are built and compared in full.
 */
export class WrittenGroups {
  private readonly bySlot = new Map<number, Written>();
  /** The slot each container's pointer names (absent: none, or unknown). */
  private readonly pointer = new Map<string, number>();

  /** What writing `g` must send (nothing is recorded until written() is called). */
  plan(g: StoredGroup): GroupPlan {
    const last = this.bySlot.get(g.slot);
    const { slot, members } = g;
    const n = members.length;
    const parts = statusParts(n);
    const mask = parts - 1;
    const from =
      last === undefined
        ? new Int32Array(n).fill(-1)
        : align(members, last.members, (id) => this.pointer.get(id) === slot || last.lost.has(id));
    const hashes = new Uint32Array(n);
    for (let i = 0; i < n; i++) hashes[i] = from[i]! >= 0 ? last!.hashes[from[i]!]! : hashText(members[i]!);
    let positionBase = 0;
    let higherAheadBase = 0;
    if (last !== undefined) {
      // The bases move by the shift most members share: their stored values stay.
      const [dp, dh] = this.modeShifts(g, from, hashes, last);
      positionBase = last.row.positionBase + dp;
      higherAheadBase = last.row.higherAheadBase + dh;
    }
    // The parts that may differ from the last write's: those of members not paired with it or whose
    // stored numbers changed, and of the last write's members passed over (they left or moved). With
    // another number of parts, all.
    const same = last !== undefined && last.row.parts === parts;
    const dirty = new Uint8Array(parts).fill(same ? 0 : 1);
    const repointed: string[] = [];
    let kept = 0; // the last write's members before `kept` were paired or passed over
    for (let i = 0; i < n; i++) {
      const j = from[i]!;
      if (j < 0) {
        dirty[hashes[i]! & mask] = 1;
        if (this.pointer.get(members[i]!) !== slot) repointed.push(members[i]!);
        continue;
      }
      if (last!.lost.size > 0 && last!.lost.has(members[i]!) && this.pointer.get(members[i]!) !== slot)
        repointed.push(members[i]!);
      if (!same) continue;
      for (; kept < j; kept++) dirty[last.hashes[kept]! & mask] = 1;
      kept = j + 1;
      if (
        g.positions[i]! - positionBase !== last.positions[j]! - last.row.positionBase ||
        g.higherAhead[i]! - higherAheadBase !== last.higherAhead[j]! - last.row.higherAheadBase
      )
        dirty[hashes[i]! & mask] = 1;
    }
    if (same) for (; kept < last.members.length; kept++) dirty[last.hashes[kept]! & mask] = 1;
    // The parts that may differ are built anew; the others are the last write's, as they are.
    const byPart: PartRow[] = Array.from({ length: parts }, (_, part) =>
      dirty[part] === 0 ? last!.byPart[part]! : { part, members: [], positions: [], higherAhead: [] },
    );
    for (let i = 0; i < n; i++) {
      const part = hashes[i]! & mask;
      if (dirty[part] === 0) continue;
      const p = byPart[part]!;
      p.members.push(members[i]!);
      p.positions.push(g.positions[i]! - positionBase);
      p.higherAhead.push(g.higherAhead[i]! - higherAheadBase);
    }
    const changed = byPart.filter((p) => dirty[p.part] === 1 && !(same && samePart(p, last.byPart[p.part]!)));
    const row = { slot, reason: g.reason, parts, positionBase, higherAheadBase };
    return {
      write: { row, parts: changed, repointed },
      next: {
        row,
        byPart,
        // Copies (a memcpy each): the caller may change its arrays after the write.
        members: members.slice(),
        positions: g.positions.slice(),
        higherAhead: g.higherAhead.slice(),
        hashes,
        lost: new Set(),
      },
      seen: last?.lost.size ?? 0,
    };
  }

  /**
   * The shifts of position and of higher-priority count most of a sample of `g`'s members share since
   * `last` (0 when none of them was in it). A sampled member not paired with the last write (`from`) is
   * looked for in its part of it.
   */
  private modeShifts(g: StoredGroup, from: Int32Array, hashes: Uint32Array, last: Written): [number, number] {
    const step = Math.max(1, Math.floor(g.members.length / SAMPLE));
    const mask = last.row.parts - 1;
    const dp: number[] = [];
    const dh: number[] = [];
    for (let i = 0; i < g.members.length; i += step) {
      if (from[i]! >= 0) {
        dp.push(g.positions[i]! - last.positions[from[i]!]!);
        dh.push(g.higherAhead[i]! - last.higherAhead[from[i]!]!);
        continue;
      }
      const part = last.byPart[hashes[i]! & mask]!;
      const j = part.members.indexOf(g.members[i]!);
      if (j < 0) continue;
      dp.push(g.positions[i]! - (part.positions[j]! + last.row.positionBase));
      dh.push(g.higherAhead[i]! - (part.higherAhead[j]! + last.row.higherAheadBase));
    }
    return [mostCommon(dp) ?? 0, mostCommon(dh) ?? 0];
  }

  /** Records a successful write: plan()'s groups were written, and the slots not in `slots` were dropped. */
  written(plans: GroupPlan[], slots: readonly number[]): void {
    const kept = new Set(slots);
    const dropped = [...this.bySlot.keys()].filter((slot) => !kept.has(slot));
    for (const slot of dropped) this.bySlot.delete(slot);
    // A dropped group's members lose their pointer (ON DELETE SET NULL).
    if (dropped.length > 0)
      for (const [id, slot] of this.pointer) if (!kept.has(slot)) this.pointer.delete(id);
    for (const { write, next } of plans) for (const id of write.repointed) this.moved(id, next.row.slot);
    for (const { next, seen } of plans) {
      // What left the slot while the write ran (a plan saw `seen` of the last write's lost) is still lost.
      const last = this.bySlot.get(next.row.slot);
      if (last !== undefined && last.lost.size > seen) {
        for (const id of [...last.lost].slice(seen))
          if (this.pointer.get(id) !== next.row.slot) next.lost.add(id);
      }
      this.bySlot.set(next.row.slot, next);
    }
    // Ids no group holds any more (a container that left the queue keeps its pointer: its text is then
    // its own) are forgotten now and then, so that the map does not grow without bound over a long run.
    let members = 0;
    for (const w of this.bySlot.values()) members += w.members.length;
    const bound = 2 * members + 1024;
    if (this.pointer.size > bound) {
      const held = new Set<string>();
      for (const w of this.bySlot.values()) for (const id of w.members) held.add(id);
      for (const id of [...this.pointer.keys()]) if (!held.has(id)) this.pointer.delete(id);
    }
  }

  /** Containers given a text of their own: their pointer is cleared (setStatuses). */
  unpointed(ids: Iterable<string>): void {
    for (const id of ids) this.moved(id, undefined);
  }

  /** `id`'s pointer names `slot` now (undefined: none); the group whose slot it named lost it. */
  private moved(id: string, slot: number | undefined): void {
    const was = this.pointer.get(id);
    if (was !== undefined && was !== slot) this.bySlot.get(was)?.lost.add(id);
    if (slot === undefined) this.pointer.delete(id);
    else this.pointer.set(id, slot);
  }

  /** Forgets everything: the next write of each group sends all of it. */
  clear(): void {
    this.bySlot.clear();
    this.pointer.clear();
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
