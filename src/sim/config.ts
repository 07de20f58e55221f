// The simulator's configuration file (`berth sim --config FILE`): the catalog, the scheduler config, the
// sim cloud's boot times and fault knobs, Berth's own cloud limits, and the agents' and dispatcher's
// timings. JSON, snake_case like the §6.4 snapshot; durations and sizes as people write them ("90s").
// Every error names the key ("faults.agent_crash_rate: expected a probability from 0 to 1, got 2");
// unknown keys are rejected.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { CapacityOutage, SimCloudOptions } from '../cloud/sim/options.js';
import type { Distribution } from '../cloud/sim/distribution.js';
import { parseSnapshot, SnapshotError } from '../dispatch/snapshot-json.js';
import type { SchedulerConfig } from '../dispatch/scheduler/types.js';
import { EC2_BILLING, type BillingRule } from '../model/billing.js';
import type { InstanceType } from '../model/types.js';
import { parseDuration, UnitError } from '../model/units.js';
import { CatalogError, defaultCatalog, loadCatalog, parseCatalog } from './catalog.js';

/** A validated simulator configuration. */
export interface SimConfig {
  catalog: InstanceType[];
  scheduler: SchedulerConfig;
  /** Sim cloud options except the seed (given per run); outage times are ms after the run's start. */
  cloud: Omit<SimCloudOptions, 'seed' | 'recordCalls'>;
  /** Berth's own limits on cloud calls (the rate-limit decorator). */
  limits: { opsPerSecond: number | null; burst: number | null; maxConcurrentCreates: number | null };
  agent: { startDelayMs: number; pingIntervalMs: number };
  /**
   * minPassIntervalMs: passes run at least this far apart in virtual time (what happens meanwhile waits
   * for the next pass, as it would while a real dispatcher's pass takes that long); 0 = a pass at every
   * instant something happened.
   */
  dispatcher: {
    nodeLostAfterMs: number;
    syncIntervalMs: number;
    safetyTickMs: number;
    minPassIntervalMs: number;
  };
  /** Stop the run this long after its start, finished or not; null = last arrival + 30 days. */
  timeLimitMs: number | null;
  /** How the report bills instances (the provider's rule; default EC2's: at least 60 s, then per second). */
  billing: BillingRule;
}

/** A configuration file that cannot be used; the message names the key. */
export class SimConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SimConfigError';
  }
}

type Obj = Record<string, unknown>;

/** Reads one JSON object's keys; done() rejects those never read. */
class Keys {
  private readonly seen = new Set<string>();
  constructor(
    readonly o: Obj,
    readonly path: string,
  ) {}

  static of(v: unknown, path: string): Keys {
    if (typeof v !== 'object' || v === null || Array.isArray(v))
      throw new SimConfigError(`${path || 'config'}: expected an object, got ${JSON.stringify(v)}`);
    return new Keys(v as Obj, path);
  }

  at(k: string): string {
    return this.path === '' ? k : `${this.path}.${k}`;
  }

  get<T>(k: string, parse: (v: unknown, path: string) => T, fallback: T): T {
    this.seen.add(k);
    const v = this.o[k];
    if (v === undefined) return fallback;
    try {
      return parse(v, this.at(k));
    } catch (err) {
      if (err instanceof UnitError) throw new SimConfigError(`${this.at(k)}: ${err.message}`);
      throw err;
    }
  }

  done(allowed: string[]): void {
    for (const k of Object.keys(this.o))
      if (!this.seen.has(k))
        throw new SimConfigError(`${this.at(k)}: unknown key; expected one of ${allowed.join(', ')}`);
  }
}

const duration = (v: unknown): number => parseDuration(v);

function probability(v: unknown, path: string): number {
  if (typeof v !== 'number' || !(v >= 0 && v <= 1))
    throw new SimConfigError(`${path}: expected a probability from 0 to 1, got ${JSON.stringify(v)}`);
  return v;
}

