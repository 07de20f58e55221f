import { describe, expect, it } from 'vitest';
import { createPool, withDatabase } from '../../src/store/db.js';
import { loadMigrations, migrate } from '../../src/store/migrate.js';
import { inject } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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
