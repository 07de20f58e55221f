// Opening Berth's database: the configured URL, or the embedded server under BERTH_HOME; migrated.
import { join } from 'node:path';
import type { Config } from '../config/options.js';
import { createPool, withDatabase, type Db } from '../store/db.js';
import { startEmbedded, type EmbeddedServer, type OwnerStop } from '../store/embedded.js';
import { migrate } from '../store/migrate.js';

export interface OpenDatabase {
  pool: Db;
  url: string;
  embedded: EmbeddedServer | null;
  close(): Promise<void>;
}

const DB_NAME = 'berth';

export async function openDatabase(
  cfg: Config,
  onProgress: (line: string) => void = () => {},
  shutdown?: OwnerStop,
): Promise<OpenDatabase> {
  let embedded: EmbeddedServer | null = null;
  let url = cfg.database_url;
  if (!url) {
    embedded = await startEmbedded({ dataDir: join(cfg.home, 'pgdata'), onProgress, shutdown });
    const admin = createPool(embedded.url, 1);
    try {
      const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DB_NAME]);
      if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${DB_NAME}`);
    } catch (err) {
      await embedded.stop();
      throw err;
    } finally {
      await admin.end();
    }
    url = withDatabase(embedded.url, DB_NAME);
    onProgress(`embedded PostgreSQL on port ${embedded.port} (data in ${embedded.dataDir})`);
  }
  const pool = createPool(url, 20);
  try {
    const applied = await migrate(pool);
    if (applied.length > 0) onProgress(`applied migrations: ${applied.join(', ')}`);
  } catch (err) {
    await pool.end();
    await embedded?.stop();
    throw err;
  }
  return {
    pool,
    url,
    embedded,
    async close() {
      await pool.end();
      await embedded?.stop();
    },
  };
}
