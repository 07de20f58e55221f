// Placing the waiting containers, in queue order (DESIGN §6.2 rules 1–6): each goes on existing capacity
// (capacity.ts), on an instance planned in this pass (bins.ts), or on a new one; or it waits, and its
// status says why. At a global limit the first container stopped is the head (rule 5): nobody at or below
// its priority creates an instance, lower-priority Locked containers give back places it could use, and
// an instance is drained for it (heads.ts) so that lower-priority work arriving all the time cannot keep
// it waiting forever.
import type { InstanceType } from '../../model/types.js';
import { EndAligned, expectedRunOf } from './aligned.js';
import { joinBin, leaveBin, openBin } from './bins.js';
import { BootBudget } from './budget.js';
import type { Room, Slot } from './capacity.js';
import { Freeing } from './durations.js';
import type { Shape, ShapeCache } from './fitting.js';
import { reserveForHead } from './heads.js';
import type { LimitBlock } from './limits.js';
import { avoidedUntil } from './opportunistic.js';
import { matchLists, type KeptPass, type Match } from './kept.js';
import { sortQueue, takesTurns, turnOrder, updateQueue, type SortedQueue } from './ordering.js';
import { pairEnds } from './paired.js';
import type { Head, Pass, Placement } from './pass.js';
import { add, fits, subtract, typeCapacity } from './resources.js';
import { statusText } from './status.js';
import type { SnapshotContainer } from './types.js';

/** The type a shape would get now, and the wait reason when it cannot get one. */
interface Choice {
  version: number;
  /** The type to create, or null when no eligible type may be created (unavailable or capped). */
  type: InstanceType | null;
  /** A global or rate limit stopping the create of `type`. */
  block: LimitBlock | null;
  /** The reason (statuses index) of a container that waits for this. */
  waitReason: number;
  /** Cached reason for containers behind a blocked head, and the head it was built for. */
  behind: { head: Head; reason: number } | null;
}

/** Picks the cheapest type we may create now within the price factor; unavailable or capped types are
 * skipped without blocking anyone (rule 4). */
function chooseType(pass: Pass, shape: Shape): Choice {
  const { limits, statuses } = pass;
  const skipped: string[] = [];
  for (const t of shape.fitting) {
    if (t.price > shape.maxPrice) break;
    const capped = limits.typeCapped(t);
    if (limits.isUnavailable(t.name)) skipped.push(`${t.name} unavailable (cloud capacity error)`);
    else if (capped !== null) skipped.push(capped);
    else {
      const block = limits.check(t);
      const text =
        block === null
          ? ''
          : block.kind === 'rate'
            ? statusText.rateLimited(t.name, block.text)
            : statusText.limit(t.name, block.text);
      return { version: limits.version, type: t, block, waitReason: statuses.reason(text), behind: null };
    }
  }
  const want = shape.fitting[0]!;
  const text = statusText.noType(want.name, skipped.join(', '));
  return {
    version: limits.version,
    type: null,
    block: null,
    waitReason: statuses.reason(text),
    behind: null,
  };
}

/**
 * consider()'s flags: the container is Locked; it is opportunistic; its run time is expected (aligned.ts);
 * it has a name (a step for boot_budget, budget.ts).
 */
const LOCKED = 1;
const OPPORTUNISTIC = 2;
const ESTIMATED = 4;
const NAMED = 8;
/** facts[] packs a shape's number and the flags as number << FLAG_BITS | flags. */
const FLAG_BITS = 4;

/**
 * What placeWaiting reads of each waiting container, by its index in the waiting list (input order), and
 * their queue order. An incremental planner keeps the last pass's (kept.ts) and reads again only the
 * containers that arrived or changed (the others are the same objects, with the same facts).
 */
