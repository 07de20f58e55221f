// The dispatcher's queue on PostgreSQL: the store's transitions, plus the dispatcher's lease (a
// session-level advisory lock on a connection of its own: it is released the moment the process dies, so
// a restarted dispatcher takes over at once, and two live dispatchers for one tag can never both run).
import pg from 'pg';
import { REASONS } from '../model/transitions.js';
import type { Store } from '../store/store.js';
import { ofRequest } from '../store/records.js';
import type { Outcome } from '../store/transitions/index.js';
import {
  FAILED_NODE_VISIBLE_MS,
  isSilent,
  type AssignItem,
  type CancelItem,
  type ChangeCursor,
  type ContainerChanges,
  type DispatchQueue,
  type ItemOutcome,
  type NodeChanges,
  type NodeView,
  type StatusUpdate,
  type StoredGroup,
  type UnlockItem,
} from './ports.js';
import type { MeasuredUsage, SnapshotContainer } from './scheduler/types.js';
import { WrittenGroups, type GroupWrite } from './status-parts.js';

export interface PgQueueOptions {
  /**
   * Whether the snapshot carries each container's request name (a sub-select per row), which only the
   * run-time estimates of `wait_for_running` read (run-history.ts). Off: the name is not read.
   */
  names?: boolean;
  /**
   * Whether the snapshot carries each container's request `max_run_time` as its expected run time (a
   * sub-select per row; a limit, so never below the run time), which end-aligned placement reads
   * (scheduler/aligned.ts). Off: no expected run time.
   */
  runLimits?: boolean;
}

export class PgQueue implements DispatchQueue {
  private leaseClient: pg.Client | null = null;
  private readonly sql: SnapshotSql;
  /** What each dispatcher's status groups hold, as its writes left them (status-parts.ts). */
  private readonly written = new Map<string, WrittenGroups>();

  constructor(
    private readonly store: Store,
    private readonly url: string,
    o: PgQueueOptions = {},
  ) {
    this.sql = snapshotSql(o);
  }

  private get pool() {
    return this.store.ctx.pool;
  }

