// What both sides of `bench vs-slurm` measure, and the small helpers they share.

/** One side's run: how long submitting and finishing took, and each job's submit → start latency. */
export interface SideResult {
  jobs: number;
  /** Jobs the system's records still held at the end (the percentiles are over these). */
  recorded: number;
  /** Jobs that ended with exit code 0. */
  succeeded: number;
  /** From the first submission call to the last one's answer. */
  submitSeconds: number;
  /** From the first submission call until a poll (every 100 ms) saw every job finished. */
  makespanSeconds: number;
  /** Per job, from the system's own records (submit/queued time → start time). */
  submitToStartMs: number[];
  /** Per job, start → end from the same records. */
  runMs: number[];
  /** Most jobs running at once by those records (null where whole seconds make it meaningless). */
  maxRunning: number | null;
}

/** Most intervals overlapping at one instant. */
export function maxOverlap(intervals: [number, number][]): number {
  const edges = intervals.flatMap(([a, b]): [number, number][] => [
    [a, 1],
    [b, -1],
  ]);
  edges.sort((x, y) => x[0] - y[0] || x[1] - y[1]); // an end before a start at the same instant
  let cur = 0;
  let max = 0;
  for (const [, d] of edges) max = Math.max(max, (cur += d));
  return max;
}

/** The p-th percentile (nearest rank) of an ascending list. */
export function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** Runs `task` `count` times with at most `concurrency` in flight. */
export async function runPool(
  count: number,
  concurrency: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

/** Polls `check` every `everyMs` until it returns true; rejects after `timeoutMs`. */
export async function pollUntil(
  check: () => Promise<boolean>,
  timeoutMs: number,
  everyMs = 100,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`not done after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
