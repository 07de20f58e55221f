// Queue order (DESIGN §6.2 rule 1): Locked before Queued, then priority descending, then queue time
// ascending, then id. The id tie-break makes the order total, so equal-priority containers keep their
// relative order from pass to pass and never flap.
//
// Fair sharing (issue 10): among Queued containers of one priority, owners take turns instead of the
// oldest going first: the next container is the oldest of the owner with the fewest containers placed
// (already running or assigned, plus those ordered before it in this pass). One owner's thousand
// containers then do not keep another owner's single container waiting. Locked containers keep their
// order: they are claimed already. Equal priorities never evict one another (rule 5 only takes places
// for a higher priority), so a changing turn order never makes containers flap.
import type { SnapshotContainer } from './types.js';

/** Returns the waiting containers in the order the scheduler considers them. */
export function queueOrder(
  waiting: SnapshotContainer[],
  fairShare: { placed: ReadonlyMap<string, number> } | null = null,
): SnapshotContainer[] {
  // A comparator sort of a million containers costs ~20M JavaScript calls. Instead: a counting sort
  // into (Locked, priority) buckets, then inside each bucket a native numeric sort of packed
  // (queue second, index) keys, and a comparator only for the few containers queued in the same second.
  const n = waiting.length;
  const BUCKETS = 2 * 1024;
  const bucketOf = new Uint16Array(n);
  const start = new Uint32Array(BUCKETS + 1);
  const times = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const c = waiting[i]!;
    const pri = Math.min(Math.max(Math.floor(c.priority), 0), 1023);
    const b = (c.state === 'Locked' ? 0 : 1024) + (1023 - pri);
    bucketOf[i] = b;
    start[b + 1]!++;
    times[i] = c.queuedAt.getTime();
  }
  for (let b = 0; b < BUCKETS; b++) start[b + 1]! += start[b]!;
  const order = new Uint32Array(n);
  const next = start.slice(0, BUCKETS);
  for (let i = 0; i < n; i++) order[next[bucketOf[i]!]!++] = i;
  const byTimeThenId = (a: number, b: number): number => {
    const ta = times[a]!;
    const tb = times[b]!;
    if (ta !== tb) return ta < tb ? -1 : 1;
    const x = waiting[a]!.id;
    const y = waiting[b]!.id;
    return x < y ? -1 : x > y ? 1 : 0;
  };
  for (let b = 0; b < BUCKETS; b++) {
    if (start[b + 1]! - start[b]! > 1)
      sortRange(order.subarray(start[b]!, start[b + 1]!), times, byTimeThenId);
  }
  const out = new Array<SnapshotContainer>(n);
  for (let i = 0; i < n; i++) out[i] = waiting[order[i]!]!;
  if (fairShare !== null)
    for (let b = 1024; b < BUCKETS; b++)
      if (start[b + 1]! - start[b]! > 1) takeTurns(out, start[b]!, start[b + 1]!, fairShare.placed);
  return out;
}