export interface WaitingFacts {
  readonly waiting: readonly SnapshotContainer[];
  /**
   * Side by side, so that reading them in queue order costs one cache miss: facts[2i] is container i's
   * priority, facts[2i + 1] its shape's number and its flags (FLAG_BITS).
   */
  readonly facts: Float64Array;
  /**
   * The same facts in queue order (before fair sharing's turns): qfacts[2k] are queue.byQueue[k]'s. Null
   * in a pass from scratch (no kept pass), which reads the facts once, through the order's indices.
   */
  readonly qfacts: Float64Array | null;
  readonly shapeOf: Uint32Array;
  /** Expected run times by index (ms; Infinity: unknown); null when no container has one. */
  readonly runs: Float64Array | null;
  /** How many containers have an expected run time. */
  readonly estimated: number;
  /** How many containers have a name (NAMED). */
  readonly named: number;
  /** The shapes by number (some may be no waiting container's any more). */
  readonly distinct: Shape[];
  readonly numberOf: Map<Shape, number>;
  readonly queue: SortedQueue;
  /** What the facts were read with: the shapes, and where run times come from (aligned.ts). */
  readonly shapes: ShapeCache;
  readonly runSource: RunSource;
}

/**
 * Where expected run times come from: end_aligned's mode and, for `history`, the estimates (their owner,
 * run-history.ts, hands over the same object while nothing changed).
 */
interface RunSource {
  mode: string;
  estimates: object | null;
}

function runSourceOf(pass: Pass): RunSource {
  const mode = pass.config.endAligned;
  return { mode, estimates: mode === 'history' ? (pass.snap.estimates ?? null) : null };
}

/** The pass's waiting facts: the kept ones updated when they can be (kept.ts), else read anew. */
function readFacts(pass: Pass): WaitingFacts {
  const kept = pass.kept;
  const last = kept?.waiting ?? null;
  const source = runSourceOf(pass);
  let out: WaitingFacts | null = null;
  if (
    kept !== undefined &&
    last !== null &&
    last.shapes === pass.shapes &&
    last.runSource.mode === source.mode &&
    last.runSource.estimates === source.estimates
  ) {
    const n = pass.waiting.length;
    const max = Math.max(64, n >> 4);
    // settle's match of the waiting lists (kept-pool.ts), when it has one for these lists; else match them.
    const w = kept.pool.waitMatch;
    const derived = w !== null && w.before === last.waiting;
    if (derived) kept.pool.counts.waitsMatched++;
    const m = derived
      ? differences(w.match, last.waiting.length) <= max
        ? w.match
        : null
      : matchLists(last.waiting, pass.waiting, max);
    if (m !== null) out = updateFacts(pass, kept, last, m);
  }
  if (kept !== undefined) kept.counts[out === null ? 'sorted' : 'merged']++;
  out ??= buildFacts(pass, source);
  if (kept !== undefined) kept.waiting = out;
  return out;
}

/** How many elements `m` added or found gone, of a list of `before` elements. */
function differences(m: Match, before: number): number {
  let kept = 0;
  for (let r = 0; r < m.from.length; r++) kept += m.to[r]! - m.from[r]!;
  return m.added.length + before - kept;
}

/** Shapes are looked up and facts copied in input order (file comment of placeWaiting). */
function buildFacts(pass: Pass, runSource: RunSource): WaitingFacts {
  const waiting = pass.waiting;
  const n = waiting.length;
  const w: Mutable = {
    facts: new Float64Array(2 * n),
    shapeOf: new Uint32Array(n),
    runs: null,
    estimated: 0,
    named: 0,
    distinct: [],
    numberOf: new Map(),
  };
  const runOf = expectedRunOf(pass);
  for (let i = 0; i < n; i++) readOne(pass, w, runOf, i, waiting[i]!);
  // Kept for the next pass: the containers and their facts in queue order too (a pass from scratch would
  // only pay for these, at a million containers as much as it saves in the walk).
  const inOrder = pass.kept !== undefined;
  const queue = sortQueue(waiting, inOrder);
  let qfacts: Float64Array | null = null;
  if (inOrder) {
    qfacts = new Float64Array(2 * n);
    for (let k = 0; k < n; k++) {
      const j = queue.order[k]!;
      qfacts[2 * k] = w.facts[2 * j]!;
      qfacts[2 * k + 1] = w.facts[2 * j + 1]!;
    }
  }
  return {
    ...w,
    qfacts,
    runs: w.estimated > 0 ? w.runs : null,
    waiting,
    queue,
    shapes: pass.shapes,
    runSource,
  };
}

