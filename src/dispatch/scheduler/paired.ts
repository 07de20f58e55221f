// Paired ends (issue 14, `pair_ends`): containers queued at the same moment (a workflow's fan-out: its
// children become runnable when the parent ends) are considered longest expected run time first, so that
// the ones an instance planned in this pass takes together are neighbours in run time and end together;
// queue order alone pairs a long task with a short one and leaves the instance half empty for the
// difference. It is the offline packer's tie-break (src/sim/pack.ts: equal starts, longest estimate
// first), which is worth 1.226 → 1.153 × the lower bound on the day mix with exact run times
// (docs/performance/sim.md, "Session 9 (h-cost7)"). Only the order among containers of one priority,
// state and queue time changes: queue order (ordering.ts) stands between different ones, so no container
// passes one queued before it. Expected run times are end_aligned's (aligned.ts `expectedRun`); a
// container with none keeps its place before the estimated ones of its group.
import { expectedRunOf } from './aligned.js';
import type { Pass } from './pass.js';
import type { SnapshotContainer } from './types.js';

/**
 * Reorders `order` (indices into `waiting`, in queue order) in place: each run of containers with equal
 * state, priority and queue time is sorted by expected run time, longest first (unknown first, stable).
 */
export function pairEnds(pass: Pass, waiting: readonly SnapshotContainer[], order: Uint32Array): void {
  if (!pass.config.pairEnds) return;
  const runOf = expectedRunOf(pass);
  if (runOf === null) return;
  let i = 0;
  while (i < order.length) {
    const first = waiting[order[i]!]!;
    let j = i + 1;
    while (j < order.length && sameMoment(first, waiting[order[j]!]!)) j++;
    if (j - i > 1) sortGroup(order, i, j, waiting, runOf);
    i = j;
  }
}

function sameMoment(a: SnapshotContainer, b: SnapshotContainer): boolean {
  return a.state === b.state && a.priority === b.priority && a.queuedAt.getTime() === b.queuedAt.getTime();
}

function sortGroup(
  order: Uint32Array,
  from: number,
  to: number,
  waiting: readonly SnapshotContainer[],
  runOf: (c: SnapshotContainer) => number | null,
): void {
  const group = Array.from(order.subarray(from, to), (index, k) => {
    const run = runOf(waiting[index]!);
    return { index, k, run: run === null ? Infinity : run };
  });
  let changed = false;
  for (let k = 1; k < group.length && !changed; k++) changed = group[k]!.run > group[k - 1]!.run;
  if (!changed) return;
  group.sort((a, b) => b.run - a.run || a.k - b.k);
  for (let k = 0; k < group.length; k++) order[from + k] = group[k]!.index;
}
