// Container logs: chunks appended by the agent with its own sequence numbers (so a retried append after
// a network error is idempotent), read in order, and followed by readers.
import type { StoreContext } from './context.js';

export type LogStream = 'stdout' | 'stderr' | 'system';

export interface LogChunk {
  seq: number;
  stream: LogStream;
  data: string;
  at?: Date;
}

export class Logs {
  constructor(private readonly ctx: StoreContext) {}

  /** Appends chunks; chunks whose seq is already stored are ignored. Returns how many were new. */
  async append(containerId: string, chunks: LogChunk[]): Promise<number> {
    if (chunks.length === 0) return 0;
    const now = this.ctx.clock.now();
    const r = await this.ctx.pool.query(
      `INSERT INTO log_chunks (container_id, seq, stream, at, data)
       SELECT $1, u.seq, u.stream, $2, u.data FROM unnest($3::int4[], $4::text[], $5::text[]) AS u(seq, stream, data)
       ON CONFLICT (container_id, seq) DO NOTHING`,
      [containerId, now, chunks.map((c) => c.seq), chunks.map((c) => c.stream), chunks.map((c) => c.data)],
    );
    if ((r.rowCount ?? 0) > 0) this.ctx.wake.send('berth_logs', containerId);
    return r.rowCount ?? 0;
  }

  /** Chunks with seq > after, in order. */
  async read(containerId: string, after = -1, limit = 1000): Promise<LogChunk[]> {
    const r = await this.ctx.pool.query(
      `SELECT seq, stream, at, data FROM log_chunks WHERE container_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [containerId, after, limit],
    );
    return r.rows;
  }
}