/**
 * `last` with the containers of this pass, matched by kept.ts matchLists: the matched ones keep their
 * facts (copied run by run), the added ones (arrived, or changed: a new object) are read. Null when the
 * queue order cannot be updated.
 */
function updateFacts(pass: Pass, kept: KeptPass, last: WaitingFacts, m: Match): WaitingFacts | null {
  const waiting = pass.waiting;
  const n = waiting.length;
  // The arrays written here are reused from the pass before last (kept.ts Spare).
  const spare = kept.spare;
  spare.flip();
  const u = updateQueue(last.queue, last.waiting, waiting, m, spare);
  const lastQ = last.qfacts;
  if (u === null || lastQ === null) return null;
  const w: Mutable = {
    facts: spare.f64('facts', 2 * n),
    shapeOf: spare.u32('shapeOf', n),
    runs: last.runs === null ? null : spare.f64('runs', n).fill(Infinity),
    estimated: last.estimated,
    named: last.named,
    distinct: last.distinct,
    numberOf: last.numberOf,
  };
  let end = 0;
  for (let r = 0; r <= m.from.length; r++) {
    const gapTo = r < m.from.length ? m.from[r]! : last.waiting.length;
    if (last.runs !== null) for (let i = end; i < gapTo; i++) if (last.runs[i] !== Infinity) w.estimated--;
    for (let i = end; i < gapTo; i++) if ((last.facts[2 * i + 1]! & NAMED) !== 0) w.named--;
    if (r === m.from.length) break;
    const [from, to, to2] = [m.from[r]!, m.to[r]!, m.from[r]! + m.shift[r]!];
    w.facts.set(last.facts.subarray(2 * from, 2 * to), 2 * to2);
    w.shapeOf.set(last.shapeOf.subarray(from, to), to2);
    if (w.runs !== null) w.runs.set(last.runs!.subarray(from, to), to2);
    end = to;
  }
  const runOf = expectedRunOf(pass);
  for (const j of m.added) readOne(pass, w, runOf, j, waiting[j]!);
  const qfacts = spare.f64('qfacts', 2 * n);
  const order = u.queue.order;
  for (let k = 0; k < n; k++) {
    const s = u.from[k]!;
    const src = s >= 0 ? lastQ : w.facts;
    const at = s >= 0 ? s : order[k]!;
    qfacts[2 * k] = src[2 * at]!;
    qfacts[2 * k + 1] = src[2 * at + 1]!;
  }
  return {
    ...w,
    qfacts,
    runs: w.estimated > 0 ? w.runs : null,
    waiting,
    queue: u.queue,
    shapes: last.shapes,
    runSource: last.runSource,
  };
}

type Mutable = {
  -readonly [
    K in 'facts' | 'shapeOf' | 'runs' | 'estimated' | 'named' | 'distinct' | 'numberOf'
  ]: WaitingFacts[K];
};

/** Reads what consider() needs of waiting container `c` (index i) into `w`. */
function readOne(
  pass: Pass,
  w: Mutable,
  runOf: ((c: SnapshotContainer) => number | null) | null,
  i: number,
  c: SnapshotContainer,
): void {
  let flags = (c.state === 'Locked' ? LOCKED : 0) | (c.opportunistic === true ? OPPORTUNISTIC : 0);
  if (c.name !== undefined) {
    flags |= NAMED;
    w.named++;
  }
  const run = runOf === null ? null : runOf(c);
  if (run !== null) {
    w.runs ??= new Float64Array(w.shapeOf.length).fill(Infinity);
    w.runs[i] = run;
    w.estimated++;
    flags |= ESTIMATED;
  }
  const shape = pass.shapes.get(c);
  let k = w.numberOf.get(shape);
  if (k === undefined) {
    k = w.distinct.length;
    w.distinct.push(shape);
    w.numberOf.set(shape, k);
  }
  w.shapeOf[i] = k;
  w.facts[2 * i] = c.priority;
  w.facts[2 * i + 1] = (k << FLAG_BITS) | flags;
}

