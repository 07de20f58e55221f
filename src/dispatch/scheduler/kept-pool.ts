// The pool side of what a planner keeps from one pass to the next (issue 12; kept.ts keeps the queue side):
// the containers assigned to each instance, the pool view (pool.ts viewPool), and what depends on little
// else: lent capacity (opportunistic.ts), vacate's slots (vacate.ts), and what settle does with each
// container (settle.ts). A pass after one arrival read all containers to group the assigned ones and to
// settle them, and all instances to view the pool, although none of that had changed; now it updates the
// groups from the containers that arrived, changed or left (kept.ts matchLists, as the queue does), reuses
// the last view and what hangs on it while nothing they are a function of changed, and settles only the
// containers that arrived or changed. When only some instances changed (a start, an end: their groups and
// their records' lists of containers; a state, a new instance, one shut down or gone: their records), the
// view is updated for those instances alone (updateSlots), and settle's kinds are kept with it.
//
// What is kept for an instance or a container is kept for its object: the dispatcher hands over the same
// object while it is the same (dispatcher.ts `shown`, ../container-view.ts). Changing one in place between
// passes would leave what is kept stale.
import { isEndingInstanceState, type InstanceType } from '../../model/types.js';
import { matchLists, type Match } from './kept.js';
import type { LimitTotals, Limits } from './limits.js';
import { compareSlots, type Slot } from './capacity.js';
import { countsOwner, settleVisits, WAITS, type SettledBefore, type SettledOut } from './settle.js';
import { assignments, freeOn, isAssigned, slotOf, takesWork, unknownIds, type PoolView } from './pool.js';
import { BORROW_FIELDS, type BorrowConfig, type Borrowing } from './opportunistic.js';
import type { RunEstimates, Snapshot, SnapshotContainer, SnapshotInstance } from './types.js';

/** What settle (settle.ts) does with each container, by index, and how many count for each owner. */
export interface Settled {
  kinds: Uint8Array;
  /** Containers that count for their owner (settle.ts countsOwner), by owner. */
  owned: Map<string, number>;
  /** The indices of the containers settle gives actions or a status (settle.ts settleVisits), in order. */
  visits: Int32Array;
  /** The containers that wait for a place (kind WAITS), in input order: the pass's waiting list. */
  waiting: SnapshotContainer[];
  /** waitsBefore[i]: how many of the containers before index i wait (n + 1 of them). */
  waitsBefore: Int32Array;
  /** settle's texts and actions for these kinds (settle.ts sets it: null until the first pass over them). */
  out: SettledOut | null;
  /** What settle.ts updates `out` from: the last kinds' out and the containers added since; null: none. */
  before: SettledBefore | null;
}

/** How this pass's waiting list matches the last one (`before`), from the containers' match. */
export interface WaitMatch {
  before: readonly SnapshotContainer[];
  match: Match;
}

/** The last pass's pool view and what it was computed from. */
interface LastView {
  instances: readonly SnapshotInstance[];
  types: readonly InstanceType[];
  ramOverhead: number;
  bootTimeoutMs: number;
  /** KeptPool.groups' version the view read. */
  groups: number;
  view: PoolView;
  /** Its slots as they were before the pass placed anything on them (a pass changes its slots). */
  slots: Slot[];
  /** The copies of `slots` the last pass changed, set back for the next (null: none yet). */
  copies: Slot[] | null;
  /** What its instances add to the limits. */
  totals: LimitTotals;
  /** vacate.ts's slots to look at, for this minimum billing period, from this time on. */
  vacating: {
    minBillingPeriodMs: number;
    since: number;
    slots: number[];
    /** Slots updated since (updateSlots), by id: looked at again by the next pass. */
    recheck: Set<string>;
  } | null;
  /** What settle (settle.ts) does with each container of `containers`, for this max_dispatch_attempts. */
  settled: (Settled & { containers: readonly SnapshotContainer[]; maxAttempts: number }) | null;
  /**
   * The lent capacity (opportunistic.ts), for this config and these estimates; `pending`: the instances
   * whose groups or records changed since (updateSlots), updated when it is next asked for.
   */
  borrowing: {
    config: BorrowConfig;
    estimates: RunEstimates | undefined;
    of: Borrowing;
    pending: Set<string>;
  } | null;
  /**
   * The boot deadline of each instance that has one in the view (booting, live, not held), made when an
   * update first needs it (updateSlots): the view's stableUntil is their earliest.
   */
  boots: Map<string, number> | null;
  /**
   * The instances the limits count (all but gone ones), in id order as viewPool adds them, with their
   * prices, made when an update first needs it: the spend summed again in that order is the same to the bit.
   */
  counted: { ids: string[]; prices: number[] } | null;
}

