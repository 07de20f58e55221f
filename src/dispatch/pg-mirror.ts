// The dispatcher's view of its instances, published to PostgreSQL for the management API (`berth
// instances`), the dashboard and cost accounting, and the operator's requests (hold/drain/run/kill) read
// back from the same rows. Rows outlive their instances: an instance that left the view keeps its row with
// gone_at and the time its billing ended (ended_at), so what it cost can be computed later (docs/COST.md).
import { billingRuleOf, PER_SECOND, type BillingRule } from '../model/billing.js';
import type { IdleBehavior, InstanceType } from '../model/types.js';
import type { Db } from '../store/db.js';
import type { DispatcherView, InstanceMirror } from './dispatcher.js';
import type { PoolInstance } from './pool.js';

/** How often the rows of live instances are marked seen (the end of one that vanishes unwatched). */
export const SEEN_INTERVAL_MS = 60_000;

export class PgMirror implements InstanceMirror {
  private last = new Map<string, string>();
  private published = false;
  private lastSeen = -Infinity;
  private types = new Map<string, InstanceType>();
  /** How the cloud bills the instances (the cost query's rule), from the scheduler's keys. */
  private billing: BillingRule = PER_SECOND;
  private lastView = '';

  constructor(
    private readonly pool: Db,
    private readonly cluster: string,
    private readonly tag: string,
  ) {}

  async publish(instances: PoolInstance[], now: Date, view?: DispatcherView): Promise<void> {
    if (view) {
      this.types = new Map(view.instanceTypes.map((t) => [t.name, t]));
      this.billing = billingRuleOf(view.config);
      await this.publishView(view, now);
    }
    const rows = instances.filter((i) => i.state !== 'gone');
    // A gone one is written once more when its destroy (the end of its billing) was not published yet.
    const changed = instances.filter(
      (i) => (i.state !== 'gone' || destroyedAt(i) !== null) && this.last.get(i.id) !== key(i),
    );
    const ids = rows.map((i) => i.id);
    if (changed.length > 0) await this.upsert(changed, now);
    // Rows no longer in the view become history. Billing ended when the driver accepted the destroy
    // (ended_at, already written); else, for one this process saw live, now (it vanished since its last
    // pass); for one only a previous process saw, when that process last saw it (seen_at).
    if (!this.published || changed.length > 0 || this.last.size !== rows.length) {
      await this.pool.query(
        `UPDATE instances SET state = 'gone', gone_at = $3, updated_at = $3,
           ended_at = COALESCE(ended_at, CASE WHEN id = ANY($5) THEN $3 ELSE COALESCE(seen_at, updated_at) END)
         WHERE cluster = $1 AND dispatcher_tag = $2 AND gone_at IS NULL AND NOT (id = ANY($4))`,
        [this.cluster, this.tag, now, ids, [...this.last.keys()]],
      );
    }
    if (now.getTime() - this.lastSeen >= SEEN_INTERVAL_MS && ids.length > 0) {
      await this.pool.query(`UPDATE instances SET seen_at = $2 WHERE id = ANY($1) AND gone_at IS NULL`, [
        ids,
        now,
      ]);
      this.lastSeen = now.getTime();
    }
    this.published = true;
    this.last = new Map(rows.map((i) => [i.id, key(i)]));
  }

