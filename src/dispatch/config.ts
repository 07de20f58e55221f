// The dispatcher's configuration file (JSON): cluster identity, driver, instance types, the scheduler's
// settings (the same keys as the `config` of a `berth plan` snapshot) and the dispatcher's own timers.
// Every key is validated; an error names the key and what was expected.
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import type { InstanceType } from '../model/types.js';
import { parseDuration, UnitError } from '../model/units.js';
import type { SchedulerConfig } from './scheduler/types.js';
import { parseSnapshot, SnapshotError } from './snapshot-json.js';

export interface DispatchConfig {
  cluster: string;
  tag: string;
  driver: 'local';
  instanceTypes: InstanceType[];
  scheduler: SchedulerConfig;
  nodeLostAfterMs: number;
  dispatcherLostAfterMs: number;
  syncIntervalMs: number;
  tickIntervalMs: number;
  shutdownRetryMs: number;
  capacityTtlMs: number;
  quotaTtlMs: number;
  maxCloudOpsPerSecond: number;
  maxConcurrentCreates: number;
  /** local driver: how long an instance takes to "boot" before its agent starts. */
  bootDelayMs: number;
  /** local driver: run each instance's agent in its own network namespace (root; see cloud/local/netns.ts). */
  netns: boolean;
}

export class DispatchConfigError extends Error {}

const NAME = /^[a-z0-9][a-z0-9-]{0,31}$/;

const DURATIONS: [keyof DispatchConfig, string, string, string][] = [
  [
    'nodeLostAfterMs',
    'node_lost_after',
    '60s',
    'A node that has not pinged for this long is failed; its containers are retried elsewhere.',
  ],
  [
    'dispatcherLostAfterMs',
    'dispatcher_lost_after',
    '60s',
    'Another dispatcher of the cluster silent this long loses its unplaced locks.',
  ],
  [
    'syncIntervalMs',
    'sync_interval',
    '10s',
    "How often the cloud's instance list is reconciled with the dispatcher's view.",
  ],
  [
    'tickIntervalMs',
    'tick_interval',
    '1s',
    'Safety tick: a pass at least this often even without notifications.',
  ],
  [
    'shutdownRetryMs',
    'shutdown_retry',
    '30s',
    'A failed destroy is retried after this long, until the instance is gone.',
  ],
  ['capacityTtlMs', 'capacity_ttl', '60s', 'A type that returned a capacity error is skipped for this long.'],
  [
    'quotaTtlMs',
    'quota_ttl',
    '5m',
    'After a quota error the current count is the cap for this long (or until an instance goes away).',
  ],
  [
    'bootDelayMs',
    'boot_delay',
    '1s',
    "local driver: the simulated boot time before an instance's agent starts.",
  ],
];

/** The dispatch config keys with their defaults and meaning (docs/CONFIG.md is generated from this). */
export const DISPATCH_KEYS: { key: string; default: string; help: string }[] = [
  { key: 'cluster', default: 'local', help: 'Cluster name: instances and nodes are tagged with it.' },
  {
    key: 'tag',
    default: 'default',
    help: 'Dispatcher tag: one live dispatcher per cluster/tag; it owns the instances carrying the tag.',
  },
  {
    key: 'driver',
    default: 'local',
    help: 'Cloud driver: `local` (instances are `berth agent` processes on this machine).',
  },
  {
    key: 'instance_types',
    default: 'three types sized for this machine (then max_instances defaults to 2 × CPUs)',
    help: 'List of {name, provider_type?, vcpus, ram, scratch?, gpus?, price, preemptible?}.',
  },
  {
    key: 'scheduler',
    default: '{}',
    help: 'Scheduler settings, the same keys as the `config` of a `berth plan` snapshot (see docs/SCHEDULER.md).',
  },
  ...DURATIONS.map(([, key, d, help]) => ({ key, default: d, help })),
  { key: 'max_cloud_ops_per_second', default: '10', help: 'Rate limit on cloud API calls (token bucket).' },
  { key: 'max_concurrent_creates', default: '4', help: 'Most instance creates in flight at once.' },
  {
    key: 'netns',
    default: 'false',
    help: "local driver: run each instance's agent in its own network namespace behind a veth pair (root only); the API must listen on 0.0.0.0.",
  },
];

