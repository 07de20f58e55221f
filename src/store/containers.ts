// Container transitions (DESIGN §3.2). Each is one transaction that locks the row, checks the current
// state (and, for lock-holder and agent operations, the holder and the per-lock token), and refuses an
// illegal change with a ConflictError that says why, changing nothing.
import type { UsageSample } from '../api/schemas.js';
import {
  isFinalContainerState,
  isLegalTransition,
  type ContainerState,
  type FailureClass,
} from '../model/types.js';
import type { StoreContext } from './context.js';
import { withRetriedTx, type Tx } from './db.js';
import { AlreadyFinishedError, ConflictError, ForbiddenError, NotFoundError } from './errors.js';
import {
  addEvent,
  cancelContainer,
  finishContainer,
  recordExitAfterCancel,
  type CancelOptions,
} from './finish.js';
import { CONTAINER_COLUMNS, type ContainerRecord, type Usage } from './records.js';
import { lockKey, lockToken, lockTokenValid } from './secrets.js';
import { maxDispatchAttempts } from './settings.js';

/** The columns of Row. */
const ROW_COLUMNS = `id, state, locked_by, lock_generation, lock_count, node_id, instance_id, owner, priority,
  run_after, started_at, finished_at, exit_code`;

/** A lock granted to a dispatcher: the per-lock token goes to the agent that will run the container. */
export interface GrantedLock {
  id: string;
  token: string;
}

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
}

export type { UsageSample };

export interface NodeWork {
  start: StartOrder[];
  kill: string[];
}

interface Row {
  id: string;
  state: ContainerState;
  locked_by: string | null;
  lock_generation: number;
  lock_count: number;
  node_id: string | null;
  instance_id: string | null;
  owner: string;
  priority: number;
  run_after: Date | null;
  started_at: Date | null;
  finished_at: Date | null;
  exit_code: number | null;
}

/**
 * The cancel grace (issue 10 item 8): a container cancelled while Running goes on running for the agent's
 * kill grace (SIGTERM, then SIGKILL), and what it prints meanwhile and how it ended are worth keeping. The
 * per-lock token it ran under stays good, after the cancel revoked it, for exactly two things: appending
 * its logs, and one final report of its exit code and usage, which closes the grace. Neither changes the
 * container's state (it stays Cancelled: no container completes twice), and the grace ends this long after
 * the cancel in any case, so an agent that comes back much later is refused as any stale writer is.
 */
export const CANCEL_GRACE_MS = 3_600_000;

/** How long a Running container may be missing from its agent's pings before it counts as lost. */
export const UNKNOWN_TO_AGENT_GRACE_MS = 90_000;

export class Containers {
  private key: Buffer | null = null;

  constructor(private readonly ctx: StoreContext) {}

  private async lockKey(): Promise<Buffer> {
    this.key ??= await lockKey(this.ctx.pool);
    return this.key;
  }

  async get(id: string): Promise<ContainerRecord> {
    const r = await this.ctx.pool.query(`SELECT ${CONTAINER_COLUMNS} FROM containers WHERE id = $1`, [id]);
    if (!r.rows[0]) throw new NotFoundError(`container ${id} not found`);
    return r.rows[0];
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
    return lockToken(await this.lockKey(), id, r.lock_generation);
  }

  /**
   * True when token may append to the container's logs: its current per-lock token, or the token it ran
   * under while in its cancel grace (see CANCEL_GRACE_MS).
   */
  async tokenValid(id: string, token: string): Promise<boolean> {
    const r = await this.ctx.pool.query(`SELECT ${ROW_COLUMNS} FROM containers WHERE id = $1`, [id]);
    if (!r.rows[0]) throw new NotFoundError(`container ${id} not found`);
    const row = r.rows[0] as Row;
    const key = await this.lockKey();
    return lockTokenValid(key, id, row.lock_generation, token) || (await this.inCancelGrace(row, key, token));
  }

  /**
   * Whether token is the one a cancelled container ran under and its cancel grace is still open: not on a
   * node declared failed, whose containers were cancelled because it was lost (its agent is exactly the
   * stale writer DESIGN §3.2 refuses).
   */
  private async inCancelGrace(row: Row, key: Buffer, token: string): Promise<boolean> {
    const open =
      row.state === 'Cancelled' &&
      row.started_at !== null &&
      row.exit_code === null &&
      row.finished_at !== null &&
      this.ctx.clock.now().getTime() - new Date(row.finished_at).getTime() <= CANCEL_GRACE_MS &&
      // cancelContainer moved the generation on by one: the running token is of the one before.
      lockTokenValid(key, row.id, row.lock_generation - 1, token);
    if (!open || row.node_id === null) return false;
    const node = await this.ctx.pool.query(`SELECT state FROM nodes WHERE id = $1`, [row.node_id]);
    return node.rows[0] !== undefined && node.rows[0].state !== 'failed';
  }

