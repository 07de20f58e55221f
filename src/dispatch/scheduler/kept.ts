// What a planner keeps from one pass to the next (issue 12) to compute the same pass faster: the pool
// view's orders (pool.ts PoolOrder), the shapes of the containers, the waiting containers' facts and queue
// order (placement.ts WaitingFacts: a pass reads and sorts only the containers that arrived or changed, and
// merges them in), and the pool side (kept-pool.ts: the assigned containers' groups, the pool view and what
// hangs on it, what settle does with each container). A pass from scratch (plan(snapshot) alone, `berth
// plan`) builds them anew and decides the same; the incremental planner (incremental.ts) keeps one for the
// dispatcher's passes.
//
// What is kept for a container is kept for its object: a container that changes is a new object (the
// dispatcher's container view, ../container-view.ts, hands over the same object only while the container
// is the same). Changing a container object in place between passes would leave its facts stale.
import type { InstanceType } from '../../model/types.js';
import type { ShapeCache } from './fitting.js';
import { type ShapeConfig } from './fitting.js';
import type { WaitingFacts } from './placement.js';
import { KeptPool } from './kept-pool.js';
import { PoolOrder } from './pool.js';

const SHAPE_FIELDS = [
  'ramOverhead',
  'maxPriceFactor',
  'maxSpendPerHour',
  'onDemandAfterInterruptions',
  'shareRule',
] as const satisfies readonly (keyof ShapeConfig)[];

/** A cache kept over a long run starts again past this many shapes (each lookup scans its ram's shapes). */
const MAX_SHAPES = 10_000;

export class KeptPass {
  readonly order = new PoolOrder();
  /** The containers assigned to each instance and the pool view (kept-pool.ts). */
  readonly pool = new KeptPool();
  /** The last pass's waiting containers' facts and queue order (placement.ts). */
  waiting: WaitingFacts | null = null;
  /** Passes that updated the kept facts and queue order, and passes that read and sorted them anew. */
  readonly counts = { merged: 0, sorted: 0 };
  /** The arrays the updates write, reused. */
  readonly spare = new Spare();
  private shapeCache: { types: readonly InstanceType[]; config: ShapeConfig; cache: ShapeCache } | null =
    null;

  /**
   * The shape cache of the last pass while the snapshot's type list (the same array) and what shapes depend
   * on in the config are the same, and it is not too big; else `make()`'s. A type list the cache is kept
   * for is frozen, it and its types: changing it in place (which would leave the shapes stale) throws, so a
   * caller with other types passes another array.
   */
  shapes(types: readonly InstanceType[], config: ShapeConfig, make: () => ShapeCache): ShapeCache {
    const k = this.shapeCache;
    if (
      k !== null &&
      k.types === types &&
      k.cache.size <= MAX_SHAPES &&
      SHAPE_FIELDS.every((f) => k.config[f] === config[f])
    )
      return k.cache;
    const cache = make();
    for (const t of types) Object.freeze(t);
    this.shapeCache = { types: Object.freeze(types), config, cache };
    return cache;
  }
}

/** How far matchLists looks ahead for the next element the two lists share. */
const LOOK_AHEAD = 8;

/**
 * How two lists match (matchLists): before[i] for i in [from[r], to[r]) is now[i + shift[r]] (runs in
 * order, not overlapping); before's other elements are gone, and `added` are the indices of now's elements
 * that before does not have.
 */
export interface Match {
  readonly from: number[];
  readonly to: number[];
  readonly shift: number[];
  readonly added: number[];
}

/** before[i]'s index in `now` under `m`, or -1 when it is gone (a binary search over the runs). */
export function matchedIndex(m: Match, i: number): number {
  let lo = 0;
  let hi = m.from.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (m.from[mid]! <= i) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 && i < m.to[lo - 1]! ? i + m.shift[lo - 1]! : -1;
}

