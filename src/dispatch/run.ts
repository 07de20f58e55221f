// Running a dispatcher as a service: the event-driven loop (LISTEN/NOTIFY wake-ups coalesced into passes,
// plus a safety tick), driver decorators, metrics, and a graceful stop.
import { Registry } from 'prom-client';
import type { Driver } from '../cloud/driver.js';
import { withMetrics } from '../cloud/decorators/metrics.js';
import { withRateLimit } from '../cloud/decorators/rate-limit.js';
import { systemClock, type Clock } from '../model/clock.js';
import type { Notifier } from '../store/notifier.js';
import type { Store } from '../store/store.js';
import type { DispatchConfig } from './config.js';
import { Dispatcher, type DispatchEvent } from './dispatcher.js';
import { runPassLoop } from './loop.js';
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
  log?: (line: string) => void;
  onEvent?: (e: DispatchEvent) => void;
}

/** The boot data of an instance: what its agent needs to find the API and prove who it is. */
export interface BootData {
  api_url: string;
  node_id: string;
  bootstrap_secret: string;
  instance_type: string;
}

export async function startDispatcher(o: StartDispatcherOptions): Promise<RunningDispatcher> {
  const clock = o.clock ?? systemClock;
  const log = o.log ?? (() => {});
  const registry = new Registry();
  const { cfg } = o;
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
    id: `${cfg.cluster}/${cfg.tag}`,
    cluster: cfg.cluster,
    tag: cfg.tag,
    queue: new PgQueue(o.store, o.dbUrl),
    driver,
    clock,
    instanceTypes: cfg.instanceTypes,
    config: cfg.scheduler,
    nodeLostAfterMs: cfg.nodeLostAfterMs,
    dispatcherLostAfterMs: cfg.dispatcherLostAfterMs,
    syncIntervalMs: cfg.syncIntervalMs,
    shutdownRetryMs: cfg.shutdownRetryMs,
    capacityTtlMs: cfg.capacityTtlMs,
    quotaTtlMs: cfg.quotaTtlMs,
    bootData: ({ nodeId, bootstrapSecret, instanceType }) =>
      JSON.stringify({
        api_url: o.apiUrl,
        node_id: nodeId,
        bootstrap_secret: bootstrapSecret,
        instance_type: instanceType.name,
      } satisfies BootData),
    mirror: new PgMirror(o.store.ctx.pool, cfg.cluster, cfg.tag),
    onEvent: (e) => {
      metrics.onEvent(e);
      o.onEvent?.(e);
    },
  });
  // The first pass takes the lease: refuse to run beside another live dispatcher for the same tag.
  await dispatcher.tick();
  log(
    `dispatcher ${cfg.cluster}/${cfg.tag} running (${cfg.instanceTypes.length} instance types, driver ${cfg.driver})`,
  );

  const loop = runPassLoop({
    tick: () => dispatcher.tick(),
    notifier: o.notifier,
    intervalMs: cfg.tickIntervalMs,
    onLeaseLost: (err) => log(`stopping: ${err.message}`),
    // The database or the cloud is unreachable: retried at the next tick, never a crash.
    onPassFailed: (err) => log(`pass failed (retrying): ${err.message}`),
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
