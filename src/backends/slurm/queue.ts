// What the slurm dispatcher reads from PostgreSQL in a pass. Its writes are the store's transitions
// through the dispatcher queue (src/dispatch/pg-queue.ts): lock, assign, unlock, cancel, nodes.
import type { Db } from '../../store/db.js';
import type { SlurmConfig } from './config.js';
import type { HeldContainer, NodeInfo, QueuedContainer } from './plan.js';
import type { Allocation } from './sbatch.js';

/** Containers this dispatcher holds (containers_live, its second column: migration 230). */
export async function heldContainers(pool: Db, dispatcherId: string): Promise<HeldContainer[]> {
  const r = await pool.query(
    `SELECT id, state, priority, updated_at, node_id FROM containers
     WHERE locked_by = $1 AND state IN ('Locked', 'Running')`,
    [dispatcherId],
  );
  return r.rows.map((row) => ({
    id: row.id,
    state: row.state,
    priority: row.priority,
    updatedAt: row.updated_at,
    nodeId: row.node_id,
  }));
}

/**
 * Runnable Queued containers in Berth's order (priority, then queue time), at most `limit`: the partial
 * queue index serves the order, and the request row gives max_run_time (for --time).
 */
export async function runnableQueued(pool: Db, now: Date, limit: number): Promise<QueuedContainer[]> {
  const r = await pool.query(
    `SELECT c.id, c.priority, c.vcpus, c.ram, c.scratch, c.gpus, c.instance_types, r.max_run_time_ms
     FROM containers c JOIN container_requests r ON r.id = c.request_id
     WHERE c.state = 'Queued' AND c.priority > 0 AND (c.run_after IS NULL OR c.run_after <= $1)
     ORDER BY c.priority DESC, c.queued_at, c.id LIMIT $2`,
    [now, limit],
  );
  return r.rows.map((row) => ({
    id: row.id,
    priority: row.priority,
    vcpus: row.vcpus,
    ram: Number(row.ram),
    scratch: Number(row.scratch),
    gpus: row.gpus,
    instanceTypes: row.instance_types,
    maxRunTimeMs: row.max_run_time_ms === null ? null : Number(row.max_run_time_ms),
  }));
}

/** This dispatcher's node records that are not failed (one per SLURM job). */
export async function liveNodes(pool: Db, cluster: string, tag: string): Promise<NodeInfo[]> {
  const r = await pool.query(
    `SELECT id, instance_id, last_ping_at FROM nodes
     WHERE cluster = $1 AND dispatcher_tag = $2 AND state <> 'failed'`,
    [cluster, tag],
  );
  return r.rows.map((row) => ({ id: row.id, instanceId: row.instance_id, lastPingAt: row.last_ping_at }));
}

/** The state of each named container; null for names that are not containers of this database. */
export async function containerStates(pool: Db, ids: string[]): Promise<Map<string, string | null>> {
  const out = new Map<string, string | null>(ids.map((id) => [id, null]));
  if (ids.length === 0) return out;
  const r = await pool.query(`SELECT id, state FROM containers WHERE id = ANY($1)`, [ids]);
  for (const row of r.rows) out.set(row.id, row.state);
  return out;
}

/** Whether this dispatcher's jobs take further containers after their own (the move transition's callers). */
export function reusesAllocations(cfg: Pick<SlurmConfig, 'reuseAllocation'>): boolean {
  return cfg.reuseAllocation.enabled && cfg.reuseAllocation.maxContainers > 1;
}

/**
 * Records on each node what its job asks SLURM for, with the reuse limits and a run count of 1 (the store's
 * move transition, src/store/transitions/move.ts, reads them): one statement for a pass's submissions.
 * `slack_ms`: what a moved container needs beyond its max_run_time in what is left of the allocation (its
 * agent stops it in agent_kill_grace and reports it; 10 s for that report).
 */
export async function recordAllocations(
  pool: Db,
  items: { node: string; allocation: Allocation }[],
  cfg: Pick<SlurmConfig, 'reuseAllocation' | 'agentKillGraceMs'>,
): Promise<void> {
  if (items.length === 0) return;
  const reuse = cfg.reuseAllocation;
  const limits = reusesAllocations(cfg)
    ? {
        max_containers: reuse.maxContainers,
        max_ms: reuse.maxTimeMs,
        slack_ms: cfg.agentKillGraceMs + 10_000,
      }
    : null;
  await pool.query(
    `UPDATE nodes n SET allocation = a.allocation
     FROM unnest($1::text[], $2::jsonb[]) AS a(id, allocation) WHERE n.id = a.id`,
    [
      items.map((it) => it.node),
      items.map((it) => JSON.stringify({ ...it.allocation, reuse: limits, runs: 1 })),
    ],
  );
}
