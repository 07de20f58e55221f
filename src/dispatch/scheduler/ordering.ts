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
import { matchedIndex, type Match, type Spare } from './kept.js';
import type { SnapshotContainer } from './types.js';

/** Returns the waiting containers in the order the scheduler considers them. */
export function queueOrder(
  waiting: SnapshotContainer[],
  fairShare: { placed: ReadonlyMap<string, number> } | null = null,
): SnapshotContainer[] {
  const order = queueOrderIndex(waiting, fairShare);
  const out = new Array<SnapshotContainer>(order.length);
  for (let i = 0; i < order.length; i++) out[i] = waiting[order[i]!]!;
  return out;
}

/**
 * The queue order as indices into `waiting`: element i is the index of the i-th container to consider.
 * Callers that keep per-container data in input order (placement.ts) read it through these indices
 * instead of looking it up again in queue order, which visits the containers in random memory order.
 * `times` (by index, filled here: each container's queue time in ms) lets a caller keep them.
 */
export function queueOrderIndex(
  waiting: SnapshotContainer[],
  fairShare: { placed: ReadonlyMap<string, number> } | null = null,
  times = new Float64Array(waiting.length),
): Uint32Array {
  const q = sortQueue(waiting);
  times.set(q.times);
  if (fairShare !== null) takeTurnsAll(q, q.order, waiting, fairShare.placed);
  return q.order;
}

const BUCKETS = 2 * 1024;

/** A container's (Locked, priority) bucket: the first keys of queue order, smallest first. */
function bucketOf(c: SnapshotContainer): number {
  const pri = Math.min(Math.max(Math.floor(c.priority), 0), 1023);
  return (c.state === 'Locked' ? 0 : 1024) + (1023 - pri);
}

/**
 * The queue order before fair sharing's turns (indices into the waiting list it was sorted for), with what
 * updating it needs: an incremental planner keeps one across passes (kept.ts) and merges the containers
 * that arrived, changed or left into it (updateQueue) instead of sorting them all again.
 */
export interface SortedQueue {
  readonly order: Uint32Array;
  /**
   * The containers in that order (read in order, they are not looked up at random through `order`); null
   * when not asked for (a pass from scratch, which reads the queue once, reads it through `order`).
   */
  readonly byQueue: SnapshotContainer[] | null;
  /** Queue times by index (ms). */
  readonly times: Float64Array;
  /** order[start[b], start[b + 1]) is bucket b. */
  readonly start: Uint32Array;
  /** Buckets where more than one owner may wait (a bucket stays marked after the others left). */
  readonly mixed: Uint8Array;
  readonly firstOwner: (string | undefined)[];
  /** Whether every queue time is a number (a NaN has no place in a merge: then it sorts again). */
  readonly exact: boolean;
}

/** Sorts `waiting` into queue order, without fair sharing's turns; `inOrder`: with `byQueue`. */
export function sortQueue(waiting: SnapshotContainer[], inOrder = false): SortedQueue {
  // A comparator sort of a million containers costs ~20M JavaScript calls. Instead: a counting sort
  // into (Locked, priority) buckets, then inside each bucket a native numeric sort of packed
  // (queue time, index) keys, and a comparator only for the few containers queued at the same time.
  const n = waiting.length;
  const times = new Float64Array(n);
  const buckets = new Uint16Array(n);
  const start = new Uint32Array(BUCKETS + 1);
  // Fair sharing reorders only buckets with more than one owner: found here, in memory order.
  const firstOwner = new Array<string | undefined>(BUCKETS);
  const mixed = new Uint8Array(BUCKETS);
  let exact = true;
  for (let i = 0; i < n; i++) {
    const c = waiting[i]!;
    const b = bucketOf(c);
    buckets[i] = b;
    const first = firstOwner[b];
    if (first === undefined) firstOwner[b] = c.owner;
    else if (first !== c.owner) mixed[b] = 1;
    start[b + 1]!++;
    const t = c.queuedAt.getTime();
    times[i] = t;
    if (Number.isNaN(t)) exact = false;
  }
  for (let b = 0; b < BUCKETS; b++) start[b + 1]! += start[b]!;
  const order = new Uint32Array(n);
  const next = start.slice(0, BUCKETS);
  for (let i = 0; i < n; i++) order[next[buckets[i]!]!++] = i;
  for (let b = 0; b < BUCKETS; b++) {
    if (start[b + 1]! - start[b]! > 1) sortRange(order.subarray(start[b]!, start[b + 1]!), times, waiting);
  }
  let byQueue: SnapshotContainer[] | null = null;
  if (inOrder) {
    byQueue = new Array<SnapshotContainer>(n);
    for (let k = 0; k < n; k++) byQueue[k] = waiting[order[k]!]!;
  }
  return { order, byQueue, times, start, mixed, firstOwner, exact };
}

