// The dispatch config file (`berth dispatch --config FILE`, `berth up --config FILE`), declared with
// the mechanism of every option (src/config/declare.ts): cluster identity, driver, instance types, the
// scheduler's keys (those of a `berth plan` snapshot's `config`) and the dispatcher's own timers.
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { amiFor, EC2_OPTIONS } from '../cloud/ec2/config.js';
import { at, ConfigError, opt, section, type Infer } from '../config/declare.js';
import { bool, duration, Expected, int, nullable, num, oneOf, text, type Kind } from '../config/kinds.js';
import { SCHEDULER_OPTIONS } from '../config/scheduler.js';
import type { InstanceType } from '../model/types.js';
import { parseInstanceTypes, SnapshotError } from './snapshot-json.js';

/** The cloud drivers this build can run. */
export const DRIVERS = ['local', 'ec2'] as const;

const NAME = text('lower-case letters, digits and - (at most 32)', /^[a-z0-9][a-z0-9-]{0,31}$/, '<name>');

/** Instance types as in a §6.4 snapshot; at least one. */
const instanceTypes: Kind<InstanceType[]> = {
  type: 'array of instance types',
  placeholder: '<json>',
  parse(v, path) {
    let types: InstanceType[];
    try {
      types = parseInstanceTypes(v, path);
    } catch (err) {
      if (err instanceof SnapshotError) throw new ConfigError(err.path, err.problem);
      throw err;
    }
    if (types.length === 0) throw new Expected('at least one instance type');
    return types;
  },
};

/** The dispatcher's timers (also what the simulator and the chaos run give the Dispatcher). */
export const DISPATCHER_TIMERS = section([
  opt({
    key: 'node_lost_after',
    field: 'nodeLostAfterMs',
    kind: duration(),
    default: '60s',
    help: 'A node that has not pinged for this long is failed; its containers are retried elsewhere.',
  }),
  opt({
    key: 'dispatcher_lost_after',
    field: 'dispatcherLostAfterMs',
    kind: duration(),
    default: '60s',
    help: 'Another dispatcher of the cluster silent this long loses its unplaced locks.',
  }),
  opt({
    key: 'sync_interval',
    field: 'syncIntervalMs',
    kind: duration(),
    default: '10s',
    help: "How often the cloud's instance list is reconciled with the dispatcher's view.",
  }),
  opt({
    key: 'shutdown_retry',
    field: 'shutdownRetryMs',
    kind: duration(),
    default: '30s',
    help: 'A destroy not yet confirmed (it failed, or the cloud still lists the instance) is retried after this long, until the instance is gone.',
  }),
  opt({
    key: 'stop_grace',
    field: 'stopGraceMs',
    kind: duration(),
    default: '30s',
    help: 'At a stop, creates and destroys in flight are awaited this long before the lease is released.',
  }),
  opt({
    key: 'capacity_ttl',
    field: 'capacityTtlMs',
    kind: duration(),
    default: '60s',
    help: 'A type that returned a capacity error is skipped for this long.',
  }),
  opt({
    key: 'quota_ttl',
    field: 'quotaTtlMs',
    kind: duration(),
    default: '5m',
    help: 'After a quota error the current count is the cap for this long (or until an instance goes away).',
  }),
  opt({
    key: 'status_interval',
    field: 'statusIntervalMs',
    kind: duration(),
    default: '2s',
    help: "Waiting containers' status texts are written at most this often, beside the passes, and after a write that took d no sooner than 2 × d after it ended.",
  }),
  opt({
    key: 'full_reload_passes',
    field: 'fullReloadPasses',
    kind: int(1),
    default: 100,
    help: "The container view is read whole every this many passes (and on start, and after any error); the passes between read only what changed since the last one (the queue's changes()).",
  }),
]);

/** The dispatcher's timers, compiled. */
export type DispatcherTimers = Infer<(typeof DISPATCHER_TIMERS.options)[number]>;