  private async upsert(changed: PoolInstance[], now: Date): Promise<void> {
    const res = (i: PoolInstance) => this.types.get(i.type);
    // ready_at: the first time its agent was there; ended_at: when the driver accepted its destroy. Both
    // keep their first value; a row that was history and is live again (listed after all) starts over.
    await this.pool.query(
      `INSERT INTO instances (id, cluster, dispatcher_tag, type, provider_type, price, state, idle_behavior, node_id, containers,
         created_at, state_since, updated_at, seen_at, preemptible, vcpus, ram, scratch, gpus, ready_at, ended_at,
         billing_minimum_ms, billing_increment_ms)
       SELECT u.id, $1, $2, u.type, u.ptype, u.price, u.state, u.idle, u.node, u.n, u.created, u.since, $3, $3,
         u.preemptible, u.vcpus, u.ram, u.scratch, u.gpus, u.ready, u.ended, $21, $22
       FROM unnest($4::text[], $5::text[], $6::text[], $7::float8[], $8::text[], $9::text[], $10::text[], $11::int4[],
         $12::timestamptz[], $13::timestamptz[], $14::bool[], $15::float8[], $16::int8[], $17::int8[], $18::int4[],
         $19::timestamptz[], $20::timestamptz[])
         AS u(id, type, ptype, price, state, idle, node, n, created, since, preemptible, vcpus, ram, scratch, gpus, ready, ended)
       ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, idle_behavior = EXCLUDED.idle_behavior, node_id = EXCLUDED.node_id,
         containers = EXCLUDED.containers, state_since = EXCLUDED.state_since, updated_at = EXCLUDED.updated_at,
         seen_at = EXCLUDED.seen_at, gone_at = NULL,
         ready_at = COALESCE(instances.ready_at, EXCLUDED.ready_at),
         ended_at = CASE WHEN instances.gone_at IS NULL THEN COALESCE(instances.ended_at, EXCLUDED.ended_at)
                         ELSE EXCLUDED.ended_at END`,
      [
        this.cluster,
        this.tag,
        now,
        changed.map((i) => i.id),
        changed.map((i) => i.type),
        changed.map((i) => i.providerType),
        changed.map((i) => i.price),
        changed.map((i) => i.state),
        changed.map((i) => i.idleBehavior),
        changed.map((i) => i.nodeId),
        changed.map((i) => i.containers.length),
        changed.map((i) => i.createdAt),
        changed.map((i) => i.stateSince),
        changed.map((i) => i.preemptible),
        changed.map((i) => res(i)?.vcpus ?? null),
        changed.map((i) => res(i)?.ram ?? null),
        changed.map((i) => res(i)?.scratch ?? null),
        changed.map((i) => res(i)?.gpus ?? null),
        changed.map((i) => (i.state === 'idle' || i.state === 'running' ? i.stateSince : null)),
        changed.map((i) => destroyedAt(i)),
        this.billing.minimumMs,
        this.billing.incrementMs,
      ],
    );
  }

  /** The dispatcher's limits and the cloud's errors in force, for the dashboard; written when changed. */
  private async publishView(view: DispatcherView, now: Date): Promise<void> {
    const c = view.config;
    const body = {
      instance_types: view.instanceTypes.map((t) => ({
        name: t.name,
        vcpus: t.vcpus,
        ram: t.ram,
        scratch: t.scratch,
        gpus: t.gpus,
        price: t.price,
        preemptible: t.preemptible,
      })),
      limits: {
        max_instances: c.maxInstances,
        max_spend_per_hour: c.maxSpendPerHour,
        max_instances_per_type: c.maxInstancesPerType,
        min_instances: c.minInstances,
        ram_overhead: c.ramOverhead,
        on_demand_after_interruptions: c.onDemandAfterInterruptions,
        max_price_factor: c.maxPriceFactor,
        share_rule: c.shareRule,
      },
      cloud: {
        quota_max_instances: view.cloud.quotaMaxInstances,
        unavailable_types: view.cloud.unavailableTypes,
        rate_limited_until: view.cloud.rateLimitedUntil?.toISOString() ?? null,
      },
    };
    const text = JSON.stringify(body);
    if (text === this.lastView) return;
    await this.pool.query(`UPDATE dispatchers SET view = $3 WHERE cluster = $1 AND tag = $2`, [
      this.cluster,
      this.tag,
      { ...body, at: now.toISOString() },
    ]);
    this.lastView = text;
  }

  async requests(): Promise<{ instance: string; idleBehavior: IdleBehavior | null; kill: boolean }[]> {
    const r = await this.pool.query(
      `WITH req AS (
         SELECT id, requested_idle_behavior AS idle, kill_requested AS kill FROM instances
         WHERE cluster = $1 AND dispatcher_tag = $2 AND gone_at IS NULL
           AND (requested_idle_behavior IS NOT NULL OR kill_requested) FOR UPDATE),
       cleared AS (
         UPDATE instances SET requested_idle_behavior = NULL, kill_requested = false FROM req WHERE instances.id = req.id)
       SELECT id, idle, kill FROM req`,
      [this.cluster, this.tag],
    );
    return r.rows.map((row) => ({ instance: row.id, idleBehavior: row.idle, kill: row.kill }));
  }
}

/** When the driver accepted the instance's destroy (its billing ended), or null. */
function destroyedAt(i: PoolInstance): Date | null {
  return (i.state === 'destroy_pending' || i.state === 'gone') && i.destroyAttemptAt !== null
    ? new Date(i.destroyAttemptAt)
    : null;
}

function key(i: PoolInstance): string {
  return `${i.state}|${i.idleBehavior}|${i.nodeId}|${i.containers.length}|${i.stateSince.getTime()}|${destroyedAt(i)?.getTime()}`;
}
