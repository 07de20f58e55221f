// Nodes: the agent's side of an instance. The dispatcher records a node with a one-time bootstrap secret
// when it creates an instance; the agent registers with that secret and receives a node token.
import { newId } from '../model/ids.js';
import type { NodeState } from '../model/types.js';
import type { StoreContext } from './context.js';
import { withRetriedTx } from './db.js';
import { ConflictError, NotFoundError, UnauthorizedError } from './errors.js';
import { newSecret, sha256 } from './secrets.js';
import type { Tokens } from './tokens.js';

export interface NodeRecord {
  id: string;
  cluster: string;
  dispatcher_tag: string;
  instance_id: string;
  instance_type: string;
  state: NodeState;
  registered_at: Date | null;
  last_ping_at: Date | null;
  failed_reason: string | null;
  info: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

const NODE_COLUMNS = `id, cluster, dispatcher_tag, instance_id, instance_type, state, registered_at, last_ping_at,
  failed_reason, info, created_at, updated_at`;

export class Nodes {
  constructor(
    private readonly ctx: StoreContext,
    private readonly tokens: Tokens,
  ) {}

  /** Records a node for a new instance; returns the one-time bootstrap secret for its boot data. */
  async create(n: {
    cluster: string;
    dispatcherTag: string;
    instanceId: string;
    instanceType: string;
  }): Promise<{
    node: NodeRecord;
    bootstrapSecret: string;
  }> {
    const now = this.ctx.clock.now();
    const secret = newSecret('bs_');
    const r = await this.ctx.pool.query(
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
    );
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

  /** Records a ping: the node's own view of its state. A failed node may not come back. */
  async ping(id: string, state: 'idle' | 'busy' | 'draining' | 'drained'): Promise<NodeRecord> {
    const now = this.ctx.clock.now();
    const r = await this.ctx.pool.query(
      `UPDATE nodes SET last_ping_at = $2, state = $3, updated_at = $2 WHERE id = $1 AND state <> 'failed' RETURNING ${NODE_COLUMNS}`,
      [id, now, state],
    );
    if (!r.rows[0]) {
      await this.get(id);
      throw new ConflictError(`node ${id} was declared failed; its agent must stop`);
    }
    return r.rows[0];
  }
}
