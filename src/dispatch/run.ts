// Running a dispatcher as a service: the event-driven loop (LISTEN/NOTIFY wake-ups coalesced into passes,
// plus a safety tick), driver decorators, metrics, and a graceful stop.
import { performance } from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { bootDataFor } from '../cloud/boot-data.js';
import type { Driver } from '../cloud/driver.js';
import { withMetrics } from '../cloud/decorators/metrics.js';
import { withRateLimit } from '../cloud/decorators/rate-limit.js';
import { errorFields, silentLogger, type Logger } from '../log/logger.js';
import { sleep, systemClock, type Clock } from '../model/clock.js';
import type { Notifier } from '../store/notifier.js';
import type { Store } from '../store/store.js';
import { DISPATCHER_TIMERS, type DispatchConfig } from './config.js';
import { Dispatcher, LeaseLostError, type DispatchEvent } from './dispatcher.js';
import { logDispatchEvents } from './log.js';
import { dispatcherMetrics } from './metrics.js';
import { PgMirror } from './pg-mirror.js';
import { PgQueue } from './pg-queue.js';

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
    queue: new PgQueue(o.store, o.dbUrl),
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
    onEvent: (e) => {
      metrics.onEvent(e);
      logEvent(e);
      o.onEvent?.(e);
    },
  });
  // The first pass takes the lease: refuse to run beside another live dispatcher for the same tag.
  await dispatcher.tick();
  logger.info({ instance_types: cfg.instanceTypes.length, driver: cfg.driver }, 'dispatcher running');

  let stopped = false;
  const waiter = o.notifier?.waiter('berth_dispatch', null) ?? null;
  let wake: (() => void) | null = null;
  const done = (async () => {
    while (!stopped) {
      const t0 = performance.now();
      try {
        await dispatcher.tick();
      } catch (err) {
        if (err instanceof LeaseLostError) {
          logger.error(errorFields(err), 'stopping: the lease is lost');
          break;
        }
        // The database or the cloud is unreachable: retried at the next tick, never a crash.
        logger.error(errorFields(err), 'pass failed (retried at the next tick)');
      }
      metrics.passSeconds.observe((performance.now() - t0) / 1000);
      if (stopped) break;
      await Promise.race([
        waiter ? waiter.next(cfg.tickIntervalMs) : sleep(cfg.tickIntervalMs),
        new Promise<void>((r) => (wake = r)),
      ]);
    }
  })();
  return {
    dispatcher,
    registry,
    done,
    async stop() {
      stopped = true;
      wake?.();
      await done;
      waiter?.close();
      await dispatcher.stop();
    },
  };
}
