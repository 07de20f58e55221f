// Containers one at a time, for the API and tests: each call is a batch of one through the transitions
// module (src/store/transitions/), its refusal thrown as the error the API maps to a status (NotFound,
// Forbidden, Conflict: DESIGN §3.2, changing nothing). Also what an agent's ping reads and records.
import type { UsageSample } from '../api/schemas.js';
import type { Actor } from '../model/transitions.js';
import type { ContainerState, FailureClass } from '../model/types.js';
import { changeStampIf } from './change-stamp.js';
import type { StoreContext } from './context.js';
import { ConflictError, NotFoundError } from './errors.js';
import { pauseOrders, type PauseRow } from './pause.js';
import {
  CONTAINER_COLUMNS,
  withStatusText,
  START_ORDER_COLUMNS,
  type ContainerRecord,
  type StartOrderRow,
  type Usage,
} from './records.js';
import { appendLogs } from './logs.js';
import { lockToken } from './secrets.js';
import type { GrantedLock, Transitions } from './transitions/index.js';
import { one } from './transitions/outcome.js';

export type { GrantedLock, UsageSample };
export { CANCEL_GRACE_MS } from './transitions/grace.js';

/** Who asks for a cancel; decides what they may cancel. */
export type Canceller =
  | { kind: 'user'; owner: string | null /* null = admin */ }
  | { kind: 'dispatcher'; dispatcherId: string }
  | { kind: 'node'; nodeId: string; token: string }
  | { kind: 'system' };

export interface ExitReport {
  exitCode: number;
  oomKilled: boolean;
  usage: Usage | null;
  reason?: string | null;
}

/** A container for an agent to start: its spec and the per-lock token for its reports. */
export interface StartOrder {
  id: string;
  /** Its request: what the attempts of one request share (the application's checkpoint). */
  request_id?: string;
  lock_token: string;
  image: string | null;
  command: string[];
  env: Record<string, string>;
  /** Secret environment values: set in the container like env, never shown or logged. */
  secret_env: Record<string, string>;
  cwd: string | null;
  vcpus: number;
  ram: number;
  scratch: number;
  gpus: number;
  max_run_time_ms: number | null;
  /** It may be frozen and handed back when guaranteed containers claim their capacity (src/agent/pressure.ts). */
  opportunistic?: boolean;
  /** Its request has a kept checkpoint (src/store/checkpoints.ts): the agent downloads it before starting. */
  checkpoint?: boolean;
  /** Already Running: its start was recorded with the order (a one-shot agent's registration). */
  started?: boolean;
}

export interface NodeWork {
  start: StartOrder[];
  kill: string[];
  /** Running containers to freeze (berth pause) and to thaw (berth resume); see pause.ts. */
  pause: string[];
  resume: string[];
}

/** How long a Running container may be missing from its agent's pings before it counts as lost. */
export const UNKNOWN_TO_AGENT_GRACE_MS = 90_000;

/**
 * A Running container's usage sample stamps the change feed when the last stamped one is this old
 * (recordUsage): the dispatcher's view of what it lends lags by at most this much, against
 * opportunistic_min_observation's default of 5 minutes before it lends anything.
 */
export const USAGE_STAMP_INTERVAL_MS = 30_000;
/** ... or when its peak memory grew by this share of its request since the stamped sample. */
export const USAGE_STAMP_GROWTH = 1 / 16;

/** The actor of a cancel. */
function actorOf(by: Canceller, generation: number | null): Actor {
  switch (by.kind) {
    case 'user':
      return { kind: 'user', owner: by.owner };
    case 'dispatcher':
      return { kind: 'dispatcher', id: by.dispatcherId };
    case 'node':
      return { kind: 'agent', node: by.nodeId, generation };
    case 'system':
      return { kind: 'system' };
  }
}

export class Containers {
  constructor(
    private readonly ctx: StoreContext,
    private readonly t: Transitions,
  ) {}

