// The offline packer's third method (src/sim/pack.ts has the model): arrival order, as `arrival`, but a job
// may start up to `maxWait` after its arrival, on a live instance where room frees up by then. It answers
// what waiting buys: fewer boots and less idle for a wait no job exceeds. Clairvoyant by default (true run times); with estimates, as a scheduler knowing them.
//
// Each job goes where it adds least to the bill, over every live instance and every moment it could start
// there (its arrival, or the end of one of that instance's jobs within the wait), or a new instance of its
// cheapest type at its arrival (booted ahead: no wait). Ties go to the earlier start, then to a live
// instance. With estimates, decisions go by them and the jobs run their true times (packWaiting). A job may now start after a later-arriving job, so an instance's use is not monotone any more:
// a start is checked over the whole run (pack.ts fitsBeside).
import {
  fitsBeside,
  placeAt,
  pricing,
  scheduleOf,
  summarize,
  type IntervalBin,
  type PackJob,
  type PackOptions,
  type PackResult,
  type Placed,
} from './pack.js';

/** When a job may start: its arrival, or after its parents' ends as placed (`starts`). */
function release(j: PackJob, starts: number[], jobs?: PackJob[]): number {
  if (j.parents === undefined || jobs === undefined) return j.start;
  let at = Number.NEGATIVE_INFINITY;
  for (const p of j.parents) at = Math.max(at, starts[p]! + jobs[p]!.duration);
  return at;
}

/**
 * Yields the jobs by release time (longer expected first on ties, then input order), a task once all its parents
 * were yielded and placed: the caller sets starts[] of each yielded job before asking for the next.
 */
function* releaseOrder(jobs: PackJob[], starts: number[]): Generator<number> {
  const key = (i: number): [number, number, number] => [
    release(jobs[i]!, starts, jobs),
    -(jobs[i]!.estimate ?? jobs[i]!.duration),
    i,
  ];
  const less = (a: number, b: number): boolean => {
    const [x, y] = [key(a), key(b)];
    return x[0] < y[0] || (x[0] === y[0] && (x[1] < y[1] || (x[1] === y[1] && x[2] < y[2])));
  };
  const waitingOn = jobs.map((j) => j.parents?.length ?? 0);
  const children: number[][] = jobs.map(() => []);
  jobs.forEach((j, i) => j.parents?.forEach((p) => children[p]!.push(i)));
  // Released jobs, latest first (so the next is at the end); a job's key is fixed once it is released.
  // Insertion by binary search: O(n) per insert, fine for the workloads' thousands of tasks.
  const ready: number[] = [];
  const push = (i: number): void => {
    let [lo, hi] = [0, ready.length];
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (less(ready[mid]!, i)) hi = mid;
      else lo = mid + 1;
    }
    ready.splice(lo, 0, i);
  };
  jobs.forEach((_, i) => {
    if (waitingOn[i] === 0) push(i);
  });
  while (ready.length > 0) {
    const i = ready.pop()!;
    yield i;
    for (const c of children[i]!) {
      waitingOn[c] = waitingOn[c]! - 1;
      if (waitingOn[c] === 0) push(c);
    }
  }
}

/** The job as the packer expects it to run (its estimate as its run time). */
function expectedJob(j: PackJob): PackJob {
  return j.estimate === undefined ? j : { ...j, duration: j.estimate };
}

/**
 * The placed jobs as the packer expects them at `now`: ending at start + estimate, and one running past
 * its estimate ending just after now (it is seen running; nothing more is known of it). With no estimates,
 * the jobs as they are.
 */
function expectedPlaced(placed: Placed[], now: number): Placed[] {
  return placed.map((x) =>
    x.job.estimate === undefined
      ? x
      : { ...x, end: Math.max(x.start + x.job.estimate, x.start <= now ? now + 1 : x.start) },
  );
}