/** Walks the waiting containers in queue order and places each one it can. */
export function placeWaiting(pass: Pass): void {
  const fair = pass.config.fairShare ? { placed: pass.owners.placed } : null;
  const waiting = pass.waiting;
  // Shapes are looked up in input order (the containers' order in memory: at a million containers,
  // visiting them in queue order costs a cache miss each), as small numbers to count by.
  // What consider() reads of every container (priority, Locked, opportunistic, whether its run time is
  // expected) is copied too (readFacts), so that a container the limits keep waiting is not touched at
  // all in queue order. Expected run times (end_aligned's, read by pair_ends too) are looked up once
  // each; `runs` exists only when one is known, and then holds them by index (Infinity: unknown).
  const { facts, qfacts, shapeOf, runs, distinct, queue, named } = readFacts(pass);
  const placer = new Placer(pass, runs !== null, named > 0, distinct.length);
  pass.statuses.reserve(waiting.length);
  // How many containers of each shape are still to be considered: a planned instance grows for a
  // container when the ones like it behind it would fill what it grows by (bins.ts).
  const alike = new Uint32Array(distinct.length);
  for (let i = 0; i < shapeOf.length; i++) alike[shapeOf[i]!]!++;
  const mask = (1 << FLAG_BITS) - 1;
  const byQueue = queue.byQueue;
  if (
    byQueue !== null &&
    qfacts !== null &&
    (fair === null || !takesTurns(queue)) &&
    !(pass.config.pairEnds && runs !== null)
  ) {
    // Neither fair sharing's turns nor pair_ends reorder the queue: walk the containers and their facts
    // in queue order, one after the other in memory (at a million containers, reading them through the
    // order's indices costs two cache misses each).
    for (let i = 0; i < byQueue.length; i++) {
      const shapeAndFlags = qfacts[2 * i + 1]!;
      const k = shapeAndFlags >>> FLAG_BITS;
      placer.consider(byQueue[i]!, distinct[k]!, k, --alike[k]!, qfacts[2 * i]!, shapeAndFlags & mask);
    }
  } else {
    const order = turnOrder(queue, waiting, fair);
    pairEnds(pass, waiting, order, runs, queue.times);
    for (let i = 0; i < order.length; i++) {
      const j = order[i]!;
      const shapeAndFlags = facts[2 * j + 1]!;
      const k = shapeAndFlags >>> FLAG_BITS;
      placer.consider(waiting[j]!, distinct[k]!, k, --alike[k]!, facts[2 * j]!, shapeAndFlags & mask);
    }
  }
  placer.finishPlanned();
  pass.statuses.seal();
}

/**
 * What the last container of a shape waiting behind the head met, and when (a Placer's `behind`): a
 * container of that shape and no higher priority, with none of consider()'s flags, meets the same while
 * none of these changed.
 */
interface Behind {
  head: Head;
  priority: number;
  reason: number;
  /** Limits.version, Placer.evictVersion and Capacity.epoch when it waited. */
  limits: number;
  evict: number;
  epoch: number;
}

/**
 * consider()'s shortcut behind the head (Behind): whether it is taken (tests switch it off to compare the
 * plans with and without it: test/dispatch/behind-head.test.ts), and how many times it was.
 */
export const behindShortcut = { on: true, taken: 0 };

class Placer {
  private readonly choices = new Map<Shape, Choice>();
  /** By shape number (placeWaiting's distinct): see Behind. */
  private readonly behind: (Behind | undefined)[];
  private evictVersion = 0;
  private readonly evictFailed = new Map<string, { priority: number; version: number }>();
  private readonly unavailable: (name: string) => boolean;

  /** share_rule expected: the Locked containers each existing instance was created for, by container id. */
  private readonly createdFor = new Map<string, Slot>();
  /** wait_for_running: room expected to free up before a new instance could boot (durations.ts). */
  private freeing: Freeing | null | undefined;
  /** end_aligned: existing instances by the latest expected end of their containers (aligned.ts). */
  private readonly aligned: EndAligned | null;
  /** boot_budget: new capacity per step in proportion to its work (budget.ts). */
  private readonly budget: BootBudget | null;

