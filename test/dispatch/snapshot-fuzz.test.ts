// Fuzzing the `berth plan` input path (DESIGN §6.4): random JSON, mutated valid snapshots and damaged
// snapshot text must each end in either a valid Plan or a SnapshotError naming a path, never in another
// exception. BERTH_FUZZ_RUNS sets the case count of each property (CI: 10,000).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { Plan } from '../../src/dispatch/scheduler/types.js';
import {
  parseSnapshot,
  parseSnapshotText,
  planToJson,
  SnapshotError,
} from '../../src/dispatch/snapshot-json.js';

const RUNS = Number(process.env.BERTH_FUZZ_RUNS ?? 400);
// About 0.1 ms a case here (30,000 cases in ~7 s); the limit leaves room for slow CI machines.
const TIMEOUT = { timeout: Math.max(60_000, RUNS * 10) };

// Raw JSON as the fuzzer builds and damages it: deliberately loose.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Raw = any;

const OPS = new Set(['create', 'lock', 'start', 'unlock', 'cancel', 'shutdown', 'kill']);

/** What a run of the parser and the scheduler ended in; throws (failing the property) on anything else. */
function outcome(run: () => Plan): { plan: Plan } | { error: SnapshotError } {
  try {
    return { plan: run() };
  } catch (err) {
    if (err instanceof SnapshotError) return { error: err };
    throw new Error(`not a SnapshotError: ${(err as Error)?.stack ?? String(err)}`);
  }
}

/** Parses and plans `value`, asserting the outcome is a well-formed plan or an error with a path. */
function check(run: () => Plan, containerIds: () => Set<string> | null): 'plan' | 'error' {
  const r = outcome(run);
  if ('error' in r) {
    // The one empty path is an unknown field whose name is the empty string (its path is its name).
    if (r.error.path === '') expect(r.error.problem).toBe('unknown field');
    expect(r.error.problem.length).toBeGreaterThan(0);
    expect(r.error.message).toBe(`${r.error.path}: ${r.error.problem}`);
    return 'error';
  }
  const out = JSON.parse(planToJson(r.plan)) as { actions: Raw[]; status: Record<string, unknown> };
  expect(Array.isArray(out.actions)).toBe(true);
  const ids = containerIds();
  for (const a of out.actions) {
    expect(OPS.has(a.op), JSON.stringify(a)).toBe(true);
    if (ids && typeof a.container === 'string') expect(ids.has(a.container), JSON.stringify(a)).toBe(true);
  }
  for (const v of Object.values(out.status)) expect(typeof v).toBe('string');
  return 'plan';
}

const ids = (prefix: string) => fc.constantFrom(`${prefix}1`, `${prefix}2`, `${prefix}3`, `${prefix}4`);
const time = fc
  .integer({ min: Date.parse('2025-12-31T00:00:00Z'), max: Date.parse('2026-01-01T01:00:00Z') })
  .map((ms) => new Date(ms).toISOString());
const size = fc.oneof(
  fc.nat(64 * 1024 ** 3),
  fc.constantFrom('0', '512MiB', '1GiB', '4GiB', '32GiB', '1.5GiB', '100MB'),
);
const vcpus = fc.oneof(fc.constantFrom(0.25, 0.5, 1, 2, 4, 16), fc.integer({ min: 0, max: 64 }));

const typeArb = fc.record(
  {
    name: ids('t'),
    provider_type: fc.constantFrom('m5.large', 'c5.xlarge'),
    vcpus,
    ram: size,
    scratch: size,
    gpus: fc.nat(4),
    price: fc.double({ min: 0, max: 10, noNaN: true }),
    preemptible: fc.boolean(),
  },
  { requiredKeys: ['name', 'vcpus', 'ram', 'price'] },
);

