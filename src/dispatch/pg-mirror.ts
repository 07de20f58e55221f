// The dispatcher's view of its instances, published to PostgreSQL for the management API (`berth
// instances`), and the operator's requests (hold/drain/run/kill) read back from the same rows.
import type { IdleBehavior } from '../model/types.js';
import type { Db } from '../store/db.js';
import type { InstanceMirror } from './dispatcher.js';
import type { PoolInstance } from './pool.js';

export class PgMirror implements InstanceMirror {
  private last = new Map<string, string>();

  constructor(
    private readonly pool: Db,
    private readonly cluster: string,
    private readonly tag: string,
  ) {}

  async publish(instances: PoolInstance[], now: Date): Promise<void> {
    const rows = instances.filter((i) => i.state !== 'gone');
    const changed = rows.filter((i) => this.last.get(i.id) !== key(i));
    const ids = rows.map((i) => i.id);
    if (changed.length > 0) {
      await this.pool.query(
        `INSERT INTO instances (id, cluster, dispatcher_tag, type, provider_type, price, state, idle_behavior, node_id, containers,
           created_at, state_since, updated_at)
         SELECT u.id, $1, $2, u.type, u.ptype, u.price, u.state, u.idle, u.node, u.n, u.created, u.since, $3
         FROM unnest($4::text[], $5::text[], $6::text[], $7::float8[], $8::text[], $9::text[], $10::text[], $11::int4[],
           $12::timestamptz[], $13::timestamptz[]) AS u(id, type, ptype, price, state, idle, node, n, created, since)
         ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, idle_behavior = EXCLUDED.idle_behavior, node_id = EXCLUDED.node_id,
           containers = EXCLUDED.containers, state_since = EXCLUDED.state_since, updated_at = EXCLUDED.updated_at`,
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
        ],
      );
    }
    if (changed.length > 0 || this.last.size !== rows.length) {
      await this.pool.query(
        `DELETE FROM instances WHERE cluster = $1 AND dispatcher_tag = $2 AND NOT (id = ANY($3))`,
        [this.cluster, this.tag, ids],
      );
    }
    this.last = new Map(rows.map((i) => [i.id, key(i)]));
  }

  async requests(): Promise<{ instance: string; idleBehavior: IdleBehavior | null; kill: boolean }[]> {
    const r = await this.pool.query(
      `WITH req AS (
         SELECT id, requested_idle_behavior AS idle, kill_requested AS kill FROM instances
         WHERE cluster = $1 AND dispatcher_tag = $2 AND (requested_idle_behavior IS NOT NULL OR kill_requested) FOR UPDATE),
       cleared AS (
         UPDATE instances SET requested_idle_behavior = NULL, kill_requested = false FROM req WHERE instances.id = req.id)
       SELECT id, idle, kill FROM req`,
      [this.cluster, this.tag],
    );
    return r.rows.map((row) => ({ instance: row.id, idleBehavior: row.idle, kill: row.kill }));
  }
}

function key(i: PoolInstance): string {
  return `${i.state}|${i.idleBehavior}|${i.nodeId}|${i.containers.length}|${i.stateSince.getTime()}`;
}
