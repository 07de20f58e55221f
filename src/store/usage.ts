// Usage per request name or owner, for right-sizing (`berth usage`, GET /v1/usage): what completed
// containers asked for and what their agents recorded (peak memory, CPU seconds), aggregated in one
// statement so a large history never leaves the database row by row. The suggestion itself is computed
// by src/model/rightsize.ts, the same rule as the simulator's report.
import { CPU_PERCENTILE, type UsageAggregate } from '../model/rightsize.js';
import type { StoreContext } from './context.js';

/** How `usage` groups containers. */
export type UsageGroup = 'name' | 'owner';

export interface UsageFilter {
  by: UsageGroup;
  /** Only this owner's containers (a user sees their own); null = everyone's. */
  owner: string | null;
  /** Only containers that finished at or after this time; null = all. */
  since: Date | null;
}

interface Row {
  key: string;
  containers: string;
  cpu_n: string;
  cpu_asked_h: number | null;
  cpu_run_h: number | null;
  cpu_min: number | null;
  cpu_max: number | null;
  cpu_used_h: number | null;
  cpu_p95: number | null;
  ram_n: string;
  ram_asked_gibh: number | null;
  ram_run_h: number | null;
  ram_min: string | null;
  ram_max: string | null;
  ram_peak: string | null;
}

// The group key is one of two fixed column expressions, never user text.
const KEY: Record<UsageGroup, string> = { name: 'r.name', owner: 'c.owner' };

export class UsageQueries {
  constructor(private readonly ctx: StoreContext) {}

  /**
   * Completed containers grouped by request name or owner. The run time is the agent's wall time, or
   * finished − started when it reported none; CPU figures cover the containers with recorded CPU
   * seconds, memory figures those with a recorded peak.
   */
  async aggregate(f: UsageFilter): Promise<UsageAggregate[]> {
    const cpu = 'cpu_s IS NOT NULL AND run_s > 0';
    const res = await this.ctx.pool.query<Row>(
      `WITH s AS (
         SELECT ${KEY[f.by]} AS key, c.vcpus, c.ram,
                COALESCE(NULLIF((c.usage->>'wall_ms')::float8, 0) / 1000,
                         EXTRACT(EPOCH FROM c.finished_at - c.started_at)::float8) AS run_s,
                (c.usage->>'cpu_seconds')::float8 AS cpu_s,
                (c.usage->>'peak_ram')::float8 AS peak
         FROM containers c JOIN container_requests r ON r.id = c.request_id
         WHERE c.state = 'Complete'
           AND ($1::text IS NULL OR c.owner = $1)
           AND ($2::timestamptz IS NULL OR c.finished_at >= $2))
       SELECT key, count(*) AS containers,
              count(*) FILTER (WHERE ${cpu}) AS cpu_n,
              sum(vcpus * run_s / 3600) FILTER (WHERE ${cpu}) AS cpu_asked_h,
              sum(run_s / 3600) FILTER (WHERE ${cpu}) AS cpu_run_h,
              min(vcpus) FILTER (WHERE ${cpu}) AS cpu_min,
              max(vcpus) FILTER (WHERE ${cpu}) AS cpu_max,
              sum(cpu_s / 3600) FILTER (WHERE ${cpu}) AS cpu_used_h,
              percentile_disc($3::float8) WITHIN GROUP (ORDER BY cpu_s / run_s) FILTER (WHERE ${cpu}) AS cpu_p95,
              count(*) FILTER (WHERE peak IS NOT NULL) AS ram_n,
              sum(ram / 1073741824.0 * run_s / 3600) FILTER (WHERE peak IS NOT NULL) AS ram_asked_gibh,
              sum(run_s / 3600) FILTER (WHERE peak IS NOT NULL) AS ram_run_h,
              min(ram) FILTER (WHERE peak IS NOT NULL) AS ram_min,
              max(ram) FILTER (WHERE peak IS NOT NULL) AS ram_max,
              max(peak) FILTER (WHERE peak IS NOT NULL) AS ram_peak
       FROM s GROUP BY key ORDER BY key`,
      [f.owner, f.since, CPU_PERCENTILE / 100],
    );
    return res.rows.map((r) => ({
      key: r.key,
      containers: Number(r.containers),
      cpu:
        Number(r.cpu_n) === 0
          ? null
          : {
              containers: Number(r.cpu_n),
              askedHours: Number(r.cpu_asked_h),
              runHours: Number(r.cpu_run_h),
              askedMin: Number(r.cpu_min),
              askedMax: Number(r.cpu_max),
              usedHours: Number(r.cpu_used_h),
              coresP95: Number(r.cpu_p95),
            },
      ram:
        Number(r.ram_n) === 0
          ? null
          : {
              containers: Number(r.ram_n),
              askedGiBHours: Number(r.ram_asked_gibh),
              runHours: Number(r.ram_run_h),
              askedMin: Number(r.ram_min),
              askedMax: Number(r.ram_max),
              peakMax: Number(r.ram_peak),
            },
    }));
  }
}
