// Containers that need no place (the first phase of a pass, plan.ts): running or assigned ones (counted
// for their owners), priority-0 withdrawals, exhausted ones. The rest wait for a place (placement.ts).
import type { Pass } from './pass.js';
import { statusText } from './status.js';
import type { SettledTexts } from './statuses.js';
import type { Action, SnapshotContainer } from './types.js';

/** What settle does with a container (settleAs), one byte each: kept by an incremental planner. */
export const WAITS = 0;
const KILLED = 1;
const RUNS_HERE = 2;
const RUNS_ELSEWHERE = 3;
const UNLOCKED = 4;
const NOT_SCHEDULED = 5;
const ASSIGNED = 6;
const CANCELLED = 7;

/**
 * What settle gives the containers it visits (settleVisits), side by side in input order: their texts
 * (statuses.ts SettledTexts) and actions (null: none). An incremental planner keeps it with the kinds
 * (kept-pool.ts Settled) and hands the same object to the next pass while none of these containers
 * changed: never changed once made.
 */
export interface SettledOut extends SettledTexts {
  readonly acts: readonly (Action | null)[];
  /** The actions of `acts`, in order. */
  readonly actions: readonly Action[];
}

/**
 * The last pass's SettledOut and the containers added since (indices, increasing): what a pass updates;
 * with the instances whose state changed in a view updated in place (kept-pool.ts updateSlots), whose
 * assigned containers' texts name that state (null: none).
 */
export interface SettledBefore {
  readonly out: SettledOut;
  readonly added: readonly number[];
  readonly restated: ReadonlySet<string> | null;
}

interface OutLists {
  containers: SnapshotContainer[];
  texts: (string | null)[];
  acts: (Action | null)[];
}

/**
 * Containers that need no place: running or assigned ones (counted for their owners), priority-0
 * withdrawals, exhausted ones. The rest wait for a place. Which of these a container is depends on it,
 * the pool view and max_dispatch_attempts only: an incremental planner keeps it for the containers that
 * did not change while they are the same (kept-pool.ts), so a pass does not read every container again;
 * and it keeps their texts and actions too (SettledOut), so that a pass makes them only for the
 * containers that arrived or changed.
 */
export function settle(pass: Pass): void {
  const { config, pool } = pass;
  const containers = pass.snap.containers;
  const kindOf = (c: SnapshotContainer) => settleAs(c, pool.keeps, config.maxDispatchAttempts);
  const kept = pass.kept?.pool.settled(containers, config.maxDispatchAttempts, kindOf);
  if (kept === undefined) {
    const out: OutLists = { containers: [], texts: [], acts: [] };
    for (const c of containers) {
      const kind = kindOf(c);
      if (kind === WAITS) pass.waiting.push(c);
      else if (settleVisits(kind)) settleOne(pass, c, kind, out);
      if (countsOwner(kind)) pass.owners.add(c.owner);
    }
    give(pass, finish(out));
    return;
  }
  // The waiting list and the containers to visit as they changed (kept-pool.ts), in input order: a pass
  // does not step through every container again.
  pass.waiting = kept.waiting;
  if (kept.out === null) {
    const before = kept.before;
    kept.out = settledOut(pass, containers, kept.kinds, kept.visits, before);
    kept.before = null;
    if (before !== null) pass.kept!.pool.counts[kept.out === before.out ? 'textsShared' : 'textsUpdated']++;
  }
  give(pass, kept.out);
  // Counted as they changed (kept-pool.ts), not container by container.
  for (const [owner, n] of kept.owned) pass.owners.add(owner, n);
}

/** The pass's texts and actions of settle: `out`'s (shared, not copied). */
function give(pass: Pass, out: SettledOut): void {
  pass.statuses.settled = out;
  for (const a of out.actions)
    (a.op === 'kill' ? pass.kills : a.op === 'cancel' ? pass.cancels : pass.unlocks).push(a);
}

function finish(out: OutLists): SettledOut {
  return { ...out, actions: out.acts.filter((a) => a !== null) };
}

