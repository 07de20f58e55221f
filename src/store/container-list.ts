// Listing containers with filters and cursor pages (newest first), and reading their event logs.
import type { ContainerState } from '../model/types.js';
import type { StoreContext } from './context.js';
import { listPage, type Page } from './pages.js';
import { Where } from './where.js';
import { CONTAINER_COLUMNS, ofRequest, withStatusText, type ContainerRecord } from './records.js';
import { SUBMITTED_EVENT } from './transitions/events.js';

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
      .add(ofRequest('', '?::text'), f.requestId)
      .add('priority >= ?', f.priorityMin)
      .add('priority <= ?', f.priorityMax)
      .add('node_id = ?', f.nodeId);
    const page = await listPage<ContainerRecord>(
      this.ctx.pool,
      'containers',
      CONTAINER_COLUMNS,
      where,
      f.cursor,
      f.limit,
    );
    return { ...page, items: page.items.map(withStatusText) };
  }

  /** A container's events in order, after event id `after` (the submission's is id 0: SUBMITTED_EVENT). */
  async events(containerId: string, after = -1, limit = 1000): Promise<ContainerEvent[]> {
    const r = await this.ctx.pool.query(
      `SELECT id, at, kind, message, data FROM (
         SELECT 0::int8 AS id, c.created_at AS at, $4::text AS kind, $5::text AS message, NULL::jsonb AS data
         FROM containers c WHERE c.id = $1 AND c.attempt = 1 AND NOT EXISTS (
           SELECT 1 FROM container_events o WHERE o.container_id = $1 AND o.kind = $4 AND o.message = $5)
         UNION ALL
         SELECT id, at, kind, message, data FROM container_events WHERE container_id = $1) e
       WHERE id > $2 ORDER BY id LIMIT $3`,
      [containerId, after, limit, SUBMITTED_EVENT.kind, SUBMITTED_EVENT.message],
    );
    return r.rows.map((row) => ({ ...row, id: Number(row.id) }));
  }
}
