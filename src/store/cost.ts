// What everything costs (docs/COST.md). An instance costs its price for the time it was billed: its life
// (created until its destroy was accepted, or until now while it lives) under its provider's billing rule
// (src/model/billing.ts, the rule its dispatcher wrote: EC2 bills at least 60 s, then per second). That cost is divided among the containers
// that ran on it, each in proportion to its weight: its share of the instance (the largest fraction of the
// instance's CPUs, memory, scratch or GPUs it asked for, at most 1) times how long it ran there. So each
// container pays its share of the price for its run time ("direct"), plus the same proportion of the boot,
// idle and unused time of its instance ("overhead"), and the containers' costs add up to the instances'
// costs exactly; an instance that ran no container is "unattributed". Over a window [from, to] every
// interval is clipped to the window first, so the identity holds for every window.
//
// The whole computation is one SQL query: attribution needs every container of an instance, and summing
// in the database scales to millions of containers where fetching them would not.
import { billedEndSql } from '../model/billing.js';
import type { StoreContext } from './context.js';
import type { Queryable } from './db.js';
import { ofRequest } from './records.js';

/** How costs are grouped: by owner, request, name (numbered series together), instance type, or label. */
export type CostBy = 'owner' | 'request' | 'name' | 'type' | `label:${string}`;

export interface CostWindow {
  /** Start of the window; null: since the first instance. */
  from: Date | null;
  /** End of the window (default: now, on the store's clock). */
  to?: Date;
}

/** The cost of a group of containers in a window. */
export interface CostGroup {
  key: string;
  /** The group's cost: direct + overhead. */
  cost: number;
  /** Price × share × run time. */
  direct: number;
  /** Its proportion of its instances' boot, idle and unused time (negative when shares overlapped). */
  overhead: number;
  containers: number;
  requests: number;
  /** Summed run time of its containers, in seconds. */
  run_seconds: number;
}

/** What the instances of a window cost, by type. */
export interface InstanceSpend {
  type: string;
  cost: number;
  hours: number;
  instances: number;
}

export interface CostSummary {
  from: Date | null;
  to: Date;
  by: CostBy;
  /** The most expensive groups first (at most `limit`). */
  groups: CostGroup[];
  /** How many groups there are in all (groups may hold fewer). */
  group_count: number;
  /** The summed cost of every group (not only those listed). */
  total: number;
  /**
   * For admins: what the instances cost, by type, and the part no container can carry (instances that
   * ran nothing in the window). total + unattributed = the instances' cost. Null for a user's summary.
   */
  instances: { cost: number; unattributed: number; by_type: InstanceSpend[] } | null;
}

/** One container's cost (an attempt, on the instance it ran on). */
export interface ContainerCost {
  container: string;
  request: string;
  instance: string;
  type: string;
  /** The instance type's hourly price. */
  price: number;
  /** Its share of the instance (largest resource fraction, at most 1). */
  share: number;
  run_seconds: number;
  cost: number;
  direct: number;
  overhead: number;
}

/**
 * When each instance's billing ends under its provider's rule (src/model/billing.ts: a minimum, then whole
 * increments), from its life: created until its destroy was accepted, or until the window's end ($2) while
 * it lives.
 */
const BILLED_END = billedEndSql(
  'created_at',
  'LEAST(COALESCE(ended_at, $2::timestamptz), $2::timestamptz)',
  'billing_minimum_ms',
  'billing_increment_ms',
);

/** The billed interval of each instance of the window, clipped to it: $1 = from, $2 = to. */
const INSTANCES = (where: string) => `inst AS (
    SELECT id, type, price, vcpus, ram, scratch, gpus,
      GREATEST(created_at, $1::timestamptz) AS s, LEAST(${BILLED_END}, $2::timestamptz) AS e
    FROM instances
    WHERE created_at < $2::timestamptz AND ${BILLED_END} > $1::timestamptz ${where}),
  ic AS (SELECT id, type, price * EXTRACT(EPOCH FROM e - s) / 3600 AS cost, EXTRACT(EPOCH FROM e - s) AS secs FROM inst)`;

/**
 * A container's share of an instance: the largest fraction of the instance's resources it asked for, at
 * most 1; 1 on an instance whose resources are unknown (a record older than the history).
 */
const SHARE = `CASE WHEN i.vcpus IS NULL THEN 1.0 ELSE LEAST(1.0, GREATEST(
    c.vcpus / NULLIF(i.vcpus, 0), c.ram::float8 / NULLIF(i.ram, 0), c.scratch::float8 / NULLIF(i.scratch, 0),
    c.gpus::float8 / NULLIF(i.gpus, 0), 0.0)) END`;

/**
 * Every container's run on an instance of the window (clipped), its weight and its attributed cost. The
 * instance's total weight is a window sum, not a join: CTE row estimates are poor, and a join of the runs
 * with their per-instance totals was planned as a nested loop (200 ms for 3,000 runs).
 */
const ATTRIBUTED = `runs AS (
    SELECT c.id, c.request_id, c.owner, c.instance_id, i.type, i.price, ${SHARE} AS share,
      EXTRACT(EPOCH FROM LEAST(COALESCE(c.finished_at, $2::timestamptz), i.e) - GREATEST(c.started_at, i.s)) AS secs,
      i.price * EXTRACT(EPOCH FROM i.e - i.s) / 3600 AS instance_cost
    FROM inst i JOIN containers c ON c.instance_id = i.id AND c.started_at IS NOT NULL
    WHERE c.started_at < i.e AND COALESCE(c.finished_at, $2::timestamptz) > i.s),
  weighed AS (SELECT r.*, SUM(r.share * r.secs) OVER (PARTITION BY r.instance_id) AS total FROM runs r),
  att AS (
    SELECT w.*, w.instance_cost * (w.share * w.secs) / w.total AS cost, w.price * w.share * w.secs / 3600 AS direct
    FROM weighed w WHERE w.total > 0)`;

