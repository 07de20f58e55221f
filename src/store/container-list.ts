// Listing containers with filters and cursor pages (newest first), and reading their event logs.
import type { ContainerState } from '../model/types.js';
import type { StoreContext } from './context.js';
import { listPage, type Page } from './pages.js';
import { Where } from './where.js';
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
    const where = new Where()
      .add('owner = ?', f.owner)
      .add('state = ?', f.state)
      .add('request_id = ?', f.requestId)
      .add('priority >= ?', f.priorityMin)
      .add('priority <= ?', f.priorityMax)
      .add('node_id = ?', f.nodeId);
    return listPage<ContainerRecord>(
      this.ctx.pool,
      'containers',
      CONTAINER_COLUMNS,
      where,
      f.cursor,
      f.limit,
    );
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
