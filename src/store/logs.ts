// Container logs: chunks appended by the agent with its own sequence numbers (so a retried append after
// a network error is idempotent), read in order, and followed by readers.
import type { StoreContext } from './context.js';
import type { Queryable } from './db.js';
import { inCancelGrace } from './transitions/grace.js';
import { readFacts, type Refused } from './transitions/outcome.js';

export type LogStream = 'stdout' | 'stderr' | 'system';

export interface LogChunk {
  seq: number;
  stream: LogStream;
  data: string;
  at?: Date;
}

/** One container's chunks from its agent, with the lock generation its token was issued for. */
export interface LogAppend {
  id: string;
  node: string;
  /** null: the token is not genuine. */
  generation: number | null;
  chunks: LogChunk[];
}

/** An append's outcome: how many chunks were new, or why it was refused. */
export type LogOutcome = { id: string; ok: true; appended: number } | Refused;

/**
 * Appends several containers' chunks in one statement, each only while its token is current (or in its
 * cancel grace: transitions/grace.ts) and the container is on the agent's node (a log may still come
 * after the container completed). An empty
 * append checks just that. Chunks already stored (by seq) are ignored: a resend is idempotent.
 */
export async function appendLogs(ctx: StoreContext, q: Queryable, items: LogAppend[]): Promise<LogOutcome[]> {
  if (items.length === 0) return [];
  const rows = items.flatMap((it) => [
    // One row without a chunk per item, so an empty append is checked too.
    { it, seq: null as number | null, stream: null as string | null, data: null as string | null },
    ...it.chunks.map((c) => ({ it, seq: c.seq, stream: c.stream, data: c.data })),
  ]);
  const now = ctx.clock.now();
  const r = await q.query<{ id: string; appended: number }>(
    `WITH i AS (
       SELECT * FROM unnest($2::text[], $3::text[], $4::int4[], $5::int4[], $6::text[], $7::text[])
         AS i(id, node, gen, seq, stream, data)),
     ok AS (SELECT i.* FROM i JOIN containers c ON c.id = i.id AND c.node_id = i.node
       AND (c.lock_generation = i.gen OR ${inCancelGrace('c', 'i.gen', '$1')})),
     ins AS (
       INSERT INTO log_chunks (container_id, seq, stream, at, data)
       SELECT id, seq, stream, $1, data FROM ok WHERE seq IS NOT NULL
       ON CONFLICT (container_id, seq) DO NOTHING RETURNING container_id)
     SELECT a.id, coalesce(n.appended, 0)::int AS appended FROM (SELECT DISTINCT id FROM ok) a
     LEFT JOIN (SELECT container_id AS id, count(*) AS appended FROM ins GROUP BY 1) n USING (id)`,
    [
      now,
      rows.map((x) => x.it.id),
      rows.map((x) => x.it.node),
      rows.map((x) => x.it.generation ?? -1),
      rows.map((x) => x.seq),
      rows.map((x) => x.stream),
      rows.map((x) => x.data),
    ],
  );
  const accepted = new Map(r.rows.map((row) => [row.id, row.appended]));
  for (const [id, n] of accepted) if (n > 0) ctx.wake.send('berth_logs', id);
  const refused = items.filter((it) => !accepted.has(it.id));
  const facts =
    refused.length > 0
      ? await readFacts(
          q,
          refused.map((it) => it.id),
        )
      : null;
  return items.map((it) => {
    const n = accepted.get(it.id);
    if (n !== undefined) return { id: it.id, ok: true, appended: n };
    const c = facts!.get(it.id);
    // As for reading it: a container not on the agent's node looks absent.
    if (c === undefined || c.nodeId !== it.node)
      return { id: it.id, ok: false, code: 'not_found', reason: `container ${it.id} not found` };
    return {
      id: it.id,
      ok: false,
      code: 'conflict',
      reason: `stale lock token for container ${it.id}: it was unlocked, cancelled or re-locked since`,
    };
  });
}

export class Logs {
  constructor(private readonly ctx: StoreContext) {}

  /** Chunks with seq > after, in order. */
  async read(containerId: string, after = -1, limit = 1000): Promise<LogChunk[]> {
    const r = await this.ctx.pool.query(
      `SELECT seq, stream, at, data FROM log_chunks WHERE container_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [containerId, after, limit],
    );
    return r.rows;
  }
}
