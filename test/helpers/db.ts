// A fresh database per test file, cloned from the migrated template.
import { randomBytes } from 'node:crypto';
import { afterAll, inject } from 'vitest';
import { createPool, withDatabase, type Db } from '../../src/store/db.js';

export interface TestDb {
  pool: Db;
  url: string;
  name: string;
}

/** Creates a database for this test file (dropped after the file's tests). */
export async function testDb(): Promise<TestDb> {
  const base = inject('pgUrl');
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = createPool(base, 1);
  // CREATE DATABASE ... TEMPLATE fails if another session is connected to the template; retry.
  for (let i = 0; ; i++) {
    try {
      await admin.query(`CREATE DATABASE ${name} TEMPLATE ${inject('pgTemplate')}`);
      break;
    } catch (err) {
      if (i >= 50 || !/being accessed by other users/.test((err as Error).message)) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  await admin.end();
  const url = withDatabase(base, name);
  const pool = createPool(url, 20);
  afterAll(async () => {
    await pool.end();
    if (process.env.BERTH_KEEP_TEST_DB === '1') return;
    const a = createPool(base, 1);
    await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await a.end();
  });
  return { pool, url, name };
}