/** Reorders out[from, to) (one priority, in queue-time order) so that owners take turns (file comment). */
function takeTurns(
  out: SnapshotContainer[],
  from: number,
  to: number,
  placed: ReadonlyMap<string, number>,
): void {
  const first = out[from]!.owner;
  let i = from + 1;
  while (i < to && out[i]!.owner === first) i++;
  if (i === to) return; // one owner: nothing to share
  const byOwner = new Map<string, SnapshotContainer[]>();
  for (let k = from; k < to; k++) {
    const c = out[k]!;
    const list = byOwner.get(c.owner);
    if (list === undefined) byOwner.set(c.owner, [c]);
    else list.push(c);
  }
  // A turn is (containers the owner has placed, position of its oldest waiting container): the fewest
  // first, then the one queued earliest. A binary heap over owners.
  interface Turn {
    list: SnapshotContainer[];
    next: number;
    count: number;
    rank: number;
  }
  const rankOf = new Map<SnapshotContainer, number>();
  for (let k = from; k < to; k++) rankOf.set(out[k]!, k);
  const heap: Turn[] = [];
  const before = (a: Turn, b: Turn) => a.count < b.count || (a.count === b.count && a.rank < b.rank);
  const push = (t: Turn) => {
    heap.push(t);
    for (let j = heap.length - 1; j > 0;) {
      const p = (j - 1) >> 1;
      if (!before(heap[j]!, heap[p]!)) break;
      [heap[j], heap[p]] = [heap[p]!, heap[j]!];
      j = p;
    }
  };
  const pop = (): Turn => {
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      for (let j = 0; ;) {
        const l = 2 * j + 1;
        const r = l + 1;
        let m = j;
        if (l < heap.length && before(heap[l]!, heap[m]!)) m = l;
        if (r < heap.length && before(heap[r]!, heap[m]!)) m = r;
        if (m === j) break;
        [heap[j], heap[m]] = [heap[m]!, heap[j]!];
        j = m;
      }
    }
    return top;
  };
  for (const [owner, list] of byOwner)
    push({ list, next: 0, count: placed.get(owner) ?? 0, rank: rankOf.get(list[0]!)! });
  for (let k = from; k < to; k++) {
    const t = pop();
    out[k] = t.list[t.next++]!;
    if (t.next < t.list.length) {
      t.count++;
      t.rank = rankOf.get(t.list[t.next]!)!;
      push(t);
    }
  }
}

/** Sorts container indices by queue time, then id. */
function sortRange(range: Uint32Array, times: Float64Array, cmp: (a: number, b: number) => number): void {
  const len = range.length;
  let lo = Infinity;
  let hi = -Infinity;
  for (let j = 0; j < len; j++) {
    const sec = Math.floor(times[range[j]!]! / 1000);
    if (sec < lo) lo = sec;
    if (sec > hi) hi = sec;
  }
  const shift = 2 ** Math.ceil(Math.log2(len));
  // Packed keys must stay exact in a double; otherwise (a span of centuries) sort the slow way.
  if (len < 64 || (hi - lo + 1) * shift > 2 ** 53) {
    range.sort(cmp);
    return;
  }
  const keys = new Float64Array(len);
  for (let j = 0; j < len; j++) keys[j] = (Math.floor(times[range[j]!]! / 1000) - lo) * shift + j;
  keys.sort();
  const sorted = new Uint32Array(len);
  for (let j = 0; j < len; j++) {
    const k = keys[j]!;
    sorted[j] = range[k - Math.floor(k / shift) * shift]!;
  }
  // Same second: order by the exact time and id.
  let runStart = 0;
  for (let j = 1; j <= len; j++) {
    if (j === len || Math.floor(keys[j]! / shift) !== Math.floor(keys[runStart]! / shift)) {
      if (j - runStart > 1) sorted.subarray(runStart, j).sort(cmp);
      runStart = j;
    }
  }
  range.set(sorted);
}

/**
 * Counts, for each container in queue order, how many containers ahead of it have a strictly higher
 * priority (for status texts). A Fenwick tree over priorities keeps this O(log P) per container.
 */
export class AheadCounter {
  private readonly tree: Int32Array;
  private readonly size: number;

  constructor(maxPriority = 1000) {
    this.size = maxPriority + 2;
    this.tree = new Int32Array(this.size + 1);
  }

  private index(priority: number): number {
    return Math.min(Math.max(Math.floor(priority), 0), this.size - 1) + 1;
  }

  add(priority: number): void {
    for (let i = this.index(priority); i <= this.size; i += i & -i) this.tree[i]!++;
  }

  /** How many added priorities are strictly greater than `priority`. */
  higherThan(priority: number): number {
    let total = 0;
    let atMost = 0;
    for (let i = this.size; i > 0; i -= i & -i) total += this.tree[i]!;
    for (let i = this.index(priority); i > 0; i -= i & -i) atMost += this.tree[i]!;
    return total - atMost;
  }
}