/** What viewPool reads besides the snapshot's instances and the groups, for updateSlots. */
export interface ViewContext {
  typesByName: ReadonlyMap<string, InstanceType>;
  typeIndex: ReadonlyMap<string, number>;
}

/** An instance record that is not the last view's: `before` null for a new instance, `now` null for one no longer listed. */
interface Change {
  id: string;
  before: SnapshotInstance | null;
  now: SnapshotInstance | null;
}

/**
 * What an instance is in a pool view (viewPool): not counted (gone, or not listed), counted but not live
 * (shutdown, destroy_pending), given a slot, or anything else (held, draining, unconfigured, with
 * containers the snapshot does not describe, past its boot deadline): updateSlots makes the view anew for
 * a change to or from the last.
 */
const ABSENT = 0;
const ENDING = 1;
const SLOT = 2;
const OTHER = 3;

/**
 * A kept pool's counts, all 0 (KeptPool.counts): passes that grouped the containers anew and that updated the
 * groups; views built and reused; passes that settled every container and those that settled the changed
 * ones; views updated per instance; waiting lists matched from settle's match (for tests).
 */
export function poolCounts() {
  return {
    grouped: 0,
    updated: 0,
    built: 0,
    reused: 0,
    settledAll: 0,
    settledChanged: 0,
    /** Views updated for the instances whose groups or records changed (and then reused). */
    updatedView: 0,
    /** Of those, views updated for changed instance records (not only groups). */
    updatedRecords: 0,
    /** Slots the updates added (an instance that takes work now) and took off (one that does not any more). */
    slotsAdded: 0,
    slotsRemoved: 0,
    /** Lent capacity updated for the instances an updated view changed (not made again). */
    lentUpdated: 0,
    /** Passes whose waiting list placement.ts matched by settle's match (waitMatch), not anew. */
    waitsMatched: 0,
    /** Passes that took settle's texts and actions from the last pass's as they were, or updated them (settle.ts). */
    textsShared: 0,
    textsUpdated: 0,
  };
}

export class KeptPool {
  private containers: readonly SnapshotContainer[] | null = null;
  /** The last list before `containers` and how the two matched (null: not matched). */
  private before: readonly SnapshotContainer[] | null = null;
  private match: Match | null = null;
  private groups = new Map<string, SnapshotContainer[]>();
  /** Bumped whenever a group changes: a view is reused only over the groups it read. */
  private version = 0;
  /**
   * The instances whose groups changed since the last view was made (null: all of them, the groups were
   * made anew): a view is updated for these alone when nothing else it reads changed.
   */
  private dirty: Set<string> | null = new Set();
  private last: LastView | null = null;
  /**
   * How the waiting list that settled() gave matches the last pass's (placement.ts reads it instead of
   * matching the two lists again); null when settled() read every container.
   */
  waitMatch: WaitMatch | null = null;
  /** What the passes kept and rebuilt (poolCounts). */
  readonly counts = poolCounts();

  /**
   * The containers assigned to each instance (pool.ts assignments), updated from the last pass's by the
   * containers that arrived, changed or left. Each group holds the same containers as assignments' would,
   * maybe in another order: every reader of the groups is indifferent to it (vacate.ts toVacate says why
   * it sums in its own order).
   */
  assigned(containers: readonly SnapshotContainer[]): Map<string, SnapshotContainer[]> {
    const before = this.containers;
    this.containers = containers;
    this.before = before;
    this.match = null;
    if (before === containers) return this.groups;
    const m = before === null ? null : matchLists(before, containers, Math.max(64, containers.length >> 4));
    this.match = m;
    if (m === null) {
      this.counts.grouped++;
      this.groups = assignments(containers);
      this.version++;
      this.dirty = null;
      return this.groups;
    }
    this.counts.updated++;
    let changed = false;
    forEachGone(m, before!.length, (i) => {
      const c = before![i]!;
      if (isAssigned(c) && this.ungroup(c)) {
        changed = true;
        this.dirty?.add(c.instance);
      }
    });
    for (const j of m.added) {
      const c = containers[j]!;
      if (!isAssigned(c)) continue;
      const group = this.groups.get(c.instance);
      if (group === undefined) this.groups.set(c.instance, [c]);
      else group.push(c);
      changed = true;
      this.dirty?.add(c.instance);
    }
    if (changed) this.version++;
    return this.groups;
  }

