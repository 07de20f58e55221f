// Containers that need no place (the first phase of a pass, plan.ts): running or assigned ones (counted
// for their owners), priority-0 withdrawals, exhausted ones. The rest wait for a place (placement.ts).
import type { Pass } from './pass.js';
import { statusText } from './status.js';
import type { SnapshotContainer } from './types.js';

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
 * Containers that need no place: running or assigned ones (counted for their owners), priority-0
 * withdrawals, exhausted ones. The rest wait for a place. Which of these a container is depends on it,
 * the pool view and max_dispatch_attempts only: an incremental planner keeps it for the containers that
 * did not change while they are the same (kept-pool.ts), so a pass does not read every container again.
 */
export function settle(pass: Pass): void {
  const { config, pool } = pass;
  const containers = pass.snap.containers;
  const kindOf = (c: SnapshotContainer) => settleAs(c, pool.keeps, config.maxDispatchAttempts);
  const kept = pass.kept?.pool.settled(containers, config.maxDispatchAttempts, kindOf);
  if (kept === undefined) {
    for (const c of containers) {
      const kind = kindOf(c);
      if (kind === WAITS) pass.waiting.push(c);
      else settleOne(pass, c, kind);
      if (countsOwner(kind)) pass.owners.add(c.owner);
    }
    return;
  }
  // The waiting list and the containers to visit as they changed (kept-pool.ts), in input order: a pass
  // does not step through every container again.
  const { kinds, owned, visits, waiting } = kept;
  pass.waiting = waiting;
  for (let v = 0; v < visits.length; v++) settleOne(pass, containers[visits[v]!]!, kinds[visits[v]!]!);
  // Counted as they changed (kept-pool.ts), not container by container.
  for (const [owner, n] of owned) pass.owners.add(owner, n);
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

/** The actions and status of a container that does not wait (settleAs says which; none for a running one). */
function settleOne(pass: Pass, c: SnapshotContainer, kind: number): void {
  const { config, pool } = pass;
  switch (kind) {
    case KILLED:
      pass.kills.push({ op: 'kill', container: c.id, instance: c.instance! });
      return;
    case UNLOCKED:
      pass.unlocks.push({ op: 'unlock', container: c.id, reason: statusText.priorityZero });
      pass.say(c, statusText.unlocked(statusText.priorityZero));
      return;
    case NOT_SCHEDULED:
      pass.say(c, statusText.notScheduled);
      return;
    case ASSIGNED: {
      const inst = pool.instanceOf.get(c.instance!);
      pass.say(c, statusText.assigned(c.instance!, inst?.state ?? 'held or draining'));
      return;
    }
    case CANCELLED: {
      const reason = statusText.dispatchAttempts(c.lockCount, config.maxDispatchAttempts);
      pass.cancels.push({ op: 'cancel', container: c.id, class: 'perm', reason });
      pass.say(c, statusText.cancelled(reason));
      return;
    }
  }
}