const instanceArb = fc.record(
  {
    id: ids('i-'),
    type: ids('t'),
    state: fc.constantFrom('booting', 'unknown', 'idle', 'running', 'shutdown', 'gone'),
    idle_behavior: fc.constantFrom('run', 'hold', 'drain'),
    containers: fc.uniqueArray(ids('c'), { maxLength: 3 }),
    state_since: time,
    created_at: time,
  },
  { requiredKeys: ['id', 'type', 'state', 'state_since'] },
);

const containerArb = fc
  .record(
    {
      id: ids('c'),
      state: fc.constantFrom('Queued', 'Locked', 'Running'),
      priority: fc.integer({ min: 0, max: 1000 }),
      queued_at: time,
      vcpus,
      ram: size,
      scratch: size,
      gpus: fc.nat(2),
      preemptible: fc.boolean(),
      instance_types: fc.option(fc.uniqueArray(ids('t'), { minLength: 1, maxLength: 3 })),
      instance: fc.option(ids('i-')),
      lock_count: fc.nat(12),
    },
    { requiredKeys: ['id', 'state', 'priority', 'queued_at', 'vcpus', 'ram'] },
  )
  // The parser insists on these two; keep most generated snapshots valid so that the plan runs.
  .map((c: Raw) => {
    if (c.state === 'Queued') c.instance = null;
    if (c.state === 'Running' && !c.instance) c.instance = 'i-1';
    return c;
  });

const configArb = fc.record(
  {
    max_instances: fc.option(fc.nat(20)),
    max_spend_per_hour: fc.option(fc.double({ min: 0, max: 5, noNaN: true })),
    max_price_factor: fc.double({ min: 1, max: 4, noNaN: true }),
    max_containers_per_instance: fc.nat(4),
    idle_timeout: fc.constantFrom('0s', '30s', '60s', 90, '10m'),
    boot_timeout: fc.constantFrom('1m', '10m', 60),
    max_instances_per_type: fc.dictionary(ids('t'), fc.nat(5)),
    min_instances: fc.nat(3),
    ram_overhead: fc.constantFrom(0, '256MiB'),
    billing_period: fc.constantFrom(0, '1h'),
    shutdown_window: fc.constantFrom(0, '5m'),
    max_dispatch_attempts: fc.integer({ min: 1, max: 12 }),
  },
  { requiredKeys: [] },
);

const cloudArb = fc.record(
  {
    quota_max_instances: fc.option(fc.nat(10)),
    unavailable_types: fc.uniqueArray(ids('t'), { maxLength: 2 }),
    rate_limited_until: fc.option(time),
  },
  { requiredKeys: [] },
);

/** Snapshots in the §6.4 shape, ids unique (mostly parseable), references free to dangle. */
const snapshotArb = fc.record(
  {
    now: time,
    config: configArb,
    instance_types: fc.uniqueArray(typeArb, { selector: (t: Raw) => t.name, maxLength: 4 }),
    instances: fc.uniqueArray(instanceArb, { selector: (i: Raw) => i.id, maxLength: 4 }),
    containers: fc.uniqueArray(containerArb, { selector: (c: Raw) => c.id, maxLength: 4 }),
    cloud: cloudArb,
  },
  { requiredKeys: ['now'] },
);

/** Every path (as key lists) to a value inside `v`. */
function paths(v: Raw, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [prefix];
  if (Array.isArray(v)) v.forEach((x, i) => out.push(...paths(x, [...prefix, i])));
  else if (v !== null && typeof v === 'object')
    for (const k of Object.keys(v)) out.push(...paths(v[k], [...prefix, k]));
  return out;
}

type Mutation =
  | { kind: 'replace'; at: number; value: unknown }
  | { kind: 'delete'; at: number }
  | { kind: 'add'; at: number; key: string; value: unknown }
  | { kind: 'duplicate'; at: number };

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({
    kind: fc.constant('replace' as const),
    at: fc.nat(),
    value: fc.oneof(
      fc.jsonValue({ maxDepth: 2 }),
      fc.constantFrom(-1, 0, 1.5, 1e308, -0, '', 'x', '4 gigs', 'soon', 'yesterday', '-1GiB', '1e999'),
      fc.constantFrom(Number.MAX_SAFE_INTEGER + 2, 2 ** 53, '99999999999999999999GiB', '9999999h'),
    ),
  }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }),
  fc.record({
    kind: fc.constant('add' as const),
    at: fc.nat(),
    key: fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('__proto__', 'constructor', 'toString')),
    value: fc.jsonValue({ maxDepth: 1 }),
  }),
  fc.record({ kind: fc.constant('duplicate' as const), at: fc.nat() }),
);

