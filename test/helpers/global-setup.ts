// One PostgreSQL server for the whole test run (BERTH_TEST_DATABASE_URL, or an embedded one in a temp
// directory) and a migrated template database that each test file clones.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { createPool, withDatabase } from '../../src/store/db.js';
import { startEmbedded, type EmbeddedServer } from '../../src/store/embedded.js';
import { migrate } from '../../src/store/migrate.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgUrl: string;
    pgTemplate: string;
  }
}

const TEMPLATE = 'berth_template';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let server: EmbeddedServer | null = null;
  let dir: string | null = null;
  let url = process.env.BERTH_TEST_DATABASE_URL;
  if (!url) {
    dir = mkdtempSync(join(tmpdir(), 'berth-test-pg-'));
    chmodSync(dir, 0o755); // as root the server runs as the postgres user, which must reach it
    process.stderr.write(`test PostgreSQL in ${dir}\n`);
    server = await startEmbedded({ dataDir: join(dir, 'pgdata') });
    url = server.url;
  }
  const admin = createPool(url, 1);
  await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE}`);
  await admin.query(`CREATE DATABASE ${TEMPLATE}`);
  const tpl = createPool(withDatabase(url, TEMPLATE), 2);
  await migrate(tpl);
  await tpl.end();
  await admin.end();
  project.provide('pgUrl', url);
  project.provide('pgTemplate', TEMPLATE);
  return async () => {
    if (server) await server.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  };
}
