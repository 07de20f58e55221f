// Opportunistic placement (issue 16, seed 004; DESIGN §8 "classes of work"). A guaranteed container gets
// its whole request; most use far less. A container that asked to be opportunistic may be placed into the
// part of running guaranteed containers' requests that they measurably do not use, when there is no free
// room for it: no instance is created for work that fits into reservations lying idle.
//
// Which instances lend: only those whose agent can claim lent room back (`reclaims` in the snapshot: the
// node's ping says its pressure watcher runs). An agent without usable cgroups runs no watcher yet reports
// usage; room lent there would be room a guaranteed container could not claim back.
//
// What a guaranteed container lends: its request less its measured use × (1 + opportunistic_margin), for
// memory (its peak since it started) and CPUs (its average), once it has been measured for
// opportunistic_min_observation; nothing of its scratch or GPUs. Only opportunistic containers borrow:
// a guaranteed container is placed in free room only (room not counting what opportunistic containers
// take as free), so nothing a guaranteed container could claim back is ever promised to one that has no
// way out. When a guaranteed container grows back into what it lent, its agent freezes the borrowers and
// they are requeued (the agent's side); the scheduler never needs to act for it to get its request.
//
// Which lenders (opportunistic_any_type, on by default): a borrower may take lent room on an instance of
// any type, not only of the types max_price_factor lets it use, because the room is paid for already. What
// made that lose before (docs/PERFORMANCE.md) was a small borrower keeping a large instance alive after its
// lenders had ended; two rules stop it. On a type beyond max_price_factor a borrower goes only next to
// guaranteed containers expected to outlast it (the run-time estimates of durations.ts: the latest known
// expected end of the instance's guaranteed containers at or after the borrower's expected end); when
// nothing is known of either, it may go, and vacate.ts takes it off again if its lenders end first.
//
// Accounting within a pass: an instance's free room already has every assigned container's full request
// taken off (pool.ts), opportunistic ones included, so a borrower makes it negative. A borrower fits when
// its need fits into free room plus what the instance's guaranteed containers lend; each placement then
// takes its need off the free room as any placement does, so what is lent is never lent twice.
import type { Capacity, Slot } from './capacity.js';
import { expectedRunMs } from './durations.js';
import type { Shape } from './fitting.js';
import type { Res } from './resources.js';
import type { RunEstimates, SchedulerConfig, SnapshotContainer, SnapshotInstance } from './types.js';

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

/**
 * Whether an instance may lend: its agent can claim lent room back (its pressure watcher runs). On any
 * other, a borrower would have no way out when a guaranteed container grows back into what it lent.
 */
export function reclaims(inst: SnapshotInstance | undefined): boolean {
  return inst?.reclaims === true;
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

/** The latest expected end (ms) of the guaranteed containers on an instance, or null when none is known. */
export function guaranteedUntil(
  containers: SnapshotContainer[],
  endsAt: Record<string, number>,
): number | null {
  let until: number | null = null;
  for (const c of containers) {
    const end = c.opportunistic ? undefined : endsAt[c.id];
    if (end !== undefined && (until === null || end > until)) until = end;
  }
  return until;
}

/**
 * Whether a borrower expected to run `runMs` from `now` may go next to guaranteed containers expected to
 * end by `until` on an instance of a type beyond its max_price_factor: when they are expected to outlast
 * it, or when nothing is known of them (vacate.ts is the way out then). A borrower whose own run time is
 * unknown does not go next to lenders known to end.
 */
export function outlasts(until: number | null, now: number, runMs: number): boolean {
  return until === null || now + runMs <= until;
}

/** What lent capacity depends on in the config (a kept Borrowing is reused while they are the same). */
export const BORROW_FIELDS = [
  'opportunisticMargin',
  'opportunisticMinObservationMs',
  'opportunisticAnyType',
] as const satisfies readonly (keyof SchedulerConfig)[];

export type BorrowConfig = Pick<SchedulerConfig, (typeof BORROW_FIELDS)[number]>;

/** The pass's view of lent capacity: instance id → what its guaranteed containers lend. */
export class Borrowing {
  constructor(
    private readonly lentBy: Map<string, Res>,
    /** Per lending instance: its guaranteed containers' latest expected end (guaranteedUntil). */
    private readonly until: Map<string, number | null>,
    private readonly anyType: boolean,
    private readonly estimates: RunEstimates | undefined,
  ) {}

  /**
   * `instances`: the pass's instances by id (pool.ts's instanceOf); only one whose agent can claim lent room
   * back (`reclaims`) lends.
   */
  static of(
    assigned: Map<string, SnapshotContainer[]>,
    instances: ReadonlyMap<string, SnapshotInstance>,
    config: BorrowConfig,
    estimates: RunEstimates | undefined,
  ): Borrowing {
    const b = new Borrowing(new Map(), new Map(), config.opportunisticAnyType, estimates);
    for (const [instance, list] of assigned) b.lend(instance, list, instances, config);
    return b;
  }

  /**
   * The same lent capacity for the instances in `ids` as `of` would give now (their groups or records
   * changed; the config and the estimates are the ones it was made with): the kept pool view
   * (kept-pool.ts) updates it instead of making it again.
   */
  update(
    ids: Iterable<string>,
    assigned: Map<string, SnapshotContainer[]>,
    instances: ReadonlyMap<string, SnapshotInstance>,
    config: BorrowConfig,
  ): void {
    for (const id of ids) {
      this.lentBy.delete(id);
      this.until.delete(id);
      const list = assigned.get(id);
      if (list !== undefined) this.lend(id, list, instances, config);
    }
  }

  /** Records what `list`'s guaranteed containers lend on `instance`, if it reclaims and they lend anything. */
  private lend(
    instance: string,
    list: SnapshotContainer[],
    instances: ReadonlyMap<string, SnapshotInstance>,
    config: BorrowConfig,
  ): void {
    if (!reclaims(instances.get(instance))) return;
    const r = lent(list, config);
    if (r.mcpu <= 0 && r.ram <= 0) return;
    this.lentBy.set(instance, r);
    this.until.set(instance, guaranteedUntil(list, this.estimates?.endsAt ?? {}));
  }

  /**
   * Whether the borrower may take lent room on the slot, room aside: the capacity's own check (the cap, a
   * head's reservation, and its types within max_price_factor), or with opportunistic_any_type any type
   * its lenders are expected to outlast it on (outlasts). `changesAt` hears when a yes turns into a no as
   * the clock moves (the plan's validUntil).
   */
  mayBorrow(
    cap: Capacity,
    slot: Slot,
    c: SnapshotContainer,
    shape: Shape,
    now: number,
    changesAt: (at: number) => void,
  ): boolean {
    if (cap.mayTake(slot, shape, c.priority)) return true;
    if (!this.anyType || !cap.mayTake(slot, shape, c.priority, true)) return false;
    const run = expectedRunMs(c, this.estimates?.steps ?? {});
    const until = this.until.get(slot.id) ?? null;
    const yes = outlasts(until, now, run);
    if (yes && until !== null) changesAt(until - run + 1);
    return yes;
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
