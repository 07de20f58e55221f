// `berth dispatch --backend slurm` as a service: the database, the notifications that wake a pass (new
// work, priority changes), a safety tick, and a graceful stop.
import type { Config } from '../../config/options.js';
import { runPassLoop } from '../../dispatch/loop.js';
import { agentApiUrl, dispatchDatabaseUrl } from '../../dispatch/service.js';
import { errorFields, silentLogger, type Logger } from '../../log/logger.js';
import type { Clock } from '../../model/clock.js';
import { createPool } from '../../store/db.js';
import { migrate } from '../../store/migrate.js';
import { Notifier } from '../../store/notifier.js';
import { Store } from '../../store/store.js';
import { SlurmCommands } from './commands.js';
import type { SlurmConfig } from './config.js';
import { SlurmDispatcher, type SlurmEvent } from './dispatcher.js';
import { DISPATCH_WAKE } from '../../store/wake.js';
import { prepareAllocationMoves } from '../../store/transitions/move.js';
import { reusesAllocations } from './queue.js';

export interface RunningSlurmDispatcher {
  dispatcher: SlurmDispatcher;
  /** Resolves when the loop ended (stop() or a lost lease); never rejects. */
  done: Promise<void>;
  stop(): Promise<void>;
}

/**
 * The notifications that start a pass at once: new work (submitted without waiting for the tick) and priority
 * changes (renice, withdraw). Agents registering and containers ending, two per job, need nothing from the
 * dispatcher that cannot wait for the tick (a status text, a retry after its backoff, the scancel of a
 * cancelled container's pending job); woken by them, the dispatcher ran a pass, with its squeue, about twice
 * per job, taking CPU from the jobs on a shared node.
 */
export const SLURM_WAKE_ON = [DISPATCH_WAKE.queue, DISPATCH_WAKE.priority] as const;

/** Runs passes until stopped (src/dispatch/loop.ts): on notifications and at least every tick_interval. */
export async function startSlurmDispatcher(o: {
  cfg: SlurmConfig;
  store: Store;
  dbUrl: string;
  apiUrl: string;
  notifier: Notifier | null;
  slurm?: SlurmCommands;
  clock?: Clock;
  /** The process's logger; the dispatcher logs through a child carrying its id. Default: silent. */
  logger?: Logger;
  onEvent?: (e: SlurmEvent) => void;
}): Promise<RunningSlurmDispatcher> {
  const logger = (o.logger ?? silentLogger).child({ dispatcher: `${o.cfg.cluster}/${o.cfg.tag}` });
  const dispatcher = new SlurmDispatcher({
    cfg: o.cfg,
    store: o.store,
    dbUrl: o.dbUrl,
    apiUrl: o.apiUrl,
    slurm: o.slurm ?? new SlurmCommands(o.cfg),
    clock: o.clock,
    onEvent: (e) => {
      logSlurmEvent(logger, e);
      o.onEvent?.(e);
    },
  });
  // The move's index (src/store/transitions/move.ts), where jobs take further containers: built once per
  // database, only where SLURM runs.
  if (reusesAllocations(o.cfg)) await prepareAllocationMoves(o.store.ctx.pool);
  // The first pass takes the lease: refuse to run beside another live dispatcher of the same cluster/tag.
  await dispatcher.tick();
  logger.info({ marker: dispatcher.marker }, 'slurm dispatcher running (its jobs carry this --comment)');
  const loop = runPassLoop({
    tick: () => dispatcher.tick(),
    notifier: o.notifier,
    intervalMs: o.cfg.tickIntervalMs,
    wakeOn: SLURM_WAKE_ON,
    onLeaseLost: (err) => logger.error(errorFields(err), 'stopping: the lease is lost'),
    // SLURM or the database is unreachable: tried again at the next tick, never a crash.
    onPassFailed: (err) => logger.error(errorFields(err), 'pass failed (retried at the next tick)'),
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

/**
 * Logs a dispatcher event: SLURM refusals at warn, failed actions at error (the next pass retries them),
 * submissions, SLURM-side actions and stale actions at debug (frequent and routine).
 */
function logSlurmEvent(logger: Logger, e: SlurmEvent): void {
  switch (e.kind) {
    case 'error':
      logger.error({ op: e.op, error: e.message }, 'slurm dispatcher action failed');
      break;
    case 'refused':
      logger.warn({ container: e.container, failure_class: e.failure, error: e.message }, 'sbatch refused');
      break;
    case 'submitted':
      logger.debug({ container: e.container, job: e.job, nice: e.nice }, 'submitted');
      break;
    case 'action':
      logger.debug({ action: e.action }, e.action.op);
      break;
    case 'stale':
      logger.debug({ op: e.op, error: e.message }, 'stale action (the container moved on)');
      break;
  }
}

/** The whole service: finds the database and the API URL, then runs the dispatcher. */
export async function runSlurmService(
  cfg: Config,
  scfg: SlurmConfig,
  logger: Logger,
): Promise<{ done: Promise<void>; stop(): Promise<void> }> {
  const url = dispatchDatabaseUrl(cfg);
  const apiUrl = agentApiUrl(cfg, scfg.apiUrl);
  const pool = createPool(url, 10);
  await migrate(pool);
  const store = new Store(pool);
  const notifier = new Notifier(url);
  await notifier.start();
  let running: RunningSlurmDispatcher;
  try {
    running = await startSlurmDispatcher({ cfg: scfg, store, dbUrl: url, apiUrl, notifier, logger });
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
