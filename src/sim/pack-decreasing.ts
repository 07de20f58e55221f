// The offline packer's second method (src/sim/pack.ts has the model and the first): first fit decreasing
// into instance-time bins. Jobs are taken largest first (by what each would bill alone), so that the room
// a large job leaves on its rounded-up type is known before the small jobs are placed: a small job then
// goes into that room wherever it fits over its whole run, at any time, whereas in arrival order it may
// arrive before the large job that would have had room for it. Each job goes where it adds least to the
// bill: a bin whose life it fits inside adds nothing; a bin it widens adds the longer life's bill; a new
// instance of its cheapest type adds its own bill. Ties go to the smallest bin (fewest vcpus).
// Fitting is checked over the job's whole run (pack.ts fitsBeside).
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
} from './pack.js';

/** Packs the jobs largest first; deterministic. Estimates are not used: this method is clairvoyant only. */
export function packDecreasing(jobs: PackJob[], o: PackOptions): PackResult {
  const { billed, cheapestAlone } = pricing(o);
  const own = jobs.map((j) => cheapestAlone(j, j.duration));
  const order = jobs
    .map((_, i) => i)
    .filter((i) => own[i] !== null)
    .sort((a, b) => own[b]!.cost - own[a]!.cost || jobs[a]!.start - jobs[b]!.start || a - b);
  const bins: IntervalBin[] = [];
  let alone = 0;
  for (const i of order) {
    const j = jobs[i]!;
    const mine = own[i]!;
    alone += mine.cost;
    const s = j.start;
    const e = s + j.duration;
    let best: IntervalBin | null = null;
    let bestCost = mine.cost;
    let bestFree = 0;
    for (const b of bins) {
      // A bin more than a boot away in time would idle longer than a new boot costs.
      if (b.created > e || b.end + o.bootMs < s) continue;
      const created = Math.min(b.created, s - o.bootMs);
      const end = Math.max(b.end, e);
      const added =
        created === b.created && end === b.end
          ? 0
          : billed(b.type, end - created) - billed(b.type, b.end - b.created);
      if (added > bestCost + 1e-12) continue;
      const free = b.type.vcpus;
      if (!(added < bestCost - 1e-12 || best === null || free < bestFree)) continue;
      if (!fitsBeside(b.type, j, s, b.placed)) continue;
      best = b;
      bestCost = added;
      bestFree = free;
    }
    if (best === null) {
      best = { type: mine.type, created: s - o.bootMs, end: e, jobs: [], placed: [] };
      bins.push(best);
    }
    placeAt(best, i, j, s, o.bootMs);
  }
  return summarize(jobs, scheduleOf(bins), o, alone, jobs.length - order.length);
}
