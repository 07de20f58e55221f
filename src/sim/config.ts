// The simulator's configuration file (`berth sim --config FILE`), declared with the mechanism of every
// option (src/config/declare.ts): the catalog, the scheduler's keys (those of a `berth plan` snapshot),
// the sim cloud's boot times and fault knobs, Berth's own cloud limits (the dispatch config's keys), and
// the agents' and the dispatcher's timings (the agent's and the dispatch config's options, with the
// simulator's defaults where they differ). Every error names the key
// ("faults.agent_crash_rate: expected a probability from 0 to 1, got 2"); unknown keys are rejected.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { SimCloudOptions } from '../cloud/sim/options.js';
import {
  at,
  ConfigError,
  listOf,
  mapOf,
  opt,
  reuse,
  section,
  variant,
  type Infer,
} from '../config/declare.js';
import {
  bool,
  duration,
  int,
  nullable,
  num,
  oneOf,
  optional,
  probability,
  text,
  type Kind,
} from '../config/kinds.js';
import { PROCESS_OPTIONS } from '../config/options.js';
import { SCHEDULER_OPTIONS } from '../config/scheduler.js';
import { DISPATCH_OPTIONS } from '../dispatch/config.js';
import { EC2_BILLING, type BillingRule } from '../model/billing.js';
import type { InstanceType } from '../model/types.js';
import { CatalogError, defaultCatalog, loadCatalog, parseCatalog } from './catalog.js';

/** "default", a catalog file (relative to the config file), or the catalog itself. */
const catalog: Kind<InstanceType[]> = {
  type: 'catalog',
  placeholder: '<json>',
  parse(v, path, ctx) {
    try {
      if (v === 'default') return defaultCatalog();
      if (typeof v === 'string') return loadCatalog(resolve(ctx.baseDir, v));
      return parseCatalog(v);
    } catch (err) {
      if (err instanceof CatalogError) throw new ConfigError(path, err.message);
      throw err;
    }
  },
};

const above0 = num(0, { above: true });

/** Spot interruptions per instance-hour. */
const rate = num(0, { what: 'a number >= 0 (per hour, such as 0.05)' });

/** A distribution of durations: {"kind": "fixed", "time": "90s"} and the like. */
const distribution = variant('kind', {
  fixed: section([opt({ key: 'time', field: 'ms', kind: duration(), help: 'The duration.' })]),
  uniform: section(
    [
      opt({ key: 'min', field: 'minMs', kind: duration(), help: 'Shortest.' }),
      opt({ key: 'max', field: 'maxMs', kind: duration(), help: 'Longest.' }),
    ],
    (d, path) => {
      if (d.maxMs < d.minMs) throw new ConfigError(at(path, 'max'), 'expected at least min');
    },
  ),
  lognormal: section([
    opt({ key: 'median', field: 'medianMs', kind: duration(), help: 'Median.' }),
    opt({ key: 'sigma', kind: above0, default: 0.25, help: 'Spread (σ of the log).' }),
  ]),
  exponential: section([opt({ key: 'mean', field: 'meanMs', kind: duration(), help: 'Mean.' })]),
});

const outage = section(
  [
    opt({
      key: 'scope',
      kind: oneOf(['type', 'quota-group', 'all']),
      help: 'What is out of capacity: one provider type, a quota group, or the whole cloud.',
    }),
    opt({
      key: 'subject',
      kind: optional(text('a name')),
      defaultText: 'required unless scope is all',
      help: 'The provider type or quota group.',
    }),
    opt({ key: 'from', field: 'fromMs', kind: duration(), default: 0, help: 'Start, after the run starts.' }),
    opt({ key: 'until', field: 'untilMs', kind: duration(), help: 'End, after the run starts.' }),
  ],
  (w, path) => {
    if (w.scope !== 'all' && w.subject === undefined)
      throw new ConfigError(at(path, 'subject'), `required for scope ${w.scope}`);
    if (w.untilMs < w.fromMs)
      throw new ConfigError(at(path, 'until'), 'expected a time after "from" (a duration after the start)');
  },
);

