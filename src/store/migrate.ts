// Numbered SQL migrations (src/store/migrations/NNN_name.sql), each applied in its own transaction.
// A transaction-scoped advisory lock serialises processes that start at the same time.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';

const MIGRATION_LOCK = 0x6265_7274; // "bert"

/** The migrations directory: beside this file when run from source, under src/ when run from dist/. */
export function migrationsDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, 'migrations'), join(here, '..', '..', '..', 'src', 'store', 'migrations')];
  const found = candidates.find((d) => existsSync(d));
  if (!found) throw new Error(`migrations directory not found (looked in ${candidates.join(', ')})`);
  return found;
}

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export function loadMigrations(dir = migrationsDir()): Migration[] {
  const all = readdirSync(dir)
    .filter((f) => /^\d+_.+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: Number(f.split('_')[0]), name: f, sql: readFileSync(join(dir, f), 'utf8') }));
  // Two files with one number (branches merged) would apply only the first: refuse to start instead.
  const seen = new Map<number, string>();
  for (const m of all) {
    const other = seen.get(m.version);
    if (other) throw new Error(`migrations ${other} and ${m.name} share version ${m.version}: renumber one`);
    seen.set(m.version, m.name);
  }
  return all;
}

/** Applies every migration not yet applied; returns the names applied now. */
export async function migrate(pool: pg.Pool): Promise<string[]> {
  const applied: string[] = [];
  const client = await pool.connect();
  client.on('error', () => {}); // a dying connection fails the next query instead of crashing the process
  try {
    await client.query(`CREATE TABLE IF NOT EXISTS berth_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
  } catch (err) {
    // Two processes creating the table at once: one wins, the other sees a unique violation.
    if ((err as { code?: string }).code !== '23505') throw err;
  }
  try {
    for (const m of loadMigrations()) {
      await client.query('BEGIN');
      try {
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
        const done = await client.query('SELECT 1 FROM berth_migrations WHERE version = $1', [m.version]);
        if (done.rowCount === 0) {
          await client.query(m.sql);
          await client.query('INSERT INTO berth_migrations (version, name) VALUES ($1, $2)', [
            m.version,
            m.name,
          ]);
          applied.push(m.name);
        }
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${m.name} failed: ${(err as Error).message}`);
      }
    }
  } finally {
    client.release();
  }
  return applied;
}
