import { describe, expect, it } from 'vitest';
import { createPool, withDatabase } from '../../src/store/db.js';
import { loadMigrations, migrate } from '../../src/store/migrate.js';
import { inject } from 'vitest';
import { randomBytes } from 'node:crypto';

describe('migrations', () => {
  it('apply on an empty database, are a no-op when re-run, and survive two concurrent runs', async () => {
    const base = inject('pgUrl');
    const name = `m_${randomBytes(5).toString('hex')}`;
    const admin = createPool(base, 1);
    await admin.query(`CREATE DATABASE ${name}`);
    const a = createPool(withDatabase(base, name), 2);
    const b = createPool(withDatabase(base, name), 2);
    try {
      const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
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
});
