// Locked → Running, reported by the agent of the node each container is assigned to, holding its
// current per-lock token: one statement for a batch (an agent's reports, or several agents' at once).
import { statesFrom } from '../../model/transitions.js';
import type { StoreContext } from '../context.js';
import type { Queryable } from '../db.js';
import { LIVE_NODES, ON_LIVE_NODE } from './assign.js';
import { HIDDEN, outcomes, type Outcome } from './outcome.js';
import { CHANGE_STAMP } from '../change-stamp.js';

export interface StartItem {
  id: string;
  node: string;
  /** The generation the agent's token was issued for; null when its token is not genuine. */
  generation: number | null;
}

// The guard of refusal('start') for an agent: a state the table allows, its node, its generation, and
// its node not declared failed (a failed node's agent is told, as with a stale token; nothing changes).
export const START_SQL = `
  WITH ${LIVE_NODES('$3')},
  s AS (
    UPDATE containers c SET state = 'Running', started_at = $1, updated_at = $1, ${CHANGE_STAMP}
    FROM unnest($2::text[], $3::text[], $4::int4[]) AS i(id, node, gen)
    WHERE c.id = i.id AND c.state = ANY(${HIDDEN('$5')}) AND c.node_id = i.node AND c.lock_generation = i.gen
      AND ${ON_LIVE_NODE('i.node')}
    RETURNING c.id, i.node)
  INSERT INTO container_events (container_id, at, kind, message)
  SELECT id, $1, 'state', 'Running on node ' || node FROM s
  RETURNING container_id AS id`;

export async function startContainers(
  ctx: StoreContext,
  q: Queryable,
  items: StartItem[],
): Promise<Outcome[]> {
  if (items.length === 0) return [];
  const now = ctx.clock.now();
  const r = await q.query<{ id: string }>({
    name: 'berth-start',
    text: START_SQL,
    values: [
      now,
      items.map((it) => it.id),
      items.map((it) => it.node),
      // A token that is not genuine matches no generation: refused, and explained as stale.
      items.map((it) => it.generation ?? -1),
      statesFrom('start'),
    ],
  });
  return outcomes(
    q,
    'start',
    items.map((it) => ({
      id: it.id,
      actor: { kind: 'agent' as const, node: it.node, generation: it.generation },
      node: it.node,
    })),
    new Map(r.rows.map((row) => [row.id, 'Running' as const])),
    now.getTime(),
  );
}
