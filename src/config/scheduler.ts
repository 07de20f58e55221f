// The scheduler's keys: the `config` of a `berth plan` snapshot (DESIGN §6.4), the `scheduler` section of
// the dispatch config file and of the simulator's config file. Sizes and durations as people write them.
import { ConfigError, at, opt, reuse, section, mapOf, type Infer } from './declare.js';
import { duration, int, nullable, num, size } from './kinds.js';
import { PROCESS_OPTIONS } from './options.js';

export const SCHEDULER_OPTIONS = section(
  [
    opt({
      key: 'max_instances',
      field: 'maxInstances',
      kind: nullable(int(0)),
      default: null,
      defaultText: 'null (no cap)',
      help: 'Hard cap on live and booting instances.',
    }),
    opt({
      key: 'max_spend_per_hour',
      field: 'maxSpendPerHour',
      kind: nullable(num(0)),
      default: null,
      defaultText: 'null (no cap)',
      help: 'Cap on the summed hourly price of live and booting instances.',
    }),
    opt({
      key: 'max_price_factor',
      field: 'maxPriceFactor',
      kind: num(1),
      default: 1.5,
      help: "A container may use room on an existing instance when its share of that instance's price is within this factor of its cheapest type's price.",
    }),
    opt({
      key: 'max_containers_per_instance',
      field: 'maxContainersPerInstance',
      kind: int(0),
      default: 0,
      defaultText: '0 (unlimited)',
      help: 'Most containers on one instance.',
    }),
    opt({
      key: 'idle_timeout',
      field: 'idleTimeoutMs',
      kind: duration(),
      default: '60s',
      help: 'An idle instance is shut down after this long.',
    }),
    opt({
      key: 'boot_timeout',
      field: 'bootTimeoutMs',
      kind: duration(),
      default: '10m',
      help: 'A booting instance whose agent has not registered after this long is shut down.',
    }),
    opt({
      key: 'max_instances_per_type',
      field: 'maxInstancesPerType',
      kind: mapOf(int(0)),
      default: {},
      defaultText: '{} (type name → count)',
      help: 'Per-type cap on instances.',
    }),
    opt({
      key: 'min_instances',
      field: 'minInstances',
      kind: int(0),
      default: 0,
      help: 'Warm pool: keep at least this many instances (of the cheapest type) up.',
    }),
    opt({
      key: 'ram_overhead',
      field: 'ramOverhead',
      kind: size,
      default: 0,
      help: "RAM reserved per instance for the system and the agent, subtracted from the type's ram.",
    }),
    opt({
      key: 'billing_period',
      field: 'billingPeriodMs',
      kind: duration(),
      default: 0,
      defaultText: '0 (per-second billing, no window)',
      help: 'Billing period of the cloud.',
    }),
    opt({
      key: 'shutdown_window',
      field: 'shutdownWindowMs',
      kind: duration(),
      default: 0,
      help: 'With a billing period: an idle instance is shut down only in the last this-long of its current period (at most billing_period).',
    }),
    opt({
      key: 'on_demand_after_interruptions',
      field: 'onDemandAfterInterruptions',
      kind: nullable(int(1)),
      default: null,
      defaultText: 'null (always spot)',
      help: "A preemptible container whose request's attempts were ended by a spot interruption this many times runs on non-preemptible (on-demand) types only.",
    }),
    reuse(PROCESS_OPTIONS.option('max_dispatch_attempts'), {
      field: 'maxDispatchAttempts',
      help: 'A Queued container locked this many times is cancelled (perm). `berth dispatch` and `berth up` take it from the database (the server option of the same name), never from their own file.',
    }),
  ],
  (c, path) => {
    if (c.billingPeriodMs > 0 && c.shutdownWindowMs > c.billingPeriodMs)
      throw new ConfigError(at(path, 'shutdown_window'), 'expected a duration no longer than billing_period');
  },
).documented('Scheduler keys');

/** Scheduler configuration: what the plan's decisions depend on (docs in SCHEDULER_OPTIONS). */
export type SchedulerConfig = Infer<(typeof SCHEDULER_OPTIONS.options)[number]>;