  /**
   * Queued → Locked for each of ids that is still Queued, runnable (run_after passed) and has priority > 0.
   * Concurrent lockers of the same ids each get a disjoint subset: the row lock serialises them and the
   * state check is re-evaluated after the wait.
   */
  async lock(ids: string[], dispatcherId: string): Promise<GrantedLock[]> {
    if (ids.length === 0) return [];
    const key = await this.lockKey();
    return withRetriedTx(this.ctx.pool, async (tx) => {
      const now = this.ctx.clock.now();
      const r = await tx.query(
        `UPDATE containers SET state = 'Locked', locked_by = $2, lock_generation = lock_generation + 1,
           lock_count = lock_count + 1, updated_at = $3
         WHERE id = ANY($1) AND state = 'Queued' AND priority > 0 AND (run_after IS NULL OR run_after <= $3)
         RETURNING id, lock_generation`,
        [ids, dispatcherId, now],
      );
      return this.granted(tx, now, dispatcherId, key, r.rows);
    });
  }

  /** Locks up to `limit` runnable Queued containers in queue order, skipping rows other lockers hold. */
  async lockNext(dispatcherId: string, limit: number): Promise<GrantedLock[]> {
    const key = await this.lockKey();
    return withRetriedTx(this.ctx.pool, async (tx) => {
      const now = this.ctx.clock.now();
      // SKIP LOCKED: concurrent lockers take different rows instead of queueing behind each other.
      const r = await tx.query(
        `WITH picked AS (
           SELECT id FROM containers
           WHERE state = 'Queued' AND priority > 0 AND (run_after IS NULL OR run_after <= $3)
           ORDER BY priority DESC, queued_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
         UPDATE containers c SET state = 'Locked', locked_by = $1, lock_generation = lock_generation + 1,
           lock_count = lock_count + 1, updated_at = $3
         FROM picked WHERE c.id = picked.id RETURNING c.id, c.lock_generation`,
        [dispatcherId, limit, now],
      );
      return this.granted(tx, now, dispatcherId, key, r.rows);
    });
  }

  /**
   * Locked → Queued, by the lock holder only; the per-lock token is revoked. A container whose
   * max_dispatch_attempts-th lock ends here (lock_count >= max) is cancelled perm instead.
   */
  async unlock(id: string, dispatcherId: string, reason: string): Promise<ContainerState> {
    return withRetriedTx(this.ctx.pool, async (tx) => {
      const row = await this.row(tx, id);
      this.expect(row, 'Queued');
      if (row.locked_by !== dispatcherId)
        throw new ConflictError(`container ${id} is locked by ${row.locked_by}, not by ${dispatcherId}`);
      const now = this.ctx.clock.now();
      const max = await maxDispatchAttempts(tx);
      if (row.lock_count >= max) {
        await cancelContainer(
          this.ctx,
          tx,
          id,
          'perm',
          `locked and unlocked ${row.lock_count} times (max_dispatch_attempts=${max}); last: ${reason}`,
        );
        return 'Cancelled';
      }
      await tx.query(
        `UPDATE containers SET state = 'Queued', locked_by = NULL, lock_generation = lock_generation + 1,
           instance_id = NULL, node_id = NULL, updated_at = $2 WHERE id = $1`,
        [id, now],
      );
      await addEvent(tx, now, id, 'state', `Queued: unlocked by ${dispatcherId}: ${reason}`);
      return 'Queued';
    });
  }

