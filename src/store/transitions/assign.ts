// A dispatcher places Locked containers it holds on instances (and their nodes, once registered): one
// statement for the batch, with its events; the nodes are woken so their long-poll pings answer at once.
import { statesFrom } from '../../model/transitions.js';
import type { StoreContext } from '../context.js';
import type { Queryable } from '../db.js';
import { HIDDEN, outcomes, type Outcome } from './outcome.js';
import { CHANGE_STAMP } from '../change-stamp.js';

export interface AssignItem {
  id: string;
  instance: string;
  node: string | null;
}

/** The assign event's message, of a row with `instance` and `node`. */
export const ASSIGN_MESSAGE = `'assigned to instance ' || instance || coalesce(' (node ' || node || ')', '')`;

/**
 * SQL, the guard of nodeTakesWork (src/model/transitions.ts) for the nodes an assign names or whose agents
 * report starts: a CTE `live` of those among `param` (a text[] parameter) that are known and not failed,
 * share-locked. The lock orders the statement with a node failure (src/store/nodes.ts updates the node row
 * first, then requeues what the node holds): a failure that committed first is seen (the row is read again
 * after the wait) and the item refused; one that comes later waits for this statement and then finds its
 * containers. Nothing lands on a failed node in between.
 */
export const LIVE_NODES = (param: string): string =>
  `live AS (SELECT id FROM nodes WHERE id = ANY(${param}::text[]) AND state <> 'failed' ORDER BY id FOR SHARE)`;

/** SQL: the node `node` (an expression; null: no node named yet, only an instance) is in `live`. */
export const ON_LIVE_NODE = (node: string): string => `(${node} IS NULL OR ${node} IN (SELECT id FROM live))`;

// The guard of refusal('assign'): Locked (statesFrom('assign')), held by this dispatcher, a live node.
export const ASSIGN_SQL = `
  WITH ${LIVE_NODES('$5')},
  a AS (
    UPDATE containers c SET instance_id = i.instance, node_id = i.node, updated_at = $2, ${CHANGE_STAMP}
    FROM unnest($3::text[], $4::text[], $5::text[]) AS i(id, instance, node)
    WHERE c.id = i.id AND c.state = ANY(${HIDDEN('$6')}) AND c.locked_by = $1 AND ${ON_LIVE_NODE('i.node')}
    RETURNING c.id, i.instance, i.node),
  e AS (
    INSERT INTO container_events (container_id, at, kind, message)
    SELECT id, $2, 'assign', ${ASSIGN_MESSAGE} FROM a)
  SELECT id FROM a`;

export async function assignContainers(
  ctx: StoreContext,
  q: Queryable,
  items: AssignItem[],
  dispatcherId: string,
): Promise<Outcome[]> {
  if (items.length === 0) return [];
  const now = ctx.clock.now();
  const r = await q.query<{ id: string }>(ASSIGN_SQL, [
    dispatcherId,
    now,
    items.map((it) => it.id),
    items.map((it) => it.instance),
    items.map((it) => it.node),
    statesFrom('assign'),
  ]);
  const done = new Set(r.rows.map((row) => row.id));
  wakeNodes(ctx, items, done);
  const actor = { kind: 'dispatcher' as const, id: dispatcherId };
  return outcomes(
    q,
    'assign',
    items.map((it) => ({ id: it.id, actor, node: it.node })),
    new Map([...done].map((id) => [id, 'Locked' as const])),
    now.getTime(),
  );
}

/** Wakes the nodes given work (their long-poll pings answer at once). */
export function wakeNodes(ctx: StoreContext, items: AssignItem[], done: Set<string>): void {
  for (const node of new Set(items.filter((it) => done.has(it.id) && it.node).map((it) => it.node!)))
    ctx.wake.send('berth_node', node);
}
