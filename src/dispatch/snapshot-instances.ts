// The snapshot's instances, kept across passes (issue 12: a pass costs what changed, not the pool). Each
// pool instance keeps its SnapshotInstance object while the fields the scheduler reads stay the same, so a
// pass allocates nothing for the instances that did not change, and the incremental planner
// (scheduler/incremental.ts) finds them equal by reference. The list keeps the pool's order (the
// dispatcher's map: creation order), which the run history reads (run-history.ts).
import type { PoolInstance } from './pool.js';
import type { SnapshotInstance } from './scheduler/types.js';

/** Where a pool instance keeps its last view (a symbol: not a field of the record, not serialised). */
const VIEW = Symbol('snapshot view');

type Viewed = PoolInstance & { [VIEW]?: SnapshotInstance };

/** The scheduler's view of the pool's instances that are not gone, in the pool's order. */
export function snapshotInstances(pool: Iterable<PoolInstance>): SnapshotInstance[] {
  const out: SnapshotInstance[] = [];
  for (const i of pool as Iterable<Viewed>) {
    if (i.state === 'gone') continue;
    let v = i[VIEW];
    if (v === undefined || !current(v, i)) v = i[VIEW] = viewOf(i);
    out.push(v);
  }
  return out;
}

/** The fields of a pool instance the scheduler reads (DESIGN §6.4). */
function viewOf(i: PoolInstance): SnapshotInstance {
  return {
    id: i.id,
    type: i.type,
    state: i.state,
    idleBehavior: i.idleBehavior,
    containers: i.containers,
    stateSince: i.stateSince,
    createdAt: i.createdAt,
    ...(i.createdFor && { createdFor: i.createdFor }),
  };
}

/** Whether `v` still describes `i` (its lists compared by reference: the dispatcher replaces, never edits). */
function current(v: SnapshotInstance, i: PoolInstance): boolean {
  return (
    v.state === i.state &&
    v.idleBehavior === i.idleBehavior &&
    v.type === i.type &&
    v.containers === i.containers &&
    (v.stateSince === i.stateSince || v.stateSince.getTime() === i.stateSince.getTime()) &&
    (v.createdAt === i.createdAt || v.createdAt.getTime() === i.createdAt.getTime()) &&
    v.createdFor === i.createdFor
  );
}
