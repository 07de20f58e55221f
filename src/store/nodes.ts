// Nodes: the agent's side of an instance. The dispatcher records a node with a one-time bootstrap secret
// when it creates an instance; the agent registers with that secret and receives a node token.
import { newId } from '../model/ids.js';
import { REASONS } from '../model/transitions.js';
import type { NodeState } from '../model/types.js';
import type { StoreContext } from './context.js';
import { onCommit, withRetriedTx } from './db.js';
import { ConflictError, NotFoundError, UnauthorizedError } from './errors.js';
import { newSecret, sha256 } from './secrets.js';
import type { Tokens } from './tokens.js';
import type { Transitions } from './transitions/index.js';
import { DISPATCH_WAKE } from './wake.js';

export interface NodeRecord {
  id: string;
  cluster: string;
  dispatcher_tag: string;
  instance_id: string | null;
  instance_type: string;
  state: NodeState;
  registered_at: Date | null;
  last_ping_at: Date | null;
  failed_reason: string | null;
  info: Record<string, unknown>;
  /**
   * Its agent can claim lent room back (its pressure watcher runs: src/agent/pressure.ts), as its last ping
   * said; false until one says so. Only such nodes' instances lend to opportunistic containers.
   */
  reclaims: boolean;
  created_at: Date;
  updated_at: Date;
}

const NODE_COLUMNS = `id, cluster, dispatcher_tag, instance_id, instance_type, state, registered_at, last_ping_at,
  failed_reason, info, reclaims, created_at, updated_at`;

/** A failed node's live containers ($1 the node), by the live index's first column (migration 230). */
export const NODE_CONTAINERS_SQL = `SELECT id, state FROM containers WHERE node_id = $1 AND state IN ('Locked', 'Running') ORDER BY id`;

export class Nodes {
  constructor(
    private readonly ctx: StoreContext,
    private readonly tokens: Tokens,
    private readonly transitions: Transitions,
  ) {}

  /** Records a node for a new instance; returns the one-time bootstrap secret for its boot data. */
  async create(n: {
    cluster: string;
    dispatcherTag: string;
    instanceId: string | null;
    instanceType: string;
  }): Promise<{
    node: NodeRecord;
    bootstrapSecret: string;
  }> {
    const now = this.ctx.clock.now();
    const secret = newSecret('bs_');
    const r = await this.ctx.pool
      .query(
        `INSERT INTO nodes (id, cluster, dispatcher_tag, instance_id, instance_type, state, bootstrap_hash, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, 'registered', $6, $7, $7) RETURNING ${NODE_COLUMNS}`,
        [
          newId('n', now.getTime()),
          n.cluster,
          n.dispatcherTag,
          n.instanceId,
          n.instanceType,
          sha256(secret),
          now,
        ],
      )
      .catch((err: { code?: string }) => {
        // nodes_instance: one live node per instance.
        if (err.code === '23505')
          throw new ConflictError(`instance ${n.instanceId} already has a node that has not failed`);
        throw err;
      });
    return { node: r.rows[0], bootstrapSecret: secret };
  }

  /** The agent proves it runs on the node's instance with the bootstrap secret, once; gets a node token. */
  async register(
    nodeId: string,
    secret: string,
    info: Record<string, unknown>,
  ): Promise<{ node: NodeRecord; token: string }> {
    return withRetriedTx(this.ctx.pool, async (tx) => {
      const r = await tx.query(`SELECT bootstrap_hash, state FROM nodes WHERE id = $1 FOR UPDATE`, [nodeId]);
      const row = r.rows[0];
      // The same answer for an unknown node, a wrong secret and a used secret: nothing to probe.
      if (
        !row ||
        row.bootstrap_hash === null ||
        row.bootstrap_hash !== sha256(secret) ||
        row.state === 'failed'
      ) {
        throw new UnauthorizedError(
          'bootstrap secret does not match (unknown node, wrong secret, or already used)',
        );
      }
      const now = this.ctx.clock.now();
      const u = await tx.query(
        `UPDATE nodes SET bootstrap_hash = NULL, state = 'idle', registered_at = $2, last_ping_at = $2, info = $3, updated_at = $2
         WHERE id = $1 RETURNING ${NODE_COLUMNS}`,
        [nodeId, now, JSON.stringify(info)],
      );
      // A new agent is capacity: wake the dispatcher.
      onCommit(tx, () => this.ctx.wake.send('berth_dispatch', DISPATCH_WAKE.node));
      const { secret: token } = await this.tokens.create({
        scope: 'node',
        owner: `node:${nodeId}`,
        nodeId,
        description: `node ${nodeId}`,
      });
      return { node: u.rows[0], token };
    });
  }

  async get(id: string): Promise<NodeRecord> {
    const r = await this.ctx.pool.query(`SELECT ${NODE_COLUMNS} FROM nodes WHERE id = $1`, [id]);
    if (!r.rows[0]) throw new NotFoundError(`node ${id} not found`);
    return r.rows[0];
  }

