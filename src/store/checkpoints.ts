// Containers' own checkpoints kept by the API (issue 16, migration 120): the agent of a Running container
// uploads the tar archive of its $BERTH_CHECKPOINT_DIR when the container ends without success (reclaimed,
// a temp failure); the agent of the request's next attempt, on any instance, downloads it before starting.
// One checkpoint per request, replaced by a newer one, stored in chunks (as log chunks are); the request
// becoming Final drops it (a trigger of migration 120). Only the agent holding the current per-lock token
// of a Running container on its node reads or writes it; users see that it exists (size, time), never the
// bytes.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import type { StoreContext } from './context.js';
import { COPY_HEADER, COPY_TRAILER, copyColumnBytes, copyTuple } from './copy-binary.js';
import { withTx, type Queryable } from './db.js';
import { ConflictError, NotFoundError } from './errors.js';
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
    const generation = this.t.generation(await this.t.lockKey(), c.id, c.token);
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
   * Keeps the archive `body` yields as the checkpoint of the container's request, replacing an older one,
   * in chunks of CHECKPOINT_CHUNK_BYTES written as the body arrives (never the whole archive in memory;
   * one chunk's INSERT in flight while the next is read). One transaction: a body that fails midway (cut
   * off, over the limit, not a tar: `body` throws) leaves the older checkpoint as it was, and no part of
   * this one. `reclaimed`: its container is being reclaimed, so its retry migrates (a `migrate` event).
   * `wholeState`: the runtime that saved the container whole (migration 223), null when it wrote its own.
   */
  async put(
    c: CheckpointCaller,
    body: AsyncIterable<Buffer> | Iterable<Buffer>,
    reclaimed: boolean,
    wholeState: string | null = null,
  ): Promise<CheckpointInfo> {
    const now = this.ctx.clock.now();
    return withTx(this.ctx.pool, async (tx) => {
      const h = await this.holder(tx, c);
      await tx.query(`DELETE FROM checkpoints WHERE request_id = $1`, [h.request_id]);
      await tx.query(
        `INSERT INTO checkpoints (request_id, container_id, instance_id, bytes, at, whole_state)
         VALUES ($1, $2, $3, 0, $4, $5)`,
        [h.request_id, c.id, h.instance_id, now, wholeState],
      );
      let bytes = 0;
      const requestId = h.request_id;
      // The body's bytes in rows of CHECKPOINT_CHUNK_BYTES, by a binary COPY (copy-binary.ts: why).
      async function* rows(): AsyncGenerator<Buffer> {
        yield COPY_HEADER;
        let seq = 0;
        let chunk = Buffer.allocUnsafe(CHECKPOINT_CHUNK_BYTES);
        let filled = 0;
        const row = (data: Buffer) => copyTuple([{ text: requestId }, { int4: seq++ }, { bytea: data }]);
        for await (const piece of body) {
          bytes += piece.length;
          for (let off = 0; off < piece.length;) {
            const n = piece.copy(chunk, filled, off);
            filled += n;
            off += n;
            if (filled === CHECKPOINT_CHUNK_BYTES) {
              yield* row(chunk);
              chunk = Buffer.allocUnsafe(CHECKPOINT_CHUNK_BYTES);
              filled = 0;
            }
          }
        }
        if (filled > 0) yield* row(chunk.subarray(0, filled));
        yield COPY_TRAILER;
      }
      // A failing body (cut off, refused) aborts the COPY (CopyFail), and the transaction rolls back.
      await pipeline(
        Readable.from(rows()),
        tx.query(copyFrom(`COPY checkpoint_chunks (request_id, seq, data) FROM STDIN (FORMAT binary)`)),
      );
      await tx.query(`UPDATE checkpoints SET bytes = $2 WHERE request_id = $1`, [h.request_id, bytes]);
      const events = new EventRows();
      const where = h.instance_id ? ` on instance ${h.instance_id}` : '';
      if (reclaimed)
        events.add(
          c.id,
          'migrate',
          `migrating: its checkpoint (${bytes} bytes) was kept${where}; the retry resumes from it on an instance with room`,
          { from: h.instance_id, bytes },
        );
      else events.add(c.id, 'checkpoint', `checkpoint kept (${bytes} bytes)${where}`, { bytes });
      await tx.query(EventRows.INSERT_SQL(2), [now, ...events.params()]);
      return { bytes, at: now, container_id: c.id, instance_id: h.instance_id };
    });
  }

  /**
   * The checkpoint of the container's request, for its agent to restore before starting it, or null when
   * there is none: its size, and its chunks to read once, in order, from one transaction (a newer put
   * cannot mix into it) that ends when they are read to the end (committing the `migrate` event that names
   * where the checkpoint was written and where it resumes) or abandoned (rolled back: no event). The caller
   * must read `chunks` or call its `return()`: the transaction holds a connection until then.
   */
  async take(
    c: CheckpointCaller,
  ): Promise<{ bytes: number; wholeState: string | null; chunks: AsyncGenerator<Buffer> } | null> {
    const now = this.ctx.clock.now();
    const tx = await this.ctx.pool.connect();
    const onError = () => {}; // as withTx: a connection dying mid-way fails the next query instead
    tx.on('error', onError);
    const end = async (sql: 'COMMIT' | 'ROLLBACK') => {
      try {
        await tx.query(sql);
      } finally {
        tx.off('error', onError);
        tx.release();
      }
    };
    /** Mid-COPY, no query can follow: the connection is closed (PostgreSQL rolls back) and not reused. */
    const abandon = () => {
      tx.off('error', onError);
      tx.release(new Error('checkpoint download abandoned'));
    };
    let kept:
      | { container_id: string; instance_id: string | null; bytes: number; whole_state: string | null }
      | undefined;
    let requestId = '';
    try {
      await tx.query('BEGIN');
      const h = await this.holder(tx, c);
      requestId = h.request_id;
      kept = (
        await tx.query<{
          container_id: string;
          instance_id: string | null;
          bytes: string;
          whole_state: string | null;
        }>(`SELECT container_id, instance_id, bytes, whole_state FROM checkpoints WHERE request_id = $1`, [
          h.request_id,
        ])
      ).rows.map((r) => ({ ...r, bytes: Number(r.bytes) }))[0];
      if (kept) {
        const from = kept.instance_id ?? 'an unknown instance';
        const to = h.instance_id ?? 'an unknown instance';
        const events = new EventRows();
        events.add(
          c.id,
          'migrate',
          `resumes from the checkpoint of ${kept.container_id} (${kept.bytes} bytes): from instance ${from} to ${to}`,
          { from: kept.instance_id, to: h.instance_id, container: kept.container_id, bytes: kept.bytes },
        );
        await tx.query(EventRows.INSERT_SQL(2), [now, ...events.params()]);
      }
    } catch (err) {
      await end('ROLLBACK').catch(() => {});
      throw err;
    }
    if (!kept) {
      await end('COMMIT');
      return null;
    }
    const select = `COPY (SELECT data FROM checkpoint_chunks WHERE request_id = ${tx.escapeLiteral(requestId)} ORDER BY seq) TO STDOUT (FORMAT binary)`;
    const bytes = kept.bytes;
    async function* chunks(): AsyncGenerator<Buffer> {
      let done = false;
      try {
        // The rows' bytes by a binary COPY, as they arrive (copy-binary.ts: why not a SELECT).
        let sent = 0;
        for await (const b of copyColumnBytes(tx.query(copyTo(select)))) {
          sent += b.length;
          yield b;
        }
        // Never a short answer under its content-length (the agent would wait for the rest): an error
        // here cuts the connection instead.
        if (sent !== bytes) throw new Error(`checkpoint of ${bytes} bytes read back as ${sent}`);
        done = true;
      } finally {
        if (done) await end('COMMIT');
        else abandon();
      }
    }
    return { bytes, wholeState: kept.whole_state, chunks: chunks() };
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