/** Instance types for the local driver sized for this machine: a small, a medium and a whole-machine type. */
export function localInstanceTypes(): Record<string, unknown>[] {
  const n = Math.max(1, cpus().length);
  const gib = Math.max(1, Math.floor(totalmem() / 1024 ** 3));
  return [
    {
      name: 'small',
      vcpus: Math.min(1, n),
      ram: `${Math.max(1, Math.min(2, Math.floor(gib / 4)))}GiB`,
      price: 0.02,
    },
    { name: 'medium', vcpus: n, ram: `${Math.max(1, Math.min(8, Math.floor(gib / 2)))}GiB`, price: 0.08 },
    { name: 'large', vcpus: n, ram: `${Math.max(1, Math.floor(gib * 0.75))}GiB`, price: 0.2 },
  ];
}

/** Parses a dispatch config object; `defaults` fills what the object leaves out. */
export function parseDispatchConfig(value: unknown, source = 'dispatch config'): DispatchConfig {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new DispatchConfigError(`${source}: expected a JSON object`);
  const o = value as Record<string, unknown>;
  const known = new Set([
    'cluster',
    'tag',
    'driver',
    'instance_types',
    'scheduler',
    'max_cloud_ops_per_second',
    'max_concurrent_creates',
    'netns',
    ...DURATIONS.map((d) => d[1]),
  ]);
  for (const k of Object.keys(o))
    if (!known.has(k))
      throw new DispatchConfigError(`${source}: ${k}: unknown key (known: ${[...known].join(', ')})`);
  const name = (k: string, dflt: string) => {
    const v = o[k] ?? dflt;
    if (typeof v !== 'string' || !NAME.test(v))
      throw new DispatchConfigError(
        `${source}: ${k}: expected lower-case letters, digits and - (at most 32), got ${JSON.stringify(v)}`,
      );
    return v;
  };
  const driver = o.driver ?? 'local';
  if (driver !== 'local')
    throw new DispatchConfigError(
      `${source}: driver: expected "local" (the only driver this build can run), got ${JSON.stringify(driver)}`,
    );
  let snap;
  try {
    // The default local types share this machine: without a cap a deep queue would start an agent per
    // container. Cap the instances at twice the CPUs unless the config says otherwise.
    const scheduler = (o.scheduler ?? {}) as Record<string, unknown>;
    const localDefault =
      o.instance_types === undefined &&
      (o.driver ?? 'local') === 'local' &&
      scheduler.max_instances === undefined;
    snap = parseSnapshot({
      now: '2026-01-01T00:00:00Z',
      config: localDefault ? { ...scheduler, max_instances: Math.max(4, 2 * cpus().length) } : scheduler,
      instance_types: o.instance_types ?? localInstanceTypes(),
      instances: [],
      containers: [],
      cloud: { quota_max_instances: null, unavailable_types: [], rate_limited_until: null },
    });
  } catch (err) {
    if (err instanceof SnapshotError)
      throw new DispatchConfigError(
        `${source}: ${err.path.replace(/^config\b/, 'scheduler')}: ${err.problem}`,
      );
    throw err;
  }
  if (snap.instanceTypes.length === 0)
    throw new DispatchConfigError(`${source}: instance_types: expected at least one type`);
  const out: Record<string, unknown> = {
    cluster: name('cluster', 'local'),
    tag: name('tag', 'default'),
    driver,
    instanceTypes: snap.instanceTypes,
    scheduler: snap.config,
  };
  for (const [field, key, dflt] of DURATIONS) {
    try {
      out[field] = parseDuration(o[key] ?? dflt);
    } catch (err) {
      throw new DispatchConfigError(
        `${source}: ${key}: ${err instanceof UnitError ? err.message : String(err)}`,
      );
    }
  }
  const posInt = (k: string, dflt: number) => {
    const v = o[k] ?? dflt;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1)
      throw new DispatchConfigError(`${source}: ${k}: expected a whole number ≥ 1, got ${JSON.stringify(v)}`);
    return v;
  };
  out.maxCloudOpsPerSecond = posInt('max_cloud_ops_per_second', 10);
  out.maxConcurrentCreates = posInt('max_concurrent_creates', 4);
  const netns = o.netns ?? false;
  if (typeof netns !== 'boolean')
    throw new DispatchConfigError(`${source}: netns: expected true or false, got ${JSON.stringify(netns)}`);
  out.netns = netns;
  return out as unknown as DispatchConfig;
}

export function loadDispatchConfig(
  path: string | null,
  overrides: Record<string, unknown> = {},
): DispatchConfig {
  let value: Record<string, unknown> = {};
  if (path) {
    try {
      value = JSON.parse(readFileSync(path, 'utf8'));
    } catch (err) {
      throw new DispatchConfigError(`${path}: ${(err as Error).message}`);
    }
  }
  return parseDispatchConfig({ ...value, ...overrides }, path ?? 'dispatch config');
}
