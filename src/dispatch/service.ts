// `berth dispatch` as a service: find the database and the API, open the driver, run the loop.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Driver } from '../cloud/driver.js';
import type { Config } from '../config/options.js';
import type { Logger } from '../log/logger.js';
import { API_URL_FILE } from '../server/files.js';
import { createPool, withDatabase } from '../store/db.js';
import { runningEmbeddedUrl } from '../store/embedded.js';
import { migrate } from '../store/migrate.js';
import { Notifier } from '../store/notifier.js';
import { Store } from '../store/store.js';
import type { DispatchConfig } from './config.js';
import { startDispatcher, type RunningDispatcher } from './run.js';

export interface DriverOptions {
  agentArgs?: string[];
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

/**
 * Opens the configured cloud driver. `agentArgs`: flags for the agents the local driver starts on this
 * machine; `credentials`: static ones for the ec2 driver (an emulator's), else the SDK's default chain.
 */
export async function openDriver(dcfg: DispatchConfig, home: string, o: DriverOptions = {}): Promise<Driver> {
  if (dcfg.driver === 'ec2') {
    const { Ec2Driver } = await import('../cloud/ec2/driver.js');
    return new Ec2Driver({ config: dcfg.ec2!, ...(o.credentials ? { credentials: o.credentials } : {}) });
  }
  const { LocalDriver } = await import('../cloud/local/driver.js');
  return new LocalDriver({
    home,
    bootDelayMs: dcfg.bootDelayMs,
    netns: dcfg.netns,
    agentArgs: o.agentArgs ?? [],
  });
}

export interface DispatchService {
  running: RunningDispatcher;
  done: Promise<void>;
  stop(): Promise<void>;
}

/** The database a dispatcher uses: database_url, else the embedded server `berth server` runs in home. */
export function dispatchDatabaseUrl(cfg: Config): string {
  if (cfg.database_url) return cfg.database_url;
  const embedded = runningEmbeddedUrl(join(cfg.home, 'pgdata'));
  if (!embedded)
    throw new Error(
      `no database: set BERTH_DATABASE_URL, or start \`berth server\` with BERTH_HOME=${cfg.home} first`,
    );
  return withDatabase(embedded, 'berth');
}

/** The API URL agents are given: `configured`, else api_url, else the URL the local server wrote. */
export function agentApiUrl(cfg: Config, configured: string | null = null): string {
  const apiUrlFile = join(cfg.home, API_URL_FILE);
  const apiUrl =
    configured ?? cfg.api_url ?? (existsSync(apiUrlFile) ? readFileSync(apiUrlFile, 'utf8').trim() : null);
  if (!apiUrl)
    throw new Error(
      'no API URL for the agents: set BERTH_API_URL (or --api-url), or start `berth server` first',
    );
  return apiUrl;
}

export async function runDispatchService(
  cfg: Config,
  dcfg: DispatchConfig,
  logger: Logger,
): Promise<DispatchService> {
  const url = dispatchDatabaseUrl(cfg);
  const apiUrl = agentApiUrl(cfg);
  const pool = createPool(url, 10);
  await migrate(pool);
  const store = new Store(pool);
  const notifier = new Notifier(url);
  await notifier.start();
  const driver = await openDriver(dcfg, cfg.home);
  let running: RunningDispatcher;
  try {
    running = await startDispatcher({ cfg: dcfg, store, dbUrl: url, notifier, driver, apiUrl, logger });
  } catch (err) {
    await notifier.stop();
    await pool.end();
    throw err;
  }
  return {
    running,
    done: running.done,
    async stop() {
      await running.stop();
      await notifier.stop();
      await pool.end();
    },
  };
}