function count(v: unknown, path: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
    throw new SimConfigError(`${path}: expected a whole number >= 0, got ${JSON.stringify(v)}`);
  return v;
}

function positive(v: unknown, path: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
    throw new SimConfigError(`${path}: expected a number above 0, got ${JSON.stringify(v)}`);
  return v;
}

/** A rate per hour (interruptions): 0 or more. */
function rate(v: unknown, path: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
    throw new SimConfigError(`${path}: expected a rate per hour >= 0 such as 0.05, got ${JSON.stringify(v)}`);
  return v;
}

function mapOf<T>(parse: (v: unknown, path: string) => T) {
  return (v: unknown, path: string): Record<string, T> => {
    const k = Keys.of(v, path);
    const out: Record<string, T> = {};
    for (const name of Object.keys(k.o)) out[name] = k.get(name, parse, undefined as T);
    return out;
  };
}

/** {"kind": "fixed", "time": "90s"} | uniform {min, max} | lognormal {median, sigma} | exponential {mean}. */
function distribution(v: unknown, path: string): Distribution {
  const k = Keys.of(v, path);
  const kind = k.get('kind', (x) => x, undefined as unknown);
  const req = (name: string): number => {
    const ms = k.get(name, duration, -1);
    if (ms < 0) throw new SimConfigError(`${k.at(name)}: required for kind ${String(kind)}`);
    return ms;
  };
  let d: Distribution;
  switch (kind) {
    case 'fixed':
      d = { kind, ms: req('time') };
      k.done(['kind', 'time']);
      break;
    case 'uniform':
      d = { kind, minMs: req('min'), maxMs: req('max') };
      if (d.maxMs < d.minMs) throw new SimConfigError(`${k.at('max')}: expected at least min`);
      k.done(['kind', 'min', 'max']);
      break;
    case 'lognormal':
      d = { kind, medianMs: req('median'), sigma: k.get('sigma', positive, 0.25) };
      k.done(['kind', 'median', 'sigma']);
      break;
    case 'exponential':
      d = { kind, meanMs: req('mean') };
      k.done(['kind', 'mean']);
      break;
    default:
      throw new SimConfigError(
        `${k.at('kind')}: expected fixed, uniform, lognormal or exponential, got ${JSON.stringify(kind)}`,
      );
  }
  return d;
}

function outage(v: unknown, path: string): CapacityOutage {
  const k = Keys.of(v, path);
  const scope = k.get('scope', (x) => x, undefined as unknown);
  if (scope !== 'type' && scope !== 'quota-group' && scope !== 'all')
    throw new SimConfigError(
      `${k.at('scope')}: expected type, quota-group or all, got ${JSON.stringify(scope)}`,
    );
  const subject = k.get(
    'subject',
    (x, p) => {
      if (typeof x !== 'string' || x === '')
        throw new SimConfigError(`${p}: expected a name, got ${JSON.stringify(x)}`);
      return x;
    },
    undefined as string | undefined,
  );
  if (scope !== 'all' && subject === undefined)
    throw new SimConfigError(`${k.at('subject')}: required for scope ${scope}`);
  const fromMs = k.get('from', duration, 0);
  const untilMs = k.get('until', duration, -1);
  if (untilMs < fromMs)
    throw new SimConfigError(`${k.at('until')}: expected a time after "from" (a duration after the start)`);
  k.done(['scope', 'subject', 'from', 'until']);
  return subject === undefined ? { scope, fromMs, untilMs } : { scope, subject, fromMs, untilMs };
}