  async heartbeat(
    dispatcherId: string,
    cluster: string,
    tag: string,
    now: Date,
    lostAfterMs: number,
  ): Promise<boolean> {
    if (!this.leaseClient) {
      const c = new pg.Client({ connectionString: this.url });
      c.on('error', () => {
        this.leaseClient = null;
      });
      try {
        await c.connect();
        const r = await c.query('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [
          `berth-dispatcher:${dispatcherId}`,
        ]);
        if (!r.rows[0].ok) {
          await c.end();
          return false;
        }
      } catch (err) {
        await c.end().catch(() => {});
        throw err;
      }
      this.leaseClient = c;
    }
    await this.pool.query(
      `INSERT INTO dispatchers (id, cluster, tag, started_at, heartbeat_at, pid, hostname) VALUES ($1, $2, $3, $4, $4, $5, $6)
       ON CONFLICT (id) DO UPDATE SET heartbeat_at = $4, stopped_at = NULL, pid = $5, hostname = $6`,
      [dispatcherId, cluster, tag, now, process.pid, process.env.HOSTNAME ?? null],
    );
    // Dispatchers of this cluster that stopped beating lose their unplaced locks (DESIGN §3.5).
    const lost = await this.pool.query<{ id: string; locked_by: string }>(
      `SELECT c.id, c.locked_by FROM containers c JOIN dispatchers d ON d.id = c.locked_by
       WHERE c.state = 'Locked' AND c.instance_id IS NULL AND d.cluster = $1 AND d.id <> $3
         AND d.heartbeat_at < $2::timestamptz - make_interval(secs => $4)`,
      [cluster, now, dispatcherId, lostAfterMs / 1000],
    );
    await this.requeueUnplaced(
      lost.rows.map((r) => ({
        id: r.id,
        holder: r.locked_by,
        why: REASONS.dispatcherLost(r.locked_by),
      })),
    );
    return true;
  }

  async release(dispatcherId: string, now: Date): Promise<void> {
    const mine = await this.pool.query<{ id: string }>(
      `SELECT id FROM containers WHERE locked_by = $1 AND state = 'Locked' AND instance_id IS NULL`,
      [dispatcherId],
    );
    await this.requeueUnplaced(
      mine.rows.map((r) => ({
        id: r.id,
        holder: dispatcherId,
        why: REASONS.released(dispatcherId),
      })),
    );
    await this.pool.query(`UPDATE dispatchers SET stopped_at = $2 WHERE id = $1`, [dispatcherId, now]);
    const c = this.leaseClient;
    this.leaseClient = null;
    await c?.end().catch(() => {});
  }

  /**
   * Runnable Queued containers (priority > 0, run_after passed) and everything this dispatcher holds.
   * Two index scans: the partial queue index and the locked_by index.
   */
  async containers(dispatcherId: string, now: Date): Promise<SnapshotContainer[]> {
    const r = await this.pool.query<SnapshotRow>(this.sql.considered, [dispatcherId, now]);
    return r.rows.map(toSnapshot);
  }

  /**
   * The view incrementally (SEAMS §2), in one statement so the rows and the cursor come from one snapshot.
   * The cursor is the oldest transaction still running at this read: the next read takes every row
   * stamped by it or any later one (migration 020), so a change committed after this read is never
   * missed, whatever order transactions commit in; a few rows may come twice.
   */
  async changes(dispatcherId: string, now: Date, since: ChangeCursor | null): Promise<ContainerChanges> {
    const { columns, considered } = this.sql;
    const select = since
      ? `SELECT ${columns}, ${CONSIDERED} AS considered FROM containers WHERE change_xid >= $3::xid8
         UNION ALL
         SELECT ${columns}, true FROM containers
         WHERE state = 'Queued' AND priority > 0 AND run_after > $4 AND run_after <= $2`
      : `SELECT *, true AS considered FROM (${considered}) q`;
    const r = await this.pool.query(
      `WITH s AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS position),
         n AS (SELECT min(run_after) AS next FROM containers WHERE state = 'Queued' AND priority > 0 AND run_after > $2),
         c AS (${select})
       SELECT s.position, n.next, c.* FROM s CROSS JOIN n LEFT JOIN c ON true`,
      since ? [dispatcherId, now, since.position, since.now] : [dispatcherId, now],
    );
    const rows = r.rows as (SnapshotRow & { position: string; next: Date | null; considered: boolean })[];
    const first = rows[0]!;
    const upserts = new Map<string, SnapshotContainer>();
    const removed = new Set<string>();
    for (const row of rows) {
      if (row.id === null) continue; // no container changed: the LEFT JOIN's one row
      if (row.considered) upserts.set(row.id, toSnapshot(row));
      else removed.add(row.id);
    }
    for (const id of upserts.keys()) removed.delete(id);
    return {
      cursor: { position: first.position, now },
      upserts: [...upserts.values()],
      removed: [...removed],
      nextRunAfter: first.next,
    };
  }

  maxDispatchAttempts(): Promise<number> {
    return this.store.settings.maxDispatchAttempts();
  }

  async lock(ids: string[], dispatcherId: string): Promise<string[]> {
    return (await this.store.containers.lock(ids, dispatcherId)).map((l) => l.id);
  }

  async lockAssign(items: AssignItem[], dispatcherId: string): Promise<string[]> {
    return (await this.store.transitions.lockAssign(items, dispatcherId)).map((l) => l.id);
  }

  async unlock(items: UnlockItem[], dispatcherId: string): Promise<ItemOutcome[]> {
    return (await this.store.transitions.unlock(items, dispatcherId)).map(itemOutcome);
  }

  async assign(items: AssignItem[], dispatcherId: string): Promise<ItemOutcome[]> {
    return (await this.store.transitions.assign(items, dispatcherId)).map(itemOutcome);
  }

  /** What it holds, and Queued containers nobody holds (unsatisfiable before they were ever locked). */
  async cancel(items: CancelItem[], dispatcherId: string): Promise<ItemOutcome[]> {
    const actor = { kind: 'dispatcher' as const, id: dispatcherId };
    const out = await this.store.transitions.end(
      items.map((it) => ({
        id: it.id,
        actor,
        end: {
          state: 'Cancelled',
          failureClass: it.failureClass,
          reason: it.reason,
          retryable: it.retryable ?? true,
          reclaimed: it.reclaimed ?? false,
        },
      })),
    );
    return out.map(itemOutcome);
  }

  /** Locked → Queued for locks that were never placed (release, a lost dispatcher). */
  private async requeueUnplaced(items: { id: string; holder: string; why: string }[]): Promise<void> {
    if (items.length === 0) return;
    await this.store.transitions.requeue(
      items.map((it) => ({
        id: it.id,
        actor: { kind: 'dispatcher', id: it.holder },
        why: it.why,
        event: `Queued: ${it.why}`,
        unplacedOnly: true,
      })),
    );
  }

  async createNode(instanceType: string, cluster: string, tag: string) {
    const { node, bootstrapSecret } = await this.store.nodes.create({
      cluster,
      dispatcherTag: tag,
      instanceId: null,
      instanceType,
    });
    return { nodeId: node.id, bootstrapSecret };
  }

  async bindNode(nodeId: string, instanceId: string): Promise<void> {
    await this.store.nodes.bind(nodeId, instanceId);
  }

  async nodes(cluster: string, tag: string, now: Date): Promise<NodeView[]> {
    // updated_at of a failed node is when it failed (the store writes it with the same clock).
    const r = await this.pool.query(
      `SELECT id, instance_id, state, last_ping_at, reclaims FROM nodes WHERE cluster = $1 AND dispatcher_tag = $2
       AND (state <> 'failed' OR updated_at > $3)`,
      [cluster, tag, new Date(now.getTime() - FAILED_NODE_VISIBLE_MS)],
    );
    return r.rows.map((row) => ({
      id: row.id,
      instanceId: row.instance_id,
      state: row.state,
      lastPingAt: row.last_ping_at,
      ...(row.reclaims === true && { reclaims: true }),
    }));
  }

  /**
   * Always the whole list (`full`): a production pass reads its nodes once, against a pass of database
   * round trips, and the nodes of a cluster are thousands at most. Silent nodes by one more query.
   */
  async nodeChanges(
    cluster: string,
    tag: string,
    now: Date,
    _since: ChangeCursor | null,
    silentBefore: Date | null,
  ): Promise<NodeChanges> {
    const upserts = await this.nodes(cluster, tag, now);
    const silent = silentBefore === null ? [] : upserts.filter((n) => isSilent(n, silentBefore.getTime()));
    return { cursor: { position: 'full', now }, full: true, upserts, removed: [], silent };
  }

  async failNode(nodeId: string, reason: string): Promise<void> {
    await this.store.nodes.fail(nodeId, reason);
  }

  async drainNode(nodeId: string): Promise<void> {
    await this.store.nodes.drain(nodeId);
  }

  async setStatuses(statuses: StatusUpdate): Promise<void> {
    if (statuses.size === 0) return;
    await this.pool.query(
      `UPDATE containers c SET scheduling_status = u.s, status_group = NULL
       FROM unnest($1::text[], $2::text[]) AS u(id, s) WHERE c.id = u.id`,
      [[...statuses.keys()], [...statuses.values()]],
    );
    for (const w of this.written.values()) w.unpointed(statuses.keys());
  }

  /**
   * Drops the gone groups, then upserts the changed ones: their rows, the parts that differ from what the
   * last write left (status-parts.ts: positions are stored less the group's bases, so a moving head
   * changes a base, not every part), and the pointers of members that moved from another group.
   */
  async setWaiting(dispatcherId: string, groups: StoredGroup[], slots: number[]): Promise<void> {
    const written = this.writtenGroups(dispatcherId);
    const plans = groups.map((g) => written.plan(g));
    try {
      // Two statements: a deleted group's members lose their pointer (ON DELETE SET NULL) before the
      // upsert gives them their new one.
      await this.pool.query(
        `DELETE FROM status_groups WHERE dispatcher_id = $1 AND NOT (slot = ANY($2::integer[]))`,
        [dispatcherId, slots],
      );
      if (groups.length > 0)
        await this.writeGroups(
          dispatcherId,
          plans.map((p) => p.write),
        );
    } catch (err) {
      // What the database holds is not known now: the next write sends everything.
      written.clear();
      throw err;
    }
    written.written(plans, slots);
  }

  /** One statement: the groups' rows, their changed parts (and none past `parts`), the moved pointers. */
  private async writeGroups(dispatcherId: string, writes: GroupWrite[]): Promise<void> {
    const parts = writes.flatMap((w) => w.parts.map((p) => ({ slot: w.row.slot, ...p })));
    const pointers = writes.flatMap((w) => w.repointed.map((id) => [id, w.row.slot] as const));
    await this.pool.query(
      `WITH g AS (SELECT * FROM jsonb_to_recordset($2::jsonb)
                  AS x(slot integer, reason text, parts integer, "positionBase" integer, "higherAheadBase" integer)),
         up AS (INSERT INTO status_groups (dispatcher_id, slot, reason, parts, position_base, higher_ahead_base)
                SELECT $1, slot, reason, parts, "positionBase", "higherAheadBase" FROM g
                ON CONFLICT (dispatcher_id, slot) DO UPDATE
                  SET reason = EXCLUDED.reason, parts = EXCLUDED.parts,
                      position_base = EXCLUDED.position_base, higher_ahead_base = EXCLUDED.higher_ahead_base
                RETURNING id, slot, parts),
         pt AS (SELECT * FROM jsonb_to_recordset($3::jsonb)
                AS x(slot integer, part integer, members text[], positions integer[], "higherAhead" integer[])),
         pointed AS (UPDATE containers c SET status_group = up.id
                     FROM unnest($4::text[], $5::integer[]) AS m(id, slot) JOIN up USING (slot)
                     WHERE c.id = m.id AND c.status_group IS DISTINCT FROM up.id),
         dropped AS (DELETE FROM status_group_parts p USING up WHERE p.group_id = up.id AND p.part >= up.parts)
       INSERT INTO status_group_parts AS p (group_id, part, members, positions, higher_ahead)
       SELECT up.id, pt.part, pt.members, pt.positions, pt."higherAhead" FROM pt JOIN up USING (slot)
       ON CONFLICT (group_id, part) DO UPDATE
         SET members = EXCLUDED.members, positions = EXCLUDED.positions, higher_ahead = EXCLUDED.higher_ahead
         WHERE (p.members, p.positions, p.higher_ahead)
           IS DISTINCT FROM (EXCLUDED.members, EXCLUDED.positions, EXCLUDED.higher_ahead)`,
      [
        dispatcherId,
        JSON.stringify(writes.map((w) => w.row)),
        JSON.stringify(parts),
        pointers.map((p) => p[0]),
        pointers.map((p) => p[1]),
      ],
    );
  }

  private writtenGroups(dispatcherId: string): WrittenGroups {
    let w = this.written.get(dispatcherId);
    if (w === undefined) this.written.set(dispatcherId, (w = new WrittenGroups()));
    return w;
  }
}