export const DISPATCH_OPTIONS = section(
  [
    opt({
      key: 'cluster',
      kind: NAME,
      default: 'local',
      help: 'Cluster name: instances and nodes are tagged with it.',
    }),
    opt({
      key: 'tag',
      kind: NAME,
      default: 'default',
      help: 'Dispatcher tag: one live dispatcher per cluster/tag; it owns the instances carrying the tag.',
    }),
    opt({
      key: 'driver',
      kind: oneOf(DRIVERS),
      default: 'local',
      help: 'Cloud driver: `local` (instances are `berth agent` processes on this machine) or `ec2` (AWS EC2; settings under `ec2`, see docs/AWS.md).',
    }),
    opt({
      key: 'ec2',
      kind: nullable(EC2_OPTIONS),
      default: null,
      help: 'The ec2 driver (`"driver": "ec2"`): subnets, AMI, security groups, instance profile, volumes, agent install (docs/AWS.md).',
    }),
    opt({
      key: 'instance_types',
      field: 'instanceTypes',
      kind: instanceTypes,
      default: () => localInstanceTypes(),
      defaultText:
        'three types sized for this machine (and then `scheduler.max_instances` defaults to 2 × CPUs, at least 4)',
      help: 'List of {name, provider_type?, vcpus, ram, scratch?, gpus?, price, preemptible?}, as in a `berth plan` snapshot.',
    }),
    opt({
      key: 'scheduler',
      kind: SCHEDULER_OPTIONS.without(
        ['max_dispatch_attempts'],
        'a server option (--max-dispatch-attempts, $BERTH_MAX_DISPATCH_ATTEMPTS): the dispatcher reads it from the database',
      ),
      default: {},
      help: 'The scheduler keys (below), except `max_dispatch_attempts`.',
    }),
    ...DISPATCHER_TIMERS.options,
    opt({
      key: 'tick_interval',
      field: 'tickIntervalMs',
      kind: duration({ above0: true }),
      default: '1s',
      help: 'Safety tick: a full pass at least this often, even without notifications (finished containers alone wake quick placing passes: docs/ARCHITECTURE.md).',
    }),
    opt({
      key: 'max_cloud_ops_per_second',
      field: 'maxCloudOpsPerSecond',
      kind: nullable(num(0, { above: true })),
      default: 10,
      help: 'Rate limit on cloud API calls (a token bucket over all operations); null: none.',
    }),
    opt({
      key: 'max_concurrent_creates',
      field: 'maxConcurrentCreates',
      kind: nullable(int(1)),
      default: 4,
      help: 'Most instance creates in flight at once; null: no limit.',
    }),
    opt({
      key: 'boot_delay',
      field: 'bootDelayMs',
      kind: duration(),
      default: '1s',
      help: "local driver: the simulated boot time before an instance's agent starts.",
    }),
    opt({
      key: 'netns',
      kind: bool,
      default: false,
      help: "local driver: run each instance's agent in its own network namespace behind a veth pair (root only); the API must listen on 0.0.0.0.",
    }),
  ],
  checkDriver,
);

/** The compiled dispatch config. */
export type DispatchConfig = Infer<(typeof DISPATCH_OPTIONS.options)[number]>;

/** The driver's own section is there exactly when that driver is chosen, and covers every type. */
function checkDriver(c: { driver: string; ec2: unknown; instanceTypes: InstanceType[] }, path: string): void {
  if (c.driver !== 'ec2') {
    if (c.ec2 !== null) throw new ConfigError(at(path, 'ec2'), 'only used with "driver": "ec2"');
    return;
  }
  const ec2 = c.ec2 as DispatchConfig['ec2'];
  if (ec2 === null)
    throw new ConfigError(
      at(path, 'ec2'),
      'required with "driver": "ec2" (at least {"subnets": [...], "ami": ...})',
    );
  for (const t of c.instanceTypes)
    if (!amiFor(ec2, t))
      throw new ConfigError(at(path, 'ec2.ami'), `required (type ${t.name} has no ec2.ami_by_type entry)`);
}

/** Instance types for the local driver sized for this machine: a small, a medium and a whole-machine type. */
export function localInstanceTypes(): Record<string, unknown>[] {
  const n = Math.max(1, cpus().length);
  const gib = Math.max(1, Math.floor(totalmem() / 1024 ** 3));
  return [
    {
      name: 'small',
      vcpus: Math.min(1, n),
      ram: `${Math.max(1, Math.min(2, Math.floor(gib / 4)))}GiB`,
      scratch: '10GiB',
      price: 0.02,
    },
    {
      name: 'medium',
      vcpus: n,
      ram: `${Math.max(1, Math.min(8, Math.floor(gib / 2)))}GiB`,
      scratch: '50GiB',
      price: 0.08,
    },
    {
      name: 'large',
      vcpus: n,
      ram: `${Math.max(1, Math.floor(gib * 0.75))}GiB`,
      scratch: '100GiB',
      price: 0.2,
    },
  ];
}

/**
 * Parses a dispatch config object; absent keys take their defaults. With the local driver's default
 * types (which share this machine) and no max_instances, the instances are capped at twice the CPUs:
 * without a cap a deep queue would start an agent per container.
 */
export function parseDispatchConfig(value: unknown): DispatchConfig {
  let raw = value;
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const o = value as Record<string, unknown>;
    // The default types are sized for this machine: a cloud driver needs the cloud's.
    if (o.driver === 'ec2' && o.instance_types === undefined)
      throw new ConfigError(
        'instance_types',
        'required with the ec2 driver (`berth catalog ec2` builds them)',
      );
    const scheduler = o.scheduler;
    if (
      o.instance_types === undefined &&
      (o.driver ?? DISPATCH_OPTIONS.option('driver').default) === 'local' &&
      (scheduler === undefined ||
        (typeof scheduler === 'object' && scheduler !== null && !('max_instances' in scheduler)))
    )
      raw = { ...o, scheduler: { ...scheduler, max_instances: Math.max(4, 2 * cpus().length) } };
  }
  return DISPATCH_OPTIONS.parse(raw);
}

/** Reads a dispatch config file (none: every default); `overrides` replace top-level keys. */
export function loadDispatchConfig(
  path: string | null,
  overrides: Record<string, unknown> = {},
): DispatchConfig {
  let value: unknown = {};
  if (path) {
    try {
      value = JSON.parse(readFileSync(path, 'utf8'));
    } catch (err) {
      throw new ConfigError('', `cannot read a JSON dispatch config: ${(err as Error).message}`, {
        file: path,
      });
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      throw new ConfigError('', 'expected a JSON object', { file: path });
  }
  try {
    return parseDispatchConfig({ ...(value as object), ...overrides });
  } catch (err) {
    if (err instanceof ConfigError && path) throw err.from({ file: path });
    throw err;
  }
}