  /**
   * `estimated`: some waiting container's run time is expected (else end_aligned has nothing to place);
   * `named`: some waiting container has a name (else boot_budget, which counts only named ones, allows
   * all: each of its calls below is about a waiting container).
   */
  constructor(
    private readonly pass: Pass,
    estimated: boolean,
    named: boolean,
    shapes: number,
  ) {
    this.behind = new Array<Behind | undefined>(shapes);
    this.unavailable = (name) => pass.limits.isUnavailable(name);
    this.aligned = estimated ? EndAligned.of(pass) : null;
    this.budget = named ? BootBudget.of(pass) : null;
    if (pass.config.shareRule === 'expected')
      for (const slot of pass.capacity.slots)
        for (const id of pass.pool.instanceOf.get(slot.id)?.createdFor ?? []) this.createdFor.set(id, slot);
  }

  /** What creating an instance for a shape runs into: computed once per shape and limits version. */
  private choose(shape: Shape): Choice {
    const known = this.choices.get(shape);
    if (known !== undefined && known.version === this.pass.limits.version) return known;
    const choice = chooseType(this.pass, shape);
    this.choices.set(shape, choice);
    return choice;
  }

  private wait(c: SnapshotContainer, reason: number): void {
    this.pass.statuses.wait(c, reason);
  }

  /**
   * `priority` and `flags` are c's (placeWaiting): read from c, they would cost a cache miss each; `k` is
   * its shape's number.
   */
  consider(
    c: SnapshotContainer,
    shape: Shape,
    k: number,
    alikeBehind: number,
    priority: number,
    flags: number,
  ): void {
    const pass = this.pass;
    // Behind the head, most containers meet what the last one of their shape met (Behind): no room, the
    // same type, no place to take back; they wait for the same reason without asking again.
    const b = this.behind[k];
    if (
      b !== undefined &&
      behindShortcut.on &&
      flags === 0 &&
      priority <= b.priority &&
      b.head === pass.head &&
      b.limits === pass.limits.version &&
      b.evict === this.evictVersion &&
      b.epoch === pass.capacity.epoch
    ) {
      behindShortcut.taken++;
      return this.wait(c, b.reason);
    }
    if (shape.unsatisfiable !== null) {
      pass.cancels.push({
        op: 'cancel',
        container: c.id,
        class: 'perm',
        reason: shape.unsatisfiable,
        retryable: false,
      });
      pass.say(c, statusText.cancelled(shape.unsatisfiable));
      return;
    }
    const full = pass.owners.max === null ? null : pass.owners.full(c.owner);
    if (full !== null) return this.wait(c, pass.statuses.reason(statusText.ownerFull(full)));
    const head = pass.head;
    const behindHead = head !== null && priority <= head.container.priority;
    // A planned instance grows for a container only when its step may have more new capacity (budget.ts).
    const grow = !behindHead && (this.budget?.allows(c) ?? true);
    // Behind a blocked head a planned instance does not grow: that would spend what the head waits for.
    const own = (flags & LOCKED) !== 0 ? this.createdFor.get(c.id) : undefined;
    const aligned =
      own === undefined && (flags & ESTIMATED) !== 0
        ? (this.aligned?.find(c, shape, priority) ?? null)
        : null;
    const room =
      (own !== undefined ? pass.capacity.roomOn(own, shape, priority, true, false) : null) ??
      (aligned !== null ? { slot: aligned, growTo: -1 } : null) ??
      pass.capacity.find(shape, priority, grow, alikeBehind);
    if (room !== null) return this.place(c, shape, room);
    if ((flags & OPPORTUNISTIC) !== 0) {
      const cap = pass.capacity;
      const lent = pass.borrowing.find(cap.slots, shape, (s) => {
        // Not back into the room of the instance that reclaimed it, for a while (replanned when that ends).
        const until = avoidedUntil(c, s.id, pass.now);
        if (until !== null) pass.until(until);
        return until === null && pass.borrowing.mayBorrow(cap, s, c, shape, pass.now, (at) => pass.until(at));
      });
      if (lent !== null) return this.place(c, shape, { slot: lent, growTo: -1 });
    }
    // No room anywhere: an instance must be created (or the container waits).
    const choice = this.choose(shape);
    if (choice.type === null) return this.wait(c, choice.waitReason);
    if (behindHead) {
      const taken = this.tryEvict(c, priority, shape, head.limit, false);
      if (taken !== null) return this.place(c, shape, taken);
      const reason = this.behindHeadReason(choice, head);
      // What a container with none of the flags met depends on nothing else of it (its owner's count
      // aside: not with max_running_per_user).
      if (flags === 0 && pass.owners.max === null)
        this.behind[k] = {
          head,
          priority,
          reason,
          limits: pass.limits.version,
          evict: this.evictVersion,
          epoch: pass.capacity.epoch,
        };
      return this.wait(c, reason);
    }
    const block = choice.block;
    if (block !== null && block.kind === 'rate') return this.wait(c, choice.waitReason);
    if (block !== null) {
      const taken = this.tryEvict(c, priority, shape, block.text, true);
      if (taken !== null) return this.place(c, shape, taken);
      if (head === null || priority > head.container.priority) {
        pass.head = { container: c, limit: block.text, block, type: choice.type };
        reserveForHead(pass, pass.head, shape);
      }
      return this.wait(c, choice.waitReason);
    }
    // Rather than boot an instance, wait for one expected to free up sooner (durations.ts).
    if (this.freeing === undefined) this.freeing = Freeing.of(pass);
    const soon = this.freeing?.claim(c, shape) ?? null;
    if (soon !== null) {
      this.budget?.servedLater(c);
      return this.wait(c, pass.statuses.reason(statusText.waitingFreeing(soon.id)));
    }
    if (!grow) return this.wait(c, pass.statuses.reason(statusText.bootBudget(pass.config.bootBudget)));
    const type = choice.type;
    const slot = openBin(
      `new-${++pass.planned}`,
      type,
      pass.typeIndex.get(type.name)!,
      pass.sortedTypes.length,
      pass.config.ramOverhead,
      this.unavailable,
      pass.sortedTypes,
    );
    pass.limits.add(type.name, type.price);
    pass.capacity.addPlanned(slot);
    this.place(c, shape, { slot, growTo: -1 });
  }

