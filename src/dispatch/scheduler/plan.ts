// One scheduler pass (DESIGN §6.2): a pure function of the snapshot. No I/O, no clock, no randomness;
// the same snapshot always gives the same plan, action for action.
//
// Steps: look at the pool (pool.ts), settle containers that need no placement (kill, unlock, cancel),
// then walk the waiting containers in queue order (ordering.ts) placing each on existing capacity
// (capacity.ts) or on an instance created for it (limits.ts), and finally shut idle instances down and
// top up the warm pool (shutdown.ts). Each waiting container gets a status text (status.ts).
import type { InstanceType } from '../../model/types.js';
import { Capacity, type Slot } from './capacity.js';
import { buildShape, compareTypes, ShapeCache, type Shape } from './fitting.js';
import { Limits, type LimitBlock } from './limits.js';
import { AheadCounter, queueOrder } from './ordering.js';
import { assignments, viewPool } from './pool.js';
import { add, containerNeed, subtract, typeCapacity } from './resources.js';
import { idleShutdowns } from './shutdown.js';
import { aheadText, statusText } from './status.js';
import type { Action, Plan, Snapshot, SnapshotContainer } from './types.js';

/** The type a shape would get now, and the wait text when it cannot get one. */
interface Choice {
  version: number;
  /** The type to create, or null when no eligible type may be created (unavailable or capped). */
  type: InstanceType | null;
  /** A global or rate limit stopping the create of `type`. */
  block: LimitBlock | null;
  /** The status text (after the queue position) of a container that waits for this reason. */
  waitText: string;
  /** Cached text for containers behind a blocked head, and the head it was built for. */
  behind: { head: Head; text: string } | null;
}

/** The first container a global limit stopped (rule 5). */
interface Head {
  container: SnapshotContainer;
  limit: string;
}

/** Picks the cheapest type we may create now within the price factor; unavailable or capped types are
 * skipped without blocking anyone (rule 4). */
function chooseType(shape: Shape, limits: Limits): Choice {
  const skipped: string[] = [];
  for (const t of shape.fitting) {
    if (t.price > shape.maxPrice) break;
    const capped = limits.typeCapped(t);
    if (limits.isUnavailable(t.name)) skipped.push(`${t.name} unavailable (cloud capacity error)`);
    else if (capped !== null) skipped.push(capped);
    else {
      const block = limits.check(t);
      const waitText =
        block === null
          ? ''
          : block.kind === 'rate'
            ? statusText.rateLimited(t.name, block.text)
            : statusText.limit(t.name, block.text);
      return { version: limits.version, type: t, block, waitText, behind: null };
    }
  }
  const want = shape.fitting[0]!;
  return {
    version: limits.version,
    type: null,
    block: null,
    waitText: statusText.noType(want.name, skipped.join(', ')),
    behind: null,
  };
}

function behindHeadText(choice: Choice, head: Head): string {
  if (choice.behind === null || choice.behind.head !== head)
    choice.behind = {
      head,
      text: statusText.behindHead(choice.type!.name, head.limit, head.container.id),
    };
  return choice.behind.text;
}

/** A placement made in this pass by a Locked container: the one kind rule 5 may take back. */
interface Placement {
  c: SnapshotContainer;
  slot: Slot;
  /** Index of its start action in `placeActions`, or -1 when it waits for a booting/new instance. */
  action: number;
  evicted: boolean;
}