  /** The lock holder places a Locked container on an instance (and its node, once registered). */
  async assign(id: string, dispatcherId: string, instanceId: string, nodeId: string | null): Promise<void> {
    await withRetriedTx(this.ctx.pool, async (tx) => {
      const row = await this.row(tx, id);
      if (row.state !== 'Locked')
        throw new ConflictError(`container ${id} is ${row.state}; only a Locked container can be assigned`);
      if (row.locked_by !== dispatcherId)
        throw new ConflictError(`container ${id} is locked by ${row.locked_by}, not by ${dispatcherId}`);
      const now = this.ctx.clock.now();
      await tx.query(`UPDATE containers SET instance_id = $2, node_id = $3, updated_at = $4 WHERE id = $1`, [
        id,
        instanceId,
        nodeId,
        now,
      ]);
      await addEvent(
        tx,
        now,
        id,
        'assign',
        `assigned to instance ${instanceId}${nodeId ? ` (node ${nodeId})` : ''}`,
      );
    });
    // Wakes the node's long-poll ping at once.
    if (nodeId) this.ctx.wake.send('berth_node', nodeId);
  }

  /** Locked → Running, reported by the assigned agent holding the current per-lock token. */
  async start(id: string, nodeId: string, token: string): Promise<void> {
    await withRetriedTx(this.ctx.pool, async (tx) => {
      const row = await this.agentRow(tx, id, nodeId, token);
      this.expect(row, 'Running');
      const now = this.ctx.clock.now();
      await tx.query(
        `UPDATE containers SET state = 'Running', started_at = $2, updated_at = $2 WHERE id = $1`,
        [id, now],
      );
      await addEvent(tx, now, id, 'state', `Running on node ${nodeId}`);
    });
  }

  /**
   * Running → Complete with the exit code and usage, reported by the agent; then retry or finalise. For a
   * container in its cancel grace, the report is recorded on the Cancelled container instead (exit code,
   * OOM, usage; the state and the request's course stay as the cancel left them) and closes the grace.
   */
  async complete(
    id: string,
    nodeId: string,
    token: string,
    exit: ExitReport,
  ): Promise<{ retryId: string | null; afterCancel?: true }> {
    return withRetriedTx(this.ctx.pool, async (tx) => {
      const current = await this.row(tx, id);
      if (current.node_id === nodeId && (await this.inCancelGrace(current, await this.lockKey(), token))) {
        await recordExitAfterCancel(this.ctx, tx, id, exit);
        return { retryId: null, afterCancel: true };
      }
      const row = await this.agentRow(tx, id, nodeId, token);
      this.expect(row, 'Complete');
      return finishContainer(this.ctx, tx, id, {
        state: 'Complete',
        exitCode: exit.exitCode,
        oomKilled: exit.oomKilled,
        usage: exit.usage,
        reason: exit.reason ?? null,
      });
    });
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
    opts: CancelOptions = {},
  ): Promise<{ retryId: string | null }> {
    return withRetriedTx(this.ctx.pool, async (tx) => {
      const row =
        by.kind === 'node' ? await this.agentRow(tx, id, by.nodeId, by.token) : await this.row(tx, id);
      if (by.kind === 'user' && by.owner !== null && row.owner !== by.owner)
        throw new NotFoundError(`container ${id} not found`);
      if (by.kind === 'dispatcher' && row.locked_by !== by.dispatcherId) {
        throw new ConflictError(
          `container ${id} is ${row.locked_by ? `locked by ${row.locked_by}` : 'not locked'}, not by ${by.dispatcherId}`,
        );
      }
      // Nothing left to stop: say so in words, not as a transition (berth cancel reports it as done).
      if (isFinalContainerState(row.state)) throw new AlreadyFinishedError(id, row.state);
      this.expect(row, 'Cancelled');
      return cancelContainer(this.ctx, tx, id, failureClass, reason, opts);
    });
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
    const lost = await this.ctx.pool.query(
      `SELECT id FROM containers
       WHERE node_id = $1 AND state = 'Running' AND started_at < $2 AND NOT (id = ANY($3)) ORDER BY id`,
      [nodeId, before, running],
    );
    const cancelled: string[] = [];
    for (const { id } of lost.rows as { id: string }[]) {
      const done = await withRetriedTx(this.ctx.pool, async (tx) => {
        const row = await this.row(tx, id);
        // Re-checked under the row lock: it may have completed meanwhile.
        if (row.state !== 'Running' || row.node_id !== nodeId) return false;
        await cancelContainer(
          this.ctx,
          tx,
          id,
          'temp',
          `the agent on node ${nodeId} no longer reports it running (lost in an agent restart)`,
        );
        return true;
      });
      if (done) cancelled.push(id);
    }
    return cancelled;
  }

