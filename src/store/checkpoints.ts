// Containers' own checkpoints kept by the API (issue 16, migration 120): the agent of a Running container
// uploads the tar archive of its $BERTH_CHECKPOINT_DIR when the container ends without success (reclaimed,
// a temp failure); the agent of the request's next attempt, on any instance, downloads it before starting.
// One checkpoint per request, replaced by a newer one, stored in chunks (as log chunks are); the request
// becoming Final drops it (a trigger of migration 120). Only the agent holding the current per-lock token
// of a Running container on its node reads or writes it; users see that it exists (size, time), never the
// bytes.
import type { StoreContext } from './context.js';
import { withTx, type Queryable } from './db.js';
import { ConflictError, NotFoundError } from './errors.js';
import { tokenGeneration } from './secrets.js';
import type { Transitions } from './transitions/index.js';
import { EventRows } from './transitions/events.js';

/** Bytes per stored chunk: a row stays well under PostgreSQL's 1 GB value limit and a query small. */
export const CHECKPOINT_CHUNK_BYTES = 1024 * 1024;

/** What a user sees of a request's kept checkpoint. */
export interface CheckpointInfo {
  bytes: number;
  at: Date;
  /** The attempt that wrote it, and the instance it ran on. */
  container_id: string;
  instance_id: string | null;
}

/** The agent's call, as the API authenticated it: its node and the container's per-lock token. */
export interface CheckpointCaller {
  id: string;
  node: string;
  token: string;
}

interface Holder {
  request_id: string;
  instance_id: string | null;
}

export class Checkpoints {
  constructor(
    private readonly ctx: StoreContext,
    private readonly t: Transitions,
  ) {}

  /** The Running container `c.id` on the caller's node under its current token, or why not (thrown). */
  private async holder(q: Queryable, c: CheckpointCaller): Promise<Holder> {
    const generation = tokenGeneration(await this.t.lockKey(), c.id, c.token);
    // FOR SHARE of the request: it cannot become Final (dropping its checkpoint) while a write is in flight.
    const r = await q.query<Holder & { ok: boolean; node_id: string | null }>(
      `SELECT c.request_id, c.instance_id, c.node_id,
         (c.state = 'Running' AND c.lock_generation = $2 AND r.state = 'Committed' AND r.container_id = c.id) AS ok
       FROM containers c JOIN container_requests r ON r.id = c.request_id WHERE c.id = $1
       FOR SHARE OF r`,
      [c.id, generation ?? -1],
    );
    const row = r.rows[0];
    // As for its logs: a container not on the agent's node looks absent.
    if (!row || row.node_id !== c.node) throw new NotFoundError(`container ${c.id} not found`);
    if (!row.ok)
      throw new ConflictError(
        `stale lock token for container ${c.id}: it is not running under this token (unlocked, ended or re-locked since)`,
      );
    return row;
  }

  /**
   * Keeps `data` (a tar archive) as the checkpoint of the container's request, replacing an older one.
   * `reclaimed`: its container is being reclaimed, so its retry migrates (a `migrate` event says so).
   */
  async put(c: CheckpointCaller, data: Buffer, reclaimed: boolean): Promise<CheckpointInfo> {
    const now = this.ctx.clock.now();
    return withTx(this.ctx.pool, async (tx) => {
      const h = await this.holder(tx, c);
      await tx.query(`DELETE FROM checkpoints WHERE request_id = $1`, [h.request_id]);
      await tx.query(
        `INSERT INTO checkpoints (request_id, container_id, instance_id, bytes, at) VALUES ($1, $2, $3, $4, $5)`,
        [h.request_id, c.id, h.instance_id, data.length, now],
      );
      const seqs: number[] = [];
      const chunks: Buffer[] = [];
      for (let off = 0, seq = 0; off < data.length; off += CHECKPOINT_CHUNK_BYTES, seq++) {
        seqs.push(seq);
        chunks.push(data.subarray(off, off + CHECKPOINT_CHUNK_BYTES));
      }
      // One row per chunk; node-postgres sends each Buffer as bytea.
      for (let i = 0; i < chunks.length; i++)
        await tx.query(`INSERT INTO checkpoint_chunks (request_id, seq, data) VALUES ($1, $2, $3)`, [
          h.request_id,
          seqs[i],
          chunks[i],
        ]);
      const events = new EventRows();
      const where = h.instance_id ? ` on instance ${h.instance_id}` : '';
      if (reclaimed)
        events.add(
          c.id,
          'migrate',
          `migrating: its checkpoint (${data.length} bytes) was kept${where}; the retry resumes from it on an instance with room`,
          { from: h.instance_id, bytes: data.length },
        );
      else
        events.add(c.id, 'checkpoint', `checkpoint kept (${data.length} bytes)${where}`, {
          bytes: data.length,
        });
      await tx.query(EventRows.INSERT_SQL(2), [now, ...events.params()]);
      return { bytes: data.length, at: now, container_id: c.id, instance_id: h.instance_id };
    });
  }

  /**
   * The checkpoint of the container's request, for its agent to restore before starting it, or null when
   * there is none. A `migrate` event on the container names where the checkpoint was written and where it
   * resumes.
   */
  async take(c: CheckpointCaller): Promise<Buffer | null> {
    const now = this.ctx.clock.now();
    return withTx(this.ctx.pool, async (tx) => {
      const h = await this.holder(tx, c);
      const k = await tx.query<{ container_id: string; instance_id: string | null; bytes: string }>(
        `SELECT container_id, instance_id, bytes FROM checkpoints WHERE request_id = $1`,
        [h.request_id],
      );
      const kept = k.rows[0];
      if (!kept) return null;
      const r = await tx.query<{ data: Buffer }>(
        `SELECT data FROM checkpoint_chunks WHERE request_id = $1 ORDER BY seq`,
        [h.request_id],
      );
      const data = Buffer.concat(r.rows.map((row) => row.data));
      const from = kept.instance_id ?? 'an unknown instance';
      const to = h.instance_id ?? 'an unknown instance';
      const events = new EventRows();
      events.add(
        c.id,
        'migrate',
        `resumes from the checkpoint of ${kept.container_id} (${data.length} bytes): from instance ${from} to ${to}`,
        { from: kept.instance_id, to: h.instance_id, container: kept.container_id, bytes: data.length },
      );
      await tx.query(EventRows.INSERT_SQL(2), [now, ...events.params()]);
      return data;
    });
  }

  /** What a user may know of the checkpoints of these requests: size and time, by request id. */
  async infoOf(requestIds: string[]): Promise<Map<string, CheckpointInfo>> {
    if (requestIds.length === 0) return new Map();
    const r = await this.ctx.pool.query<CheckpointInfo & { request_id: string; bytes: string }>(
      `SELECT request_id, bytes, at, container_id, instance_id FROM checkpoints WHERE request_id = ANY($1)`,
      [requestIds],
    );
    return new Map(r.rows.map((row) => [row.request_id, { ...row, bytes: Number(row.bytes) }]));
  }
}