function byContainer(a: Action, b: Action): number {
  const x = 'container' in a ? a.container : '';
  const y = 'container' in b ? b.container : '';
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Runs one scheduling pass. */
/**
 * A preemptible container interrupted `on_demand_after_interruptions` times or more is planned as a
 * non-preemptible one: on on-demand types only. The snapshot is returned as it is when none is.
 */
function onDemandAfterInterruptions(snap: Snapshot): Snapshot {
  const n = snap.config.onDemandAfterInterruptions;
  if (n === null) return snap;
  const moved = (c: SnapshotContainer) => c.preemptible && (c.spotInterruptions ?? 0) >= n;
  if (!snap.containers.some(moved)) return snap;
  return { ...snap, containers: snap.containers.map((c) => (moved(c) ? { ...c, preemptible: false } : c)) };
}

export function plan(input: Snapshot): Plan {
  const snap = onDemandAfterInterruptions(input);
  const { config } = snap;
  const now = snap.now.getTime();
  const sortedTypes = [...snap.instanceTypes].sort(compareTypes);
  const typesByName = new Map<string, InstanceType>(sortedTypes.map((t) => [t.name, t]));
  const typeIndex = new Map<string, number>(sortedTypes.map((t, i) => [t.name, i]));
  const limits = new Limits(snap);
  const status = new Map<string, string>();
  const kills: Action[] = [];
  const cancels: Action[] = [];
  const unlocks: Action[] = [];
  const placeActions: (Action | null)[] = [];
  const assigned = assignments(snap.containers);
  const pool = viewPool(snap, typesByName, typeIndex, assigned, limits);
  const capacity = new Capacity(pool.slots, config.maxContainersPerInstance);

  // Containers that need no place: running or assigned ones, priority-0 withdrawals, exhausted ones.
  const waiting: SnapshotContainer[] = [];
  for (const c of snap.containers) {
    const placed = c.instance !== null && pool.keeps.has(c.instance);
    if (c.state === 'Running') {
      if (c.priority === 0 && c.instance !== null)
        kills.push({ op: 'kill', container: c.id, instance: c.instance });
      continue;
    }
    if (c.priority <= 0) {
      if (c.state === 'Locked') {
        unlocks.push({ op: 'unlock', container: c.id, reason: statusText.priorityZero });
        status.set(c.id, statusText.unlocked(statusText.priorityZero));
      } else status.set(c.id, statusText.notScheduled);
      continue;
    }
    if (c.state === 'Locked' && placed) {
      const inst = pool.instanceOf.get(c.instance!);
      status.set(c.id, statusText.assigned(c.instance!, inst?.state ?? 'held or draining'));
      continue;
    }
    if (c.state === 'Queued' && c.lockCount >= config.maxDispatchAttempts) {
      const reason = statusText.dispatchAttempts(c.lockCount, config.maxDispatchAttempts);
      cancels.push({ op: 'cancel', container: c.id, class: 'perm', reason });
      status.set(c.id, statusText.cancelled(reason));
      continue;
    }
    waiting.push(c);
  }

  const shapes = new ShapeCache((c) =>
    buildShape(c, sortedTypes, config.ramOverhead, config.maxPriceFactor, config.maxSpendPerHour),
  );

  const evictable: Placement[] = [];
  let evictVersion = 0;
  const evictFailed = new Map<string, { priority: number; version: number }>();
  // The first container a global limit stopped (rule 5): no container at or below its priority may
  // create an instance in this pass.
  let head: Head | null = null;
  const ahead = new AheadCounter();
  let position = 0;
  let planned = 0;

  /** The status of the next container that waits: its queue position among waiting containers, then why. */
  // Containers of one priority mostly see the same count ahead and the same reason, so everything after
  // the position is built once per change and shared: one concatenation per container.
  let lastAhead = -1;
  let lastReason = '';
  let lastSuffix = '';
  const waitStatus = (priority: number, reason: string): string => {
    const higher = ahead.higherThan(priority);
    if (higher !== lastAhead || reason !== lastReason) {
      lastAhead = higher;
      lastReason = reason;
      lastSuffix = `${aheadText(higher)}; ${reason}`;
    }
    ahead.add(priority);
    return 'queue position ' + ++position + lastSuffix;
  };

  const place = (c: SnapshotContainer, slot: Slot): void => {
    subtract(slot.free, containerNeed(c));
    slot.count++;
    slot.used = true;
    if (c.state === 'Queued') placeActions.push({ op: 'lock', container: c.id });
    let action = -1;
    if (slot.ready) {
      action = placeActions.length;
      placeActions.push({ op: 'start', container: c.id, instance: slot.id });
      status.set(c.id, statusText.starting(slot.id));
    } else if (slot.createFor !== null) {
      slot.createFor.push(c.id);
      status.set(c.id, statusText.waitingNew(slot.type.name));
    } else {
      status.set(c.id, statusText.waitingExisting(slot.id, slot.state, slot.type.name));
    }
    if (c.state === 'Locked') {
      evictable.push({ c, slot, action, evicted: false });
      evictVersion++;
    }
  };

  // Rule 5 with rule 1's "Locked before Queued": a lower-priority Locked container placed earlier in
  // this pass gives its place back when a higher-priority container blocked at a limit could use it.
  const tryEvict = (c: SnapshotContainer, shape: Shape, limit: string): Slot | null => {
    if (evictable.length === 0) return null;
    const failed = evictFailed.get(shape.key);
    if (failed !== undefined && failed.version === evictVersion && failed.priority >= c.priority) return null;
    const bySlot = new Map<Slot, Placement[]>();
    for (const p of evictable) {
      if (p.evicted || p.c.priority >= c.priority || shape.usableByIndex[p.slot.typeIndex] !== 1) continue;
      const list = bySlot.get(p.slot);
      if (list === undefined) bySlot.set(p.slot, [p]);
      else list.push(p);
    }
    for (const [slot, list] of bySlot) {
      const free = { ...slot.free };
      for (const p of list) add(free, containerNeed(p.c));
      const probe: Slot = { ...slot, free, count: slot.count - list.length };
      if (!capacity.hasRoom(probe, shape.need)) continue;
      // Lowest priority first, latest placed first among equals.
      const order = [...list].reverse().sort((a, b) => a.c.priority - b.c.priority);
      for (const p of order) {
        if (capacity.hasRoom(slot, shape.need)) break;
        p.evicted = true;
        add(slot.free, containerNeed(p.c));
        slot.count--;
        if (p.action >= 0) placeActions[p.action] = null;
        if (slot.createFor !== null) slot.createFor.splice(slot.createFor.indexOf(p.c.id), 1);
        const reason = statusText.unlockedForHigher(slot.id, c.id, limit);
        unlocks.push({ op: 'unlock', container: p.c.id, reason });
        status.set(p.c.id, statusText.unlocked(reason));
      }
      evictVersion++;
      capacity.resetCursors();
      return slot;
    }
    evictFailed.set(shape.key, { priority: c.priority, version: evictVersion });
    return null;
  };

  // What creating an instance for a shape runs into. It only changes when an instance is added, so it
  // is computed once per shape and limits version, not once per waiting container: at a limit most
  // of a large queue takes this path.
  const choices = new Map<Shape, Choice>();
  const choose = (shape: Shape): Choice => {
    const known = choices.get(shape);
    if (known !== undefined && known.version === limits.version) return known;
    const choice = chooseType(shape, limits);
    choices.set(shape, choice);
    return choice;
  };

  for (const c of queueOrder(waiting)) {
    const shape = shapes.get(c);
    if (shape.unsatisfiable !== null) {
      cancels.push({
        op: 'cancel',
        container: c.id,
        class: 'perm',
        reason: shape.unsatisfiable,
        retryable: false,
      });
      status.set(c.id, statusText.cancelled(shape.unsatisfiable));
      continue;
    }
    const slot = capacity.find(shape);
    if (slot !== null) {
      place(c, slot);
      continue;
    }
    // No room anywhere: an instance must be created (or the container waits).
    const choice = choose(shape);
    if (choice.type === null) {
      status.set(c.id, waitStatus(c.priority, choice.waitText));
      continue;
    }
    const type = choice.type;
    if (head !== null && c.priority <= head.container.priority) {
      const taken = tryEvict(c, shape, head.limit);
      if (taken !== null) place(c, taken);
      else status.set(c.id, waitStatus(c.priority, behindHeadText(choice, head)));
      continue;
    }
    const block = choice.block;
    if (block !== null && block.kind === 'rate') {
      status.set(c.id, waitStatus(c.priority, choice.waitText));
      continue;
    }
    if (block !== null) {
      const taken = tryEvict(c, shape, block.text);
      if (taken !== null) {
        place(c, taken);
        continue;
      }
      if (head === null || c.priority > head.container.priority) head = { container: c, limit: block.text };
      status.set(c.id, waitStatus(c.priority, choice.waitText));
      continue;
    }
    const created: Slot = {
      id: `new-${++planned}`,
      type,
      typeIndex: typeIndex.get(type.name)!,
      state: 'new',
      ready: false,
      free: typeCapacity(type, config.ramOverhead),
      count: 0,
      createFor: [],
      used: false,
    };
    limits.add(type.name, type.price);
    capacity.addPlanned(created);
    place(c, created);
  }

  const shutdowns = [...pool.shutdowns];
  let liveAfter = limits.count - shutdowns.length;
  const idle = idleShutdowns(
    pool.slots,
    pool.instanceOf,
    config,
    now,
    liveAfter,
    head === null ? null : { container: head.container.id, limit: head.limit },
  );
  shutdowns.push(...idle);
  liveAfter -= idle.length;

  // Warm pool: top up to min_instances with the cheapest type we may create.
  const warm: InstanceType[] = [];
  while (liveAfter < config.minInstances) {
    const t = sortedTypes.find(
      (x) => !limits.isUnavailable(x.name) && limits.typeCapped(x) === null && limits.check(x) === null,
    );
    if (t === undefined) break;
    limits.add(t.name, t.price);
    warm.push(t);
    liveAfter++;
  }

  const creates: Action[] = [];
  for (const s of capacity.slots)
    if (s.createFor !== null && s.createFor.length > 0)
      creates.push({ op: 'create', type: s.type.name, for: s.createFor });
  for (const t of warm) creates.push({ op: 'create', type: t.name, for: [] });

  // Kills, cancels and unlocks were found in input order; sort them so the plan does not depend on it.
  for (const list of [kills, cancels, unlocks]) list.sort(byContainer);
  const actions: Action[] = [
    ...kills,
    ...cancels,
    ...unlocks,
    ...shutdowns.map((s): Action => ({ op: 'shutdown', instance: s.instance, reason: s.reason })),
    ...(placeActions.filter((a) => a !== null) as Action[]),
    ...creates,
  ];
  return { actions, status };
}