/**
 * The sorted queue of `waiting` from `q`, the sorted queue of `before`, given how the two lists match
 * (kept.ts matchLists: a container matched is the same object, so it keeps its place in queue order; the
 * added ones are new). Gives the order sortQueue(waiting) gives, at the cost of a copy of the order and a
 * binary search per added container, with `from[k]`: the position in q's order that position k comes
 * from (-1: added). Null when `q` cannot be updated (a queue time that is not a number, or no `byQueue`). Its arrays come
 * from `spare` (kept.ts): they are valid until the pass after next.
 */
export function updateQueue(
  q: SortedQueue,
  before: readonly SnapshotContainer[],
  waiting: readonly SnapshotContainer[],
  m: Match,
  spare: Spare,
): { queue: SortedQueue; from: Int32Array } | null {
  const was = q.byQueue;
  if (!q.exact || was === null) return null;
  const n = waiting.length;
  const times = spare.f64('times', n);
  const count = new Int32Array(BUCKETS);
  for (let b = 0; b < BUCKETS; b++) count[b] = q.start[b + 1]! - q.start[b]!;
  // Matched runs keep their times; the gaps between them are the containers gone.
  let end = 0;
  for (let r = 0; r <= m.from.length; r++) {
    const gapTo = r < m.from.length ? m.from[r]! : before.length;
    for (let i = end; i < gapTo; i++) count[bucketOf(before[i]!)]!--;
    if (r === m.from.length) break;
    times.set(q.times.subarray(m.from[r]!, m.to[r]!), m.from[r]! + m.shift[r]!);
    end = m.to[r]!;
  }
  const firstOwner = q.firstOwner.slice();
  const mixed = q.mixed.slice();
  // Each added container with its bucket and its place in the old order (first element after it).
  const adds: { index: number; bucket: number; time: number; id: string; at: number }[] = [];
  for (const j of m.added) {
    const c = waiting[j]!;
    const t = c.queuedAt.getTime();
    if (Number.isNaN(t)) return null;
    times[j] = t;
    const b = bucketOf(c);
    count[b]!++;
    const first = firstOwner[b];
    if (first === undefined) firstOwner[b] = c.owner;
    else if (first !== c.owner) mixed[b] = 1;
    // The first old element of the bucket that comes after c (by queue time, then id).
    let lo = q.start[b]!;
    let hi = q.start[b + 1]!;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const te = q.times[q.order[mid]!]!;
      const after = te > t || (te === t && was[mid]!.id > c.id);
      if (after) hi = mid;
      else lo = mid + 1;
    }
    adds.push({ index: j, bucket: b, time: t, id: c.id, at: lo });
  }
  adds.sort((x, y) =>
    x.at !== y.at
      ? x.at - y.at
      : x.bucket !== y.bucket
        ? x.bucket - y.bucket
        : x.time !== y.time
          ? x.time - y.time
          : x.id < y.id
            ? -1
            : x.id > y.id
              ? 1
              : 0,
  );
  // One pass over the old order, in order: nothing is read at random.
  const order = spare.u32('order', n);
  const byQueue = spare.list<SnapshotContainer>('byQueue', n);
  const from = spare.i32('from', n);
  let k = 0;
  let a = 0;
  const old = q.order;
  for (let i = 0; i <= old.length; i++) {
    for (; a < adds.length && adds[a]!.at === i; a++, k++) {
      const j = adds[a]!.index;
      order[k] = j;
      byQueue[k] = waiting[j]!;
      from[k] = -1;
    }
    if (i === old.length) break;
    const j = matchedIndex(m, old[i]!);
    if (j < 0) continue;
    order[k] = j;
    byQueue[k] = was[i]!;
    from[k++] = i;
  }
  const start = new Uint32Array(BUCKETS + 1);
  for (let b = 0; b < BUCKETS; b++) start[b + 1] = start[b]! + count[b]!;
  return { queue: { order, byQueue, times, start, mixed, firstOwner, exact: true }, from };
}

