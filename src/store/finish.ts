// Ending a container and deciding what its request does next (DESIGN §3.3), inside the caller's
// transaction. Lock order everywhere: the container row first, then its request row.
import { newId } from '../model/ids.js';
import { decideRetry, retryRunAfter, type ContainerEnd } from '../model/retry.js';
import type { FailureClass } from '../model/types.js';
import type { StoreContext } from './context.js';
import { onCommit, type Tx } from './db.js';
import type { Usage } from './records.js';

/** How a container ends, as the store records it. */
export interface EndOfContainer {
  state: 'Complete' | 'Cancelled';
  exitCode?: number | null;
  oomKilled?: boolean | null;
  usage?: Usage | null;
  failureClass?: FailureClass | null;
  reason?: string | null;
}

/** Appends an event to a container's event log. */
export async function addEvent(
  tx: Tx,
  at: Date,
  containerId: string,
  kind: string,
  message: string,
  data?: unknown,
): Promise<void> {
  await tx.query(
    `INSERT INTO container_events (container_id, at, kind, message, data) VALUES ($1, $2, $3, $4, $5)`,
    [containerId, at, kind, message, data === undefined ? null : JSON.stringify(data)],
  );
}

/**
 * Cancels a container (already locked FOR UPDATE by the caller, in a non-final state): its per-lock token
 * is revoked (the lock generation moves on), the node it is assigned to is woken to drop it, and it ends
 * Cancelled with the class and reason; then its request retries or is finalised.
 */
export async function cancelContainer(
  ctx: StoreContext,
  tx: Tx,
  containerId: string,
  failureClass: FailureClass,
  reason: string,
): Promise<{ retryId: string | null }> {
  const u = await tx.query(
    `UPDATE containers SET lock_generation = lock_generation + 1 WHERE id = $1 RETURNING node_id`,
    [containerId],
  );
  const nodeId = u.rows[0]?.node_id as string | null | undefined;
  if (nodeId) onCommit(tx, () => ctx.wake.send('berth_node', nodeId));
  return finishContainer(ctx, tx, containerId, { state: 'Cancelled', failureClass, reason });
}

/**
 * Marks a container (already locked FOR UPDATE by the caller, and in a non-final state) as ended, then
 * retries or finalises its request. Returns the new container's id when one was queued.
 */
export async function finishContainer(
  ctx: StoreContext,
  tx: Tx,
  containerId: string,
  end: EndOfContainer,
): Promise<{ retryId: string | null }> {
  const now = ctx.clock.now();
  const c = await tx.query(
    `UPDATE containers SET state = $2, finished_at = $3, updated_at = $3, exit_code = $4, oom_killed = $5,
       usage = $6, failure_class = $7, runtime_status = $8
     WHERE id = $1 RETURNING request_id, attempt, queued_at, state`,
    [
      containerId,
      end.state,
      now,
      end.exitCode ?? null,
      end.oomKilled ?? null,
      end.usage ? JSON.stringify(end.usage) : null,
      end.failureClass ?? null,
      end.reason ?? null,
    ],
  );
  const row = c.rows[0];
  const what =
    end.state === 'Complete'
      ? `completed with exit code ${end.exitCode}${end.oomKilled ? ' (OOM-killed)' : ''}`
      : `cancelled (${end.failureClass}): ${end.reason ?? ''}`;
  await addEvent(tx, now, containerId, 'state', `${end.state}: ${what}`, { state: end.state });

  // Capacity was freed (and a retry may be queued): wake the dispatcher (sent after commit; a rolled-back
  // transaction costs at most a needless pass).
  onCommit(tx, () => ctx.wake.send('berth_dispatch', 'finish'));
  const r = await tx.query(`SELECT * FROM container_requests WHERE id = $1 FOR UPDATE`, [row.request_id]);
  const req = r.rows[0];
  if (req.state === 'Final' || req.container_id !== containerId) return { retryId: null };
  const endInfo: ContainerEnd = {
    state: end.state,
    exitCode: end.exitCode ?? null,
    failureClass: end.failureClass ?? null,
    reason: end.reason ?? null,
  };
  const d = decideRetry(
    endInfo,
    {
      priority: req.priority,
      attempts: req.attempts,
      tempFailures: req.temp_failures,
      containerCountMax: req.container_count_max,
      maxTempRetries: req.max_temp_retries,
      retryOnFailure: req.retry_on_failure,
    },
    ctx.rng,
  );
  if (d.kind === 'final') {
    await tx.query(
      `UPDATE container_requests SET state = 'Final', outcome = $2, final_reason = $3, attempts = $4,
         temp_failures = $5, updated_at = $6 WHERE id = $1`,
      [req.id, d.outcome, d.reason, d.attempts, d.tempFailures, now],
    );
    return { retryId: null };
  }
  const retryId = newId('c', now.getTime());
  const until = retryRunAfter(now.getTime(), d.delayMs, (req.run_after as Date | null)?.getTime() ?? null);
  const runAfter = until === null ? null : new Date(until);
  const backoffUntil = d.delayMs > 0 ? new Date(now.getTime() + d.delayMs) : null;
  await tx.query(
    `INSERT INTO containers (id, request_id, owner, attempt, state, priority, vcpus, ram, scratch, gpus, preemptible,
       instance_types, queued_at, run_after, created_at, updated_at)
     SELECT $2, id, owner, $3, 'Queued', priority, vcpus, ram, scratch, gpus, preemptible, instance_types, $4, $5, $6, $6
     FROM container_requests WHERE id = $1`,
    [req.id, retryId, row.attempt + 1, row.queued_at, runAfter, now],
  );
  await tx.query(
    `UPDATE container_requests SET container_id = $2, attempts = $3, temp_failures = $4, updated_at = $5 WHERE id = $1`,
    [req.id, retryId, d.attempts, d.tempFailures, now],
  );
  const delay = backoffUntil ? ` after a backoff until ${backoffUntil.toISOString()}` : '';
  await addEvent(tx, now, containerId, 'retry', `retried as ${retryId}${delay}: ${d.reason}`, {
    retry: retryId,
  });
  await addEvent(
    tx,
    now,
    retryId,
    'state',
    `Queued: attempt ${row.attempt + 1}, retrying ${containerId} (${d.reason})`,
    {
      state: 'Queued',
    },
  );
  return { retryId };
}
