// The dashboard's reads (docs/DASHBOARD.md). Every list is a bounded page read through an index, so a
// page costs the same with 100 or 100,000 containers queued; counts are index scans of the active states.
import { randomBytes } from 'node:crypto';
import type { IdleBehavior } from '../model/types.js';
import type { StoreContext } from './context.js';
import { instanceSpend } from './cost.js';
import { NotFoundError } from './errors.js';
import type { LogChunk } from './logs.js';
import { queuedStatusSql, withStatusText, type ContainerRecord } from './records.js';
import { sha256 } from './secrets.js';
import type { Principal } from './tokens.js';

/** An owner filter: a user's name, or null for an admin (everyone). */
type Owner = string | null;

export interface WorkCounts {
  queued: number;
  /** Locked: a dispatcher is placing them (an instance is booting or about to take them). */
  placing: number;
  running: number;
  /** Requests that ended in the last 24 hours, by outcome. */
  last24h: { success: number; failed: number; cancelled: number };
}

/** Live instances of one type by what they do. */
export interface InstanceCounts {
  type: string;
  booting: number;
  idle: number;
  busy: number;
  draining: number;
  held: number;
  shutdown: number;
  price: number;
}

/** What a live dispatcher published about its limits (src/dispatch/pg-mirror.ts). */
export interface DispatcherView {
  id: string;
  heartbeat_at: Date;
  view: {
    at: string;
    instance_types: {
      name: string;
      vcpus: number;
      ram: number;
      scratch: number;
      gpus: number;
      price: number;
      preemptible: boolean;
    }[];
    limits: {
      max_instances: number | null;
      max_spend_per_hour: number | null;
      max_instances_per_type: Record<string, number>;
      min_instances: number;
      ram_overhead?: number;
      /** The scheduler keys that decide a container's type (absent in views of older dispatchers). */
      on_demand_after_interruptions?: number | null;
      max_price_factor?: number;
      share_rule?: 'price' | 'share' | 'expected';
    };
    cloud: {
      quota_max_instances: number | null;
      unavailable_types: string[];
      rate_limited_until: string | null;
    };
  } | null;
}

/** A waiting container with what a person needs to know about it: its record's fields and its request's name. */
export type WaitingContainer = Pick<
  ContainerRecord,
  | 'id'
  | 'request_id'
  | 'owner'
  | 'priority'
  | 'queued_at'
  | 'run_after'
  | 'vcpus'
  | 'ram'
  | 'scratch'
  | 'gpus'
  | 'preemptible'
  | 'instance_types'
  | 'instance_id'
  | 'scheduling_status'
> & { name: string; state: 'Queued' | 'Locked'; spot_interruptions: number };

export interface LiveInstance {
  id: string;
  cluster: string;
  dispatcher_tag: string;
  type: string;
  state: string;
  idle_behavior: IdleBehavior;
  preemptible: boolean;
  price: number;
  created_at: Date;
  state_since: Date;
  ready_at: Date | null;
  last_ping_at: Date | null;
  requested_idle_behavior: IdleBehavior | null;
  kill_requested: boolean;
  /** Containers placed on or running on it. */
  containers: { id: string; state: string; owner: string; name: string }[];
}

export interface Sample {
  at: Date;
  queued: number;
  running: number;
  instances: Record<string, number>;
  spend_per_hour: number;
}

/** How long a dispatcher may be silent and still count as live on the overview. */
const DISPATCHER_LIVE_MS = 120_000;
/** How long a sign-in link works. */
export const SIGNIN_LINK_MS = 10 * 60_000;

const WAITING_COLUMNS = `c.id, c.request_id, r.name, c.owner, c.state, c.priority, c.queued_at, c.run_after, c.vcpus,
  c.ram, c.scratch, c.gpus, c.preemptible, c.instance_types, c.instance_id, c.spot_interruptions,
  c.scheduling_status, ${queuedStatusSql('c')}`;