  async list(filter: { cluster?: string; includeFailed?: boolean } = {}): Promise<NodeRecord[]> {
    const r = await this.ctx.pool.query(
      `SELECT ${NODE_COLUMNS} FROM nodes WHERE ($1::text IS NULL OR cluster = $1) AND ($2 OR state <> 'failed') ORDER BY id`,
      [filter.cluster ?? null, filter.includeFailed ?? false],
    );
    return r.rows;
  }

  /**
   * Declares a node failed (DESIGN §3.4): its tokens are revoked, its Locked containers go back to the
   * queue and its Running containers are cancelled (temp), so they are retried elsewhere.
   */
  async fail(nodeId: string, reason: string): Promise<{ requeued: string[]; cancelled: string[] }> {
    const result = await this.failTx(nodeId, reason);
    this.tokens.invalidate();
    return result;
  }

  private async failTx(nodeId: string, reason: string): Promise<{ requeued: string[]; cancelled: string[] }> {
    return withRetriedTx(this.ctx.pool, async (tx) => {
      const now = this.ctx.clock.now();
      const n = await tx.query(
        `UPDATE nodes SET state = 'failed', failed_reason = $2, updated_at = $3 WHERE id = $1 AND state <> 'failed' RETURNING id`,
        [nodeId, reason, now],
      );
      if (n.rowCount === 0) return { requeued: [], cancelled: [] };
      await tx.query(`UPDATE tokens SET revoked_at = $2 WHERE node_id = $1 AND revoked_at IS NULL`, [
        nodeId,
        now,
      ]);
      const cs = await tx.query<{ id: string; state: 'Locked' | 'Running' }>(NODE_CONTAINERS_SQL, [nodeId]);
      const actor = { kind: 'node' as const, node: nodeId };
      const locked = cs.rows.filter((c) => c.state === 'Locked');
      const requeued = await this.transitions.requeue(
        locked.map((c) => ({
          id: c.id,
          actor,
          why: REASONS.nodeFailedRequeue(nodeId, reason),
          event: `Queued: ${REASONS.nodeFailedRequeue(nodeId, reason)}`,
        })),
        tx,
      );
      const running = cs.rows.filter((c) => c.state === 'Running');
      const cancelled = await this.transitions.end(
        running.map((c) => ({
          id: c.id,
          actor,
          end: { state: 'Cancelled', failureClass: 'temp', reason: REASONS.nodeFailedCancel(nodeId, reason) },
        })),
        tx,
      );
      const ok = (o: { id: string; ok: boolean }) => o.ok;
      return {
        requeued: requeued.filter(ok).map((o) => o.id),
        cancelled: cancelled.filter(ok).map((o) => o.id),
      };
    });
  }

  /** Records the cloud's instance id for a node created before its instance. */
  async bind(nodeId: string, instanceId: string): Promise<void> {
    const r = await this.ctx.pool.query(`UPDATE nodes SET instance_id = $2, updated_at = $3 WHERE id = $1`, [
      nodeId,
      instanceId,
      this.ctx.clock.now(),
    ]);
    if (r.rowCount === 0) throw new NotFoundError(`node ${nodeId} not found`);
  }

  /** Asks a node to drain: its next ping says so. */
  async drain(nodeId: string): Promise<void> {
    await this.ctx.pool.query(
      `UPDATE nodes SET state = 'draining', updated_at = $2 WHERE id = $1 AND state IN ('idle', 'busy')`,
      [nodeId, this.ctx.clock.now()],
    );
    this.ctx.wake.send('berth_node', nodeId);
  }

  /**
   * Records a ping: the node's own view of its state, and the cloud's notice about its instance when the
   * agent has one (a spot interruption or rebalance recommendation; kept in info.notice). A failed node may
   * not come back.
   */
  async ping(
    id: string,
    state: 'idle' | 'busy' | 'draining' | 'drained',
    notice: string | null = null,
    /** Whether its agent can claim lent room back (the ping's `reclaims`); null: unchanged. */
    reclaims: boolean | null = null,
  ): Promise<NodeRecord> {
    const now = this.ctx.clock.now();
    const r = await this.ctx.pool.query(
      // A node asked to drain stays draining until it says it is drained.
      `UPDATE nodes SET last_ping_at = $2, updated_at = $2,
         state = CASE WHEN state = 'draining' AND $3 IN ('idle', 'busy') THEN 'draining' ELSE $3 END,
         info = CASE WHEN $4::text IS NULL THEN info ELSE info || jsonb_build_object('notice', $4::text) END,
         reclaims = COALESCE($5::boolean, reclaims)
       WHERE id = $1 AND state <> 'failed' RETURNING ${NODE_COLUMNS}`,
      [id, now, state, notice, reclaims],
    );
    if (!r.rows[0]) {
      await this.get(id);
      throw new ConflictError(`node ${id} was declared failed; its agent must stop`);
    }
    return r.rows[0];
  }
}
