// Running a dispatcher as a service: the event-driven loop (LISTEN/NOTIFY wake-ups coalesced into passes,
// plus a safety tick), driver decorators, metrics, and a graceful stop.
import { Registry } from 'prom-client';
import { bootDataFor } from '../cloud/boot-data.js';
import type { Driver } from '../cloud/driver.js';
import { withMetrics } from '../cloud/decorators/metrics.js';
import { withRateLimit } from '../cloud/decorators/rate-limit.js';
import { errorFields, silentLogger, type Logger } from '../log/logger.js';
import { systemClock, type Clock } from '../model/clock.js';
import { agreedLabelsOf } from '../store/labels.js';
import type { Notifier } from '../store/notifier.js';
import type { Store } from '../store/store.js';
import { DISPATCHER_TIMERS, type DispatchConfig } from './config.js';
import { Dispatcher, type DispatchEvent } from './dispatcher.js';
import { logDispatchEvents } from './log.js';
import { runPassLoop, type PassLoop } from './loop.js';
import { dispatcherMetrics } from './metrics.js';
import { PgMirror } from './pg-mirror.js';
import { PgQueue } from './pg-queue.js';
import { learnsRunTimes, readsExpectedRuns } from './scheduler/durations.js';

export interface RunningDispatcher {
  dispatcher: Dispatcher;
  registry: Registry;
  /** Resolves when the loop ended (stop() or a lost lease); rejects never. */
  done: Promise<void>;
  stop(): Promise<void>;
}

export interface StartDispatcherOptions {
  cfg: DispatchConfig;
  store: Store;
  /** The database URL (the lease uses a connection of its own). */
  dbUrl: string;
  notifier: Notifier | null;
  driver: Driver;
  /** The API URL agents use; goes into every instance's boot data. */
  apiUrl: string;
  clock?: Clock;
  /** The process's logger; the dispatcher logs through a child carrying its id. Default: silent. */
  logger?: Logger;
  onEvent?: (e: DispatchEvent) => void;
}

/** Whether the API at `url` answers its health check (which also checks its database) within 2 s. */
async function apiAnswers(url: string): Promise<boolean> {
  try {
    const r = await fetch(`${url.replace(/\/$/, '')}/healthz`, { signal: AbortSignal.timeout(2_000) });
    await r.arrayBuffer();
    return r.ok;
  } catch {
    return false;
  }
}

export async function startDispatcher(o: StartDispatcherOptions): Promise<RunningDispatcher> {
  const clock = o.clock ?? systemClock;
  const registry = new Registry();
  const { cfg } = o;
  const id = `${cfg.cluster}/${cfg.tag}`;
  const logger = (o.logger ?? silentLogger).child({ dispatcher: id });
  const logEvent = logDispatchEvents(logger);
  let dispatcher: Dispatcher | null = null;
  let loop: PassLoop | null = null;
  const metrics = dispatcherMetrics(registry, () => dispatcher);
  const driver = withMetrics(
    withRateLimit(o.driver, {
      clock,
      opsPerSecond: cfg.maxCloudOpsPerSecond,
      maxConcurrentCreates: cfg.maxConcurrentCreates,
    }),
    { registry, clock, driverName: cfg.driver },
  );
  dispatcher = new Dispatcher({
    id,
    cluster: cfg.cluster,
    tag: cfg.tag,
    queue: new PgQueue(o.store, o.dbUrl, {
      names: learnsRunTimes(cfg.scheduler),
      runLimits: readsExpectedRuns(cfg.scheduler),
    }),
    driver,
    clock,
    instanceTypes: cfg.instanceTypes,
    config: cfg.scheduler,
    ...DISPATCHER_TIMERS.fieldsOf(cfg),
    // A stall this long could hide a silence that fails a node; well above the gaps of a running loop.
    maxPassGapMs: Math.max(cfg.nodeLostAfterMs / 2, 3 * cfg.tickIntervalMs),
    apiHealth: () => apiAnswers(o.apiUrl),
    bootData: bootDataFor(o.apiUrl),
    mirror: new PgMirror(o.store.ctx.pool, cfg.cluster, cfg.tag),
    labelsFor: (containers) => agreedLabelsOf(o.store.ctx.pool, containers),
    maxConcurrentCreates: cfg.maxConcurrentCreates,
    onOperationDone: () => loop?.poke(),
    onEvent: (e) => {
      metrics.onEvent(e);
      logEvent(e);
      o.onEvent?.(e);
    },
  });
  // The first pass takes the lease: refuse to run beside another live dispatcher for the same tag.
  await dispatcher.tick();
  logger.info({ instance_types: cfg.instanceTypes.length, driver: cfg.driver }, 'dispatcher running');

  loop = runPassLoop({
    // Statuses are written beside the passes: a long queue's take seconds (status-writer.ts).
    tick: () => dispatcher.tickAhead(),
    quick: () => dispatcher.quickTick(),
    notifier: o.notifier,
    intervalMs: cfg.tickIntervalMs,
    onLeaseLost: (err) => logger.error(errorFields(err), 'stopping: the lease is lost'),
    // The database or the cloud is unreachable: retried at the next tick, never a crash.
    onPassFailed: (err) => logger.error(errorFields(err), 'pass failed (retried at the next tick)'),
    onPass: (seconds) => metrics.passSeconds.observe(seconds),
  });
  return {
    dispatcher,
    registry,
    done: loop.done,
    async stop() {
      await loop.stop();
      await dispatcher.stop();
    },
  };
}