/** The position after the last row of a queue page: the scheduler's order is priority, queue time, id. */
export interface QueueCursor {
  priority: number;
  queuedAt: Date;
  id: string;
}

export function encodeQueueCursor(c: WaitingContainer): string {
  return Buffer.from(JSON.stringify([c.priority, new Date(c.queued_at).toISOString(), c.id])).toString(
    'base64url',
  );
}

export function decodeQueueCursor(s: string): QueueCursor | null {
  try {
    const [priority, at, id] = JSON.parse(Buffer.from(s, 'base64url').toString('utf8')) as unknown[];
    const queuedAt = new Date(String(at));
    if (typeof priority !== 'number' || typeof id !== 'string' || Number.isNaN(queuedAt.getTime()))
      return null;
    return { priority, queuedAt, id };
  } catch {
    return null;
  }
}

export class Dashboard {
  constructor(private readonly ctx: StoreContext) {}

  async work(owner: Owner, now: Date): Promise<WorkCounts> {
    const mine = owner === null ? '' : 'AND owner = $2';
    const args =
      owner === null ? [new Date(now.getTime() - 86_400_000)] : [new Date(now.getTime() - 86_400_000), owner];
    const r = await this.ctx.pool.query(
      `SELECT
         (SELECT count(*)::int FROM containers WHERE state = 'Queued' ${mine}) AS queued,
         (SELECT count(*)::int FROM containers WHERE state = 'Locked' ${mine}) AS placing,
         (SELECT count(*)::int FROM containers WHERE state = 'Running' ${mine}) AS running,
         (SELECT COALESCE(json_object_agg(outcome, n), '{}') FROM (
            SELECT outcome, count(*)::int AS n FROM container_requests
            WHERE state = 'Final' AND updated_at > $1 ${mine} GROUP BY outcome) o) AS ended`,
      args,
    );
    const row = r.rows[0];
    const ended = row.ended as Record<string, number>;
    return {
      queued: row.queued,
      placing: row.placing,
      running: row.running,
      last24h: { success: ended.success ?? 0, failed: ended.failed ?? 0, cancelled: ended.cancelled ?? 0 },
    };
  }

  /** Live instances by type and what they do (no ids: a user may see the capacity, not the machines). */
  async instanceCounts(): Promise<InstanceCounts[]> {
    const r = await this.ctx.pool.query(
      `SELECT type, max(price) AS price,
         count(*) FILTER (WHERE state IN ('booting', 'unknown'))::int AS booting,
         count(*) FILTER (WHERE state = 'idle' AND idle_behavior = 'run')::int AS idle,
         count(*) FILTER (WHERE state = 'running' AND idle_behavior = 'run')::int AS busy,
         count(*) FILTER (WHERE state IN ('idle', 'running') AND idle_behavior = 'drain')::int AS draining,
         count(*) FILTER (WHERE state IN ('idle', 'running') AND idle_behavior = 'hold')::int AS held,
         count(*) FILTER (WHERE state NOT IN ('booting', 'unknown', 'idle', 'running'))::int AS shutdown
       FROM instances WHERE gone_at IS NULL GROUP BY type ORDER BY type`,
    );
    return r.rows.map((row) => ({ ...row, price: Number(row.price) }));
  }

  /** What live instances cost per hour now (those whose billing has not ended). */
  async spendPerHour(): Promise<number> {
    const r = await this.ctx.pool.query(
      `SELECT COALESCE(SUM(price), 0) AS s FROM instances WHERE gone_at IS NULL AND ended_at IS NULL`,
    );
    return Number(r.rows[0].s);
  }

  /** What instances cost in [from, now]. */
  async spendSince(from: Date, now: Date): Promise<number> {
    return (await instanceSpend(this.ctx.pool, from, now)).reduce((n, t) => n + t.cost, 0);
  }

