// The pool side of what a planner keeps from one pass to the next (issue 12; kept.ts keeps the queue side):
// the containers assigned to each instance, the pool view (pool.ts viewPool), and what depends on little
// else: lent capacity (opportunistic.ts), vacate's slots (vacate.ts), and what settle does with each
// container (settle.ts). A pass after one arrival read all containers to group the assigned ones and to
// settle them, and all instances to view the pool, although none of that had changed; now it updates the
// groups from the containers that arrived, changed or left (kept.ts matchLists, as the queue does), reuses
// the last view and what hangs on it while nothing they are a function of changed, and settles only the
// containers that arrived or changed. When only some instances' containers changed (a start, an end: their
// groups, and maybe their records' lists of containers), the view is updated for those instances alone
// (updateSlots), and settle's kinds are kept with it.
//
// What is kept for an instance or a container is kept for its object: the dispatcher hands over the same
// object while it is the same (dispatcher.ts `shown`, ../container-view.ts). Changing one in place between
// passes would leave what is kept stale.
import type { InstanceType } from '../../model/types.js';
import { matchLists, sameList, type Match } from './kept.js';
import type { LimitTotals, Limits } from './limits.js';
import { compareSlots, type Slot } from './capacity.js';
import { countsOwner, settleVisits, WAITS, type SettledBefore, type SettledOut } from './settle.js';
import { assignments, freeOn, isAssigned, unknownIds, type PoolView } from './pool.js';
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
  /** The lent capacity (opportunistic.ts), for this config and these estimates. */
  borrowing: { config: BorrowConfig; estimates: RunEstimates | undefined; of: Borrowing } | null;
}

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
    /** Views updated for the instances whose groups changed (and then reused). */
    updatedView: 0,
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
  view(snap: Snapshot, limits: Limits, until: (at: number) => void, build: () => PoolView): PoolView {
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
    // The instance records that changed only in their list of containers (a start or an end: the dispatcher
    // sets an instance's list again when its containers change).
    const relisted = same ? relistedOnly(l.instances, snap.instances) : null;
    // The same records in another array: the same instances.
    if (l !== null && relisted !== null && relisted.length === 0) l.instances = snap.instances;
    if (
      l !== null &&
      relisted !== null &&
      (l.groups !== this.version || relisted.length > 0) &&
      dirty !== null &&
      dirty.size + relisted.length <= MAX_DIRTY
    ) {
      // Only some instances' groups or lists changed: their slots made again, the rest of the view kept.
      if (this.updateSlots(l, dirty, relisted, config.ramOverhead)) {
        this.counts.updatedView++;
        l.groups = this.version;
        l.instances = snap.instances;
        l.borrowing = null;
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
    };
    return view;
  }

  /**
   * The last view's slots made again for the instances in `dirty` from their groups now, as viewPool would
   * make them, each moved to its place in slot order (compareSlots); false, and nothing changed, when one of
   * them would have no slot, or gets one (an instance that does not take work: held, draining, of a type no
   * longer configured, or with containers the snapshot does not describe; or a new one), or is not live:
   * then the view is made anew. Which instances are live, kept and shut down, and what they add to the
   * limits, do not depend on the groups of an instance that has a slot.
   */
  private updateSlots(
    l: LastView,
    dirty: ReadonlySet<string>,
    relisted: readonly SnapshotInstance[],
    ramOverhead: number,
  ): boolean {
    const { view } = l;
    const instanceOf = view.instanceOf as Map<string, SnapshotInstance>;
    const records = new Map<string, SnapshotInstance>();
    for (const r of relisted) {
      // A record kept by the view (one that takes work) is replaced below; any other is not read by it.
      if (instanceOf.has(r.id)) records.set(r.id, r);
      else if (view.keeps.has(r.id)) return false;
    }
    const fresh: { at: number; free: Slot['free']; count: number }[] = [];
    for (const id of new Set([...dirty, ...records.keys()])) {
      const inst = records.get(id) ?? view.instanceOf.get(id);
      if (inst === undefined) {
        // Not live or not kept (its containers are not assigned: settle.ts): nothing of the view reads its group.
        if (!view.keeps.has(id)) continue;
        return false;
      }
      const mine = this.groups.get(id) ?? [];
      if (unknownIds(inst.containers, mine) > 0) return false;
      const at = l.slots.findIndex((x) => x.id === id);
      if (at < 0) return false;
      fresh.push({ at, free: freeOn(l.slots[at]!.type, ramOverhead, mine), count: mine.length });
    }
    for (const [id, r] of records) instanceOf.set(id, r);
    const moved = fresh.map((f) => {
      const slot = l.slots[f.at]!;
      slot.free = f.free;
      slot.count = f.count;
      slot.occupants = f.count;
      return slot;
    });
    const v = l.vacating;
    for (const slot of moved) {
      const from = l.slots.indexOf(slot);
      l.slots.splice(from, 1);
      // Its place among the others (compareSlots is a total order: ties end on the id).
      let lo = 0;
      let hi = l.slots.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (compareSlots(l.slots[mid]!, slot) < 0) lo = mid + 1;
        else hi = mid;
      }
      l.slots.splice(lo, 0, slot);
      if (v !== null) {
        // vacate's slots keep indices into the slots: those between the two places shift by one; the
        // updated one is looked at again.
        const kept: number[] = [];
        for (const i of v.slots) {
          if (i === from) continue;
          kept.push(i > from && i <= lo ? i - 1 : i < from && i >= lo ? i + 1 : i);
        }
        v.slots = kept;
        v.recheck.add(slot.id);
      }
    }
    return true;
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
    if (b !== null && b.estimates === estimates && BORROW_FIELDS.every((f) => b.config[f] === config[f]))
      return b.of;
    l.borrowing = { config, estimates, of: make() };
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
 * The records of `now` that differ from `before`'s only in their list of containers (same id at the same
 * place, every other field equal), or null when any other field, or the list, changed.
 */
function relistedOnly(
  before: readonly SnapshotInstance[],
  now: readonly SnapshotInstance[],
): SnapshotInstance[] | null {
  if (before === now) return [];
  if (before.length !== now.length) return null;
  const out: SnapshotInstance[] = [];
  for (let i = 0; i < now.length; i++) {
    const a = before[i]!;
    const b = now[i]!;
    if (a === b) continue;
    if (!sameButContainers(a, b)) return null;
    out.push(b);
    if (out.length > MAX_DIRTY) return null;
  }
  return out;
}

/**
 * Whether two records of an instance are equal in every field but their list of containers (dates by time,
 * lists item by item); any other kind of value counts as changed (the view is then made anew).
 */
function sameButContainers(a: SnapshotInstance, b: SnapshotInstance): boolean {
  const keys = Object.keys(b) as (keyof SnapshotInstance)[];
  if (Object.keys(a).length !== keys.length) return false;
  for (const k of keys) {
    if (k === 'containers') continue;
    const x: unknown = a[k];
    const y: unknown = b[k];
    if (x === y) continue;
    if (x instanceof Date && y instanceof Date) {
      if (x.getTime() !== y.getTime()) return false;
    } else if (!(Array.isArray(x) && Array.isArray(y) && sameList(x, y))) return false;
  }
  return true;
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
  const before = kept.out === null ? null : { out: kept.out, added: m.added };
  return { kinds, owned, ...lists(kinds, containers, kept, m), out: null, before };
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
