// API tokens: bearer secrets stored as sha256 hashes, each with a scope (DESIGN §4).
import type { Scope } from '../model/types.js';
import type { StoreContext } from './context.js';
import { NotFoundError, UnauthorizedError } from './errors.js';
import { newSecret, sha256 } from './secrets.js';

/** Who is calling: the result of authenticating a bearer token. */
export interface Principal {
  tokenId: number;
  scope: Scope;
  owner: string;
  nodeId: string | null;
  dispatcherId: string | null;
  /** The highest priority this token may give a request; null = no limit below 1000. */
  maxPriority: number | null;
}

export interface TokenInfo {
  id: number;
  prefix: string;
  scope: Scope;
  owner: string;
  nodeId: string | null;
  description: string;
  maxPriority: number | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export interface NewToken {
  scope: Scope;
  owner: string;
  nodeId?: string | null;
  dispatcherId?: string | null;
  description?: string;
  maxPriority?: number | null;
}

/**
 * How long an authenticated token is trusted without asking the database again. Revocations through this
 * process take effect at once (the cache is cleared); through another process, within this time.
 */
export const AUTH_CACHE_MS = 2000;

export class Tokens {
  private readonly cache = new Map<string, { principal: Principal; until: number }>();

  constructor(private readonly ctx: StoreContext) {}

  /** Forgets every cached authentication (after a revocation). */
  invalidate(): void {
    this.cache.clear();
  }

  /** Creates a token; the secret is returned here and never again. */
  async create(t: NewToken): Promise<{ secret: string; info: TokenInfo }> {
    const secret = newSecret('bt_');
    const r = await this.ctx.pool.query(
      `INSERT INTO tokens (hash, prefix, scope, owner, node_id, dispatcher_id, description, created_at, max_priority)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *`,
      [
        sha256(secret),
        secret.slice(0, 7),
        t.scope,
        t.owner,
        t.nodeId ?? null,
        t.dispatcherId ?? null,
        t.description ?? '',
        this.ctx.clock.now(),
        t.maxPriority ?? null,
      ],
    );
    return { secret, info: toInfo(r.rows[0]) };
  }

  /** Resolves a bearer secret to its principal; unknown or revoked → UnauthorizedError. */
  async authenticate(secret: string): Promise<Principal> {
    const hash = sha256(secret);
    const now = this.ctx.clock.now().getTime();
    const hit = this.cache.get(hash);
    if (hit && hit.until > now) return hit.principal;
    const r = await this.ctx.pool.query(
      `SELECT id, scope, owner, node_id, dispatcher_id, max_priority FROM tokens WHERE hash = $1 AND revoked_at IS NULL`,
      [hash],
    );
    const row = r.rows[0];
    if (!row) {
      this.cache.delete(hash);
      throw new UnauthorizedError('unknown or revoked token');
    }
    const principal = principalOf(row);
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(hash, { principal, until: now + AUTH_CACHE_MS });
    return principal;
  }

  /** The principal of a live token by id (a dashboard session names its token), or null. */
  async principalById(id: number): Promise<Principal | null> {
    const r = await this.ctx.pool.query(
      `SELECT id, scope, owner, node_id, dispatcher_id, max_priority FROM tokens WHERE id = $1 AND revoked_at IS NULL`,
      [id],
    );
    const row = r.rows[0];
    return row ? principalOf(row) : null;
  }

  async list(): Promise<TokenInfo[]> {
    const r = await this.ctx.pool.query(`SELECT * FROM tokens ORDER BY id`);
    return r.rows.map(toInfo);
  }

  async revoke(id: number): Promise<void> {
    const r = await this.ctx.pool.query(
      `UPDATE tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`,
      [id, this.ctx.clock.now()],
    );
    this.invalidate();
    if (r.rowCount === 0) throw new NotFoundError(`token ${id} not found or already revoked`);
  }

  /** Revokes every token of a node (a failed node's agent must not report any more). */
  async revokeNode(nodeId: string): Promise<void> {
    this.invalidate();
    await this.ctx.pool.query(`UPDATE tokens SET revoked_at = $2 WHERE node_id = $1 AND revoked_at IS NULL`, [
      nodeId,
      this.ctx.clock.now(),
    ]);
  }

  async count(scope: Scope): Promise<number> {
    const r = await this.ctx.pool.query(
      `SELECT count(*)::int AS n FROM tokens WHERE scope = $1 AND revoked_at IS NULL`,
      [scope],
    );
    return r.rows[0].n;
  }
}

function principalOf(row: Record<string, unknown>): Principal {
  return {
    tokenId: Number(row.id),
    scope: row.scope as Scope,
    owner: row.owner as string,
    nodeId: (row.node_id as string | null) ?? null,
    dispatcherId: (row.dispatcher_id as string | null) ?? null,
    maxPriority: (row.max_priority as number | null) ?? null,
  };
}

function toInfo(row: Record<string, unknown>): TokenInfo {
  return {
    id: Number(row.id),
    prefix: row.prefix as string,
    scope: row.scope as Scope,
    owner: row.owner as string,
    nodeId: (row.node_id as string | null) ?? null,
    description: row.description as string,
    maxPriority: (row.max_priority as number | null) ?? null,
    createdAt: row.created_at as Date,
    lastUsedAt: (row.last_used_at as Date | null) ?? null,
    revokedAt: (row.revoked_at as Date | null) ?? null,
  };
}
