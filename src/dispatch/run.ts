// Running a dispatcher as a service: the event-driven loop (LISTEN/NOTIFY wake-ups coalesced into passes,
// plus a safety tick), driver decorators, metrics, and a graceful stop.
import { performance } from 'node:perf_hooks';
import { Registry } from 'prom-client';
import type { BootData } from '../cloud/boot-data.js';
import type { Driver } from '../cloud/driver.js';
import { withMetrics } from '../cloud/decorators/metrics.js';
import { withRateLimit } from '../cloud/decorators/rate-limit.js';
import { systemClock, type Clock } from '../model/clock.js';
import type { Notifier } from '../store/notifier.js';
import type { Store } from '../store/store.js';
import type { DispatchConfig } from './config.js';
import { Dispatcher, LeaseLostError, type DispatchEvent } from './dispatcher.js';
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
export type { BootData };

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
          log(`stopping: ${err.message}`);
          break;
        }
        // The database or the cloud is unreachable: retried at the next tick, never a crash.
        log(`pass failed (retrying): ${(err as Error).message}`);
      }
      metrics.passSeconds.observe((performance.now() - t0) / 1000);
      if (stopped) break;
      await Promise.race([
        waiter ? waiter.next(cfg.tickIntervalMs) : new Promise((r) => setTimeout(r, cfg.tickIntervalMs)),
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