  /**
   * The pool view of `snap` (`build`: pool.ts viewPool over this pass's groups, adding to `limits` and
   * telling `until` its boot deadlines): the last one when nothing it is a function of changed — the
   * instances (the same objects), the groups, the types (the same list, frozen by kept.ts shapes), the two
   * config fields it reads, and no boot timeout passed.
   */
  view(
    snap: Snapshot,
    limits: Limits,
    until: (at: number) => void,
    build: () => PoolView,
    ctx: ViewContext,
  ): PoolView {
    const l = this.last;
    const { config } = snap;
    const dirty = this.dirty;
    this.dirty = new Set();
    const same =
      l !== null &&
      l.types === snap.instanceTypes &&
      l.ramOverhead === config.ramOverhead &&
      l.bootTimeoutMs === config.bootTimeoutMs &&
      snap.now.getTime() <= l.view.stableUntil;
    // The instance records that are not the last view's (a start or an end relists an instance; a state
    // changes; an instance is new or no longer listed).
    const changes = same ? changedRecords(l.instances, snap.instances) : null;
    // The same records in another array: the same instances.
    if (l !== null && changes !== null && changes.length === 0) l.instances = snap.instances;
    if (
      l !== null &&
      changes !== null &&
      (l.groups !== this.version || changes.length > 0) &&
      dirty !== null &&
      dirty.size + changes.length <= MAX_DIRTY
    ) {
      // Only some instances' groups or records changed: the view updated for them, the rest of it kept.
      if (this.updateSlots(l, dirty, changes, { ...ctx, now: snap.now.getTime() })) {
        restate(l.settled, changes, this.groups);
        this.counts.updatedView++;
        if (changes.length > 0) this.counts.updatedRecords++;
        l.groups = this.version;
        l.instances = snap.instances;
        if (l.borrowing !== null) {
          for (const id of dirty) l.borrowing.pending.add(id);
          for (const c of changes) l.borrowing.pending.add(c.id);
        }
      }
    }
    if (same && l !== null && l.groups === this.version && l.instances === snap.instances) {
      this.counts.reused++;
      limits.addTotals(l.totals);
      // The boot deadlines the view's pass heard (viewPool), as one: the pass keeps the earliest.
      if (l.view.stableUntil !== Infinity) until(l.view.stableUntil + 1);
      return { ...l.view, slots: this.freshSlots(l) };
    }
    this.counts.built++;
    const view = build();
    this.last = {
      instances: snap.instances,
      types: snap.instanceTypes,
      ramOverhead: config.ramOverhead,
      bootTimeoutMs: config.bootTimeoutMs,
      groups: this.version,
      view,
      slots: view.slots.map((x) => copySlot(x, null)),
      copies: null,
      totals: limits.totals(),
      vacating: null,
      borrowing: null,
      settled: null,
      boots: null,
      counted: null,
    };
    return view;
  }