/** The earliest moment in [s, until] at which `j` truly fits on `b` (s, or a placed job's true end); or null. */
function trueStart(b: IntervalBin, j: PackJob, s: number, until: number): number | null {
  const times = [s, ...b.placed.map((x) => x.end).filter((t) => t > s && t <= until)].sort((x, y) => x - y);
  for (const at of times) if (fitsBeside(b.type, j, at, b.placed)) return at;
  return null;
}

/**
 * Packs the jobs in arrival order, each waiting at most `maxWait` ms; deterministic. With estimates
 * (PackJob.estimate), the choice of instance and start is made by expected run times and ends, and the job
 * then starts when room on the chosen instance truly frees up (earlier or later than expected), or, when
 * that is not within `maxWait`, on a new instance at the end of the wait; the bill and the waits are the
 * true ones.
 */
export function packWaiting(jobs: PackJob[], o: PackOptions & { maxWait: number }): PackResult {
  if (!Number.isFinite(o.maxWait) || o.maxWait < 0)
    throw new Error(`maxWait: expected a non-negative number of ms, got ${String(o.maxWait)}`);
  const { billed, cheapestAlone } = pricing(o);
  const starts = jobs.map((j) => j.start);
  const order = releaseOrder(jobs, starts);
  let live: IntervalBin[] = [];
  const all: IntervalBin[] = [];
  let alone = 0;
  let unfit = 0;
  for (const i of order) {
    const j = jobs[i]!;
    const own = cheapestAlone(j, j.estimate ?? j.duration);
    if (own === null) {
      unfit++;
      continue;
    }
    alone += j.estimate === undefined ? own.cost : cheapestAlone(j, j.duration)!.cost;
    // Released: at its arrival, or a workflow task when its parents have ended (after their waits).
    const s = release(j, starts, jobs);
    live = live.filter((b) => b.end + o.bootMs >= s);
    let best: { bin: IntervalBin; at: number } | null = null;
    let bestCost = own.cost;
    let bestAt = s;
    const jx = expectedJob(j);
    for (const b of live) {
      // Only jobs not yet ended at this arrival can matter any more.
      b.placed = b.placed.filter((x) => x.end > s);
      const seen = expectedPlaced(b.placed, s);
      const times = [s, ...seen.map((x) => x.end).filter((t) => t > s && t <= s + o.maxWait)];
      times.sort((x, y) => x - y);
      const end = seen.length === 0 ? b.end : Math.max(...seen.map((x) => x.end));
      for (const at of times) {
        if (!fitsBeside(b.type, jx, at, seen)) continue;
        const e = at + jx.duration;
        const added = end >= e ? 0 : billed(b.type, e - b.created) - billed(b.type, end - b.created);
        if (added < bestCost - 1e-12 || (added <= bestCost + 1e-12 && (best === null || at < bestAt))) {
          best = { bin: b, at };
          bestCost = added;
          bestAt = at;
        }
        break; // later starts on this instance only cost more
      }
    }
    // Decided by estimates, it starts when room on the chosen instance truly frees up; when that does not
    // happen within the wait, it gives up then and starts on a new instance (booted to be ready then).
    // (With no estimates anywhere, the true start is the one decided.)
    const at = best === null ? s : trueStart(best.bin, j, s, s + o.maxWait);
    if (best === null || at === null) {
      const from = at ?? s + o.maxWait;
      const bin: IntervalBin = { type: own.type, created: from - o.bootMs, end: from, placed: [], jobs: [] };
      live.push(bin);
      all.push(bin);
      best = { bin, at: from };
    } else best.at = at;
    placeAt(best.bin, i, j, best.at, o.bootMs);
    starts[i] = best.at;
  }
  const schedule = scheduleOf(all);
  const started = jobs.map((j, i) => ({ ...j, start: starts[i]! }));
  const waits = jobs.map((j, i) => starts[i]! - release(j, starts, jobs)).sort((a, b) => a - b);
  return {
    ...summarize(started, schedule, o, alone, unfit),
    ...(o.keepSchedule === true ? { starts } : {}),
    waitP90: waits.length === 0 ? 0 : waits[Math.ceil(waits.length * 0.9) - 1]!,
  };
}
