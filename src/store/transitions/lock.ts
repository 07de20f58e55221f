// Queued → Locked: a dispatcher takes containers, by id or the next N in queue order. One statement
// each (the update, its events and the granted rows), so a pass's locks cost one round trip. Concurrent
// lockers of the same ids each get a disjoint subset: the row lock serialises them and the guard is
// re-evaluated after the wait.
import { statesFrom } from '../../model/transitions.js';
import type { StoreContext } from '../context.js';
import type { Queryable } from '../db.js';
import { ASSIGN_MESSAGE, LIVE_NODES, ON_LIVE_NODE, wakeNodes, type AssignItem } from './assign.js';
import { firstOfEach, HIDDEN } from './outcome.js';
import { CHANGE_STAMP } from '../change-stamp.js';

/** A row the lock statement granted: the per-lock token is made from its new generation. */
export interface LockedRow {
  id: string;
  lock_generation: number;
}

// The lock guard of src/model/transitions.ts refusal('lock'): from a state the table allows, priority > 0,
// run_after passed. $1 dispatcher, $2 now, $3 the states.
// By ids, the states are hidden from the planner (HIDDEN): the rows are read through the primary key, not
// by a scan of the queue's partial index for every lockable container.
const lockable = (states: string) =>
  `state = ANY(${states}) AND priority > 0 AND (run_after IS NULL OR run_after <= $2)`;
const SET = `state = 'Locked', locked_by = $1, lock_generation = lock_generation + 1,
  lock_count = lock_count + 1, updated_at = $2, ${CHANGE_STAMP}`;
const LOCK_MESSAGE = `'Locked by dispatcher ' || $1`;
const EVENTS = `INSERT INTO container_events (container_id, at, kind, message)
  SELECT id, $2, 'state', ${LOCK_MESSAGE} FROM l`;

export const LOCK_IDS_SQL = `WITH l AS (UPDATE containers SET ${SET} WHERE id = ANY($4) AND ${lockable(HIDDEN('$3'))} RETURNING id, lock_generation),
  e AS (${EVENTS})
  SELECT * FROM l`;

/** Locks each of ids that may be locked now; returns the rows granted. */
export async function lockIds(
  ctx: StoreContext,
  q: Queryable,
  ids: string[],
  dispatcherId: string,
): Promise<LockedRow[]> {
  if (ids.length === 0) return [];
  const r = await q.query<LockedRow>(LOCK_IDS_SQL, [dispatcherId, ctx.clock.now(), statesFrom('lock'), ids]);
  return r.rows;
}

/** Locks up to `limit` lockable containers in queue order, skipping rows other lockers hold. */
export async function lockNext(
  ctx: StoreContext,
  q: Queryable,
  dispatcherId: string,
  limit: number,
): Promise<LockedRow[]> {
  const r = await q.query<LockedRow>(
    // SKIP LOCKED: concurrent lockers take different rows instead of queueing behind each other.
    `WITH picked AS (
       SELECT id FROM containers WHERE ${lockable('$3::text[]')}
       ORDER BY priority DESC, queued_at, id LIMIT $4 FOR UPDATE SKIP LOCKED),
     l AS (UPDATE containers c SET ${SET} FROM picked WHERE c.id = picked.id RETURNING c.id, c.lock_generation),
     e AS (${EVENTS})
     SELECT * FROM l`,
    [dispatcherId, ctx.clock.now(), statesFrom('lock'), limit],
  );
  return r.rows;
}

// Lock and assign in one update, for a pass that places what it locks on a ready instance: one row
// version and one statement where lock then assign write two of each; both events, in that order. The
// assign guard's holder and state hold by construction, so the lock guard and the assign's live node are
// the guards. A container for a node that takes no work is not locked at all: it stays Queued with no
// lock spent, and the dispatcher counts it refused (not placed), as any other lock it was not granted.
export const LOCK_ASSIGN_SQL = `WITH ${LIVE_NODES('$6')},
  l AS (
    UPDATE containers c SET ${SET}, instance_id = i.instance, node_id = i.node
    FROM unnest($4::text[], $5::text[], $6::text[]) AS i(id, instance, node)
    WHERE c.id = i.id AND ${lockable(HIDDEN('$3'))} AND ${ON_LIVE_NODE('i.node')}
    RETURNING c.id, c.lock_generation, i.instance, i.node),
  e AS (INSERT INTO container_events (container_id, at, kind, message)
    SELECT id, $2, kind, message FROM (
      SELECT id, 1 AS o, 'state' AS kind, ${LOCK_MESSAGE} AS message FROM l
      UNION ALL SELECT id, 2, 'assign', ${ASSIGN_MESSAGE} FROM l) x
    ORDER BY id, o)
  SELECT id, lock_generation FROM l`;

/**
 * Locks and assigns each item that may be locked now onto a node that takes work; returns the rows
 * granted (the others: untouched).
 */
export async function lockAssign(
  ctx: StoreContext,
  q: Queryable,
  items: AssignItem[],
  dispatcherId: string,
): Promise<LockedRow[]> {
  const once = firstOfEach(items);
  if (once.length === 0) return [];
  const r = await q.query<LockedRow>({
    name: 'berth-lock-assign',
    text: LOCK_ASSIGN_SQL,
    values: [
      dispatcherId,
      ctx.clock.now(),
      statesFrom('lock'),
      once.map((it) => it.id),
      once.map((it) => it.instance),
      once.map((it) => it.node),
    ],
  });
  wakeNodes(ctx, once, new Set(r.rows.map((row) => row.id)));
  return r.rows;
}
