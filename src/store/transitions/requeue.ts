// Locked → Queued for a batch: a dispatcher's unlock, a graceful release or a lost dispatcher (its
// unplaced locks), a failed node (what it had not started). The one place this transition is written.
// Not a hot path: the rows are locked, the pure rules decide each item (refusal, and requeueDecision
// for max_dispatch_attempts: DESIGN §3.3, the same code as the simulator's), then one statement writes
// the requeues and their events, and the over-limit ones end Cancelled (perm) in the same transaction.
import { refusal, requeueDecision, statesFrom, type Actor } from '../../model/transitions.js';
import type { StoreContext } from '../context.js';
import type { Tx } from '../db.js';
import { maxDispatchAttempts } from '../settings.js';
import { endContainers, type EndItem } from './end.js';
import { EventRows } from './events.js';
import { firstOfEach, inItemOrder, readFacts, type Outcome } from './outcome.js';
import { CHANGE_STAMP } from '../change-stamp.js';

/** One Locked container to give back: who asks, why, and the event text it leaves. */
export interface RequeueItem {
  id: string;
  /** The lock holder (unlock, release, lost dispatcher) or the failed node. */
  actor: Extract<Actor, { kind: 'dispatcher' } | { kind: 'node' }>;
  /** Why, for max_dispatch_attempts' reason ("last: ..."). */
  why: string;
  /** The event's text, e.g. "Queued: unlocked by d1: no room". */
  event: string;
  /** Only while not placed on an instance (release, lost dispatcher: a placed one's agent may run it). */
  unplacedOnly?: boolean;
}

const REQUEUE_SQL = `
  WITH q AS (
    UPDATE containers c SET state = 'Queued', locked_by = NULL, lock_generation = c.lock_generation + 1,
      instance_id = NULL, node_id = NULL, updated_at = $1, ${CHANGE_STAMP}
    FROM unnest($2::text[]) AS i(id)
    WHERE c.id = i.id AND c.state = ANY($3::text[])
    RETURNING c.id)
  ${EventRows.INSERT_SQL(4)}`;

/** Requeues the items inside `tx`; see the file comment. */
export async function requeueContainers(ctx: StoreContext, tx: Tx, items: RequeueItem[]): Promise<Outcome[]> {
  if (items.length === 0) return [];
  const now = ctx.clock.now();
  const batch = firstOfEach(items);
  const facts = await readFacts(
    tx,
    batch.map((it) => it.id),
    true,
  );
  const max = await maxDispatchAttempts(tx);
  const result = new Map<string, Outcome>();
  const requeue: string[] = [];
  const events = new EventRows();
  const cancel: EndItem[] = [];
  for (const it of batch) {
    const c = facts.get(it.id);
    const r =
      refusal('requeue', it.id, c, it.actor, now.getTime()) ??
      (it.unplacedOnly && c!.instanceId !== null
        ? { code: 'conflict' as const, reason: `container ${it.id} is placed on instance ${c!.instanceId}` }
        : null);
    if (r) {
      result.set(it.id, { id: it.id, ok: false, ...r });
      continue;
    }
    const d = requeueDecision(c!.lockCount, max, it.why);
    if (d.kind === 'cancel') {
      // Decided under the row lock: the system carries it out.
      cancel.push({
        id: it.id,
        actor: { kind: 'system' },
        end: { state: 'Cancelled', failureClass: d.failureClass, reason: d.reason },
      });
    } else {
      requeue.push(it.id);
      events.add(it.id, 'state', it.event);
      result.set(it.id, { id: it.id, ok: true, state: 'Queued' });
    }
  }
  if (requeue.length > 0)
    await tx.query(REQUEUE_SQL, [now, requeue, statesFrom('requeue'), ...events.params()]);
  for (const o of await endContainers(ctx, tx, cancel)) result.set(o.id, o);
  return inItemOrder(items, result);
}
