// What a batched transition answers for each item, and how a refused item explains itself: the rows are
// read back and the pure rules (src/model/transitions.ts) say why, so the SQL guards of the fast path and
// the messages the caller sees cannot drift apart without the contract suite noticing.
import {
  refusal,
  type Actor,
  type ContainerFacts,
  type NodeFacts,
  type Refusal,
  type TransitionKind,
} from '../../model/transitions.js';
import type { ContainerState, NodeState } from '../../model/types.js';
import type { Queryable } from '../db.js';
import { refusalError } from '../errors.js';

/** One item's result: done (with the state it reached), or refused with the reason and its kind. */
export type Outcome = { id: string; ok: true; state: ContainerState } | ({ id: string; ok: false } & Refusal);

/**
 * A guard's array of states as a value the planner cannot see when it plans (an InitPlan): a batch joined
 * to containers by id then reads each row through the primary key. With the states visible, the guard
 * implies the predicate of the partial index of Locked and Running containers (containers_live), and
 * when its statistics are stale (a burst of locks since the last ANALYZE) the planner scans every
 * container of the node or the dispatcher once per item: 2,000 rows read for
 * each started container in EXPLAIN ANALYZE (docs/PERFORMANCE.md, "Store throughput").
 */
export const HIDDEN = (param: string): string => `(SELECT ${param}::text[])::text[]`;

/** A refused item. */
export type Refused = Extract<Outcome, { ok: false }>;

/** The single item's outcome, or its refusal thrown. */
export function one<O extends Outcome>(outcomes: O[]): Extract<O, { ok: true }> {
  const o = outcomes[0]!;
  if (!o.ok) throw refusalError(o);
  return o as Extract<O, { ok: true }>;
}

const FACTS = `id, state, locked_by, node_id, instance_id, lock_generation, lock_count, owner, priority, run_after`;

interface FactsRow {
  id: string;
  state: ContainerState;
  locked_by: string | null;
  node_id: string | null;
  instance_id: string | null;
  lock_generation: number;
  lock_count: number;
  owner: string;
  priority: number;
  run_after: Date | null;
}

/** The containers' facts by id; `forUpdate` row-locks them (in id order, as every batch does). */
export async function readFacts(
  q: Queryable,
  ids: string[],
  forUpdate = false,
): Promise<Map<string, ContainerFacts>> {
  const r = await q.query<FactsRow>(
    `SELECT ${FACTS} FROM containers WHERE id = ANY($1) ORDER BY id${forUpdate ? ' FOR UPDATE' : ''}`,
    [ids],
  );
  return new Map(
    r.rows.map((row) => [
      row.id,
      {
        id: row.id,
        state: row.state,
        lockedBy: row.locked_by,
        nodeId: row.node_id,
        instanceId: row.instance_id,
        generation: row.lock_generation,
        lockCount: row.lock_count,
        owner: row.owner,
        priority: row.priority,
        runAfter: row.run_after?.getTime() ?? null,
      },
    ]),
  );
}

/** The states of the nodes among `ids` that exist. */
async function readNodes(q: Queryable, ids: string[]): Promise<Map<string, NodeState>> {
  if (ids.length === 0) return new Map();
  const r = await q.query<{ id: string; state: NodeState }>(
    `SELECT id, state FROM nodes WHERE id = ANY($1)`,
    [ids],
  );
  return new Map(r.rows.map((row) => [row.id, row.state]));
}

/**
 * Outcomes for a batch whose statement carried out `done` (id → the state reached): the others are read
 * back and explained by the rules (with the node an item targets, `node`, when it names one). One the
 * rules would allow changed under the statement (a concurrent transition): refused as such, to be tried
 * again.
 */
export async function outcomes<I extends { id: string; actor: Actor; node?: string | null }>(
  q: Queryable,
  kind: TransitionKind | ((item: I) => TransitionKind),
  items: I[],
  done: Map<string, ContainerState>,
  nowMs: number,
): Promise<Outcome[]> {
  const refused = firstOfEach(items.filter((it) => !done.has(it.id)));
  const facts =
    refused.length > 0
      ? await readFacts(
          q,
          refused.map((it) => it.id),
        )
      : null;
  const named = [...new Set(refused.flatMap((it) => (it.node == null ? [] : [it.node])))];
  const nodes = await readNodes(q, named);
  const nodeFacts = (node: string | null | undefined): NodeFacts | null =>
    node == null ? null : { id: node, state: nodes.get(node) ?? null };
  const byId = new Map<string, Outcome>();
  for (const [id, state] of done) byId.set(id, { id, ok: true, state });
  for (const it of refused) {
    const k = typeof kind === 'function' ? kind(it) : kind;
    const r = refusal(k, it.id, facts!.get(it.id), it.actor, nowMs, nodeFacts(it.node));
    byId.set(
      it.id,
      r
        ? { id: it.id, ok: false, ...r }
        : {
            id: it.id,
            ok: false,
            code: 'conflict',
            reason: `container ${it.id} changed meanwhile; try again`,
          },
    );
  }
  return inItemOrder(items, byId);
}

/** The outcome of each item, in item order: a repeated id's second item is refused. */
export function inItemOrder<O extends Outcome>(
  items: { id: string }[],
  byId: Map<string, O>,
): (O | Outcome)[] {
  const seen = new Set<string>();
  return items.map((it) => {
    if (seen.has(it.id))
      return {
        id: it.id,
        ok: false,
        code: 'conflict',
        reason: `container ${it.id} appears twice in the batch`,
      };
    seen.add(it.id);
    return byId.get(it.id)!;
  });
}

/** The first of each id (a batch names a container once; repeats are refused by inItemOrder()). */
export function firstOfEach<I extends { id: string }>(items: I[]): I[] {
  const seen = new Set<string>();
  return items.filter((it) => !seen.has(it.id) && seen.add(it.id));
}
