// Server options every process must read alike, kept in the settings table: the server stores its value at
// start, and the store and every dispatcher read it from there, so two processes can never disagree.
import { convert } from '../config/declare.js';
import { PROCESS_OPTIONS } from '../config/options.js';
import type { StoreContext } from './context.js';
import type { Queryable } from './db.js';

const MAX_DISPATCH_ATTEMPTS = PROCESS_OPTIONS.option('max_dispatch_attempts');

/**
 * max_dispatch_attempts (DESIGN §3.3) as stored by the server; its declared default before a server has
 * stored one.
 */
export async function maxDispatchAttempts(db: Queryable): Promise<number> {
  const o = MAX_DISPATCH_ATTEMPTS;
  const r = await db.query<{ value: string }>(`SELECT value FROM settings WHERE key = $1`, [o.key]);
  const row = r.rows[0];
  const ctx = { baseDir: process.cwd() };
  if (row === undefined) return convert(o.kind, o.default, o.key, ctx);
  try {
    return convert(o.kind, JSON.parse(row.value), o.key, ctx);
  } catch (err) {
    throw new Error(
      `settings table: ${o.key}: cannot use ${JSON.stringify(row.value)}: ${(err as Error).message}`,
    );
  }
}

/** The settings the server stores for every process. */
export class Settings {
  constructor(private readonly ctx: StoreContext) {}

  maxDispatchAttempts(): Promise<number> {
    return maxDispatchAttempts(this.ctx.pool);
  }

  /** Stores max_dispatch_attempts (validated by its declaration) for every process. */
  async setMaxDispatchAttempts(n: number): Promise<void> {
    const o = MAX_DISPATCH_ATTEMPTS;
    const value = convert(o.kind, n, o.key, { baseDir: process.cwd() });
    await this.ctx.pool.query(
      `INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = $2`,
      [o.key, JSON.stringify(value)],
    );
  }
}
