// End-aligned placement (issue 14, `end_aligned`): a waiting container whose run time is expected goes,
// among existing instances with room, on one where a container is expected to run longer than it; such an
// instance is kept alive by that container anyway, so the newcomer adds nothing to its life. Among those,
// the one it fills best. With that guarantee an instance beyond max_price_factor may be used too (its price
// is paid whether or not the container goes there). Expected ends are the snapshot's estimates: a Running
// container's `endsAt`, and now + its step's run time for a container assigned or placed in this pass
// (durations.ts), or the container's own `expectedRunMs` where it has one. An opportunistic container
// guarantees nothing either: it may be vacated (vacate.ts) once no guaranteed one is left. A container whose end is unknown guarantees nothing; the old choice (capacity.ts find)
// stands when no instance qualifies.
import type { Slot } from './capacity.js';
import { expectedRunMs } from './durations.js';
import type { Shape } from './fitting.js';
import { outlasts } from './opportunistic.js';
import type { Pass } from './pass.js';
import { fits, type Res } from './resources.js';
import type { SnapshotContainer } from './types.js';

/** Existing instances with the latest expected end of the containers on them, for one pass. */
export class EndAligned {
  /** By slot: the latest expected end (ms) of a container on it; absent: none known. */
  private readonly latest = new Map<Slot, number>();
  /**
   * Bumped whenever an instance might newly qualify: a latest end raised or added, room given back (an
   * eviction). Otherwise, within a pass, room only shrinks, counts only grow and reservations only rise.
   */
  private version = 0;
  /**
   * By shape: the last search that found nothing, at `version`, for a container of `priority`; `reach` the
   * latest end among the instances that qualified but for their end. Until the version moves, a container
   * of that shape and no higher priority expected to end after `reach` finds nothing either: the scan per
   * waiting container (thousands of instances) is what end_aligned cost when many carry run times.
   */
  private readonly missed = new Map<Shape, { version: number; priority: number; reach: number }>();

  private constructor(
    private readonly pass: Pass,
    private readonly runOf: (c: SnapshotContainer) => number | null,
  ) {}

  /** The pass's end-aligned view, or null when the rule is off (placement.ts asks only when a waiting
   * container's run time is expected). */
  static of(pass: Pass): EndAligned | null {
    const runOf = expectedRunOf(pass);
    if (runOf === null) return null;
    const est = pass.config.endAligned === 'history' ? pass.snap.estimates : undefined;
    const a = new EndAligned(pass, runOf);
    for (const slot of pass.capacity.slots) {
      if (slot.bin !== null) continue;
      for (const c of pass.assigned.get(slot.id) ?? []) {
        if (c.opportunistic === true) continue;
        const end = c.state === 'Running' ? a.runningEnd(c, est?.endsAt) : a.endOf(c);
        if (end !== null && end > pass.now) a.raise(slot, end);
      }
    }
    return a;
  }

  /** When a container placed now is expected to end, or null when its run time is unknown. */
  endOf(c: SnapshotContainer): number | null {
    const run = this.runOf(c);
    return run === null ? null : this.pass.now + run;
  }

  /** When a Running container is expected to end: its own expected run time, else its step's history. */
  private runningEnd(c: SnapshotContainer, endsAt: Record<string, number> | undefined): number | null {
    if (c.expectedRunMs !== undefined && c.startedAt !== undefined)
      return c.startedAt.getTime() + c.expectedRunMs;
    return endsAt?.[c.id] ?? null;
  }

  /**
   * The existing instance the container should go on: one with room where another container is expected to
   * end no earlier than it, filled best (least room left, as a fraction of its type); null when none.
   */
  find(c: SnapshotContainer, shape: Shape, priority: number): Slot | null {
    const end = this.endOf(c);
    if (end === null) return null;
    const now = this.pass.now;
    const missed = this.missed.get(shape);
    if (
      missed !== undefined &&
      missed.version === this.version &&
      priority <= missed.priority &&
      !outlasts(missed.reach, now, end - now)
    )
      return null;
    let best: Slot | null = null;
    let bestLeft = Infinity;
    let reach = -Infinity;
    for (const [slot, latest] of this.latest) {
      if (!fits(shape.need, slot.free)) continue;
      // Any type it fits on (allow-list, spot or on demand), even beyond max_price_factor.
      if (shape.shareByIndex[slot.typeIndex] === Infinity) continue;
      if (!this.pass.capacity.mayTake(slot, shape, priority, true)) continue;
      if (latest > reach) reach = latest;
      if (!outlasts(latest, now, end - now)) continue;
      const left = leftAfter(slot, shape.need);
      if (left < bestLeft || (left === bestLeft && best !== null && slot.id < best.id)) {
        best = slot;
        bestLeft = left;
      }
    }
    if (best === null) this.missed.set(shape, { version: this.version, priority, reach });
    // No validUntil: a yes is acted on at once (a start or a lock), and a no stays a no as time passes.
    return best;
  }

  /** Room was given back on an instance (an eviction): searches that found nothing may find some now. */
  roomReturned(): void {
    this.version++;
  }

  /** The container was placed on the slot (by this rule or another): its end counts from now on. */
  placed(c: SnapshotContainer, slot: Slot): void {
    if (slot.bin !== null || c.opportunistic === true) return;
    const end = this.endOf(c);
    if (end !== null) this.raise(slot, end);
  }

  private raise(slot: Slot, end: number): void {
    const known = this.latest.get(slot);
    if (known === undefined || end > known) {
      this.latest.set(slot, end);
      this.version++;
    }
  }
}

/**
 * A container's expected run time (ms): its own, else (`steps` not null) its step's median from `steps`; null
 * when unknown.
 */
function runEstimate(c: SnapshotContainer, steps: Record<string, number> | null): number | null {
  const run = c.expectedRunMs ?? (steps === null ? Infinity : expectedRunMs(c, steps));
  return run === Infinity ? null : run;
}

/**
 * The expected run time of a container as end_aligned reads it (its own; with `history` also its step's
 * median), for the other rules that go by it (paired.ts, through placement.ts); null when end_aligned is
 * off. Without `history` no step is looked up (the step of a request name costs two regular expressions).
 */
export function expectedRunOf(pass: Pass): ((c: SnapshotContainer) => number | null) | null {
  const mode = pass.config.endAligned;
  if (mode === 'off') return null;
  const steps = mode === 'history' ? (pass.snap.estimates?.steps ?? {}) : null;
  return (c) => runEstimate(c, steps);
}

/** The room a slot has left once the need is taken: the larger of its vcpu and ram fractions. */
function leftAfter(slot: Slot, need: Res): number {
  const cpu = slot.type.vcpus > 0 ? (slot.free.mcpu - need.mcpu) / (slot.type.vcpus * 1000) : 0;
  const ram = slot.type.ram > 0 ? (slot.free.ram - need.ram) / slot.type.ram : 0;
  return Math.max(cpu, ram);
}