/** Whether fair sharing's turns may change `q`'s order (a bucket where more than one owner waits). */
export function takesTurns(q: SortedQueue): boolean {
  for (let b = 1024; b < BUCKETS; b++) if (q.mixed[b] === 1 && q.start[b + 1]! - q.start[b]! > 1) return true;
  return false;
}

/**
 * The order to consider `waiting` in: `q`'s (a copy, for the caller to reorder) with fair sharing's turns
 * taken in each bucket where more than one owner waits.
 */
export function turnOrder(
  q: SortedQueue,
  waiting: SnapshotContainer[],
  fairShare: { placed: ReadonlyMap<string, number> } | null,
): Uint32Array {
  const order = q.order.slice();
  if (fairShare !== null) takeTurnsAll(q, order, waiting, fairShare.placed);
  return order;
}

function takeTurnsAll(
  q: SortedQueue,
  order: Uint32Array,
  waiting: SnapshotContainer[],
  placed: ReadonlyMap<string, number>,
): void {
  for (let b = 1024; b < BUCKETS; b++)
    if (q.mixed[b] === 1 && q.start[b + 1]! - q.start[b]! > 1)
      takeTurns(order, waiting, q.start[b]!, q.start[b + 1]!, placed);
}

/**
 * Reorders order[from, to) (indices into `waiting` of one priority, in queue-time order) so that owners
 * take turns (file comment). Called only when more than one owner waits there.
 */
function takeTurns(
  order: Uint32Array,
  waiting: SnapshotContainer[],
  from: number,
  to: number,
  placed: ReadonlyMap<string, number>,
): void {
  // Each owner's waiting containers as their positions in order[from, to), oldest first.
  const byOwner = new Map<string, number[]>();
  for (let k = from; k < to; k++) {
    const owner = waiting[order[k]!]!.owner;
    const list = byOwner.get(owner);
    if (list === undefined) byOwner.set(owner, [k]);
    else list.push(k);
  }
  // A turn is (containers the owner has placed, position of its oldest waiting container): the fewest
  // first, then the one queued earliest. A binary heap over owners.
  interface Turn {
    list: number[];
    next: number;
    count: number;
  }
  const heap: Turn[] = [];
  const before = (a: Turn, b: Turn) =>
    a.count < b.count || (a.count === b.count && a.list[a.next]! < b.list[b.next]!);
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
  for (const [owner, list] of byOwner) push({ list, next: 0, count: placed.get(owner) ?? 0 });
  const range = order.slice(from, to);
  for (let k = from; k < to; k++) {
    const t = pop();
    order[k] = range[t.list[t.next++]! - from]!;
    if (t.next < t.list.length) {
      t.count++;
      push(t);
    }
  }
}

