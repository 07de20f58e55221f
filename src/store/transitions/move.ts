// Locked → Running in another allocation (the slurm backend's allocation reuse, docs/SLURM.md): a node whose
// SLURM job has run its container asks for the next one. One statement picks, in Berth's order (priority,
// then queue time), a container Locked by the same dispatcher to a node whose job has not started (no agent
// registered there) and whose allocation fits what is left of the asker's, moves it to the asker with a new
// lock generation (a new per-lock token; the old one, never used, is void) and marks it started, as the
// one-shot registration does. Race-free by construction: the update's guard is the row's state and its old
// node, so of a second asker and the container's own job starting at that moment (start.ts's guard is the
// state, the node and the generation), exactly one wins; SKIP LOCKED sends a second asker to another row.
// It returns the moved container's start order (read with its update: the asker's next call in one round trip).
import type { StoreContext } from '../context.js';
import type { Db, Queryable } from '../db.js';
import { START_ORDER_COLUMNS, type StartOrderRow } from '../records.js';
import { CHANGE_STAMP } from '../change-stamp.js';

/** The instance id of a node bound to a SLURM job (`slurm-job-ID`); only such nodes reuse allocations. */
export const SLURM_JOB_INSTANCE_PREFIX = 'slurm-job-';

/** A moved container: what its start order is made of (with its new lock generation), the node it was Locked to. */
export type MovedRow = StartOrderRow & { from_node: string };

// Whether the candidate's allocation (ca) fits the asker's (aa) with `age` seconds of it gone: no more of
// each resource, the same partition and account, no constraint or the same one, and its container's
// max_run_time plus the asker's slack (to stop and report it) within what is left of the asker's --time (an
// allocation without --time takes any; a container without max_run_time only such an allocation).
const FITS = `(ca->>'cpus')::int <= (aa->>'cpus')::int
  AND (ca->>'mem_mib')::bigint <= (aa->>'mem_mib')::bigint
  AND (ca->>'tmp_mib')::bigint <= (aa->>'tmp_mib')::bigint
  AND (ca->>'gpus')::int <= (aa->>'gpus')::int
  AND ca->'partition' = aa->'partition' AND ca->'account' = aa->'account'
  AND (ca->'constraint' = 'null'::jsonb OR ca->'constraint' = aa->'constraint')
  AND (aa->'time_min' = 'null'::jsonb OR (ca->'run_ms' <> 'null'::jsonb
       AND (ca->>'run_ms')::float8 + (aa->'reuse'->>'slack_ms')::float8 <= ((aa->>'time_min')::float8 * 60 - age) * 1000))`;