/** The grouping key of an attributed run `a` of request `q`; `param` adds a query parameter. */
function groupKey(by: CostBy, param: (v: unknown) => string): string {
  if (by === 'owner') return 'a.owner';
  if (by === 'request') return 'a.request_id';
  if (by === 'type') return 'a.type';
  // A numbered series (align-1, align-2, …) is one group: the name without its trailing number.
  if (by === 'name')
    return `COALESCE(NULLIF(regexp_replace(q.name, '[-_.:/ ]*[0-9]+$', ''), ''), '(no name)')`;
  return `COALESCE(q.labels ->> ${param(by.slice('label:'.length))}, '(none)')`;
}

const INFINITE_PAST = '-infinity';

export class Costs {
  constructor(private readonly ctx: StoreContext) {}

  /**
   * Costs in a window grouped by `by`, for one owner (a user's own work) or everyone (owner null, with
   * the instances' side for the identity).
   */
  async summary(window: CostWindow, by: CostBy, owner: string | null, limit = 100): Promise<CostSummary> {
    const to = window.to ?? this.ctx.clock.now();
    const args: unknown[] = [window.from ?? INFINITE_PAST, to];
    const param = (v: unknown) => {
      args.push(v);
      return `$${args.length}`;
    };
    const key = groupKey(by, param);
    const mine = owner === null ? '' : `WHERE a.owner = ${param(owner)}`;
    const r = await this.ctx.pool.query(
      `WITH ${INSTANCES('')}, ${ATTRIBUTED},
       g AS (
         SELECT ${key} AS key, SUM(a.cost) AS cost, SUM(a.direct) AS direct, COUNT(*)::int AS containers,
           COUNT(DISTINCT a.request_id)::int AS requests, SUM(a.secs) AS run_seconds
         FROM att a JOIN container_requests q ON q.id = a.request_id ${mine} GROUP BY 1)
       SELECT
         (SELECT COALESCE(json_agg(x), '[]') FROM (SELECT * FROM g ORDER BY cost DESC, key LIMIT ${param(limit)}) x) AS groups,
         (SELECT count(*)::int FROM g) AS group_count,
         (SELECT COALESCE(SUM(cost), 0) FROM g) AS total,
         (SELECT COALESCE(json_agg(t), '[]') FROM (
            SELECT type, SUM(cost) AS cost, SUM(secs) / 3600 AS hours, count(*)::int AS instances
            FROM ic GROUP BY type ORDER BY type) t) AS by_type,
         (SELECT COALESCE(SUM(cost), 0) FROM ic) AS instance_cost,
         (SELECT COALESCE(SUM(cost), 0) FROM ic WHERE NOT EXISTS (
            SELECT 1 FROM att WHERE att.instance_id = ic.id)) AS unattributed`,
      args,
    );
    const row = r.rows[0];
    const groups = (row.groups as Record<string, unknown>[]).map((g) => ({
      key: String(g.key),
      cost: Number(g.cost),
      direct: Number(g.direct),
      overhead: Number(g.cost) - Number(g.direct),
      containers: Number(g.containers),
      requests: Number(g.requests),
      run_seconds: Number(g.run_seconds),
    }));
    return {
      from: window.from,
      to,
      by,
      groups,
      group_count: row.group_count,
      total: Number(row.total),
      instances:
        owner === null
          ? {
              cost: Number(row.instance_cost),
              unattributed: Number(row.unattributed),
              by_type: (row.by_type as InstanceSpend[]).map((t) => ({
                type: t.type,
                cost: Number(t.cost),
                hours: Number(t.hours),
                instances: Number(t.instances),
              })),
            }
          : null,
    };
  }

  /** The cost so far of every attempt of a request that ran (all time, on the instances it ran on). */
  async ofRequest(requestId: string): Promise<ContainerCost[]> {
    const to = this.ctx.clock.now();
    const r = await this.ctx.pool.query(
      `WITH ${INSTANCES(`AND id IN (SELECT instance_id FROM containers WHERE ${ofRequest('', '$3::text')} AND started_at IS NOT NULL)`)},
         ${ATTRIBUTED}
       SELECT id, request_id, instance_id, type, price, share, secs, cost, direct FROM att WHERE request_id = $3
       ORDER BY id`,
      [INFINITE_PAST, to, requestId],
    );
    return r.rows.map((row) => ({
      container: row.id,
      request: row.request_id,
      instance: row.instance_id,
      type: row.type,
      price: Number(row.price),
      share: Number(row.share),
      run_seconds: Number(row.secs),
      cost: Number(row.cost),
      direct: Number(row.direct),
      overhead: Number(row.cost) - Number(row.direct),
    }));
  }

  /** What instances cost in a window, by type (no attribution: cheap, for the dashboard and metrics). */
  spend(window: CostWindow): Promise<InstanceSpend[]> {
    return instanceSpend(this.ctx.pool, window.from, window.to ?? this.ctx.clock.now());
  }
}

/** Instance cost by type over [from, to]. */
export async function instanceSpend(db: Queryable, from: Date | null, to: Date): Promise<InstanceSpend[]> {
  const r = await db.query(
    `WITH ${INSTANCES('')}
     SELECT type, SUM(cost) AS cost, SUM(secs) / 3600 AS hours, count(*)::int AS instances FROM ic GROUP BY type ORDER BY type`,
    [from ?? INFINITE_PAST, to],
  );
  return r.rows.map((row) => ({
    type: row.type,
    cost: Number(row.cost),
    hours: Number(row.hours),
    instances: row.instances,
  }));
}