/** The sim cloud's fault knobs; absent optional ones take the sim cloud's own defaults. */
const FAULTS = section([
  opt({
    key: 'create_error_rate',
    field: 'createErrorRate',
    kind: probability,
    default: 0,
    help: 'Share of creates that fail with a transient error.',
  }),
  opt({
    key: 'destroy_error_rate',
    field: 'destroyErrorRate',
    kind: probability,
    default: 0,
    help: 'Share of destroys that fail with a transient error.',
  }),
  opt({
    key: 'capacity_error_rate',
    field: 'capacityErrorRate',
    kind: mapOf(probability),
    default: {},
    help: 'Per provider type: share of creates that fail with a capacity error.',
  }),
  opt({
    key: 'type_capacity',
    field: 'typeCapacity',
    kind: mapOf(int(0)),
    default: {},
    help: 'Per provider type: most live instances the cloud has room for.',
  }),
  opt({
    key: 'outages',
    kind: listOf(outage, 'an array of outages'),
    default: [],
    help: 'Capacity outages: {scope: type|quota-group|all, subject, from, until} (durations after the start).',
  }),
  opt({
    key: 'quota_groups',
    field: 'quotaGroups',
    kind: mapOf(text('a group name')),
    default: {},
    help: 'Provider type → quota group name, for quota-group outages.',
  }),
  opt({
    key: 'quota',
    kind: optional(
      section([
        opt({
          key: 'max_instances',
          field: 'maxInstances',
          kind: optional(int(0)),
          defaultText: 'none',
          help: 'Account quota on live instances.',
        }),
        opt({
          key: 'max_vcpus',
          field: 'maxVcpus',
          kind: optional(int(0)),
          defaultText: 'none',
          help: 'Account quota on live vcpus.',
        }),
      ]),
    ),
    defaultText: 'none',
    help: 'Account quota; beyond it creates fail with a quota error.',
  }),
  opt({
    key: 'rate_limit',
    field: 'rateLimit',
    kind: optional(
      section([
        opt({
          key: 'ops_per_second',
          field: 'opsPerSecond',
          kind: above0,
          default: 10,
          help: 'Sustained API calls per second.',
        }),
        opt({ key: 'burst', kind: above0, default: 10, help: 'Burst of API calls.' }),
      ]),
    ),
    defaultText: 'none',
    help: "The cloud API's rate limit; beyond it calls fail with a rate-limit error.",
  }),
  opt({
    key: 'never_boot_rate',
    field: 'neverBootRate',
    kind: probability,
    default: 0,
    help: 'Share of instances that come up but whose agent never starts.',
  }),
  opt({
    key: 'agent_crash_rate',
    field: 'agentCrashRate',
    kind: probability,
    default: 0,
    help: 'Share of instances whose agent crashes some time after it started.',
  }),
  opt({
    key: 'agent_crash_after',
    field: 'agentCrashAfter',
    kind: optional(distribution),
    defaultText: 'exponential, mean 1h',
    help: 'How long after starting a crashing agent crashes.',
  }),
  opt({
    key: 'spot',
    kind: optional(
      section([
        opt({
          key: 'interruptions_per_hour',
          field: 'interruptionsPerHour',
          kind: rate,
          default: 0,
          help: 'Mean spot interruptions per preemptible instance-hour.',
        }),
        opt({
          key: 'by_type',
          field: 'byType',
          kind: mapOf(rate),
          default: {},
          help: 'Per provider type (each a preemptible type of the catalog): its own rate, instead of `interruptions_per_hour`.',
        }),
        opt({
          key: 'notice',
          field: 'noticeMs',
          kind: duration(),
          default: '2m',
          help: 'Notice before an interrupted instance ends.',
        }),
      ]),
    ),
    defaultText: 'no interruptions',
    help: 'Spot interruptions of preemptible instances.',
  }),
  opt({
    key: 'terminated_visible',
    field: 'terminatedVisibleMs',
    kind: optional(duration()),
    defaultText: '60s',
    help: 'How long a terminated instance stays in the list before the cloud forgets it.',
  }),
]);