  async get(id: string): Promise<ContainerRecord> {
    const r = await this.ctx.pool.query(`SELECT ${CONTAINER_COLUMNS} FROM containers WHERE id = $1`, [id]);
    if (!r.rows[0]) throw new NotFoundError(`container ${id} not found`);
    return withStatusText(r.rows[0]);
  }

  /** The containers of ids that exist, in one query. */
  async getMany(ids: string[]): Promise<ContainerRecord[]> {
    if (ids.length === 0) return [];
    const r = await this.ctx.pool.query(`SELECT ${CONTAINER_COLUMNS} FROM containers WHERE id = ANY($1)`, [
      ids,
    ]);
    return r.rows.map(withStatusText);
  }

  /** The per-lock token of a container that is Locked or Running (for delivery to its agent). */
  async tokenFor(id: string): Promise<string> {
    const row = await this.ctx.pool.query(`SELECT lock_generation, state FROM containers WHERE id = $1`, [
      id,
    ]);
    const r = row.rows[0];
    if (!r) throw new NotFoundError(`container ${id} not found`);
    if (r.state !== 'Locked' && r.state !== 'Running')
      throw new ConflictError(`container ${id} is ${r.state}, not Locked or Running`);
    return this.t.token(id, r.lock_generation);
  }

  /**
   * True when token may append to the container's logs: its current per-lock token, or the token it ran
   * under while in its cancel grace (transitions/grace.ts). The check of appendLogs, appending nothing.
   */
  async tokenValid(id: string, token: string): Promise<boolean> {
    const r = await this.ctx.pool.query(`SELECT node_id FROM containers WHERE id = $1`, [id]);
    if (!r.rows[0]) throw new NotFoundError(`container ${id} not found`);
    const generation = this.t.generation(await this.t.lockKey(), id, token);
    const [o] = await appendLogs(this.ctx, this.ctx.pool, [
      { id, node: r.rows[0].node_id ?? '', generation, chunks: [] },
    ]);
    return o!.ok;
  }

  /** Queued → Locked for each of ids that is still Queued, runnable and has priority > 0. */
  lock(ids: string[], dispatcherId: string): Promise<GrantedLock[]> {
    return this.t.lock(ids, dispatcherId);
  }

  /** Locks up to `limit` runnable Queued containers in queue order, skipping rows other lockers hold. */
  lockNext(dispatcherId: string, limit: number): Promise<GrantedLock[]> {
    return this.t.lockNext(dispatcherId, limit);
  }

  /**
   * Locked → Queued, by the lock holder only; the per-lock token is revoked. A container whose
   * max_dispatch_attempts-th lock ends here is cancelled perm instead. Returns the state it reached.
   */
  async unlock(id: string, dispatcherId: string, reason: string): Promise<ContainerState> {
    return one(await this.t.unlock([{ id, reason }], dispatcherId)).state;
  }

  /** The lock holder places a Locked container on an instance (and its node, once registered). */
  async assign(id: string, dispatcherId: string, instanceId: string, nodeId: string | null): Promise<void> {
    one(await this.t.assign([{ id, instance: instanceId, node: nodeId }], dispatcherId));
  }

  /** Locked → Running, reported by the assigned agent holding the current per-lock token. */
  async start(id: string, nodeId: string, token: string): Promise<void> {
    one(await this.t.start([{ id, node: nodeId, token }]));
  }

  /** Running → Complete with the exit code and usage, reported by the agent; then retry or finalise. */
  async complete(
    id: string,
    nodeId: string,
    token: string,
    exit: ExitReport,
  ): Promise<{ retryId: string | null; afterCancel?: true }> {
    const actor = await this.t.agent({ id, node: nodeId, token });
    const end = {
      state: 'Complete' as const,
      exitCode: exit.exitCode,
      oomKilled: exit.oomKilled,
      usage: exit.usage,
      reason: exit.reason ?? null,
    };
    const o = one(await this.t.end([{ id, actor, end }]));
    return o.afterCancel ? { retryId: null, afterCancel: true } : { retryId: o.retryId ?? null };
  }

