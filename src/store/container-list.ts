// Listing containers with filters and cursor pages (newest first), and reading their event logs.
import type { ContainerState } from '../model/types.js';
import type { StoreContext } from './context.js';
import { decodeCursor, encodeCursor, type Page } from './pages.js';
import { CONTAINER_COLUMNS, type ContainerRecord } from './records.js';

export interface ContainerFilter {
  owner?: string;
  state?: ContainerState;
  requestId?: string;
  priorityMin?: number;
  priorityMax?: number;
  nodeId?: string;
  cursor?: string;
  limit?: number;
}

export interface ContainerEvent {
  id: number;
  at: Date;
  kind: string;
  message: string;
  data: unknown;
}

export class ContainerList {
  constructor(private readonly ctx: StoreContext) {}

  /** A page of containers. With no filter this is an index scan of the primary key (fast at 1M rows). */
  async list(f: ContainerFilter): Promise<Page<ContainerRecord>> {
    const where: string[] = [];
    const args: unknown[] = [];
    const add = (sql: string, v: unknown) => {
      args.push(v);
      where.push(sql.replace('?', `$${args.length}`));
    };
    if (f.owner !== undefined) add('owner = ?', f.owner);
    if (f.state !== undefined) add('state = ?', f.state);
    if (f.requestId !== undefined) add('request_id = ?', f.requestId);
    if (f.priorityMin !== undefined) add('priority >= ?', f.priorityMin);
    if (f.priorityMax !== undefined) add('priority <= ?', f.priorityMax);
    if (f.nodeId !== undefined) add('node_id = ?', f.nodeId);
    if (f.cursor !== undefined) add('id < ?', decodeCursor(f.cursor));
    const limit = f.limit ?? 100;
    args.push(limit + 1);
    const r = await this.ctx.pool.query(
      `SELECT ${CONTAINER_COLUMNS} FROM containers ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY id DESC LIMIT $${args.length}`,
      args,
    );
    const items = r.rows.slice(0, limit) as ContainerRecord[];
    return { items, next_cursor: r.rows.length > limit ? encodeCursor(items[items.length - 1]!.id) : null };
  }

  /** A container's events in order, after event id `after`. */
  async events(containerId: string, after = 0, limit = 1000): Promise<ContainerEvent[]> {
    const r = await this.ctx.pool.query(
      `SELECT id, at, kind, message, data FROM container_events WHERE container_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
      [containerId, after, limit],
    );
    return r.rows.map((row) => ({ ...row, id: Number(row.id) }));
  }
}
