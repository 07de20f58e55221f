// A decorator that counts every driver operation and error and times it (DESIGN §9: driver operations
// and errors). Metrics go to the Registry passed in, never prom-client's global one, so tests and
// several dispatchers in one process do not share counters. Durations come from the injected clock:
// under the simulator they are virtual seconds.
import { Counter, Histogram, type Registry } from 'prom-client';
import type { Clock } from '../../model/clock.js';
import type { Driver, DriverOp } from '../driver.js';
import { errorKind } from '../errors.js';

/** Options of withMetrics. */
export interface MetricsOptions {
  registry: Registry;
  clock: Clock;
  /** Metric name prefix. Default "berth_cloud". */
  prefix?: string;
  /** Value of the `driver` label (e.g. "sim", "ec2"). Default "default". */
  driverName?: string;
}

type Labels = 'driver' | 'op' | 'outcome' | 'kind';

function counter(registry: Registry, name: string, help: string, labelNames: Labels[]): Counter<Labels> {
  // Decorating two drivers on one registry must share the metric, not fail on a duplicate name.
  const existing = registry.getSingleMetric(name);
  if (existing !== undefined) return existing as Counter<Labels>;
  return new Counter({ name, help, labelNames, registers: [registry] });
}

function histogram(registry: Registry, name: string, help: string): Histogram<Labels> {
  const existing = registry.getSingleMetric(name);
  if (existing !== undefined) return existing as Histogram<Labels>;
  return new Histogram({
    name,
    help,
    labelNames: ['driver', 'op'],
    // Cloud calls take from milliseconds (list) to a minute (a slow create).
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
}

/** Wraps `driver` so that each operation is counted (by outcome and error kind) and timed. */
export function withMetrics(driver: Driver, opts: MetricsOptions): Driver {
  const prefix = opts.prefix ?? 'berth_cloud';
  const driverName = opts.driverName ?? 'default';
  const ops = counter(opts.registry, `${prefix}_operations_total`, 'Cloud driver operations by outcome', [
    'driver',
    'op',
    'outcome',
  ]);
  const errors = counter(opts.registry, `${prefix}_errors_total`, 'Cloud driver errors by kind', [
    'driver',
    'op',
    'kind',
  ]);
  const duration = histogram(opts.registry, `${prefix}_operation_duration_seconds`, 'Cloud driver call time');

  async function measure<T>(op: DriverOp, call: () => Promise<T>): Promise<T> {
    const start = opts.clock.now().getTime();
    try {
      const result = await call();
      ops.inc({ driver: driverName, op, outcome: 'ok' });
      return result;
    } catch (err) {
      ops.inc({ driver: driverName, op, outcome: 'error' });
      errors.inc({ driver: driverName, op, kind: errorKind(err) });
      throw err;
    } finally {
      duration.observe({ driver: driverName, op }, (opts.clock.now().getTime() - start) / 1000);
    }
  }

  return {
    create: (type, tags, bootData) => measure('create', () => driver.create(type, tags, bootData)),
    list: (filter) => measure('list', () => driver.list(filter)),
    destroy: (id) => measure('destroy', () => driver.destroy(id)),
    setTags: (id, tags) => measure('setTags', () => driver.setTags(id, tags)),
  };
}