  /**
   * → Cancelled with a failure class; who may cancel what is decided by `by`. `retryable: false` says no
   * retry can succeed (the request ends at once, whatever attempts are left).
   */
  async cancel(
    id: string,
    by: Canceller,
    failureClass: FailureClass,
    reason: string,
    opts: { retryable?: boolean; interrupted?: boolean; reclaimed?: boolean } = {},
  ): Promise<{ retryId: string | null }> {
    const generation =
      by.kind === 'node' ? (await this.t.agent({ id, node: by.nodeId, token: by.token })).generation : null;
    const end = {
      state: 'Cancelled' as const,
      failureClass,
      reason,
      retryable: opts.retryable ?? true,
      interrupted: opts.interrupted ?? false,
      reclaimed: opts.reclaimed ?? false,
    };
    return { retryId: one(await this.t.end([{ id, actor: actorOf(by, generation), end }])).retryId ?? null };
  }

  /**
   * Containers Running on the node that its agent does not report running, though they started more
   * than `graceMs` ago: the agent has lost them (its journal did not hold them when it restarted, or its
   * disk was replaced), so no exit will ever be reported. They are cancelled (temp) and retried. The
   * grace outlasts the longest ping (60 s), so a ping sent before a container started never counts.
   */
  async cancelUnknownToAgent(
    nodeId: string,
    running: string[],
    graceMs = UNKNOWN_TO_AGENT_GRACE_MS,
  ): Promise<string[]> {
    const before = new Date(this.ctx.clock.now().getTime() - graceMs);
    const lost = await this.ctx.pool.query<{ id: string }>(
      `SELECT id FROM containers
       WHERE node_id = $1 AND state = 'Running' AND started_at < $2 AND NOT (id = ANY($3)) ORDER BY id`,
      [nodeId, before, running],
    );
    if (lost.rows.length === 0) return [];
    const reason = `the agent on node ${nodeId} no longer reports it running (lost in an agent restart)`;
    // Re-checked by the end's guard: one that completed meanwhile is left alone.
    const out = await this.t.end(
      lost.rows.map(({ id }) => ({
        id,
        actor: { kind: 'node', node: nodeId },
        end: { state: 'Cancelled', failureClass: 'temp', reason },
      })),
    );
    return out.filter((o) => o.ok).map((o) => o.id);
  }

  /**
   * The start order of one container, when it is Locked to the node (what workFor would list for it, read
   * for that container alone: a one-shot agent's registration); null otherwise.
   */
  async startOrderFor(nodeId: string, containerId: string): Promise<StartOrder | null> {
    const [order] = await this.startOrders(`c.node_id = $1 AND c.state = 'Locked' AND c.id = $2`, [
      nodeId,
      containerId,
    ]);
    return order ?? null;
  }

  /**
   * What a node should do: containers assigned to it and not yet started (with their spec and per-lock
   * token), and which of the containers it reports running it must kill (cancelled, or no longer its own).
   */
  async workFor(nodeId: string, running: string[], paused?: string[]): Promise<NodeWork> {
    const start = await this.startOrders(`c.node_id = $1 AND c.state = 'Locked' AND NOT (c.id = ANY($2))`, [
      nodeId,
      running,
    ]);
    const live = await this.ctx.pool.query<PauseRow>(
      `SELECT id, state, pause_wanted, paused FROM containers
       WHERE id = ANY($1) AND node_id = $2 AND state IN ('Locked', 'Running')`,
      [running, nodeId],
    );
    const keep = new Set(live.rows.map((r) => r.id));
    return {
      start,
      kill: running.filter((id) => !keep.has(id)),
      ...pauseOrders(live.rows, paused),
    };
  }

  /** Start orders of the containers `where` selects (c: containers, r: their requests), by id. */
  private async startOrders(where: string, params: unknown[]): Promise<StartOrder[]> {
    const key = await this.t.lockKey();
    const r = await this.ctx.pool.query<StartOrderRow>(
      `SELECT ${START_ORDER_COLUMNS}
       FROM containers c JOIN container_requests r ON r.id = c.request_id
       WHERE ${where} ORDER BY c.id`,
      params,
    );
    return r.rows.map((r) => startOrder(key, r));
  }

