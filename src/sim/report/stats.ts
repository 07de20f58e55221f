// Small numeric helpers for reports: rounding for stable output, percentiles, interval unions and
// bucketed step series.

/** Rounds to `digits` decimals; -0 becomes 0 so that equal reports print identically. */
export function round(x: number, digits: number): number {
  const f = 10 ** digits;
  const r = Math.round(x * f) / f;
  return r === 0 ? 0 : r;
}

/** Nearest-rank percentile of ascending-sorted values (p in 0–100); null for no values. */
export function percentile(sorted: readonly number[], p: number): number | null {
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
 * A step function given by +/- deltas at times, summarised as its maximum within each of `buckets`
 * equal buckets of [from, to]. Events before `from` set the starting level; deltas at the same instant
 * are applied together, so an instance replaced at one instant is no spurious peak.
 */
export function bucketMax(
  events: Array<[number, number]>,
  from: number,
  to: number,
  buckets: number,
): number[] {
  const sorted = [...events].sort((a, b) => a[0] - b[0]);
  const width = Math.max(1, (to - from) / buckets);
  const out = new Array<number>(buckets).fill(0);
  let level = 0;
  let i = 0;
  while (i < sorted.length && sorted[i]![0] < from) level += sorted[i++]![1];
  for (let b = 0; b < buckets; b++) {
    const bucketEnd = b === buckets - 1 ? Number.POSITIVE_INFINITY : from + (b + 1) * width;
    let max = level;
    while (i < sorted.length && sorted[i]![0] < bucketEnd) {
      const t = sorted[i]![0];
      while (i < sorted.length && sorted[i]![0] === t) level += sorted[i++]![1];
      max = Math.max(max, level);
    }
    out[b] = max;
  }
  return out;
}
