// No starvation under a limit (DESIGN §6.2 rule 5, issue 10 item 5). When a global limit stops the head of
// the queue, freeing room for it is not enough if lower-priority work keeps taking the room as it frees
// up: with max_instances: 1, a priority-1000 container that needs a big type waited as long as one-CPU
// priority-100 containers kept arriving, each placed on the one small instance as the last one ended.
//
// So the head gets an instance drained for it: no container of a lower priority is placed there any more
// (containers of its own priority behind it still backfill the room: DESIGN rule 5 is about priority). If the
// head could run on an existing instance once enough of its containers end, that one is drained (the
// fewest containers first) and the head takes it when there is room; otherwise the instances whose
// release lets the head's instance be created are drained (the fewest containers first; one for a count
// limit, enough price for a spend cap), and go when empty (shutdown.ts). The choice is a function of the
// snapshot, and a drained instance only ever loses containers, so the next pass drains the same one or
// one that is emptier: the head's wait is bounded by the containers already running there.
import type { Slot } from './capacity.js';
import type { Shape } from './fitting.js';
import type { Head, Pass } from './pass.js';
import { fits, typeCapacity } from './resources.js';

/** Drains instances for the head of the queue (see the file comment). */
export function reserveForHead(pass: Pass, head: Head, shape: Shape): void {
  const priority = head.container.priority;
  // The instances that may be drained, the fewest containers first (then by id): the first of them, and the
  // first that holds the head, are found in one walk; only a spend cap needs them all in that order (a
  // sort of 10k slots each time a head was set was a tenth of the pass after one change).
  const candidate = (s: Slot) => s.ready && s.bin === null && s.reservedBelow === 0;
  // Whether the head fits an instance of a type, by type index (0: not known yet, 1: fits, 2: does not).
  const byType = new Uint8Array(pass.sortedTypes.length);
  const holds = (s: Slot) => {
    let h = byType[s.typeIndex]!;
    if (h === 0) {
      const fit =
        shape.usableByIndex[s.typeIndex] === 1 &&
        fits(shape.need, typeCapacity(s.type, pass.config.ramOverhead));
      byType[s.typeIndex] = h = fit ? 1 : 2;
    }
    return h === 1;
  };
  let first: Slot | undefined;
  let own: Slot | undefined;
  for (const s of pass.pool.slots) {
    if (!candidate(s)) continue;
    if (first === undefined || fewer(s, first)) first = s;
    if ((own === undefined || fewer(s, own)) && holds(s)) own = s;
  }
  if (own !== undefined) {
    own.reservedBelow = priority;
    return;
  }
  // Draining for a create makes sense only if an instance may go: not below min_instances.
  if (head.block.kind !== 'global' || pass.limits.count <= pass.config.minInstances) return;
  if (head.block.what === 'count') {
    if (first !== undefined) first.reservedBelow = priority;
    return;
  }
  const ready = pass.pool.slots.filter(candidate).sort((a, b) => (fewer(a, b) ? -1 : 1));
  const cap = pass.config.maxSpendPerHour ?? Infinity;
  let deficit = pass.limits.spend + head.type.price - cap;
  for (const s of ready) {
    if (deficit <= 1e-9) break;
    s.reservedBelow = priority;
    deficit -= s.type.price;
  }
}

/** Whether `a` comes before `b` in draining order: fewer containers, then the smaller id (ids are unique). */
function fewer(a: Slot, b: Slot): boolean {
  return a.count < b.count || (a.count === b.count && a.id < b.id);
}