/** The port's view of a store outcome. */
function itemOutcome(o: Outcome): ItemOutcome {
  return o.ok ? { id: o.id, ok: true } : { id: o.id, ok: false, reason: o.reason };
}

/** The snapshot's columns and the containers() query, with or without the request's name and limit. */
interface SnapshotSql {
  columns: string;
  considered: string;
}

export function snapshotSql(o: PgQueueOptions): SnapshotSql {
  const request = (column: string) =>
    `(SELECT r.${column} FROM container_requests r WHERE r.id = containers.request_id)`;
  const columns = `${SNAPSHOT_COLUMNS},
  ${o.names ? request('name') : 'NULL::text'} AS name,
  ${o.runLimits ? request('max_run_time_ms') : 'NULL::int8'} AS max_run_time_ms`;
  return {
    columns,
    // The same predicate as CONSIDERED, as two index scans.
    considered: `SELECT ${columns} FROM containers
  WHERE state = 'Queued' AND priority > 0 AND (run_after IS NULL OR run_after <= $2)
  UNION ALL
  SELECT ${columns} FROM containers WHERE locked_by = $1 AND state IN ('Locked', 'Running')`,
  };
}

/** The snapshot's columns but the request's name and limit (snapshotSql adds them). */
const SNAPSHOT_COLUMNS = `id, state, priority, queued_at, vcpus, ram, scratch, gpus, preemptible, instance_types,
  instance_id, lock_count, owner, spot_interruptions, opportunistic,
  -- a Running container's latest usage sample (recordUsage): what opportunistic placement may borrow
  CASE WHEN state = 'Running' THEN usage END AS usage,
  -- a Queued opportunistic retry: where and when its request's last attempt was reclaimed (its reclaim event)
  CASE WHEN state = 'Queued' AND opportunistic THEN (
    SELECT jsonb_build_object('instance', p.instance_id, 'at', e.at)
    FROM containers p JOIN container_events e ON e.container_id = p.id AND e.kind = 'reclaim'
    WHERE ${ofRequest('p', 'containers.request_id')} AND p.id <> containers.id AND p.instance_id IS NOT NULL
    ORDER BY e.id DESC LIMIT 1) END AS reclaimed_from,
  CASE WHEN state = 'Running' THEN started_at END AS started_at`;

