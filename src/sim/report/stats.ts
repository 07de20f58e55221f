// Small numeric helpers for reports: rounding for stable output, percentiles, interval unions and
// bucketed step series.

/** Rounds to `digits` decimals; -0 becomes 0 so that equal reports print identically. */
export function round(x: number, digits: number): number {
  const f = 10 ** digits;
  const r = Math.round(x * f) / f;
  return r === 0 ? 0 : r;
}

/** Nearest-rank percentile of ascending-sorted values (p in 0–100); null for no values. */
export function percentile(sorted: ArrayLike<number>, p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1]!;
}

/** Total length of the union of [start, end) intervals (they may overlap and come in any order). */
export function unionLength(intervals: Array<[number, number]>): number {
  const xs = intervals.filter(([a, b]) => b > a).sort((p, q) => p[0] - q[0]);
  let total = 0;
  let curStart = Number.NEGATIVE_INFINITY;
  let curEnd = Number.NEGATIVE_INFINITY;
  for (const [a, b] of xs) {
    if (a > curEnd) {
      if (curEnd > curStart) total += curEnd - curStart;
      curStart = a;
      curEnd = b;
    } else if (b > curEnd) curEnd = b;
  }
  if (curEnd > curStart) total += curEnd - curStart;
  return total;
}

/**
 * A count over time — +1 at each time in `ups`, −1 at each time in `downs` (instances created and
 * destroyed, containers queued and started) — summarised as its maximum within each of `buckets` equal
 * buckets of [from, to]. Changes before `from` set the starting level; changes at the same instant are
 * applied together, so an instance replaced at one instant is no spurious peak. The times are sorted as
 * typed arrays (a million-container run has two million of them).
 */
export function bucketMax(
  ups: ArrayLike<number>,
  downs: ArrayLike<number>,
  from: number,
  to: number,
  buckets: number,
): number[] {
  const u = Float64Array.from(ups).sort();
  const d = Float64Array.from(downs).sort();
  const width = Math.max(1, (to - from) / buckets);
  const out = new Array<number>(buckets).fill(0);
  let level = 0;
  let i = 0;
  let j = 0;
  const next = () => Math.min(i < u.length ? u[i]! : Infinity, j < d.length ? d[j]! : Infinity);
  /** Applies every change at the next instant; returns false when none is left before `limit`. */
  const step = (limit: number): boolean => {
    const t = next();
    if (!(t < limit)) return false;
    for (; i < u.length && u[i] === t; i++) level++;
    for (; j < d.length && d[j] === t; j++) level--;
    return true;
  };
  while (step(from));
  for (let b = 0; b < buckets; b++) {
    const bucketEnd = b === buckets - 1 ? Infinity : from + (b + 1) * width;
    let max = level;
    while (step(bucketEnd)) max = Math.max(max, level);
    out[b] = max;
  }
  return out;
}
