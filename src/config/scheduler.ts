// The scheduler's keys: the `config` of a `berth plan` snapshot (DESIGN §6.4), the `scheduler` section of
// the dispatch config file and of the simulator's config file. Sizes and durations as people write them.
import { ConfigError, at, opt, reuse, section, mapOf, type Infer } from './declare.js';
import { bool, duration, int, nullable, num, oneOf, size } from './kinds.js';
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
      key: 'share_rule',
      field: 'shareRule',
      kind: oneOf(['expected', 'share', 'price'] as const),
      default: 'price',
      help: "How a container's part of an existing instance's price is measured against max_price_factor: `share`, the price × the largest fraction of the instance it takes; `expected`, that share plus the rest of the price weighted by the chance it is left alone there (1/(k+1) with k containers on it; booting instances: the share); `price`, the whole price. `price` is the default until the other two stop losing on the traces (docs/performance/sim.md).",
    }),
    opt({
      key: 'batch_packing',
      field: 'batchPacking',
      kind: oneOf(['cost', 'boots', 'off'] as const),
      default: 'cost',
      help: "How instances created in one pass pack the containers waiting for them: `cost`, a planned instance grows into a larger type for one more container when that adds no more than the container's own share of its cheapest type; `boots`, also when the containers like it waiting behind it would fill the larger type (fewer, larger instances at the same price); `off`, never grows.",
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
      default: '10s',
      help: "Of the idle instances of one type, as many are kept as arrivals that could use them are expected within this long at the recent arrival rate (the snapshot's `arrivals`); the others are shut down at once.",
    }),
    opt({
      key: 'max_idle_time',
      field: 'maxIdleTimeMs',
      kind: duration(),
      default: '10m',
      help: 'An idle instance kept for arrivals that are likely to use it is shut down after this long idle all the same.',
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
      key: 'min_billing_period',
      field: 'minBillingPeriodMs',
      kind: duration(),
      default: 0,
      defaultText: '0 (billed per second from the start)',
      help: 'The cloud bills every instance for at least this long (EC2: 60s). An idle instance younger than this is kept (it is paid for anyway) unless the head of the queue needs its room.',
    }),
    opt({
      key: 'arrival_window',
      field: 'arrivalWindowMs',
      kind: duration({ above0: true }),
      default: '60s',
      help: "How far back the snapshot's `arrivals` count: the recent arrival rate that says whether an idle instance will be used again soon.",
    }),
    opt({
      key: 'wait_for_running',
      field: 'waitForRunning',
      kind: bool,
      default: true,
      help: "Duration-aware reuse (docs/SCHEDULER.md): a waiting container that fits an instance whose running containers are expected to end (the snapshot's `estimates`: run times by request name, boot time, from history) before a new instance could boot, less wait_margin, waits for it instead of causing a create.",
    }),
    opt({
      key: 'wait_margin',
      field: 'waitMarginMs',
      kind: duration(),
      default: 0,
      help: 'wait_for_running waits for an instance only if it is expected to free up this long before a new instance would have booted.',
    }),
    opt({
      key: 'boot_ahead',
      field: 'bootAhead',
      kind: int(0),
      default: 0,
      defaultText: '0 (off)',
      help: "Boot ahead of fan-outs (docs/SCHEDULER.md): the most containers' worth of capacity held for containers expected to arrive when running ones end (the snapshot's `estimates`: how many arrived per end of each step, and when the running ones end), created a boot time before those ends. 0: off.",
    }),
    opt({
      key: 'end_aligned',
      field: 'endAligned',
      kind: oneOf(['off', 'expected', 'history'] as const),
      default: 'expected',
      help: "End-aligned placement (docs/SCHEDULER.md): a waiting container whose run time is expected goes, among existing instances with room, on one where another container is expected to end no earlier than it (it adds nothing to the instance's life), the one it fills best; such an instance may be beyond max_price_factor. `expected`: only run times the containers carry themselves (in the simulator, the SWF requested time); `history`: also their step's median from history (the snapshot's `estimates`); `off`: never.",
    }),
    opt({
      key: 'max_running_per_user',
      field: 'maxRunningPerUser',
      kind: nullable(int(1)),
      default: null,
      defaultText: 'null (no cap)',
      help: 'Most containers of one owner placed at once (running, or assigned and starting).',
    }),
    opt({
      key: 'fair_share',
      field: 'fairShare',
      kind: bool,
      default: true,
      help: 'Among waiting containers of equal priority, owners take turns (the owner with the fewest placed containers first) instead of strict queue time.',
    }),
    opt({
      key: 'on_demand_after_interruptions',
      field: 'onDemandAfterInterruptions',
      kind: nullable(int(1)),
      default: null,
      defaultText: 'null (always spot)',
      help: "A preemptible container whose request's attempts were ended by a spot interruption this many times runs on non-preemptible (on-demand) types only.",
    }),
    opt({
      key: 'opportunistic_margin',
      field: 'opportunisticMargin',
      kind: num(0),
      default: 0.25,
      help: 'Opportunistic placement (docs/SCHEDULER.md): a running guaranteed container lends the part of its request above its measured use × (1 + this margin): its peak memory and its average CPUs. 0.25 keeps a quarter more than it ever used.',
    }),
    opt({
      key: 'opportunistic_min_observation',
      field: 'opportunisticMinObservationMs',
      kind: duration(),
      default: '5m',
      help: 'A running guaranteed container lends nothing to opportunistic containers until its usage has been measured for this long.',
    }),
    opt({
      key: 'opportunistic_any_type',
      field: 'opportunisticAnyType',
      kind: bool,
      default: true,
      help: 'An opportunistic container may borrow on an instance of any type, not only of the types max_price_factor lets it use (the room is paid for already): on those other types only next to guaranteed containers expected to outlast it (run-time estimates), or when nothing is known of them (opportunistic_vacate is the way out then).',
    }),
    opt({
      key: 'opportunistic_vacate',
      field: 'opportunisticVacate',
      kind: bool,
      default: true,
      help: 'When no guaranteed container is left on an instance and its opportunistic containers would pay less on their own (their cheapest types × max_price_factor) than its price, they are requeued (reclaimed: retried at once, counting no failure) so that the instance can go.',
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