  /** Dispatchers that beat recently, with the limits they published. */
  async dispatchers(now: Date): Promise<DispatcherView[]> {
    const r = await this.ctx.pool.query(
      `SELECT id, heartbeat_at, view FROM dispatchers WHERE stopped_at IS NULL AND heartbeat_at > $1 ORDER BY id`,
      [new Date(now.getTime() - DISPATCHER_LIVE_MS)],
    );
    return r.rows;
  }

  /**
   * A page of waiting containers in the scheduler's order (priority, then queue time): the Queued ones
   * after `cursor`. Locked ones (being placed) are few and listed on their own.
   */
  async queued(
    owner: Owner,
    cursor: QueueCursor | null,
    limit: number,
  ): Promise<{ items: WaitingContainer[]; next: string | null; total: number }> {
    const args: unknown[] = [limit + 1];
    const mine = owner === null ? '' : `AND c.owner = $${args.push(owner)}`;
    const select = (where: string, order: string) =>
      `(SELECT ${WAITING_COLUMNS} FROM containers c JOIN container_requests r ON r.id = c.request_id
        WHERE c.state = 'Queued' ${mine} AND ${where} ORDER BY ${order} LIMIT $1)`;
    // After a cursor: the rest of its priority, then the lower priorities. Two index ranges of
    // containers_queue: one OR-ed condition would filter its way through every row before the cursor.
    let sql: string;
    if (cursor) {
      const p = `$${args.push(cursor.priority)}`;
      const q = `$${args.push(cursor.queuedAt)}`;
      const i = `$${args.push(cursor.id)}`;
      sql = `SELECT * FROM (${select(`c.priority = ${p} AND (c.queued_at, c.id) > (${q}::timestamptz, ${i})`, 'c.queued_at, c.id')}
        UNION ALL ${select(`c.priority < ${p}`, 'c.priority DESC, c.queued_at, c.id')}) u
        ORDER BY u.priority DESC, u.queued_at, u.id LIMIT $1`;
    } else sql = `${select('true', 'c.priority DESC, c.queued_at, c.id')}`;
    const rows = await this.ctx.pool.query(sql, args);
    const total = await this.ctx.pool.query(
      `SELECT count(*)::int AS n FROM containers WHERE state = 'Queued' ${owner === null ? '' : 'AND owner = $1'}`,
      owner === null ? [] : [owner],
    );
    const items = (rows.rows.slice(0, limit) as WaitingContainer[]).map(withStatusText);
    return {
      items,
      next: rows.rows.length > limit ? encodeQueueCursor(items[items.length - 1]!) : null,
      total: total.rows[0].n,
    };
  }

  /** Containers a dispatcher holds but that have not started (being placed), at most `limit`. */
  async placing(owner: Owner, limit: number): Promise<WaitingContainer[]> {
    const r = await this.ctx.pool.query(
      `SELECT ${WAITING_COLUMNS} FROM containers c JOIN container_requests r ON r.id = c.request_id
       WHERE c.state = 'Locked' ${owner === null ? '' : 'AND c.owner = $2'}
       ORDER BY c.priority DESC, c.queued_at, c.id LIMIT $1`,
      owner === null ? [limit] : [limit, owner],
    );
    return r.rows.map(withStatusText);
  }

  /** Live instances with the containers placed on them and their agent's last ping. */
  async instances(): Promise<LiveInstance[]> {
    const r = await this.ctx.pool.query(
      `SELECT i.id, i.cluster, i.dispatcher_tag, i.type, i.state, i.idle_behavior, i.preemptible, i.price, i.created_at,
         i.state_since, i.ready_at, n.last_ping_at, i.requested_idle_behavior, i.kill_requested,
         COALESCE((SELECT json_agg(json_build_object('id', c.id, 'state', c.state, 'owner', c.owner, 'name', r.name) ORDER BY c.id)
           FROM containers c JOIN container_requests r ON r.id = c.request_id
           WHERE c.node_id = i.node_id AND c.state IN ('Locked', 'Running')), '[]') AS containers
       FROM instances i LEFT JOIN nodes n ON n.id = i.node_id
       WHERE i.gone_at IS NULL ORDER BY i.created_at, i.id`,
    );
    return r.rows.map((row) => ({ ...row, price: Number(row.price) }));
  }