  /**
   * The last view updated for the instances in `dirty` (their groups changed) and for the changed records,
   * as viewPool would make it: their slots made again from their groups and records and moved to their
   * place in slot order (compareSlots), slots added for instances that take work now (a new one, one that
   * booted) and taken off those that do not any more (shut down, gone), with `keeps`, `instanceOf`, the
   * boot deadlines (stableUntil) and the limits' totals to match. False, and nothing
   * changed, when a change would need more: an instance kept without a slot before or after (held,
   * draining, of a type not configured, with containers the snapshot does not describe, or past its boot
   * deadline: shutdowns of the view's own), a type changed, or an instance that holds assigned containers
   * becoming kept or not (settle's kinds read which instances are kept): then the view is made anew.
   */
  private updateSlots(
    l: LastView,
    dirty: ReadonlySet<string>,
    changes: readonly Change[],
    ctx: ViewContext & { now: number },
  ): boolean {
    const { view } = l;
    const instanceOf = view.instanceOf as Map<string, SnapshotInstance>;
    const keeps = view.keeps as Set<string>;
    // Checked first, applied after: what each instance was in the view and what it is now.
    const steps: { id: string; rec: SnapshotInstance | null; was: number; is: number }[] = [];
    const seen = new Set<string>();
    let counted = false;
    let boots = false;
    for (const c of changes) {
      const was =
        c.before === null || c.before.state === 'gone'
          ? ABSENT
          : instanceOf.has(c.id)
            ? SLOT
            : keeps.has(c.id)
              ? OTHER
              : ENDING;
      // A listed id the view keeps under no record of the last list: not a list the dispatcher gives.
      if (c.before === null && keeps.has(c.id)) return false;
      const is = this.roleOf(c.now, ctx);
      if (was === OTHER || is === OTHER) return false;
      if (was !== ABSENT && is !== ABSENT && c.before!.type !== c.now!.type) return false;
      if ((was === SLOT) !== (is === SLOT) && this.groups.has(c.id)) return false;
      if ((was === ABSENT) !== (is === ABSENT)) counted = true;
      if (c.before?.state === 'booting' || c.now?.state === 'booting') boots = true;
      steps.push({ id: c.id, rec: c.now, was, is });
      seen.add(c.id);
    }
    for (const id of dirty) {
      if (seen.has(id)) continue;
      const inst = instanceOf.get(id);
      if (inst === undefined) {
        // Not live or not kept (its containers are not assigned: settle.ts): nothing of the view reads its group.
        if (!keeps.has(id)) continue;
        return false;
      }
      if (unknownIds(inst.containers, this.groups.get(id) ?? []) > 0) return false;
      steps.push({ id, rec: inst, was: SLOT, is: SLOT });
    }
    // Read from the last list, before it is replaced.
    if (boots) l.boots ??= bootDeadlines(l.instances, l.bootTimeoutMs);
    if (counted) l.counted ??= countedInOrder(l.instances, ctx.typesByName);
    for (const s of steps) {
      const rec = s.rec;
      if (s.was === SLOT) {
        const at = l.slots.findIndex((x) => x.id === s.id);
        const slot = l.slots[at]!;
        this.removeSlot(l, at);
        if (s.is === SLOT) {
          const mine = this.groups.get(s.id) ?? [];
          slot.state = rec!.state;
          slot.ready = rec!.state === 'idle' || rec!.state === 'running';
          slot.free = freeOn(slot.type, l.ramOverhead, mine);
          slot.count = mine.length;
          slot.occupants = mine.length;
          this.insertSlot(l, slot);
        } else {
          instanceOf.delete(s.id);
          keeps.delete(s.id);
          this.counts.slotsRemoved++;
        }
      } else if (s.is === SLOT) {
        const type = ctx.typesByName.get(rec!.type)!;
        const mine = this.groups.get(s.id) ?? [];
        this.insertSlot(l, slotOf(rec!, type, ctx.typeIndex.get(type.name)!, l.ramOverhead, mine));
        keeps.add(s.id);
        this.counts.slotsAdded++;
      }
      if (s.is === SLOT) instanceOf.set(s.id, rec!);
      if (l.boots !== null) {
        l.boots.delete(s.id);
        if (s.is === SLOT && rec!.state === 'booting')
          l.boots.set(s.id, rec!.stateSince.getTime() + l.bootTimeoutMs);
      }
      if (l.counted !== null && (s.was === ABSENT) !== (s.is === ABSENT)) {
        const c = changes.find((x) => x.id === s.id)!;
        recount(l, s.is === ABSENT ? c.before! : c.now!, s.is !== ABSENT, ctx.typesByName);
      }
    }
    let stableUntil = view.stableUntil;
    if (boots) {
      stableUntil = Infinity;
      for (const at of l.boots!.values()) if (at < stableUntil) stableUntil = at;
    }
    l.view = { ...view, stableUntil };
    return true;
  }

