// Connection pool and transactions.
import pg from 'pg';

// bigint columns (ram, scratch) fit in a double for any real size; return them as numbers.
pg.types.setTypeParser(20, (v) => Number(v));

export type Db = pg.Pool;
export type Tx = pg.PoolClient;
export type Queryable = pg.Pool | pg.PoolClient;

export function createPool(url: string, max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max, idleTimeoutMillis: 10_000 });
  // A dropped connection (server restart) must not crash the process: the next query reconnects.
  pool.on('error', () => {});
  return pool;
}

/** Runs fn in a transaction; rolls back and rethrows on error. */
export async function withTx<T>(pool: pg.Pool, fn: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // A connection that dies while checked out between two queries (the server restarting) emits 'error' on
  // the client itself, which would crash the process without a listener; the next query fails instead.
  const onError = () => {};
  client.on('error', onError);
  const after: (() => void)[] = [];
  (client as pg.PoolClient & { afterCommit?: (() => void)[] }).afterCommit = after;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    for (const f of after) f();
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    delete (client as pg.PoolClient & { afterCommit?: unknown }).afterCommit;
    client.off('error', onError);
    client.release();
  }
}

/** Runs fn once the transaction of `tx` committed (not at all if it rolls back). */
export function onCommit(tx: pg.PoolClient, fn: () => void): void {
  const after = (tx as pg.PoolClient & { afterCommit?: (() => void)[] }).afterCommit;
  if (after) after.push(fn);
  else fn();
}

/** Replaces the database name in a PostgreSQL URL. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

const RETRYABLE = new Set(['40P01', '40001']); // deadlock detected, serialization failure

/** withTx, retried a few times when PostgreSQL aborts the transaction for a deadlock or serialization. */
export async function withRetriedTx<T>(pool: pg.Pool, fn: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await withTx(pool, fn);
    } catch (err) {
      if (attempt >= 5 || !RETRYABLE.has((err as { code?: string }).code ?? '')) throw err;
    }
  }
}