  /** The last `n` log chunks of a container, oldest first. */
  async logTail(containerId: string, n: number): Promise<LogChunk[]> {
    const r = await this.ctx.pool.query(
      `SELECT * FROM (SELECT seq, stream, at, data FROM log_chunks WHERE container_id = $1 ORDER BY seq DESC LIMIT $2) t
       ORDER BY seq`,
      [containerId, n],
    );
    return r.rows;
  }

  /** Records one sample of the queue and the instances (once per bucket, whichever server writes it). */
  async sample(bucket: Date): Promise<void> {
    await this.ctx.pool.query(
      `INSERT INTO dashboard_samples (at, queued, running, instances, spend_per_hour)
       SELECT $1,
         (SELECT count(*)::int FROM containers WHERE state IN ('Queued', 'Locked')),
         (SELECT count(*)::int FROM containers WHERE state = 'Running'),
         (SELECT COALESCE(json_object_agg(type, n), '{}') FROM (
            SELECT type, count(*)::int AS n FROM instances WHERE gone_at IS NULL AND ended_at IS NULL GROUP BY type) t),
         (SELECT COALESCE(SUM(price), 0) FROM instances WHERE gone_at IS NULL AND ended_at IS NULL)
       ON CONFLICT (at) DO NOTHING`,
      [bucket],
    );
  }

  /** Forgets samples older than `before`. */
  async pruneSamples(before: Date): Promise<void> {
    await this.ctx.pool.query(`DELETE FROM dashboard_samples WHERE at < $1`, [before]);
  }

  /** Samples since `from`, at most one per `stepMs` (the last of each step), oldest first. */
  async samples(from: Date, stepMs: number): Promise<Sample[]> {
    const r = await this.ctx.pool.query(
      `SELECT at, queued, running, instances, spend_per_hour FROM (
         SELECT DISTINCT ON (floor(extract(epoch FROM at) * 1000 / $2)) * FROM dashboard_samples WHERE at >= $1
         ORDER BY floor(extract(epoch FROM at) * 1000 / $2), at DESC) s
       ORDER BY at`,
      [from, stepMs],
    );
    return r.rows;
  }

  /** A one-time sign-in link's code for the token of `p`, valid for SIGNIN_LINK_MS. */
  async createSignin(p: Principal): Promise<{ code: string; expires_at: Date }> {
    const code = randomBytes(24).toString('base64url');
    const expires = new Date(this.ctx.clock.now().getTime() + SIGNIN_LINK_MS);
    await this.ctx.pool.query(
      `INSERT INTO dashboard_signins (hash, token_id, expires_at) VALUES ($1, $2, $3)`,
      [sha256(code), p.tokenId, expires],
    );
    return { code, expires_at: expires };
  }

  /** Uses a sign-in code: the token id it signs in as, once; NotFoundError when unknown, used or expired. */
  async useSignin(code: string): Promise<number> {
    const now = this.ctx.clock.now();
    const r = await this.ctx.pool.query(
      `UPDATE dashboard_signins SET used_at = $2 WHERE hash = $1 AND used_at IS NULL AND expires_at > $2 RETURNING token_id`,
      [sha256(code), now],
    );
    // Old links go when new ones are used: the table stays small.
    await this.ctx.pool.query(`DELETE FROM dashboard_signins WHERE expires_at < $1`, [
      new Date(now.getTime() - 86_400_000),
    ]);
    if (!r.rows[0]) throw new NotFoundError('this sign-in link is unknown, used or expired');
    return Number(r.rows[0].token_id);
  }
}
