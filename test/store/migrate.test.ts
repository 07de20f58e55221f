import { describe, expect, it } from 'vitest';
import { createPool, withDatabase, type Db } from '../../src/store/db.js';
import { loadMigrations, migrate } from '../../src/store/migrate.js';
import { inject } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * `work`, or, if it has not ended after `ms`, a failure that says what the server's sessions on `db` wait
 * for (CI once saw this test hang for its whole timeout inside the full suite; it never did alone).
 */
async function explainedIfSlow<T>(admin: Db, db: string, ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const slow = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      void admin
        .query(
          `SELECT a.pid, a.state, a.wait_event_type, a.wait_event, left(a.query, 200) AS query,
                  (SELECT json_agg(json_build_object('lock', l.locktype, 'mode', l.mode, 'granted', l.granted))
                     FROM pg_locks l WHERE l.pid = a.pid) AS locks
             FROM pg_stat_activity a WHERE a.datname = $1`,
          [db],
        )
        .then(
          (r) => JSON.stringify(r.rows, null, 1),
          (err: Error) => `(pg_stat_activity unreadable: ${err.message})`,
        )
        .then((sessions) => reject(new Error(`not done after ${ms} ms; sessions on ${db}: ${sessions}`)));
    }, ms);
  });
  try {
    return await Promise.race([work, slow]);
  } finally {
    clearTimeout(timer);
  }
}

describe('migrations', () => {
  it('apply on an empty database, are a no-op when re-run, and survive two concurrent runs', async () => {
    const base = inject('pgUrl');
    const name = `m_${randomBytes(5).toString('hex')}`;
    const admin = createPool(base, 2);
    await admin.query(`CREATE DATABASE ${name}`);
    const a = createPool(withDatabase(base, name), 2);
    const b = createPool(withDatabase(base, name), 2);
    try {
      const [ra, rb] = await explainedIfSlow(admin, name, 40_000, Promise.all([migrate(a), migrate(b)]));
      const all = loadMigrations().map((m) => m.name);
      expect([...ra, ...rb].sort()).toEqual(all.sort());
      expect(await migrate(a)).toEqual([]);
      const tables = await a.query(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`,
      );
      expect(tables.rows.map((r) => r.table_name)).toContain('containers');
      const versions = await a.query('SELECT count(*)::int AS n FROM berth_migrations');
      expect(versions.rows[0].n).toBe(all.length);
    } finally {
      await a.end();
      await b.end();
      await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
      await admin.end();
    }
  });

  it('refuse two files with the same number (only the first would ever be applied)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-migrations-'));
    try {
      writeFileSync(join(dir, '001_a.sql'), 'SELECT 1;');
      writeFileSync(join(dir, '002_b.sql'), 'SELECT 1;');
      writeFileSync(join(dir, '002_c.sql'), 'SELECT 1;');
      expect(() => loadMigrations(dir)).toThrow(
        'migrations 002_b.sql and 002_c.sql share version 2: renumber one',
      );
      rmSync(join(dir, '002_c.sql'));
      expect(loadMigrations(dir).map((m) => m.version)).toEqual([1, 2]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
