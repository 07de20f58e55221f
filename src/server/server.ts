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
import { startSampler } from '../web/sampler.js';
import { openDatabase, type OpenDatabase } from './database.js';
import { ADMIN_TOKEN_FILE, API_URL_FILE } from './files.js';
import { lockHome, type HomeLock } from './home-lock.js';
import type { Shutdown } from './shutdown.js';

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
  opts: {
    onProgress?: (line: string) => void;
    registries?: Registry[];
    logger?: Logger;
    /** The process's stop (its PostgreSQL then runs in a group of its own; see src/server/shutdown.ts). */
    shutdown?: Shutdown;
    /** The BERTH_HOME lock when the caller took it (berth up); else taken here for an embedded database. */
    lock?: HomeLock;
  } = {},
): Promise<RunningServer> {
  const progress = opts.onProgress ?? (() => {});
  mkdirSync(cfg.home, { recursive: true, mode: 0o711 }); // traversable (the postgres user reaches pgdata), not listable
  // The embedded database lives in the home: one server per home, or a second start would stop the
  // first one's PostgreSQL. Before anything in the home is touched.
  const ownLock = !opts.lock && !cfg.database_url ? await lockHome(cfg.home, 'berth server') : null;
  const lock = opts.lock ?? ownLock;
  const undo: (() => Promise<void> | void)[] = [() => ownLock?.release()];
  const unwind = async () => {
    for (const f of undo.reverse()) await f();
  };
  try {
    const db = await openDatabase(cfg, progress, opts.shutdown);
    undo.push(() => db.close());
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
    undo.push(() => notifier.stop());
    const app = await buildApi({
      store,
      notifier,
      registries: opts.registries,
      bodyLimit: cfg.body_limit,
      checkpointLimitBytes: cfg.checkpoint_limit,
      logger: opts.logger ?? silentLogger,
    });
    undo.push(() => app.close());
    const [host, port] = [
      cfg.listen.slice(0, cfg.listen.lastIndexOf(':')),
      Number(cfg.listen.slice(cfg.listen.lastIndexOf(':') + 1)),
    ];
    let url: string;
    try {
      url = await app.listen({ host, port });
    } catch (err) {
      throw new Error(`cannot listen on ${cfg.listen}: ${(err as Error).message}`);
    }
    lock?.setUrl(url);
    // The dashboard's charts: the queue and the instances sampled every few seconds.
    const sampler = startSampler(store, (err) =>
      (opts.logger ?? silentLogger).warn({ err }, 'dashboard sample failed (skipped)'),
    );
    undo.push(() => sampler.stop());
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
          await sampler.stop();
          await notifier.stop();
          await app.close();
          await app.drain(10_000);
          await db.close(); // the database last
          if (existsSync(urlFile) && readFileSync(urlFile, 'utf8').trim() === url)
            rmSync(urlFile, { force: true });
          ownLock?.release();
        })();
        return stopping;
      },
    };
  } catch (err) {
    await unwind();
    throw err;
  }
}