/** Whether two lists hold equal items (`same`; by default the same object) in the same places. */
export function sameList<T>(
  a: readonly T[],
  b: readonly T[],
  same: (x: T, y: T) => boolean = (x, y) => x === y,
): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!same(a[i]!, b[i]!)) return false;
  return true;
}

/**
 * Matches `now` against `before` element by element, by identity, as the dispatcher's container view
 * changes its list: an arrival is appended, a changed container is a new object in its place, one that
 * left is gone. Matched elements keep their relative order. Null when more than `max` elements differ.
 */
export function matchLists<T>(before: readonly T[], now: readonly T[], max: number): Match | null {
  const m = { from: [] as number[], to: [] as number[], shift: [] as number[], added: [] as number[] };
  let removed = 0;
  let i = 0;
  let j = 0;
  while (i < before.length && j < now.length) {
    if (before[i] === now[j]) {
      // A run of matched elements, compared in one tight loop.
      const start = i;
      while (i < before.length && j < now.length && before[i] === now[j]) {
        i++;
        j++;
      }
      m.from.push(start);
      m.to.push(i);
      m.shift.push(j - i);
      continue;
    }
    // The nearest place where both lists go on alike: d replaced, d gone, or d new.
    let d = 1;
    for (; d <= LOOK_AHEAD; d++) {
      if (i + d < before.length && j + d < now.length && before[i + d] === now[j + d]) {
        for (let k = 0; k < d; k++) m.added.push(j + k);
        removed += d;
        i += d;
        j += d;
        break;
      }
      if (i + d < before.length && before[i + d] === now[j]) {
        removed += d;
        i += d;
        break;
      }
      if (j + d < now.length && before[i] === now[j + d]) {
        for (let k = 0; k < d; k++) m.added.push(j + k);
        j += d;
        break;
      }
    }
    if (d > LOOK_AHEAD) {
      // Nothing alike nearby: this one replaced.
      m.added.push(j++);
      removed++;
      i++;
    }
    if (m.added.length + removed > max) return null;
  }
  removed += before.length - i;
  for (; j < now.length; j++) m.added.push(j);
  return m.added.length + removed > max ? null : m;
}

/**
 * The arrays a pass that updates the kept queue writes (placement.ts updateFacts, ordering.ts
 * updateQueue), reused from pass to pass: two of each, this pass's and the last one's, which it reads. At a
 * million waiting containers a pass allocated ~60 MB of them, and allocating that much outside the heap
 * brought on full collections, each of which walked the whole snapshot.
 */
export class Spare {
  private readonly sets = [new Map<string, unknown>(), new Map<string, unknown>()];
  private turn = 0;

  /** Starts a pass: the arrays handed out from now on are not those of the last pass. */
  flip(): void {
    this.turn ^= 1;
  }

  /** A Float64Array of n elements (not cleared). */
  f64(name: string, n: number): Float64Array {
    return this.typed(name, n, (k) => new Float64Array(k));
  }

  /** A Uint32Array of n elements (not cleared). */
  u32(name: string, n: number): Uint32Array {
    return this.typed(name, n, (k) => new Uint32Array(k));
  }

  /** An Int32Array of n elements (not cleared). */
  i32(name: string, n: number): Int32Array {
    return this.typed(name, n, (k) => new Int32Array(k));
  }

  /** A list of n elements (not cleared). */
  list<T>(name: string, n: number): T[] {
    const set = this.sets[this.turn]!;
    let a = set.get(name) as T[] | undefined;
    if (a === undefined) set.set(name, (a = new Array<T>(n)));
    a.length = n;
    return a;
  }

  private typed<A extends Float64Array | Uint32Array | Int32Array>(
    name: string,
    n: number,
    make: (capacity: number) => A,
  ): A {
    const set = this.sets[this.turn]!;
    let a = set.get(name) as A | undefined;
    // Room for some growth, so that a queue growing by a few containers a pass does not allocate each time.
    if (a === undefined || a.length < n) set.set(name, (a = make(n + (n >> 4) + 16)));
    return a.subarray(0, n) as A;
  }
}