/** Applies one mutation at the (at mod count)-th path of the value; returns the new root. */
function mutate(root: Raw, m: Mutation): Raw {
  const all = paths(root);
  const path = all[m.at % all.length]!;
  if (path.length === 0) {
    if (m.kind === 'replace') return m.value;
    if (m.kind === 'add') return { ...root, [m.key]: m.value };
    return m.kind === 'delete' ? undefined : root;
  }
  let parent = root;
  for (const k of path.slice(0, -1)) parent = parent[k];
  const key = path[path.length - 1]!;
  const target = parent[key];
  switch (m.kind) {
    case 'replace':
      parent[key] = m.value;
      break;
    case 'delete':
      if (Array.isArray(parent)) parent.splice(key as number, 1);
      else delete parent[key];
      break;
    case 'add':
      if (target !== null && typeof target === 'object' && !Array.isArray(target))
        // defineProperty, so that '__proto__' becomes an own field as JSON.parse would make it
        Object.defineProperty(target, m.key, {
          value: m.value,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      else if (Array.isArray(target)) target.push(m.value);
      break;
    case 'duplicate':
      if (Array.isArray(parent)) parent.push(structuredClone(target));
      else if (Array.isArray(target) && target.length > 0) target.push(structuredClone(target[0]));
      break;
  }
  return root;
}

function containerIdsOf(raw: Raw): () => Set<string> | null {
  return () =>
    Array.isArray(raw?.containers)
      ? new Set(raw.containers.map((c: Raw) => c?.id).filter((x: unknown) => typeof x === 'string'))
      : null;
}

describe('berth plan input fuzz', () => {
  it('generated snapshots: a valid plan or a SnapshotError naming a path', TIMEOUT, () => {
    let planned = 0;
    fc.assert(
      fc.property(snapshotArb, (raw) => {
        if (check(() => plan(parseSnapshot(raw)), containerIdsOf(raw)) === 'plan') planned++;
      }),
      { numRuns: RUNS, seed: 101 },
    );
    // The generator is meant to reach the scheduler, not only the parser.
    expect(planned).toBeGreaterThan(RUNS / 4);
  });

  it(
    'mutated snapshots (replaced, deleted, added, duplicated fields): a plan or a SnapshotError',
    TIMEOUT,
    () => {
      fc.assert(
        fc.property(snapshotArb, fc.array(mutationArb, { minLength: 1, maxLength: 4 }), (raw, muts) => {
          let s = raw;
          for (const m of muts) s = mutate(s, m);
          check(() => plan(parseSnapshot(s)), containerIdsOf(s));
        }),
        { numRuns: RUNS, seed: 202 },
      );
    },
  );

  it('random JSON values and damaged snapshot text: a plan or a SnapshotError', TIMEOUT, () => {
    const damaged = fc
      .tuple(snapshotArb, fc.nat(), fc.nat(20), fc.string({ maxLength: 4 }))
      .map(([raw, at, cut, insert]) => {
        const text = JSON.stringify(raw);
        const i = at % (text.length + 1);
        return text.slice(0, i) + insert + text.slice(i + cut);
      });
    fc.assert(
      fc.property(fc.oneof(damaged, fc.json({ maxDepth: 3 }), fc.string({ maxLength: 40 })), (text) => {
        let value: Raw = null;
        try {
          value = JSON.parse(text);
        } catch {
          /* the parser must say so itself */
        }
        check(() => plan(parseSnapshotText(text)), containerIdsOf(value));
      }),
      { numRuns: RUNS, seed: 303 },
    );
  });
});
