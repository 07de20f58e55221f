// `berth server`: database (embedded or external), migrations, the first admin token, the HTTP API.
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { buildApi } from '../api/server.js';
import type { Config } from '../config/options.js';
import { silentLogger, type Logger } from '../log/logger.js';
import { Notifier } from '../store/notifier.js';
import { Store } from '../store/store.js';
import { openDatabase, type OpenDatabase } from './database.js';
import { ADMIN_TOKEN_FILE, API_URL_FILE } from './files.js';

export interface RunningServer {
  url: string;
  store: Store;
  db: OpenDatabase;
  app: FastifyInstance;
  notifier: Notifier;
  /** The admin token created on this start (first start on an empty database), else null. */
  createdAdminToken: string | null;
  stop(): Promise<void>;
}

/**
 * Starts the API server; `registries` adds metrics of other components in the same process; `logger` is
 * the process's logger (default: none).
 */
export async function startServer(
  cfg: Config,
  opts: { onProgress?: (line: string) => void; registries?: Registry[]; logger?: Logger } = {},
): Promise<RunningServer> {
  const progress = opts.onProgress ?? (() => {});
  mkdirSync(cfg.home, { recursive: true, mode: 0o711 }); // traversable (the postgres user reaches pgdata), not listable
  const db = await openDatabase(cfg, progress);
  const store = new Store(db.pool);
  await store.settings.setMaxDispatchAttempts(cfg.max_dispatch_attempts);
  let createdAdminToken: string | null = null;
  const tokenFile = join(cfg.home, ADMIN_TOKEN_FILE);
  if ((await store.tokens.count('admin')) === 0) {
    const { secret } = await store.tokens.create({
      scope: 'admin',
      owner: 'admin',
      description: 'created by the first server start',
    });
    writeFileSync(tokenFile, `${secret}\n`, { mode: 0o600 });
    chmodSync(tokenFile, 0o600);
    createdAdminToken = secret;
    progress(`created an admin token, saved in ${tokenFile}`);
  } else if (!existsSync(tokenFile)) {
    progress(
      `no admin token in ${tokenFile}: the database already has one (create more with an admin token: berth token create --scope admin)`,
    );
  }
  const notifier = new Notifier(db.url);
  await notifier.start();
  const app = await buildApi({
    store,
    notifier,
    registries: opts.registries,
    bodyLimit: cfg.body_limit,
    logger: opts.logger ?? silentLogger,
  });
  const [host, port] = [
    cfg.listen.slice(0, cfg.listen.lastIndexOf(':')),
    Number(cfg.listen.slice(cfg.listen.lastIndexOf(':') + 1)),
  ];
  let url: string;
  try {
    url = await app.listen({ host, port });
  } catch (err) {
    await app.close();
    await notifier.stop();
    await db.close();
    throw new Error(`cannot listen on ${cfg.listen}: ${(err as Error).message}`);
  }
  const urlFile = join(cfg.home, API_URL_FILE);
  writeFileSync(urlFile, `${url}\n`);
  let stopping: Promise<void> | null = null;
  return {
    url,
    store,
    db,
    app,
    notifier,
    createdAdminToken,
    stop() {
      stopping ??= (async () => {
        // Waiters first: long-poll pings and log followers return at once, while the pool is still open.
        await notifier.stop();
        await app.close();
        await app.drain(10_000);
        await db.close();
        if (existsSync(urlFile) && readFileSync(urlFile, 'utf8').trim() === url)
          rmSync(urlFile, { force: true });
      })();
      return stopping;
    },
  };
}