  /** What `inst` (null: not listed) is in a view made now (ABSENT, ENDING, SLOT or OTHER; viewPool). */
  private roleOf(inst: SnapshotInstance | null, ctx: ViewContext & { now: number }): number {
    if (inst === null || inst.state === 'gone') return ABSENT;
    if (isEndingInstanceState(inst.state)) return ENDING;
    const type = ctx.typesByName.get(inst.type);
    const mine = this.groups.get(inst.id) ?? [];
    return takesWork(inst, type, mine, ctx.now, this.last!.bootTimeoutMs) ? SLOT : OTHER;
  }

  /** Takes the slot at `at` out of the kept slots; vacate's kept indices follow. */
  private removeSlot(l: LastView, at: number): void {
    const id = l.slots[at]!.id;
    l.slots.splice(at, 1);
    const v = l.vacating;
    if (v === null) return;
    // vacate's slots keep indices into the slots: those after it shift by one.
    const kept: number[] = [];
    for (const i of v.slots) if (i !== at) kept.push(i > at ? i - 1 : i);
    v.slots = kept;
    v.recheck.delete(id);
  }

  /** Puts `slot` at its place among the kept slots (compareSlots); vacate looks at it again. */
  private insertSlot(l: LastView, slot: Slot): void {
    // compareSlots is a total order (ties end on the id): its place is the one a sort gives.
    let lo = 0;
    let hi = l.slots.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareSlots(l.slots[mid]!, slot) < 0) lo = mid + 1;
      else hi = mid;
    }
    l.slots.splice(lo, 0, slot);
    const v = l.vacating;
    if (v === null) return;
    for (let k = 0; k < v.slots.length; k++) if (v.slots[k]! >= lo) v.slots[k]!++;
    v.recheck.add(slot.id);
  }

  /**
   * The view's slots as viewPool made them, for this pass to change: the last pass's copies set back in
   * place (a pass is over when the next begins, and nothing keeps its slots), so that a pass allocates no
   * 10k slots for the garbage collector.
   */
  private freshSlots(l: LastView): Slot[] {
    const copies = (l.copies ??= []);
    // The last pass appended the instances it planned (capacity.ts addPlanned).
    copies.length = l.slots.length;
    for (let i = 0; i < l.slots.length; i++) copies[i] = copySlot(l.slots[i]!, copies[i] ?? null);
    return copies;
  }

  /**
   * What settle does with each container (`kindOf`'s answer, by index), kept with the pool view it depends
   * on: the last pass's for the containers matched to it, `kindOf` only for those that arrived or changed.
   */
  settled(
    containers: readonly SnapshotContainer[],
    maxAttempts: number,
    kindOf: (c: SnapshotContainer) => number,
  ): Settled {
    const l = this.last!;
    const s = l.settled;
    const kept = s !== null && s.maxAttempts === maxAttempts ? s : null;
    this.waitMatch = null;
    if (kept !== null && kept.containers === containers) {
      const n = kept.waiting.length;
      const all = { from: n > 0 ? [0] : [], to: n > 0 ? [n] : [], shift: n > 0 ? [0] : [], added: [] };
      this.waitMatch = { before: kept.waiting, match: all };
      return kept;
    }
    const updated =
      kept !== null && kept.containers === this.before && this.match !== null
        ? updateKinds(kept, this.match, containers, kindOf)
        : null;
    if (updated !== null) {
      this.counts.settledChanged++;
      this.waitMatch = { before: kept!.waiting, match: waitingMatch(kept!, updated, this.match!) };
    } else this.counts.settledAll++;
    l.settled = { containers, maxAttempts, ...(updated ?? settleAll(containers, kindOf)) };
    return l.settled;
  }

  /**
   * The slots vacate.ts looks at (those `looks` accepts, indices into the pass's slots), kept with the pool
   * view they index: a slot that it leaves out stays out as the clock moves on (vacate.ts candidate).
   */
  vacating(now: number, minBillingPeriodMs: number, looks: (slot: number) => boolean): number[] {
    const l = this.last!;
    const v = l.vacating;
    if (v !== null && v.minBillingPeriodMs === minBillingPeriodMs && now >= v.since) {
      if (v.recheck.size > 0) {
        // The slots updated since (updateSlots), looked at now: one left out stays out as the clock moves on.
        for (const id of v.recheck) {
          const i = l.slots.findIndex((x) => x.id === id);
          if (i >= 0 && looks(i)) v.slots.push(i);
        }
        v.slots.sort((a, b) => a - b);
        v.recheck.clear();
      }
      return v.slots;
    }
    const slots: number[] = [];
    for (let i = 0; i < l.slots.length; i++) if (looks(i)) slots.push(i);
    l.vacating = { minBillingPeriodMs, since: now, slots, recheck: new Set() };
    return l.vacating.slots;
  }

  /** What the groups lend (opportunistic.ts Borrowing.of), kept with the pool view and the groups. */
  borrowing(config: BorrowConfig, estimates: RunEstimates | undefined, make: () => Borrowing): Borrowing {
    const l = this.last!;
    const b = l.borrowing;
    if (b !== null && b.estimates === estimates && BORROW_FIELDS.every((f) => b.config[f] === config[f])) {
      if (b.pending.size > 0) {
        // Only some instances' groups or records changed (an updated view): their lending made again.
        this.counts.lentUpdated++;
        b.of.update(b.pending, this.groups, l.view.instanceOf, config);
        b.pending.clear();
      }
      return b.of;
    }
    l.borrowing = { config, estimates, of: make(), pending: new Set() };
    return l.borrowing.of;
  }

  /** Takes `c` out of its instance's group; whether it was there. */
  private ungroup(c: SnapshotContainer & { instance: string }): boolean {
    const group = this.groups.get(c.instance);
    const k = group === undefined ? -1 : group.indexOf(c);
    if (k < 0) return false;
    group!.splice(k, 1);
    // assignments() has no group for an instance without containers.
    if (group!.length === 0) this.groups.delete(c.instance);
    return true;
  }
}