// $1 now, $2 the asking node, $3 the states a start may come from, $4 the job instance prefix.
// The asker: bound to a SLURM job, registered, with reuse on, under its limits, and running nothing now.
export const MOVE_SQL = `
  WITH a AS (
    SELECT n.id, n.instance_id, n.cluster || '/' || n.dispatcher_tag AS holder, n.allocation AS aa,
      extract(epoch FROM ($1::timestamptz - n.registered_at)) AS age
    FROM nodes n
    WHERE n.id = $2 AND n.state <> 'failed' AND n.registered_at IS NOT NULL
      AND starts_with(n.instance_id, $4)
      AND jsonb_typeof(n.allocation->'reuse') = 'object'
      AND (n.allocation->>'runs')::int < (n.allocation->'reuse'->>'max_containers')::int
      AND extract(epoch FROM ($1::timestamptz - n.registered_at)) * 1000 < (n.allocation->'reuse'->>'max_ms')::float8
      AND NOT EXISTS (SELECT 1 FROM containers x WHERE x.node_id = n.id AND x.state IN ('Locked', 'Running'))
    FOR UPDATE OF n),
  -- The dispatcher's Locked containers walked in Berth's order (containers_locked_order, made by
  -- prepareAllocationMoves where a SLURM dispatcher runs; without it they are read and sorted), the
  -- first whose node fits taken: the fit is a per-row subquery, not a join, so that the planner walks the
  -- index and stops (as a join, its estimate of the JSON tests made it read them all and sort).
  picked AS (
    SELECT c.id, c.node_id AS old
    FROM containers c
    WHERE c.locked_by = (SELECT holder FROM a) AND c.state = ANY($3::text[]) AND c.priority > 0
      AND coalesce((SELECT ${FITS}
        FROM a, nodes o, LATERAL (SELECT o.allocation AS ca) x
        WHERE o.id = c.node_id AND o.id <> a.id AND o.state <> 'failed' AND o.registered_at IS NULL
          AND starts_with(o.instance_id, $4) AND o.allocation IS NOT NULL), false)
    ORDER BY c.priority DESC, c.queued_at, c.id
    LIMIT 1 FOR UPDATE OF c SKIP LOCKED),
  m AS (
    UPDATE containers c SET state = 'Running', node_id = a.id, instance_id = a.instance_id,
      lock_generation = c.lock_generation + 1, started_at = $1, updated_at = $1, ${CHANGE_STAMP}
    FROM picked, a
    WHERE c.id = picked.id AND c.state = ANY($3::text[]) AND c.node_id = picked.old
    RETURNING c.id, c.request_id, c.lock_generation, c.vcpus, c.ram, c.scratch, c.gpus, c.opportunistic,
      picked.old AS from_node),
  u AS (
    UPDATE nodes n SET allocation = jsonb_set(n.allocation, '{runs}', to_jsonb((n.allocation->>'runs')::int + 1)),
      updated_at = $1
    FROM m WHERE n.id = $2),
  e AS (
    INSERT INTO container_events (container_id, at, kind, message)
    SELECT m.id, $1, 'state', 'Running on node ' || a.id || ': moved to the allocation of SLURM job '
      || substr(a.instance_id, length($4) + 1) || ' (from node ' || m.from_node || ', whose job had not started)'
    FROM m, a)
  SELECT ${START_ORDER_COLUMNS}, c.from_node FROM m c JOIN container_requests r ON r.id = c.request_id`;

/** The index the move walks: a dispatcher's Locked containers in Berth's order (priority, then queue time). */
export const MOVE_INDEX = 'containers_locked_order';
const MOVE_INDEX_LOCK = 0x6265_726d; // "berm": one process builds the index at a time

/**
 * Creates the move's index unless it exists (the SLURM backend's setup, src/backends/slurm/service.ts, calls
 * this before its first pass). Only a database that runs SLURM dispatchers pays for it: every container that
 * enters Locked writes an entry (~5 % of the lifecycle rate, docs/PERFORMANCE.md), and no other path reads
 * it. Without it the move is still right, only slower (it reads and sorts the dispatcher's Locked containers:
 * ~15 ms at 2,000). Built CONCURRENTLY, so a populated database keeps taking writes; a build that died half
 * way leaves an invalid index, which is dropped and built again. Returns whether it built the index now.
 */
export async function prepareAllocationMoves(pool: Db): Promise<boolean> {
  const client = await pool.connect();
  client.on('error', () => {}); // a dying connection fails the next query instead of crashing the process
  try {
    // A session lock (CREATE INDEX CONCURRENTLY cannot run in a transaction), so that two dispatchers
    // starting at once build it once; it goes with the connection, which is closed, not pooled, after.
    await client.query('SELECT pg_advisory_lock($1)', [MOVE_INDEX_LOCK]);
    const r = await client.query<{ valid: boolean }>(
      `SELECT i.indisvalid AS valid FROM pg_index i WHERE i.indexrelid = to_regclass($1)`,
      [MOVE_INDEX],
    );
    if (r.rows[0]?.valid) return false;
    if (r.rows[0]) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${MOVE_INDEX}`);
    await client.query(
      `CREATE INDEX CONCURRENTLY ${MOVE_INDEX} ON containers (locked_by, priority DESC, queued_at, id)
       WHERE state = 'Locked'`,
    );
    return true;
  } finally {
    client.release(true);
  }
}

/** Moves the next fitting container to `nodeId`'s allocation; null when none fits (or the node may not). */
export async function moveToAllocation(
  ctx: StoreContext,
  q: Queryable,
  nodeId: string,
  startStates: string[],
): Promise<MovedRow | null> {
  const r = await q.query<MovedRow>(MOVE_SQL, [
    ctx.clock.now(),
    nodeId,
    startStates,
    SLURM_JOB_INSTANCE_PREFIX,
  ]);
  return r.rows[0] ?? null;
}