  private behindHeadReason(choice: Choice, head: Head): number {
    if (choice.behind === null || choice.behind.head !== head)
      choice.behind = {
        head,
        reason: this.pass.statuses.reason(
          statusText.behindHead(choice.type!.name, head.limit, head.container.id),
        ),
      };
    return choice.behind.reason;
  }

  private place(c: SnapshotContainer, shape: Shape, room: Room): void {
    const pass = this.pass;
    const slot = room.slot;
    if (slot.bin !== null)
      joinBin(slot, c, shape, room.growTo, pass.sortedTypes, pass.config.ramOverhead, pass.limits);
    else subtract(slot.free, shape.need);
    slot.count++;
    slot.used = true;
    this.aligned?.placed(c, slot);
    this.budget?.placed(c, slot);
    pass.owners.add(c.owner);
    if (c.state === 'Queued') pass.placeActions.push({ op: 'lock', container: c.id });
    let action = -1;
    if (slot.ready) {
      action = pass.placeActions.length;
      pass.placeActions.push({ op: 'start', container: c.id, instance: slot.id });
      pass.say(c, statusText.starting(slot.id));
    } else if (slot.createFor !== null) {
      // Its status names the type the instance finally gets (finishPlanned).
      slot.createFor.push(c.id);
    } else {
      pass.say(c, statusText.waitingExisting(slot.id, slot.state, slot.type.name));
    }
    if (c.state === 'Locked') {
      pass.evictable.push({ c, shape, slot, action, evicted: false });
      this.evictVersion++;
    }
  }