/**
 * `s`, a slot of an existing instance as viewPool made it (no bin, nothing placed), written into `into`
 * (or a new slot) for a pass to change.
 */
function copySlot(s: Slot, into: Slot | null): Slot {
  if (into === null)
    return { ...s, free: { ...s.free }, createFor: null, bin: null, used: false, reservedBelow: 0 };
  // Field by field: this runs for every instance, every pass.
  into.id = s.id;
  into.type = s.type;
  into.typeIndex = s.typeIndex;
  into.state = s.state;
  into.ready = s.ready;
  into.free.mcpu = s.free.mcpu;
  into.free.ram = s.free.ram;
  into.free.scratch = s.free.scratch;
  into.free.gpus = s.free.gpus;
  into.count = s.count;
  into.occupants = s.occupants;
  into.createFor = null;
  into.bin = null;
  into.used = false;
  into.reservedBelow = 0;
  return into;
}

/**
 * The records of `now` that are not `before`'s (matched by id: an instance's record changed, a new one, one
 * no longer listed), or null when more than MAX_DIRTY (or an id is listed twice).
 */
function changedRecords(
  before: readonly SnapshotInstance[],
  now: readonly SnapshotInstance[],
): Change[] | null {
  if (before === now) return [];
  const out: Change[] = [];
  const n = Math.min(before.length, now.length);
  let i = 0;
  // Usually the same ids in the same places (the dispatcher lists its instances in the order it got them).
  for (; i < n; i++) {
    const a = before[i]!;
    const b = now[i]!;
    if (a === b) continue;
    if (a.id !== b.id) break;
    out.push({ id: b.id, before: a, now: b });
    if (out.length > MAX_DIRTY) return null;
  }
  if (i === before.length && i === now.length) return out;
  // From the first place where the ids differ, matched by id.
  const rest = new Map<string, SnapshotInstance>();
  for (let k = i; k < before.length; k++) rest.set(before[k]!.id, before[k]!);
  if (rest.size !== before.length - i) return null;
  const listed = new Set<string>();
  for (let k = i; k < now.length; k++) {
    const b = now[k]!;
    if (listed.has(b.id)) return null;
    listed.add(b.id);
    const a = rest.get(b.id);
    if (a === undefined) out.push({ id: b.id, before: null, now: b });
    else {
      rest.delete(b.id);
      if (a !== b) out.push({ id: b.id, before: a, now: b });
    }
    if (out.length > MAX_DIRTY) return null;
  }
  for (const a of rest.values()) out.push({ id: a.id, before: a, now: null });
  return out.length > MAX_DIRTY ? null : out;
}