const dispatch = <K extends (typeof DISPATCH_OPTIONS.options)[number]['key']>(k: K) =>
  DISPATCH_OPTIONS.option(k);

export const SIM_OPTIONS = section(
  [
    opt({
      key: 'catalog',
      kind: catalog,
      default: 'default',
      defaultText: '"default" (80 types in four families)',
      help: '"default", a catalog file path (relative to the config file), or the catalog itself (`{"instance_types": [...]}` or an array).',
    }),
    opt({
      key: 'scheduler',
      kind: SCHEDULER_OPTIONS,
      default: {},
      help: 'The scheduler keys (below).',
    }),
    opt({
      key: 'boot_time',
      field: 'bootTime',
      kind: distribution,
      default: { kind: 'lognormal', median: '60s', sigma: 0.25 },
      defaultText: 'lognormal, median 60s, sigma 0.25',
      help: 'Time from create to the instance running and its agent starting.',
    }),
    opt({
      key: 'limits',
      kind: section([
        reuse(dispatch('max_cloud_ops_per_second'), { field: 'opsPerSecond', default: null }),
        opt({
          key: 'burst',
          kind: nullable(above0),
          default: null,
          defaultText: 'null (max(1, max_cloud_ops_per_second))',
          help: 'Burst size of the token bucket.',
        }),
        reuse(dispatch('max_concurrent_creates'), { field: 'maxConcurrentCreates', default: null }),
      ]),
      default: {},
      defaultText: 'no limits',
      help: "Berth's own limits on cloud calls (the rate-limit decorator), as in the dispatch config.",
    }),
    opt({
      key: 'workflow_estimates',
      field: 'workflowEstimates',
      kind: oneOf(['none', 'previous'] as const),
      default: 'none',
      help: "What the simulated workflow engine tells Berth of a task's run time when it submits it (the request's expected run time, as `max_run_time` carries it in production): `previous`, the task's run time in the last completed run of the same workflow (what an engine that keeps a trace of its runs knows; end_aligned and pair_ends read it); `none`, nothing.",
    }),
    opt({
      key: 'faults',
      kind: FAULTS,
      default: {},
      defaultText: 'none',
      help: "The sim cloud's fault knobs (below).",
    }),
    opt({
      key: 'agent',
      kind: section([
        opt({
          key: 'start_delay',
          field: 'startDelayMs',
          kind: duration(),
          default: '2s',
          help: "Time from the instance running to its agent's first ping.",
        }),
        reuse(PROCESS_OPTIONS.option('ping_wait'), { key: 'ping_interval', field: 'pingIntervalMs' }),
      ]),
      default: {},
      help: "The simulated agents' timings.",
    }),
    opt({
      key: 'opportunistic',
      kind: section([
        opt({
          key: 'fraction',
          kind: probability,
          default: 0,
          help: "Share of the jobs submitted as opportunistic (issue 16), picked by the run's seed.",
        }),
        opt({
          key: 'claim_probability',
          field: 'claimProbability',
          kind: probability,
          default: 0.1,
          help: "Chance that a guaranteed job grows from its trace's use to its whole request at a random point of its run (the trace records averages only): its agent then freezes and requeues the opportunistic containers on its instance until what all use fits the instance, at once.",
        }),
        opt({
          key: 'resume',
          kind: bool,
          default: false,
          help: 'A reclaimed opportunistic container (taken off its instance by the scheduler: opportunistic_vacate) resumes where it stopped, as one that checkpoints (the vm runtime, or its own checkpoint directory) does: its retry runs what was left plus move_time. Off: it starts over.',
        }),
        opt({
          key: 'move_time',
          field: 'moveMs',
          kind: duration(),
          default: '5s',
          help: 'What moving a resumed container costs its retry (save, copy, restore), with resume on.',
        }),
      ]),
      default: {},
      help: 'Opportunistic containers in the simulator (docs/PERFORMANCE.md): what share of the jobs, and how often guaranteed ones claim their capacity back.',
    }),
    opt({
      key: 'dispatcher',
      kind: section([
        reuse(dispatch('node_lost_after')),
        reuse(dispatch('sync_interval'), { default: '5m' }),
        opt({
          key: 'safety_tick',
          field: 'safetyTickMs',
          kind: duration({ above0: true }),
          default: '5m',
          help: 'A pass at least this often (the simulated tick_interval).',
        }),
        opt({
          key: 'min_pass_interval',
          field: 'minPassIntervalMs',
          kind: duration(),
          default: 0,
          help: 'Passes run at least this far apart in virtual time (what happens meanwhile waits for the next pass, as it would while a real pass takes that long); 0: a pass at every instant something happened.',
        }),
      ]),
      default: {},
      help: "The dispatcher's timings.",
    }),
    opt({
      key: 'time_limit',
      field: 'timeLimitMs',
      kind: nullable(duration()),
      default: null,
      defaultText: 'last arrival + 30 days',
      help: 'Stop the run this long after its start, finished or not.',
    }),
    opt({
      key: 'billing',
      kind: section([
        opt({
          key: 'minimum',
          field: 'minimumMs',
          kind: duration(),
          default: `${EC2_BILLING.minimumMs / 1000}s`,
          help: 'The least an instance is billed, however briefly it lived.',
        }),
        opt({
          key: 'increment',
          field: 'incrementMs',
          kind: optional(duration({ above0: true })),
          defaultText: `the scheduler's billing_period if set, else ${EC2_BILLING.incrementMs / 1000}s`,
          help: 'Past the minimum, lifetimes are rounded up to whole increments.',
        }),
      ]),
      default: {},
      defaultText: 'EC2: at least 60s, then per second',
      help: "How the report bills instances, the provider's rule (src/model/billing.ts).",
    }),
  ],
  (c, path) => {
    // The keys of faults.spot.by_type are provider types of the catalog's preemptible types.
    const spotTypes = new Set(c.catalog.filter((t) => t.preemptible).map((t) => t.providerType));
    for (const t of Object.keys(c.faults.spot?.byType ?? {}))
      if (!spotTypes.has(t))
        throw new ConfigError(
          at(path, `faults.spot.by_type.${t}`),
          'not a preemptible type of the catalog (the keys are provider types of spot types)',
        );
  },
);

