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
// `expectedRunOf`); a container with none keeps its place before the estimated ones of its size.
import { expectedRunOf } from './aligned.js';
import type { Pass } from './pass.js';
import type { SnapshotContainer } from './types.js';

/** Reorders `order` (indices into `waiting`, in queue order) in place, as the file comment says. */
export function pairEnds(pass: Pass, waiting: readonly SnapshotContainer[], order: Uint32Array): void {
  if (!pass.config.pairEnds) return;
  const runOf = expectedRunOf(pass);
  if (runOf === null) return;
  let i = 0;
  while (i < order.length) {
    const first = waiting[order[i]!]!;
    let j = i + 1;
    while (j < order.length && sameMoment(first, waiting[order[j]!]!)) j++;
    if (j - i > 1) sortGroup(order.subarray(i, j), waiting, runOf);
    i = j;
  }
}

function sameMoment(a: SnapshotContainer, b: SnapshotContainer): boolean {
  return a.state === b.state && a.priority === b.priority && a.queuedAt.getTime() === b.queuedAt.getTime();
}

interface Member {
  index: number;
  /** Its place in the group. */
  at: number;
  /** Expected run time (ms); Infinity when unknown, so that it stays first. */
  run: number;
}

/** Sorts each size's members of one group longest first, into the places that size had. */
function sortGroup(
  group: Uint32Array,
  waiting: readonly SnapshotContainer[],
  runOf: (c: SnapshotContainer) => number | null,
): void {
  const bySize = new Map<string, Member[]>();
  group.forEach((index, at) => {
    const c = waiting[index]!;
    const size = `${c.vcpus}|${c.gpus}`;
    let list = bySize.get(size);
    if (list === undefined) bySize.set(size, (list = []));
    list.push({ index, at, run: runOf(c) ?? Infinity });
  });
  for (const list of bySize.values()) {
    if (list.every((m, k) => k === 0 || m.run <= list[k - 1]!.run)) continue;
    const sorted = [...list].sort((a, b) => b.run - a.run || a.at - b.at);
    for (let k = 0; k < list.length; k++) group[list[k]!.at] = sorted[k]!.index;
  }
}