/** Whether a container is in a dispatcher's view ($1: the dispatcher, $2: now): containers() lists these. */
const CONSIDERED = `((state = 'Queued' AND priority > 0 AND (run_after IS NULL OR run_after <= $2))
  OR (locked_by = $1 AND state IN ('Locked', 'Running')))`;

/** A row of SNAPSHOT_COLUMNS. */
interface SnapshotRow {
  id: string;
  state: SnapshotContainer['state'];
  priority: number;
  queued_at: Date;
  vcpus: number;
  ram: number;
  scratch: number;
  gpus: number;
  preemptible: boolean;
  instance_types: string[] | null;
  instance_id: string | null;
  lock_count: number;
  owner: string;
  spot_interruptions: number;
  opportunistic: boolean;
  usage: { cpu_seconds?: number; peak_ram?: number; wall_ms?: number } | null;
  reclaimed_from: { instance: string; at: string } | null;
  name: string | null;
  max_run_time_ms: number | null;
  started_at: Date | null;
}

/** The measured use of a Running container's latest sample: peak memory, average CPUs, for how long. */
function measured(u: SnapshotRow['usage']): { usage?: MeasuredUsage } {
  const wall = Number(u?.wall_ms ?? 0);
  if (u === null || wall <= 0 || u.peak_ram === undefined || u.cpu_seconds === undefined) return {};
  return {
    usage: { ram: Number(u.peak_ram), vcpus: Number(u.cpu_seconds) / (wall / 1000), observedMs: wall },
  };
}

/** A container row as the scheduler sees it. */
function toSnapshot(row: SnapshotRow): SnapshotContainer {
  return {
    id: row.id,
    state: row.state,
    priority: row.priority,
    queuedAt: row.queued_at,
    vcpus: row.vcpus,
    ram: row.ram,
    scratch: row.scratch,
    gpus: row.gpus,
    preemptible: row.preemptible,
    instanceTypes: row.instance_types,
    instance: row.instance_id,
    lockCount: row.lock_count,
    owner: row.owner,
    spotInterruptions: row.spot_interruptions,
    ...(row.opportunistic ? { opportunistic: true } : {}),
    ...measured(row.usage),
    ...(row.reclaimed_from
      ? { reclaimedFrom: { instance: row.reclaimed_from.instance, at: Date.parse(row.reclaimed_from.at) } }
      : {}),
    ...(row.name ? { name: row.name } : {}),
    ...(row.max_run_time_ms !== null ? { expectedRunMs: row.max_run_time_ms } : {}),
    ...(row.started_at ? { startedAt: row.started_at } : {}),
  };
}