  /**
   * Stores the latest usage samples of the node's Running containers in `usage` (with the wall time so
   * far), where the exit report's final usage later replaces them. Samples for containers that are not
   * Running on this node are ignored. updated_at is left alone: a sample is not a state change. The change
   * feed's stamp is set when the dispatcher's incremental view (changes()) must see the sample, or
   * opportunistic placement would never learn what a guaranteed container lends (only a whole read every
   * `full_reload_passes` passes would bring it): the first sample, a sample USAGE_STAMP_INTERVAL_MS or more
   * after the last stamped one, and a sample whose peak memory grew by USAGE_STAMP_GROWTH of the request
   * since it (less lent room, at once). The others, every ping in between, update `usage` alone: no
   * change-feed row, and a HOT update where the page has room (migration 222).
   */
  async recordUsage(nodeId: string, samples: Record<string, UsageSample>): Promise<void> {
    const ids = Object.keys(samples);
    if (ids.length === 0) return;
    const s = ids.map((id) => samples[id]!);
    // One UPDATE whose WHERE names the state: a container that ended while the sample waited for its row
    // (the exit report's final usage committed first) is re-checked and left alone. (A CTE that read the
    // row first and an UPDATE joined to it on id alone wrote the stale sample over the final usage.)
    const stamp = `(c.usage_stamped_at IS NULL
      OR c.usage_stamped_at <= $3::timestamptz - make_interval(secs => $7::float8 / 1000)
      OR u.peak_ram - COALESCE(c.usage_stamped_peak, 0) >= c.ram * $8::float8)`;
    await this.ctx.pool.query(
      `UPDATE containers c SET usage = jsonb_build_object(
         'cpu_seconds', u.cpu_seconds, 'ram', u.ram, 'peak_ram', u.peak_ram, 'sampled_at', $3::timestamptz,
         'wall_ms', GREATEST(0, (extract(epoch FROM ($3::timestamptz - c.started_at)) * 1000)::bigint)),
         usage_stamped_at = CASE WHEN ${stamp} THEN $3::timestamptz ELSE c.usage_stamped_at END,
         usage_stamped_peak = CASE WHEN ${stamp} THEN u.peak_ram ELSE c.usage_stamped_peak END,
         ${changeStampIf(stamp)}
       FROM unnest($2::text[], $4::float8[], $5::bigint[], $6::bigint[]) AS u(id, cpu_seconds, ram, peak_ram)
       WHERE c.id = u.id AND c.node_id = $1 AND c.state = 'Running'`,
      [
        nodeId,
        ids,
        this.ctx.clock.now(),
        s.map((x) => x.cpu_seconds),
        s.map((x) => x.ram),
        s.map((x) => x.peak_ram),
        USAGE_STAMP_INTERVAL_MS,
        USAGE_STAMP_GROWTH,
      ],
    );
  }

  /**
   * A SLURM job's node that ran its container: the next container that fits its allocation, moved to it and
   * started (transitions/move.ts), as a start order marked started; none when nothing fits.
   */
  async nextInAllocation(nodeId: string): Promise<StartOrder[]> {
    // The move's statement returns what the order is made of (read with its update: one round trip).
    const moved = await this.t.moveToAllocation(nodeId);
    if (!moved) return [];
    return [{ ...startOrder(await this.t.lockKey(), moved), started: true }];
  }
}

/** A start order from its row (START_ORDER_COLUMNS), with its per-lock token. */
function startOrder(key: Buffer, r: StartOrderRow): StartOrder {
  return {
    id: r.id,
    request_id: r.request_id,
    lock_token: lockToken(key, r.id, r.lock_generation),
    image: r.image,
    command: r.command,
    env: r.env,
    secret_env: r.secret_env,
    cwd: r.cwd,
    vcpus: r.vcpus,
    ram: r.ram,
    scratch: r.scratch,
    gpus: r.gpus,
    max_run_time_ms: r.max_run_time_ms,
    ...(r.opportunistic ? { opportunistic: true } : {}),
    ...(r.has_checkpoint ? { checkpoint: true } : {}),
  };
}