  /**
   * Rule 5 with rule 1's "Locked before Queued": a lower-priority Locked container placed earlier in this
   * pass gives its place back when a higher-priority container blocked at a limit could use it.
   */
  private tryEvict(
    c: SnapshotContainer,
    priority: number,
    shape: Shape,
    limit: string,
    grow: boolean,
  ): Room | null {
    const pass = this.pass;
    if (pass.evictable.length === 0) return null;
    const failed = this.evictFailed.get(shape.key);
    if (failed !== undefined && failed.version === this.evictVersion && failed.priority >= priority)
      return null;
    const bySlot = new Map<Slot, Placement[]>();
    for (const p of pass.evictable) {
      if (p.evicted || p.c.priority >= priority) continue;
      if (p.slot.bin === null && shape.usableByIndex[p.slot.typeIndex] !== 1) continue;
      const list = bySlot.get(p.slot);
      if (list === undefined) bySlot.set(p.slot, [p]);
      else list.push(p);
    }
    for (const [slot, list] of bySlot) {
      if (!this.roomWithout(slot, list, shape, priority, grow)) continue;
      // Lowest priority first, latest placed first among equals.
      const order = [...list].reverse().sort((a, b) => a.c.priority - b.c.priority);
      let room = pass.capacity.roomOn(slot, shape, priority, false, grow);
      for (const p of order) {
        if (room !== null) break;
        this.evict(p, slot, c, limit);
        room = pass.capacity.roomOn(slot, shape, priority, false, grow);
      }
      this.evictVersion++;
      pass.capacity.resetCursors();
      return room;
    }
    this.evictFailed.set(shape.key, { priority, version: this.evictVersion });
    return null;
  }

  /** Whether the shape would have room on the slot if the listed placements were taken back. */
  private roomWithout(slot: Slot, list: Placement[], shape: Shape, priority: number, grow: boolean): boolean {
    const pass = this.pass;
    if (priority < slot.reservedBelow) return false;
    const max = pass.config.maxContainersPerInstance;
    if (max !== 0 && slot.count - list.length >= max) return false;
    if (slot.bin === null) {
      const free = { ...slot.free };
      for (const p of list) add(free, p.shape.need);
      return fits(shape.need, free);
    }
    // A planned instance: what the remaining containers and the newcomer need, on a type all of them may use.
    const gone = new Set(list.map((p) => p.c));
    const total = { ...shape.need };
    const allowed = Uint8Array.from(shape.usableByIndex);
    for (const m of slot.bin.members) {
      if (gone.has(m.c)) continue;
      add(total, m.shape.need);
      for (let j = 0; j < allowed.length; j++) if (m.shape.usableByIndex[j] !== 1) allowed[j] = 0;
    }
    return pass.sortedTypes.some(
      (t, j) =>
        allowed[j] === 1 &&
        (j === slot.typeIndex ||
          (grow && !this.unavailable(t.name) && pass.limits.canReplace(slot.type, t))) &&
        fits(total, typeCapacity(t, pass.config.ramOverhead)),
    );
  }

  private evict(p: Placement, slot: Slot, head: SnapshotContainer, limit: string): void {
    const pass = this.pass;
    p.evicted = true;
    slot.count--;
    pass.owners.remove(p.c.owner);
    if (slot.bin !== null)
      leaveBin(slot, p.c, pass.sortedTypes, pass.config.ramOverhead, pass.limits, this.unavailable);
    else add(slot.free, p.shape.need);
    this.aligned?.roomReturned();
    this.budget?.removed(p.c, slot);
    if (p.action >= 0) pass.placeActions[p.action] = null;
    if (slot.createFor !== null) slot.createFor.splice(slot.createFor.indexOf(p.c.id), 1);
    const reason = statusText.unlockedForHigher(slot.id, head.id, limit);
    pass.unlocks.push({ op: 'unlock', container: p.c.id, reason });
    pass.say(p.c, statusText.unlocked(reason));
  }

  /** Instances planned in this pass have their final type: their containers' statuses name it. */
  finishPlanned(): void {
    for (const slot of this.pass.capacity.slots) {
      if (slot.createFor === null) continue;
      const text = statusText.waitingNew(slot.type.name);
      for (const id of slot.createFor) this.pass.statuses.own.set(id, text);
    }
  }
}