/** Sorts indices into `waiting` by queue time (`times`, by index), then id. */
function sortRange(range: Uint32Array, times: Float64Array, waiting: SnapshotContainer[]): void {
  const cmp = (a: number, b: number): number => {
    const ta = times[a]!;
    const tb = times[b]!;
    if (ta !== tb) return ta < tb ? -1 : 1;
    const x = waiting[a]!.id;
    const y = waiting[b]!.id;
    return x < y ? -1 : x > y ? 1 : 0;
  };
  const len = range.length;
  let lo = Infinity;
  let hi = -Infinity;
  for (let j = 0; j < len; j++) {
    const t = times[range[j]!]!;
    if (t < lo) lo = t;
    if (t > hi) hi = t;
  }
  const shift = 2 ** Math.ceil(Math.log2(len));
  // Packed keys (queue time in ms, else in seconds) must stay exact in a double; otherwise (a span of
  // centuries) sort the slow way.
  const exact = (u: number) => (Math.floor(hi / u) - Math.floor(lo / u) + 1) * shift <= 2 ** 53;
  const unit = exact(1) ? 1 : exact(1000) ? 1000 : 0;
  if (len < 64 || unit === 0) {
    range.sort(cmp);
    return;
  }
  const base = Math.floor(lo / unit);
  const keys = new Float64Array(len);
  for (let j = 0; j < len; j++) keys[j] = (Math.floor(times[range[j]!]! / unit) - base) * shift + j;
  keys.sort();
  const sorted = new Uint32Array(len);
  for (let j = 0; j < len; j++) {
    const k = keys[j]!;
    sorted[j] = range[k - Math.floor(k / shift) * shift]!;
  }
  // Same packed time: order by the exact time and id. The runs are short: an insertion sort in place,
  // reading each id once (every read of a container is a cache miss at a million of them).
  const ids: string[] = [];
  let runStart = 0;
  for (let j = 1; j <= len; j++) {
    if (j === len || Math.floor(keys[j]! / shift) !== Math.floor(keys[runStart]! / shift)) {
      if (j - runStart > 32) sorted.subarray(runStart, j).sort(cmp);
      else if (j - runStart > 1) sortRun(sorted, runStart, j, times, waiting, ids);
      runStart = j;
    }
  }
  range.set(sorted);
}

/** Insertion sort of a[from, to) by (time, id); `ids` is scratch space for the run's ids. */
function sortRun(
  a: Uint32Array,
  from: number,
  to: number,
  times: Float64Array,
  waiting: SnapshotContainer[],
  ids: string[],
): void {
  for (let i = from; i < to; i++) ids[i - from] = waiting[a[i]!]!.id;
  for (let i = from + 1; i < to; i++) {
    const v = a[i]!;
    const t = times[v]!;
    const id = ids[i - from]!;
    let j = i - 1;
    for (; j >= from; j--) {
      const tj = times[a[j]!]!;
      if (tj < t || (tj === t && ids[j - from]! <= id)) break;
      a[j + 1] = a[j]!;
      ids[j + 1 - from] = ids[j - from]!;
    }
    a[j + 1] = v;
    ids[j + 1 - from] = id;
  }
}

/**
 * Counts, for each container in queue order, how many containers ahead of it have a strictly higher
 * priority (for status texts). A Fenwick tree over priorities keeps this O(log P) per container; one of
 * the lowest priority added so far (most of a queue in priority order) is counted in O(1).
 */
export class AheadCounter {
  private readonly tree: Int32Array;
  private readonly size: number;
  private added = 0;
  /** The lowest index added (size + 1: none yet), and how many were added at it. */
  private lowest: number;
  private atLowest = 0;

  constructor(maxPriority = 1000) {
    this.size = maxPriority + 2;
    this.tree = new Int32Array(this.size + 1);
    this.lowest = this.size + 1;
  }

  private index(priority: number): number {
    return Math.min(Math.max(Math.floor(priority), 0), this.size - 1) + 1;
  }

  add(priority: number): void {
    const x = this.index(priority);
    for (let i = x; i <= this.size; i += i & -i) this.tree[i]!++;
    this.added++;
    if (x < this.lowest) [this.lowest, this.atLowest] = [x, 1];
    else if (x === this.lowest) this.atLowest++;
  }

  /** How many added priorities are strictly greater than `priority`. */
  higherThan(priority: number): number {
    const x = this.index(priority);
    if (x < this.lowest) return this.added;
    if (x === this.lowest) return this.added - this.atLowest;
    let atMost = 0;
    for (let i = x; i > 0; i -= i & -i) atMost += this.tree[i]!;
    return this.added - atMost;
  }
}