  /**
   * What a node should do: containers assigned to it and not yet started (with their spec and per-lock
   * token), and which of the containers it reports running it must kill (cancelled, or no longer its own).
   */
  async workFor(nodeId: string, running: string[]): Promise<NodeWork> {
    const key = await this.lockKey();
    const start = await this.ctx.pool.query(
      `SELECT c.id, c.lock_generation, c.vcpus, c.ram, c.scratch, c.gpus, r.image, r.command, r.env, r.secret_env,
         r.cwd, r.max_run_time_ms
       FROM containers c JOIN container_requests r ON r.id = c.request_id
       WHERE c.node_id = $1 AND c.state = 'Locked' AND NOT (c.id = ANY($2)) ORDER BY c.id`,
      [nodeId, running],
    );
    const live = await this.ctx.pool.query(
      `SELECT id FROM containers WHERE id = ANY($1) AND node_id = $2 AND state IN ('Locked', 'Running')`,
      [running, nodeId],
    );
    const keep = new Set(live.rows.map((r) => r.id as string));
    return {
      start: start.rows.map((r) => ({
        id: r.id,
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
      })),
      kill: running.filter((id) => !keep.has(id)),
    };
  }

  /**
   * Stores the latest usage samples of the node's Running containers in `usage` (with the wall time so
   * far), where the exit report's final usage later replaces them. Samples for containers that are not
   * Running on this node are ignored. updated_at is left alone: a sample is not a state change.
   */
  async recordUsage(nodeId: string, samples: Record<string, UsageSample>): Promise<void> {
    const ids = Object.keys(samples);
    if (ids.length === 0) return;
    const s = ids.map((id) => samples[id]!);
    await this.ctx.pool.query(
      `UPDATE containers c SET usage = jsonb_build_object(
         'cpu_seconds', u.cpu_seconds, 'ram', u.ram, 'peak_ram', u.peak_ram, 'sampled_at', $3::timestamptz,
         'wall_ms', GREATEST(0, (extract(epoch FROM ($3::timestamptz - c.started_at)) * 1000)::bigint))
       FROM unnest($2::text[], $4::float8[], $5::bigint[], $6::bigint[]) AS u(id, cpu_seconds, ram, peak_ram)
       WHERE c.id = u.id AND c.node_id = $1 AND c.state = 'Running'`,
      [
        nodeId,
        ids,
        this.ctx.clock.now(),
        s.map((x) => x.cpu_seconds),
        s.map((x) => x.ram),
        s.map((x) => x.peak_ram),
      ],
    );
  }

  private async row(tx: Tx, id: string): Promise<Row> {
    const r = await tx.query(`SELECT ${ROW_COLUMNS} FROM containers WHERE id = $1 FOR UPDATE`, [id]);
    if (!r.rows[0]) throw new NotFoundError(`container ${id} not found`);
    return r.rows[0];
  }

  /** The row for an agent operation: assigned to this node, with the current per-lock token. */
  private async agentRow(tx: Tx, id: string, nodeId: string, token: string): Promise<Row> {
    const row = await this.row(tx, id);
    if (row.node_id !== nodeId) throw new ForbiddenError(`container ${id} is not assigned to node ${nodeId}`);
    if (!lockTokenValid(await this.lockKey(), id, row.lock_generation, token)) {
      throw new ConflictError(
        `stale lock token for container ${id}: it was unlocked, cancelled or re-locked since`,
      );
    }
    return row;
  }

  private expect(row: Row, to: ContainerState): void {
    if (!isLegalTransition(row.state, to)) {
      throw new ConflictError(`illegal transition for container ${row.id}: ${row.state} → ${to}`);
    }
  }

  /** Records the lock events of freshly locked rows and hands out their per-lock tokens. */
  private async granted(
    tx: Tx,
    now: Date,
    dispatcherId: string,
    key: Buffer,
    rows: { id: string; lock_generation: number }[],
  ): Promise<GrantedLock[]> {
    await this.events(
      tx,
      now,
      rows.map((row) => row.id),
      'state',
      `Locked by dispatcher ${dispatcherId}`,
    );
    return rows.map((row) => ({ id: row.id, token: lockToken(key, row.id, row.lock_generation) }));
  }

  private async events(tx: Tx, at: Date, ids: string[], kind: string, message: string): Promise<void> {
    if (ids.length === 0) return;
    await tx.query(
      `INSERT INTO container_events (container_id, at, kind, message) SELECT unnest($1::text[]), $2, $3, $4`,
      [ids, at, kind, message],
    );
  }
}