function faults(v: unknown, path: string): Omit<SimCloudOptions, 'seed' | 'recordCalls' | 'bootTime'> {
  const k = Keys.of(v, path);
  const quota = k.get(
    'quota',
    (x, p) => {
      const q = Keys.of(x, p);
      const out = {
        maxInstances: q.get('max_instances', count, undefined),
        maxVcpus: q.get('max_vcpus', count, undefined),
      };
      q.done(['max_instances', 'max_vcpus']);
      return out;
    },
    undefined,
  );
  const rateLimit = k.get(
    'rate_limit',
    (x, p) => {
      const r = Keys.of(x, p);
      const out = {
        opsPerSecond: r.get('ops_per_second', positive, 10),
        burst: r.get('burst', positive, 10),
      };
      r.done(['ops_per_second', 'burst']);
      return out;
    },
    undefined,
  );
  const spot = k.get(
    'spot',
    (x, p) => {
      const s = Keys.of(x, p);
      const out = {
        interruptionsPerHour: s.get('interruptions_per_hour', rate, 0),
        byType: s.get('by_type', mapOf(rate), {}),
        noticeMs: s.get('notice', duration, 120_000),
      };
      s.done(['interruptions_per_hour', 'by_type', 'notice']);
      return out;
    },
    undefined,
  );
  const out = {
    createErrorRate: k.get('create_error_rate', probability, 0),
    destroyErrorRate: k.get('destroy_error_rate', probability, 0),
    capacityErrorRate: k.get('capacity_error_rate', mapOf(probability), {}),
    typeCapacity: k.get('type_capacity', mapOf(count), {}),
    outages: k.get(
      'outages',
      (x, p) => {
        if (!Array.isArray(x)) throw new SimConfigError(`${p}: expected an array of outages`);
        return x.map((w, i) => outage(w, `${p}[${i}]`));
      },
      [],
    ),
    quotaGroups: k.get(
      'quota_groups',
      mapOf((x, p) => {
        if (typeof x !== 'string') throw new SimConfigError(`${p}: expected a group name`);
        return x;
      }),
      {},
    ),
    neverBootRate: k.get('never_boot_rate', probability, 0),
    agentCrashRate: k.get('agent_crash_rate', probability, 0),
    agentCrashAfter: k.get('agent_crash_after', distribution, undefined),
    terminatedVisibleMs: k.get('terminated_visible', duration, undefined),
    ...(quota === undefined ? {} : { quota }),
    ...(rateLimit === undefined ? {} : { rateLimit }),
    ...(spot === undefined ? {} : { spot }),
  };
  k.done([
    'create_error_rate',
    'destroy_error_rate',
    'capacity_error_rate',
    'type_capacity',
    'outages',
    'quota_groups',
    'quota',
    'rate_limit',
    'never_boot_rate',
    'agent_crash_rate',
    'agent_crash_after',
    'spot',
    'terminated_visible',
  ]);
  return out;
}

/** The scheduler section uses the §6.4 snapshot's config keys and defaults (one parser for both). */
function scheduler(v: unknown): SchedulerConfig {
  try {
    return parseSnapshot({ now: '2026-01-01T00:00:00Z', config: v }).config;
  } catch (err) {
    if (err instanceof SnapshotError) throw new SimConfigError(err.message.replace(/^config/, 'scheduler'));
    throw err;
  }
}

function catalog(v: unknown, path: string, baseDir: string): InstanceType[] {
  try {
    if (v === 'default') return defaultCatalog();
    if (typeof v === 'string') return loadCatalog(resolve(baseDir, v));
    return parseCatalog(v);
  } catch (err) {
    if (err instanceof CatalogError) throw new SimConfigError(`${path}: ${err.message}`);
    throw err;
  }
}

const TOP = [
  'catalog',
  'scheduler',
  'boot_time',
  'limits',
  'faults',
  'agent',
  'dispatcher',
  'time_limit',
  'billing',
];

