// `berth dispatch --backend slurm` as a service: the database, the notifications that wake a pass (new
// work, finished containers, agents registering), a safety tick, and a graceful stop.
import type { Config } from '../../config/options.js';
import { runPassLoop } from '../../dispatch/loop.js';
import { agentApiUrl, dispatchDatabaseUrl } from '../../dispatch/service.js';
import type { Clock } from '../../model/clock.js';
import { createPool } from '../../store/db.js';
import { migrate } from '../../store/migrate.js';
import { Notifier } from '../../store/notifier.js';
import { Store } from '../../store/store.js';
import { SlurmCommands } from './commands.js';
import type { SlurmConfig } from './config.js';
import { SlurmDispatcher, type SlurmEvent } from './dispatcher.js';

export interface RunningSlurmDispatcher {
  dispatcher: SlurmDispatcher;
  /** Resolves when the loop ended (stop() or a lost lease); never rejects. */
  done: Promise<void>;
  stop(): Promise<void>;
}

/** Runs passes until stopped (src/dispatch/loop.ts): on notifications and at least every tick_interval. */
export async function startSlurmDispatcher(o: {
  cfg: SlurmConfig;
  store: Store;
  dbUrl: string;
  apiUrl: string;
  notifier: Notifier | null;
  slurm?: SlurmCommands;
  clock?: Clock;
  log?: (line: string) => void;
  onEvent?: (e: SlurmEvent) => void;
}): Promise<RunningSlurmDispatcher> {
  const log = o.log ?? (() => {});
  const dispatcher = new SlurmDispatcher({
    cfg: o.cfg,
    store: o.store,
    dbUrl: o.dbUrl,
    apiUrl: o.apiUrl,
    slurm: o.slurm ?? new SlurmCommands(o.cfg),
    clock: o.clock,
    onEvent: o.onEvent,
  });
  // The first pass takes the lease: refuse to run beside another live dispatcher of the same cluster/tag.
  await dispatcher.tick();
  log(`slurm dispatcher ${dispatcher.id} running (jobs marked --comment=${dispatcher.marker})`);
  const loop = runPassLoop({
    tick: () => dispatcher.tick(),
    notifier: o.notifier,
    intervalMs: o.cfg.tickIntervalMs,
    onLeaseLost: (err) => log(`stopping: ${err.message}`),
    // SLURM or the database is unreachable: tried again at the next tick, never a crash.
    onPassFailed: (err) => log(`pass failed (retrying): ${err.message}`),
  });
  return {
    dispatcher,
    done: loop.done,
    async stop() {
      await loop.stop();
      await dispatcher.stop();
    },
  };
}

/** The whole service: finds the database and the API URL, then runs the dispatcher. */
export async function runSlurmService(
  cfg: Config,
  scfg: SlurmConfig,
  log: (line: string) => void,
): Promise<{ done: Promise<void>; stop(): Promise<void> }> {
  const url = dispatchDatabaseUrl(cfg);
  const apiUrl = agentApiUrl(cfg, scfg.apiUrl);
  // Every submission, renice, cancel and stale action, at log level debug or trace.
  const verbose = cfg.log_level === 'debug' || cfg.log_level === 'trace';
  const pool = createPool(url, 10);
  await migrate(pool);
  const store = new Store(pool, { options: { maxDispatchAttempts: cfg.max_dispatch_attempts } });
  const notifier = new Notifier(url);
  await notifier.start();
  let running: RunningSlurmDispatcher;
  try {
    running = await startSlurmDispatcher({
      cfg: scfg,
      store,
      dbUrl: url,
      apiUrl,
      notifier,
      log,
      onEvent: (e) => {
        if (e.kind === 'error') log(`${e.op}: ${e.message}`);
        else if (e.kind === 'refused') log(`sbatch refused ${e.container} (${e.failure}): ${e.message}`);
        else if (verbose) log(JSON.stringify(e));
      },
    });
  } catch (err) {
    await notifier.stop();
    await pool.end();
    throw err;
  }
  return {
    done: running.done,
    async stop() {
      await running.stop();
      await notifier.stop();
      await pool.end();
    },
  };
}