/** The boot deadline of each instance of `list` that viewPool hears one from (booting, not held). */
function bootDeadlines(list: readonly SnapshotInstance[], bootTimeoutMs: number): Map<string, number> {
  const m = new Map<string, number>();
  for (const inst of list)
    if (inst.state === 'booting' && inst.idleBehavior !== 'hold')
      m.set(inst.id, inst.stateSince.getTime() + bootTimeoutMs);
  return m;
}

/** The instances of `list` the limits count (all but gone ones), by id, with their prices (0: unconfigured). */
function countedInOrder(
  list: readonly SnapshotInstance[],
  typesByName: ReadonlyMap<string, InstanceType>,
): { ids: string[]; prices: number[] } {
  const ids = list.filter((x) => x.state !== 'gone').map((x) => x.id);
  ids.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const price = new Map<string, number>();
  for (const x of list) price.set(x.id, typesByName.get(x.type)?.price ?? 0);
  return { ids, prices: ids.map((id) => price.get(id)!) };
}

/**
 * The last view's limit totals with `inst` counted (`add`) or not any more: the spend summed again in id
 * order, as viewPool's adds sum it (a price taken off a sum may differ from the sum without it in the last bit).
 */
function recount(
  l: LastView,
  inst: SnapshotInstance,
  add: boolean,
  typesByName: ReadonlyMap<string, InstanceType>,
): void {
  const c = l.counted!;
  let lo = 0;
  let hi = c.ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (c.ids[mid]! < inst.id) lo = mid + 1;
    else hi = mid;
  }
  if (add) {
    c.ids.splice(lo, 0, inst.id);
    c.prices.splice(lo, 0, typesByName.get(inst.type)?.price ?? 0);
  } else {
    c.ids.splice(lo, 1);
    c.prices.splice(lo, 1);
  }
  let spend = 0;
  for (const p of c.prices) spend += p;
  const perType = new Map(l.totals.perType);
  const k = (perType.get(inst.type) ?? 0) + (add ? 1 : -1);
  if (k === 0) perType.delete(inst.type);
  else perType.set(inst.type, k);
  l.totals = { count: c.ids.length, spend, perType };
}

/** At most this many instances whose groups changed are updated in a kept view (kept-pool.ts updateSlots). */
const MAX_DIRTY = 64;

/** What settle does with every container, read from each. */
function settleAll(
  containers: readonly SnapshotContainer[],
  kindOf: (c: SnapshotContainer) => number,
): Settled {
  const kinds = new Uint8Array(containers.length);
  const owned = new Map<string, number>();
  for (let i = 0; i < containers.length; i++) {
    const c = containers[i]!;
    kinds[i] = kindOf(c);
    if (countsOwner(kinds[i]!)) owned.set(c.owner, (owned.get(c.owner) ?? 0) + 1);
  }
  return { kinds, owned, ...lists(kinds, containers, null, null), out: null, before: null };
}

/**
 * The waiting list, its prefix counts and settle's visits for `kinds`; the waiting list copied run by run
 * from `kept`'s as `m` matches them (the matched containers keep their kinds), or read from `containers`.
 */
function lists(
  kinds: Uint8Array,
  containers: readonly SnapshotContainer[],
  kept: Settled | null,
  m: Match | null,
): Pick<Settled, 'visits' | 'waiting' | 'waitsBefore'> {
  const n = kinds.length;
  const waitsBefore = new Int32Array(n + 1);
  let visits = 0;
  for (let i = 0; i < n; i++) {
    const k = kinds[i]!;
    waitsBefore[i + 1] = waitsBefore[i]! + (k === WAITS ? 1 : 0);
    if (settleVisits(k)) visits++;
  }
  const visit = new Int32Array(visits);
  for (let i = 0, v = 0; v < visits; i++) if (settleVisits(kinds[i]!)) visit[v++] = i;
  const waiting = new Array<SnapshotContainer>(waitsBefore[n]!);
  if (kept === null || m === null) {
    for (let i = 0; i < n; i++) if (kinds[i] === WAITS) waiting[waitsBefore[i]!] = containers[i]!;
  } else {
    // The matched runs' waiting containers are the last list's, in the same order.
    for (let r = 0; r < m.from.length; r++) {
      const at = waitsBefore[m.from[r]! + m.shift[r]!]!;
      const from = kept.waitsBefore[m.from[r]!]!;
      const to = kept.waitsBefore[m.to[r]!]!;
      for (let k = from; k < to; k++) waiting[at + k - from] = kept.waiting[k]!;
    }
    for (const j of m.added) if (kinds[j] === WAITS) waiting[waitsBefore[j]!] = containers[j]!;
  }
  return { visits: visit, waiting, waitsBefore };
}

