// Opportunistic placement (issue 16, seed 004; DESIGN §8 "classes of work"). A guaranteed container gets
// its whole request; most use far less. A container that asked to be opportunistic may be placed into the
// part of running guaranteed containers' requests that they measurably do not use, when there is no free
// room for it: no instance is created for work that fits into reservations lying idle.
//
// What a guaranteed container lends: its request less its measured use × (1 + opportunistic_margin), for
// memory (its peak since it started) and CPUs (its average), once it has been measured for
// opportunistic_min_observation; nothing of its scratch or GPUs. Only opportunistic containers borrow:
// a guaranteed container is placed in free room only (room not counting what opportunistic containers
// take as free), so nothing a guaranteed container could claim back is ever promised to one that has no
// way out. When a guaranteed container grows back into what it lent, its agent freezes the borrowers and
// they are requeued (the agent's side); the scheduler never needs to act for it to get its request.
//
// Accounting within a pass: an instance's free room already has every assigned container's full request
// taken off (pool.ts), opportunistic ones included, so a borrower makes it negative. A borrower fits when
// its need fits into free room plus what the instance's guaranteed containers lend; each placement then
// takes its need off the free room as any placement does, so what is lent is never lent twice.
import type { Slot } from './capacity.js';
import type { Shape } from './fitting.js';
import type { Res } from './resources.js';
import type { SchedulerConfig, SnapshotContainer } from './types.js';

/**
 * How long a reclaimed container's retry is kept out of the lent room of the instance that reclaimed it:
 * the guaranteed container that claimed its room back is likely still using it (its checkpoint, kept by
 * the API, lets it resume anywhere else).
 */
export const RECLAIM_AVOID_MS = 10 * 60_000;

/** Until when (ms) `c` may not borrow on `instance`, or null when it may. */
export function avoidedUntil(c: SnapshotContainer, instance: string, now: number): number | null {
  const r = c.reclaimedFrom;
  if (r === undefined || r.instance !== instance) return null;
  const until = r.at + RECLAIM_AVOID_MS;
  return until > now ? until : null;
}

/** What the guaranteed containers on an instance lend (mcpu and ram; nothing else is lent). */
export function lent(
  containers: SnapshotContainer[],
  config: Pick<SchedulerConfig, 'opportunisticMargin' | 'opportunisticMinObservationMs'>,
): Res {
  const out: Res = { mcpu: 0, ram: 0, scratch: 0, gpus: 0 };
  const keep = 1 + config.opportunisticMargin;
  for (const c of containers) {
    const u = c.usage;
    if (c.opportunistic || c.state !== 'Running' || u === undefined) continue;
    if (u.observedMs < config.opportunisticMinObservationMs) continue;
    out.mcpu += Math.max(0, Math.floor((c.vcpus - u.vcpus * keep) * 1000));
    out.ram += Math.max(0, Math.floor(c.ram - u.ram * keep));
  }
  return out;
}

/** The pass's view of lent capacity: instance id → what its guaranteed containers lend. */
export class Borrowing {
  constructor(private readonly lentBy: Map<string, Res>) {}

  static of(
    assigned: Map<string, SnapshotContainer[]>,
    config: Pick<SchedulerConfig, 'opportunisticMargin' | 'opportunisticMinObservationMs'>,
  ): Borrowing {
    const m = new Map<string, Res>();
    for (const [instance, list] of assigned) {
      const r = lent(list, config);
      if (r.mcpu > 0 || r.ram > 0) m.set(instance, r);
    }
    return new Borrowing(m);
  }

  /**
   * The first ready instance, in the slots' preference order, where an opportunistic container of this
   * shape fits into free room plus what is lent there; null when none. `allowed` is the capacity's own
   * check of everything but room (its types, the per-instance cap, a head's reservation).
   */
  find(slots: Slot[], shape: Shape, allowed: (slot: Slot) => boolean): Slot | null {
    for (const slot of slots) {
      const l = this.lentBy.get(slot.id);
      if (l === undefined || !slot.ready || slot.bin !== null) continue;
      const n = shape.need;
      const f = slot.free;
      if (
        n.mcpu <= f.mcpu + l.mcpu &&
        n.ram <= f.ram + l.ram &&
        n.scratch <= f.scratch &&
        n.gpus <= f.gpus &&
        allowed(slot)
      )
        return slot;
    }
    return null;
  }
}
