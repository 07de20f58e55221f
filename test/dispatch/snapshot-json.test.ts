// The §6.4 snapshot parser: every field is validated, and errors name the field and what was expected.
import { describe, expect, it } from 'vitest';
import {
  parseSnapshot,
  parseSnapshotText,
  planToJson,
  SnapshotError,
} from '../../src/dispatch/snapshot-json.js';

const GiB = 1024 ** 3;

// Raw JSON as a test mutates it: deliberately loose, since the point is to feed the parser wrong shapes.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Raw = Record<string, any>;

/** The example from DESIGN §6.4. */
function example(): Raw {
  return {
    now: '2026-01-01T00:00:00Z',
    config: {
      max_instances: 10,
      max_spend_per_hour: null,
      max_price_factor: 1.5,
      max_containers_per_instance: 0,
      idle_timeout: '60s',
    },
    instance_types: [
      { name: 't1', vcpus: 1, ram: '1GiB', scratch: '1GiB', gpus: 0, price: 0.123, preemptible: false },
    ],
    instances: [
      {
        id: 'i-1',
        type: 't1',
        state: 'idle',
        idle_behavior: 'run',
        containers: [],
        state_since: '2025-12-31T23:59:00Z',
      },
    ],
    containers: [
      {
        id: 'c1',
        state: 'Queued',
        priority: 4,
        queued_at: '2025-12-31T23:00:00Z',
        vcpus: 1,
        ram: '512MiB',
        scratch: 0,
        gpus: 0,
        preemptible: false,
        instance: null,
        lock_count: 0,
      },
    ],
    cloud: { quota_max_instances: null, unavailable_types: [], rate_limited_until: null },
  };
}

/** The message parsing `mutate(example())` fails with. */
function errorOf(mutate: (s: Raw) => void): string {
  const s = example();
  mutate(s);
  try {
    parseSnapshot(s);
  } catch (err) {
    if (err instanceof SnapshotError) return err.message;
    throw err;
  }
  throw new Error('parsed without error');
}