/**
 * The texts and actions of the containers at `visits`: `before`'s for those that did not change (the same
 * objects, in the same order: their kinds are kept with them), settleOne's for those added since and for
 * those on an instance whose state changed (`restated`: an assigned container's text names it). The same
 * object as `before`'s when no visited container came or went and no instance was restated.
 */
function settledOut(
  pass: Pass,
  containers: readonly SnapshotContainer[],
  kinds: Uint8Array,
  visits: Int32Array,
  before: SettledBefore | null,
): SettledOut {
  const out: OutLists = { containers: [], texts: [], acts: [] };
  if (before === null) {
    for (let v = 0; v < visits.length; v++) settleOne(pass, containers[visits[v]!]!, kinds[visits[v]!]!, out);
    return finish(out);
  }
  const { added, restated } = before;
  const last = before.out;
  let addedVisits = 0;
  for (const j of added) if (settleVisits(kinds[j]!)) addedVisits++;
  if (addedVisits === 0 && restated === null && visits.length === last.containers.length) return last;
  let a = 0;
  let p = 0;
  for (let v = 0; v < visits.length; v++) {
    const j = visits[v]!;
    const c = containers[j]!;
    while (a < added.length && added[a]! < j) a++;
    if (
      (a < added.length && added[a] === j) ||
      (restated !== null && c.instance !== null && restated.has(c.instance))
    ) {
      settleOne(pass, c, kinds[j]!, out);
      continue;
    }
    // A container that did not change: its entry is the last pass's (those gone since are skipped).
    while (p < last.containers.length && last.containers[p] !== c) p++;
    if (p === last.containers.length) throw new Error(`settle: container ${c.id} was not settled before`);
    out.containers.push(c);
    out.texts.push(last.texts[p]!);
    out.acts.push(last.acts[p]!);
    p++;
  }
  return finish(out);
}

/** Whether settle gives a container of this kind actions or a status (settleOne): all but waiting and running ones. */
export function settleVisits(kind: number): boolean {
  return kind !== WAITS && kind !== RUNS_HERE && kind !== RUNS_ELSEWHERE;
}

/** Whether a container of this kind counts for its owner (max_running_per_user, fair sharing). */
export function countsOwner(kind: number): boolean {
  return kind === RUNS_HERE || kind === ASSIGNED;
}

/** What settle does with `c` (the kinds above). */
export function settleAs(
  c: SnapshotContainer,
  keeps: ReadonlySet<string>,
  maxDispatchAttempts: number,
): number {
  const placed = c.instance !== null && keeps.has(c.instance);
  if (c.state === 'Running') {
    if (c.priority === 0 && c.instance !== null) return KILLED;
    return placed ? RUNS_HERE : RUNS_ELSEWHERE;
  }
  if (c.priority <= 0) return c.state === 'Locked' ? UNLOCKED : NOT_SCHEDULED;
  if (c.state === 'Locked' && placed) return ASSIGNED;
  if (c.state === 'Queued' && c.lockCount >= maxDispatchAttempts) return CANCELLED;
  return WAITS;
}

/** The actions and status of a container that settle visits (settleVisits), appended to `out`. */
function settleOne(pass: Pass, c: SnapshotContainer, kind: number, out: OutLists): void {
  const { config, pool } = pass;
  let text: string | null = null;
  let act: Action | null = null;
  switch (kind) {
    case KILLED:
      act = { op: 'kill', container: c.id, instance: c.instance! };
      break;
    case UNLOCKED:
      act = { op: 'unlock', container: c.id, reason: statusText.priorityZero };
      text = statusText.unlocked(statusText.priorityZero);
      break;
    case NOT_SCHEDULED:
      text = statusText.notScheduled;
      break;
    case ASSIGNED: {
      const inst = pool.instanceOf.get(c.instance!);
      text = statusText.assigned(c.instance!, inst?.state ?? 'held or draining');
      break;
    }
    case CANCELLED: {
      const reason = statusText.dispatchAttempts(c.lockCount, config.maxDispatchAttempts);
      act = { op: 'cancel', container: c.id, class: 'perm', reason };
      text = statusText.cancelled(reason);
      break;
    }
  }
  out.containers.push(c);
  out.texts.push(text);
  out.acts.push(act);
}