/** How `now`'s waiting list matches `kept`'s, when `m` matches their containers (as kept.ts matchLists would). */
function waitingMatch(kept: Settled, now: Settled, m: Match): Match {
  const w = { from: [] as number[], to: [] as number[], shift: [] as number[], added: [] as number[] };
  for (let r = 0; r < m.from.length; r++) {
    const from = kept.waitsBefore[m.from[r]!]!;
    const to = kept.waitsBefore[m.to[r]!]!;
    if (to === from) continue;
    const shift = now.waitsBefore[m.from[r]! + m.shift[r]!]! - from;
    // Runs that the containers between them did not split (no waiting one among them) are one.
    const last = w.from.length - 1;
    if (last >= 0 && w.to[last] === from && w.shift[last] === shift) w.to[last] = to;
    else {
      w.from.push(from);
      w.to.push(to);
      w.shift.push(shift);
    }
  }
  for (const j of m.added) if (now.kinds[j] === WAITS) w.added.push(now.waitsBefore[j]!);
  return w;
}

/**
 * `kept`'s kinds moved as `m` moves its containers, `kindOf` only for those added, and the owners' counts
 * less the gone and plus the added containers that count for their owner (a container that starts or ends
 * on an instance kept in an updated view: updateSlots).
 */
function updateKinds(
  kept: Settled & { containers: readonly SnapshotContainer[] },
  m: Match,
  containers: readonly SnapshotContainer[],
  kindOf: (c: SnapshotContainer) => number,
): Settled {
  let owned = kept.owned;
  const count = (c: SnapshotContainer, n: number) => {
    if (owned === kept.owned) owned = new Map(owned);
    const k = (owned.get(c.owner) ?? 0) + n;
    // settleAll has no entry for an owner with none.
    if (k === 0) owned.delete(c.owner);
    else owned.set(c.owner, k);
  };
  forEachGone(m, kept.containers.length, (i) => {
    if (countsOwner(kept.kinds[i]!)) count(kept.containers[i]!, -1);
  });
  const kinds = new Uint8Array(containers.length);
  for (let r = 0; r < m.from.length; r++)
    kinds.set(kept.kinds.subarray(m.from[r], m.to[r]), m.from[r]! + m.shift[r]!);
  for (const j of m.added) {
    kinds[j] = kindOf(containers[j]!);
    if (countsOwner(kinds[j]!)) count(containers[j]!, 1);
  }
  // The last texts: settle's out, or what restate() left of it (with the instances it restated).
  const last = kept.out ?? kept.before?.out ?? null;
  const before =
    last === null ? null : { out: last, added: m.added, restated: kept.before?.restated ?? null };
  return { kinds, owned, ...lists(kinds, containers, kept, m), out: null, before };
}

/**
 * After a view updated in place: the instances that hold containers and whose state changed, for settle
 * to make their containers' texts again (an assigned container's names its instance's state: settle.ts
 * settledOut); `settled`'s texts otherwise kept.
 */
function restate(
  settled: Settled | null,
  changes: readonly Change[],
  groups: ReadonlyMap<string, readonly SnapshotContainer[]>,
): void {
  const last = settled === null ? null : (settled.out ?? settled.before?.out ?? null);
  if (last === null) return;
  let restated: Set<string> | null = null;
  for (const c of changes)
    if (c.before !== null && c.now !== null && c.before.state !== c.now.state && groups.has(c.id))
      (restated ??= new Set(settled!.before?.restated)).add(c.id);
  if (restated === null) return;
  settled!.before = { out: last, added: settled!.before?.added ?? [], restated };
  settled!.out = null;
}

/** Calls `gone(i)` for each index of the old list that `m` matched to nothing. */
function forEachGone(m: Match, length: number, gone: (i: number) => void): void {
  let i = 0;
  for (let r = 0; r < m.from.length; r++) {
    for (; i < m.from[r]!; i++) gone(i);
    i = m.to[r]!;
  }
  for (; i < length; i++) gone(i);
}