describe('parseSnapshot', () => {
  it('reads the §6.4 example with units, and fills in documented defaults', () => {
    const s = parseSnapshot(example());
    expect(s.now.toISOString()).toBe('2026-01-01T00:00:00.000Z');
    expect(s.config).toEqual({
      maxInstances: 10,
      maxSpendPerHour: null,
      maxPriceFactor: 1.5,
      maxContainersPerInstance: 0,
      idleTimeoutMs: 60_000,
      bootTimeoutMs: 600_000,
      maxInstancesPerType: {},
      minInstances: 0,
      ramOverhead: 0,
      billingPeriodMs: 0,
      shutdownWindowMs: 0,
      onDemandAfterInterruptions: null,
      opportunisticMargin: 0.25,
      opportunisticMinObservationMs: 300_000,
      opportunisticAnyType: true,
      opportunisticVacate: true,
      maxDispatchAttempts: 10,
      maxIdleTimeMs: 600_000,
      minBillingPeriodMs: 0,
      arrivalWindowMs: 60_000,
      maxRunningPerUser: null,
      fairShare: true,
      shareRule: 'price',
      batchPacking: 'cost',
      waitForRunning: true,
      waitMarginMs: 0,
      bootAhead: 0,
      bootBudget: 4,
      bootEstimateMs: 60_000,
      warmPool: 0,
      warmPoolMaxVcpus: null,
      endAligned: 'expected',
      pairEnds: true,
    });
    expect(s.instanceTypes).toEqual([
      {
        name: 't1',
        providerType: 't1',
        vcpus: 1,
        ram: GiB,
        scratch: GiB,
        gpus: 0,
        price: 0.123,
        preemptible: false,
      },
    ]);
    expect(s.instances[0]!.createdAt.toISOString()).toBe('2025-12-31T23:59:00.000Z');
    expect(s.containers[0]).toMatchObject({
      ram: 512 * 1024 ** 2,
      instanceTypes: null,
      lockCount: 0,
      owner: '',
      spotInterruptions: 0,
    });
    expect(s.cloud).toEqual({ quotaMaxInstances: null, unavailableTypes: [], rateLimitedUntil: null });
    expect(s.arrivals).toEqual([]);
  });

  it('reads owners, spot interruptions and recent arrivals', () => {
    const raw = example() as Record<string, unknown> & { containers: Record<string, unknown>[] };
    Object.assign(raw.containers[0]!, { owner: 'alice', spot_interruptions: 2 });
    raw.arrivals = [
      { vcpus: 2, ram: '4GiB', count: 7 },
      { vcpus: 1, ram: 1024, preemptible: true, count: 0 },
    ];
    const s = parseSnapshot(raw);
    expect(s.containers[0]).toMatchObject({ owner: 'alice', spotInterruptions: 2 });
    expect(s.arrivals).toEqual([
      { vcpus: 2, ram: 4 * GiB, scratch: 0, gpus: 0, preemptible: false, instanceTypes: null, count: 7 },
      { vcpus: 1, ram: 1024, scratch: 0, gpus: 0, preemptible: true, instanceTypes: null, count: 0 },
    ]);
  });

  it('names the field of a bad owner, interruption count or arrival', () => {
    const bad = (patch: (raw: ReturnType<typeof example> & Record<string, unknown>) => void) => {
      const raw = example() as ReturnType<typeof example> & Record<string, unknown>;
      patch(raw);
      try {
        parseSnapshot(raw);
        return 'no error';
      } catch (err) {
        return (err as Error).message;
      }
    };
    expect(bad((r) => Object.assign(r.containers[0]!, { owner: 7 }))).toBe(
      'containers[0].owner: expected a string, got 7',
    );
    expect(bad((r) => Object.assign(r.containers[0]!, { spot_interruptions: -1 }))).toMatch(
      /^containers\[0\]\.spot_interruptions: expected a whole number/,
    );
    expect(bad((r) => (r.arrivals = [{ vcpus: 1, ram: '1GiB' }]))).toBe(
      'arrivals[0].count: required field is missing',
    );
    expect(bad((r) => (r.arrivals = [{ vcpus: 1, ram: '1GiB', count: 1, shape: 'x' }]))).toBe(
      'arrivals[0].shape: unknown field',
    );
    expect(bad((r) => (r.arrivals = {}))).toBe('arrivals: expected an array, got an object');
  });

  it('reads the optional config keys', () => {
    const raw = example();
    Object.assign(raw.config, {
      boot_timeout: '5m',
      max_instances_per_type: { t1: 3 },
      min_instances: 2,
      ram_overhead: '256MiB',
      billing_period: '1h',
      shutdown_window: 300,
      max_dispatch_attempts: 4,
      on_demand_after_interruptions: 2,
    });
    raw.instances[0].created_at = '2025-12-31T22:00:00Z';
    raw.instances[0].created_for = ['c-1'];
    raw.instance_types[0].provider_type = 'm5.large';
    raw.containers[0].instance_types = ['t1'];
    raw.containers[0].spot_interruptions = 3;
    const s = parseSnapshot(raw);
    expect(s.containers[0]!.spotInterruptions).toBe(3);
    expect(s.config).toMatchObject({
      bootTimeoutMs: 300_000,
      maxInstancesPerType: { t1: 3 },
      minInstances: 2,
      ramOverhead: 256 * 1024 ** 2,
      billingPeriodMs: 3_600_000,
      shutdownWindowMs: 300_000,
      maxDispatchAttempts: 4,
      onDemandAfterInterruptions: 2,
    });
    expect(s.instances[0]!.createdAt.toISOString()).toBe('2025-12-31T22:00:00.000Z');
    expect(s.instances[0]!.createdFor).toEqual(['c-1']);
    expect(s.instanceTypes[0]!.providerType).toBe('m5.large');
    expect(s.containers[0]!.instanceTypes).toEqual(['t1']);
  });

  const SIZE = 'expected a size such as 4GiB, 512MiB or a number of bytes, got "4 gigs"';
  const DURATION = 'expected a duration such as 90s, 10m, 1h30m or a number of seconds, got "soon"';
  const TIME = 'expected an RFC 3339 time such as 2026-01-01T00:00:00Z, got "yesterday"';
  const cases: [string, (s: Raw) => void, string][] = [
    ['unknown top-level field', (s) => (s.colour = 'red'), 'colour: unknown field'],
    ['missing now', (s) => delete s.now, 'now: required field is missing'],
    ['bad now', (s) => (s.now = 'yesterday'), `now: ${TIME}`],
    ['config not an object', (s) => (s.config = [1]), 'config: expected an object, got an array'],
    ['config unknown field', (s) => (s.config.colour = 1), 'config.colour: unknown field'],
    [
      'config.max_instances',
      (s) => (s.config.max_instances = 'x'),
      'config.max_instances: expected a whole number >= 0, got "x"',
    ],
    [
      'config.max_instances negative',
      (s) => (s.config.max_instances = -1),
      'config.max_instances: expected a whole number >= 0, got -1',
    ],
    [
      'config.max_spend_per_hour',
      (s) => (s.config.max_spend_per_hour = -2),
      'config.max_spend_per_hour: expected a number >= 0, got -2',
    ],
    [
      'config.max_price_factor',
      (s) => (s.config.max_price_factor = 0.5),
      'config.max_price_factor: expected a number >= 1, got 0.5',
    ],
    [
      'config.max_containers_per_instance',
      (s) => (s.config.max_containers_per_instance = 1.5),
      'config.max_containers_per_instance: expected a whole number >= 0, got 1.5',
    ],
    ['config.idle_timeout', (s) => (s.config.idle_timeout = 'soon'), `config.idle_timeout: ${DURATION}`],
    ['config.boot_timeout', (s) => (s.config.boot_timeout = 'soon'), `config.boot_timeout: ${DURATION}`],
    [
      'config.max_instances_per_type',
      (s) => (s.config.max_instances_per_type = { t1: 'x' }),
      'config.max_instances_per_type.t1: expected a whole number >= 0, got "x"',
    ],
    [
      'config.max_instances_per_type not an object',
      (s) => (s.config.max_instances_per_type = 3),
      'config.max_instances_per_type: expected an object, got 3',
    ],
    [
      'config.min_instances',
      (s) => (s.config.min_instances = true),
      'config.min_instances: expected a whole number >= 0, got true',
    ],
    ['config.ram_overhead', (s) => (s.config.ram_overhead = '4 gigs'), `config.ram_overhead: ${SIZE}`],
    [
      'config.billing_period',
      (s) => (s.config.billing_period = 'soon'),
      `config.billing_period: ${DURATION}`,
    ],
    [
      'config.shutdown_window',
      (s) => (s.config.shutdown_window = 'soon'),
      `config.shutdown_window: ${DURATION}`,
    ],
    [
      'shutdown_window longer than billing_period',
      (s) => Object.assign(s.config, { billing_period: '1m', shutdown_window: '2m' }),
      'config.shutdown_window: expected a duration no longer than billing_period',
    ],
    [
      'config.max_dispatch_attempts',
      (s) => (s.config.max_dispatch_attempts = 0),
      'config.max_dispatch_attempts: expected a whole number >= 1, got 0',
    ],
    [
      'instance_types not an array',
      (s) => (s.instance_types = {}),
      'instance_types: expected an array, got an object',
    ],
    [
      'instance_types[0] unknown field',
      (s) => (s.instance_types[0].colour = 1),
      'instance_types[0].colour: unknown field',
    ],
    [
      'instance_types[0].name',
      (s) => (s.instance_types[0].name = ''),
      'instance_types[0].name: expected a non-empty string, got ""',
    ],
    [
      'instance_types[0].provider_type',
      (s) => (s.instance_types[0].provider_type = 5),
      'instance_types[0].provider_type: expected a non-empty string, got 5',
    ],
    [
      'instance_types[0].vcpus',
      (s) => (s.instance_types[0].vcpus = 0),
      'instance_types[0].vcpus: expected a positive number of CPUs such as 1, 0.5 or 16, got 0',
    ],
    ['instance_types[0].ram', (s) => (s.instance_types[0].ram = '4 gigs'), `instance_types[0].ram: ${SIZE}`],
    [
      'instance_types[0].scratch',
      (s) => (s.instance_types[0].scratch = '4 gigs'),
      `instance_types[0].scratch: ${SIZE}`,
    ],
    [
      'instance_types[0].gpus',
      (s) => (s.instance_types[0].gpus = 0.5),
      'instance_types[0].gpus: expected a whole number >= 0, got 0.5',
    ],
    [
      'instance_types[0].price missing',
      (s) => delete s.instance_types[0].price,
      'instance_types[0].price: required field is missing',
    ],
    [
      'instance_types[0].preemptible',
      (s) => (s.instance_types[0].preemptible = 'no'),
      'instance_types[0].preemptible: expected true or false, got "no"',
    ],
    [
      'duplicate type',
      (s) => s.instance_types.push({ ...s.instance_types[0] }),
      'instance_types[1]: duplicate id "t1"',
    ],
    ['instances[0] unknown field', (s) => (s.instances[0].colour = 1), 'instances[0].colour: unknown field'],
    [
      'instances[0].id',
      (s) => (s.instances[0].id = null),
      'instances[0].id: expected a non-empty string, got null',
    ],
    ['instances[0].type', (s) => delete s.instances[0].type, 'instances[0].type: required field is missing'],
    [
      'instances[0].state',
      (s) => (s.instances[0].state = 'sleeping'),
      'instances[0].state: expected one of booting, unknown, idle, running, shutdown, destroy_pending, gone, got "sleeping"',
    ],
    [
      'instances[0].created_for',
      (s) => (s.instances[0].created_for = ['c-1', 7]),
      'instances[0].created_for[1]: expected a non-empty string, got 7',
    ],
    [
      'instances[0].idle_behavior',
      (s) => (s.instances[0].idle_behavior = 'nap'),
      'instances[0].idle_behavior: expected one of run, hold, drain, got "nap"',
    ],
    [
      'instances[0].containers',
      (s) => (s.instances[0].containers = 'c1'),
      'instances[0].containers: expected an array, got "c1"',
    ],
    [
      'instances[0].containers[0]',
      (s) => (s.instances[0].containers = [7]),
      'instances[0].containers[0]: expected a non-empty string, got 7',
    ],
    [
      'instances[0].state_since',
      (s) => (s.instances[0].state_since = 'yesterday'),
      `instances[0].state_since: ${TIME}`,
    ],
    [
      'instances[0].created_at',
      (s) => (s.instances[0].created_at = 'yesterday'),
      `instances[0].created_at: ${TIME}`,
    ],
    [
      'duplicate instance',
      (s) => s.instances.push({ ...s.instances[0] }),
      'instances[1]: duplicate id "i-1"',
    ],
    ['containers not an array', (s) => (s.containers = null), 'containers: expected an array, got null'],
    [
      'containers[0] unknown field',
      (s) => (s.containers[0].colour = 'red'),
      'containers[0].colour: unknown field',
    ],
    [
      'containers[0].id',
      (s) => (s.containers[0].id = 3),
      'containers[0].id: expected a non-empty string, got 3',
    ],
    [
      'containers[0].state',
      (s) => (s.containers[0].state = 'Complete'),
      'containers[0].state: expected one of Queued, Locked, Running, got "Complete"',
    ],
    [
      'containers[0].priority',
      (s) => (s.containers[0].priority = 1001),
      'containers[0].priority: expected a whole number from 0 to 1000, got 1001',
    ],
    [
      'containers[0].queued_at',
      (s) => (s.containers[0].queued_at = 'yesterday'),
      `containers[0].queued_at: ${TIME}`,
    ],
    [
      'containers[0].vcpus',
      (s) => (s.containers[0].vcpus = 'many'),
      'containers[0].vcpus: expected a positive number of CPUs such as 1, 0.5 or 16, got "many"',
    ],
    ['containers[0].ram', (s) => (s.containers[0].ram = '4 gigs'), `containers[0].ram: ${SIZE}`],
    [
      'containers[0].scratch',
      (s) => (s.containers[0].scratch = -1),
      'containers[0].scratch: expected a size such as 4GiB, 512MiB or a number of bytes, got -1',
    ],
    [
      'containers[0].gpus',
      (s) => (s.containers[0].gpus = -1),
      'containers[0].gpus: expected a whole number >= 0, got -1',
    ],
    [
      'containers[0].preemptible',
      (s) => (s.containers[0].preemptible = 1),
      'containers[0].preemptible: expected true or false, got 1',
    ],
    [
      'containers[0].instance_types',
      (s) => (s.containers[0].instance_types = 't1'),
      'containers[0].instance_types: expected an array, got "t1"',
    ],
    [
      'containers[0].instance_types[0]',
      (s) => (s.containers[0].instance_types = [1]),
      'containers[0].instance_types[0]: expected a non-empty string, got 1',
    ],
    [
      'containers[0].instance',
      (s) => (s.containers[0].instance = 5),
      'containers[0].instance: expected a non-empty string, got 5',
    ],
    [
      'a Queued container with an instance',
      (s) => (s.containers[0].instance = 'i-1'),
      'containers[0].instance: expected null for a Queued container, got "i-1"',
    ],
    [
      'a Running container without an instance',
      (s) => (s.containers[0].state = 'Running'),
      'containers[0].instance: expected the instance a Running container runs on, got null',
    ],
    [
      'containers[0].lock_count',
      (s) => (s.containers[0].lock_count = -1),
      'containers[0].lock_count: expected a whole number >= 0, got -1',
    ],
    [
      'duplicate container',
      (s) => s.containers.push({ ...s.containers[0] }),
      'containers[1]: duplicate id "c1"',
    ],
    ['cloud unknown field', (s) => (s.cloud.colour = 1), 'cloud.colour: unknown field'],
    [
      'cloud.quota_max_instances',
      (s) => (s.cloud.quota_max_instances = -1),
      'cloud.quota_max_instances: expected a whole number >= 0, got -1',
    ],
    [
      'cloud.unavailable_types',
      (s) => (s.cloud.unavailable_types = 't1'),
      'cloud.unavailable_types: expected an array, got "t1"',
    ],
    [
      'cloud.rate_limited_until',
      (s) => (s.cloud.rate_limited_until = 'yesterday'),
      `cloud.rate_limited_until: ${TIME}`,
    ],
  ];

  it.each(cases)('rejects %s', (_name, mutate, message) => {
    expect(errorOf(mutate)).toBe(message);
  });

  it('names the index of a bad container in a longer list', () => {
    expect(
      errorOf((s) => {
        for (const id of ['c2', 'c3', 'c4']) s.containers.push({ ...s.containers[0], id });
        s.containers[3].colour = 'blue';
      }),
    ).toBe('containers[3].colour: unknown field');
  });

  it('rejects text that is not JSON, or JSON that is not an object', () => {
    expect(() => parseSnapshotText('{')).toThrow(/^snapshot: not valid JSON: /);
    expect(() => parseSnapshotText('[]')).toThrow('snapshot: expected an object, got an array');
  });
});

describe('planToJson', () => {
  it('sorts status keys and keeps action field order', () => {
    const text = planToJson({
      actions: [{ op: 'start', container: 'c1', instance: 'i-1' }],
      status: new Map([
        ['b', 'x'],
        ['a', 'y'],
      ]),
    });
    expect(text).toBe(
      '{"actions":[{"op":"start","container":"c1","instance":"i-1"}],"status":{"a":"y","b":"x"}}',
    );
  });
});
