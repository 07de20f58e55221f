// Paired ends (issue 14, `pair_ends`): containers queued at the same moment (a workflow's fan-out: its
// children become runnable when the parent ends) are considered longest expected run time first, so that
// the ones an instance planned in this pass takes together are neighbours in run time and end together;
// queue order alone pairs a long task with a short one and leaves the instance half empty for the
// difference. It is the offline packer's tie-break (src/sim/pack.ts: equal starts, longest estimate
// first), which is worth 1.226 → 1.153 × the lower bound on the day mix with exact run times
// (docs/performance/sim.md, "Session 9 (h-cost7)").
//
// Only the order among containers of one state, priority and queue time changes (queue order, ordering.ts,
// stands between different ones, so no container passes one queued before it), and within such a group
// only among containers of one size (vcpus and gpus): each size keeps the places it had, so which size
// reaches the free room first stays queue order's (reordering across sizes cost 0.34 % on KTH's first
// 2,000 jobs and won nothing). Memory is not part of the size: a fan-out's tasks ask for different
// amounts, and pairing them across those is the win. Expected run times are end_aligned's (aligned.ts
// `expectedRunOf`, looked up once per container by placement.ts); a container with none keeps its place
// before the estimated ones of its size.
//
// Cost: a group whose containers all lack an expected run time keeps its order, so only the groups around
// estimated containers are looked at, and with none estimated (pair_ends on by default, and most queues
// carry no run times) the rule reads nothing: a walk of every group read each container and its queue
// time in queue order, a cache miss each, ~0.6–0.9 s of a 1M pass (docs/performance/scheduler.md,
// "Session 12").
import type { Pass } from './pass.js';
import type { SnapshotContainer } from './types.js';

/**
 * Reorders `order` (indices into `waiting`, in queue order) in place, as the file comment says. `runs`:
 * each container's expected run time by index (ms; Infinity when unknown), null when none is known;
 * `times`: their queue times by index (ms).
 */
export function pairEnds(
  pass: Pass,
  waiting: readonly SnapshotContainer[],
  order: Uint32Array,
  runs: Float64Array | null,
  times: Float64Array,
): void {
  if (!pass.config.pairEnds || runs === null) return;
  const n = order.length;
  // Groups are runs of one moment in `order`; only those with an estimated member are sorted.
  let done = 0;
  for (let i = 0; i < n; i++) {
    const x = order[i]!;
    if (runs[x] === Infinity) continue;
    let from = i;
    while (from > done && sameMoment(waiting, times, order[from - 1]!, x)) from--;
    let to = i + 1;
    while (to < n && sameMoment(waiting, times, order[to]!, x)) to++;
    if (to - from > 1) sortGroup(order.subarray(from, to), waiting, runs);
    done = to;
    i = to - 1;
  }
}

function sameMoment(
  waiting: readonly SnapshotContainer[],
  times: Float64Array,
  a: number,
  b: number,
): boolean {
  if (times[a] !== times[b]) return false;
  const x = waiting[a]!;
  const y = waiting[b]!;
  return x.state === y.state && x.priority === y.priority;
}

interface Member {
  index: number;
  /** Its place in the group. */
  at: number;
  /** Expected run time (ms); Infinity when unknown, so that it stays first. */
  run: number;
}

/** Sorts each size's members of one group longest first, into the places that size had. */
function sortGroup(group: Uint32Array, waiting: readonly SnapshotContainer[], runs: Float64Array): void {
  const bySize = new Map<string, Member[]>();
  group.forEach((index, at) => {
    const c = waiting[index]!;
    const size = `${c.vcpus}|${c.gpus}`;
    let list = bySize.get(size);
    if (list === undefined) bySize.set(size, (list = []));
    list.push({ index, at, run: runs[index]! });
  });
  for (const list of bySize.values()) {
    if (list.every((m, k) => k === 0 || m.run <= list[k - 1]!.run)) continue;
    const sorted = [...list].sort((a, b) => b.run - a.run || a.at - b.at);
    for (let k = 0; k < list.length; k++) group[list[k]!.at] = sorted[k]!.index;
  }
}