type Compiled = Infer<(typeof SIM_OPTIONS.options)[number]>;

/** A validated simulator configuration. */
export interface SimConfig extends Omit<Compiled, 'faults' | 'bootTime' | 'billing'> {
  /** Sim cloud options except the seed (given per run); outage times are ms after the run's start. */
  cloud: Omit<SimCloudOptions, 'seed' | 'recordCalls'>;
  /** How the report bills instances (the provider's rule; default EC2's: at least 60 s, then per second). */
  billing: BillingRule;
}

/** Validates a configuration value; relative catalog paths are resolved against baseDir. */
export function parseSimConfig(value: unknown, baseDir = process.cwd()): SimConfig {
  const { faults, bootTime, billing, ...rest } = SIM_OPTIONS.parse(value, '', { baseDir });
  // The increment defaults to the scheduler's billing_period when one is set (an hourly provider).
  const incrementMs =
    billing.incrementMs ??
    (rest.scheduler.billingPeriodMs > 0 ? rest.scheduler.billingPeriodMs : EC2_BILLING.incrementMs);
  return { ...rest, cloud: { ...faults, bootTime }, billing: { minimumMs: billing.minimumMs, incrementMs } };
}

/** The configuration used when no file is given. */
export function defaultSimConfig(): SimConfig {
  return parseSimConfig({});
}

/** Reads and validates a configuration file; errors name the file and the key. */
export function loadSimConfig(path: string): SimConfig {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ConfigError('', `cannot read a JSON configuration: ${(err as Error).message}`, { file: path });
  }
  try {
    return parseSimConfig(value, dirname(resolve(path)));
  } catch (err) {
    if (err instanceof ConfigError) throw err.from({ file: path });
    throw err;
  }
}