/** Validates a configuration value; relative catalog paths are resolved against baseDir. */
export function parseSimConfig(value: unknown, baseDir = process.cwd()): SimConfig {
  const k = Keys.of(value, '');
  const cat = k.get('catalog', (x, p) => catalog(x, p, baseDir), defaultCatalog());
  const sched = k.get('scheduler', scheduler, scheduler({}));
  const bootTime = k.get('boot_time', distribution, {
    kind: 'lognormal',
    medianMs: 60_000,
    sigma: 0.25,
  } as Distribution);
  const limits = k.get(
    'limits',
    (x, p) => {
      const l = Keys.of(x, p);
      const out = {
        opsPerSecond: l.get('max_cloud_ops_per_second', positive, null as number | null),
        burst: l.get('burst', positive, null as number | null),
        maxConcurrentCreates: l.get(
          'max_concurrent_creates',
          (y, q) => Math.max(1, count(y, q)),
          null as number | null,
        ),
      };
      l.done(['max_cloud_ops_per_second', 'burst', 'max_concurrent_creates']);
      return out;
    },
    { opsPerSecond: null, burst: null, maxConcurrentCreates: null },
  );
  const f = k.get('faults', faults, faults({}, 'faults'));
  const agent = k.get(
    'agent',
    (x, p) => {
      const a = Keys.of(x, p);
      const out = {
        startDelayMs: a.get('start_delay', duration, 2000),
        pingIntervalMs: a.get('ping_interval', duration, 10_000),
      };
      a.done(['start_delay', 'ping_interval']);
      return out;
    },
    { startDelayMs: 2000, pingIntervalMs: 10_000 },
  );
  if (agent.pingIntervalMs <= 0) throw new SimConfigError('agent.ping_interval: expected a duration above 0');
  const dispatcher = k.get(
    'dispatcher',
    (x, p) => {
      const d = Keys.of(x, p);
      const out = {
        nodeLostAfterMs: d.get('node_lost_after', duration, 60_000),
        syncIntervalMs: d.get('sync_interval', duration, 300_000),
        safetyTickMs: d.get('safety_tick', duration, 300_000),
        minPassIntervalMs: d.get('min_pass_interval', duration, 0),
      };
      d.done(['node_lost_after', 'sync_interval', 'safety_tick', 'min_pass_interval']);
      return out;
    },
    { nodeLostAfterMs: 60_000, syncIntervalMs: 300_000, safetyTickMs: 300_000, minPassIntervalMs: 0 },
  );
  if (dispatcher.safetyTickMs <= 0)
    throw new SimConfigError('dispatcher.safety_tick: expected a duration above 0');
  const timeLimitMs = k.get('time_limit', duration, null as number | null);
  // The increment defaults to the scheduler's billing_period when one is set (an hourly provider).
  const increment = sched.billingPeriodMs > 0 ? sched.billingPeriodMs : EC2_BILLING.incrementMs;
  const billing = k.get(
    'billing',
    (x, p) => {
      const b = Keys.of(x, p);
      const out = {
        minimumMs: b.get('minimum', duration, EC2_BILLING.minimumMs),
        incrementMs: b.get('increment', duration, increment),
      };
      b.done(['minimum', 'increment']);
      if (out.incrementMs <= 0) throw new SimConfigError(`${b.at('increment')}: expected a duration above 0`);
      return out;
    },
    { minimumMs: EC2_BILLING.minimumMs, incrementMs: increment },
  );
  const spotTypes = new Set(cat.filter((t) => t.preemptible).map((t) => t.providerType));
  for (const t of Object.keys(f.spot?.byType ?? {}))
    if (!spotTypes.has(t))
      throw new SimConfigError(
        `faults.spot.by_type.${t}: not a preemptible type of the catalog (the keys are provider types of spot types)`,
      );
  k.done(TOP);
  return {
    catalog: cat,
    scheduler: sched,
    cloud: { ...f, bootTime },
    limits,
    agent,
    dispatcher,
    timeLimitMs,
    billing,
  };
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
    throw new SimConfigError(`${path}: cannot read a JSON configuration: ${(err as Error).message}`);
  }
  try {
    return parseSimConfig(value, dirname(resolve(path)));
  } catch (err) {
    if (err instanceof SimConfigError) throw new SimConfigError(`${path}: ${err.message}`);
    throw err;
  }
}
