// `npm run bench -- scheduler --queued N --instances M --types K [--json] [--seed S] [--min-reps R]
//  [--expected X] [--set key=value …]`
//
// Times plan() on a seeded random snapshot: K instance types, M instances mostly busy with running
// containers, N queued containers of mixed shapes and priorities, max_instances a little above M so
// that a pass creates some instances and then hits the limit. Also times the steady-state "no-change"
// pass: the plan is applied (locks, starts, creates that became instances) with max_instances set to
// the resulting count, so the next pass can place nothing and only computes statuses.
// `--expected X` gives a share X of the containers an expected run time (what end_aligned and pair_ends
// read; none by default, as in a queue whose submitters pass no run time); `--set` changes a scheduler
// option of the snapshot's config (its config file key, e.g. `--set pair_ends=false`).
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { ConfigError } from '../src/config/declare.js';
import { SCHEDULER_OPTIONS } from '../src/config/scheduler.js';
import { seededRng, type Rng } from '../src/model/clock.js';
import type { InstanceType } from '../src/model/types.js';
import { plan } from '../src/dispatch/scheduler/plan.js';
import { IncrementalPlanner } from '../src/dispatch/scheduler/incremental.js';
import type { Plan, Snapshot, SnapshotContainer, SnapshotInstance } from '../src/dispatch/scheduler/types.js';
import { benchArgs, opt, UsageError, type Values } from './args.js';

const GiB = 1024 ** 3;
const NOW = new Date('2026-01-01T00:00:00Z');

const OPTIONS = {
  queued: opt.int(10_000, 'Queued containers', 0),
  instances: opt.int(1_000, 'instances', 0),
  types: opt.int(50, 'instance types', 0),
  json: opt.flag('print JSON'),
  seed: opt.int(1, 'seed of the random snapshot', 0),
  'min-reps': opt.int(5, 'timed passes at the least', 0),
  expected: opt.number(0, 'share (0 to 1) of the containers with an expected run time', false),
  set: opt.repeated('a scheduler option of the snapshot, key=value (the value as JSON, else as text)'),
};
export type Args = Values<typeof OPTIONS>;

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)]!;

function buildTypes(k: number, rng: Rng): InstanceType[] {
  return Array.from({ length: k }, (_, i) => {
    const vcpus = pick(rng, [1, 2, 4, 8, 16, 32, 64]);
    const perCpu = pick(rng, [2, 4, 8]);
    const gpus = rng() < 0.1 ? pick(rng, [1, 4]) : 0;
    const preemptible = rng() < 0.3;
    const price =
      Math.round(
        vcpus * (0.02 + perCpu * 0.005) * (1 + gpus) * (preemptible ? 0.4 : 1) * (0.9 + rng() * 0.2) * 1e4,
      ) / 1e4;
    return {
      name: `type-${i}`,
      providerType: `type-${i}`,
      vcpus,
      ram: vcpus * perCpu * GiB,
      scratch: 500 * GiB,
      gpus,
      price,
      preemptible,
    };
  });
}

const SHAPES = Array.from({ length: 30 }, (_, i) => ({
  vcpus: [0.5, 1, 2, 4, 8][i % 5]!,
  ram: [1, 2, 4, 8, 16, 32][Math.floor(i / 5)]! * GiB,
  gpus: i === 29 ? 1 : 0,
}));

export function shapeContainer(id: string, rng: Rng, extra: Partial<SnapshotContainer>): SnapshotContainer {
  const s = pick(rng, SHAPES);
  return {
    id,
    state: 'Queued',
    priority: pick(rng, [1, 1, 1, 2, 2, 3, 5, 8, 10, 100]),
    queuedAt: new Date(NOW.getTime() - Math.floor(rng() * 86_400) * 1000),
    vcpus: s.vcpus,
    ram: s.ram,
    scratch: 0,
    gpus: s.gpus,
    preemptible: rng() < 0.3,
    instanceTypes: null,
    instance: null,
    lockCount: 0,
    owner: '',
    spotInterruptions: 0,
    ...extra,
  };
}

export function buildSnapshot(a: Args): Snapshot {
  const rng = seededRng(a.seed);
  const types = buildTypes(a.types, rng);
  const instances: SnapshotInstance[] = [];
  const containers: SnapshotContainer[] = [];
  for (let i = 0; i < a.instances; i++) {
    const t = pick(rng, types);
    const id = `i-${i}`;
    const state = rng() < 0.9 ? 'running' : pick(rng, ['idle', 'booting', 'unknown'] as const);
    const inst: SnapshotInstance = {
      id,
      type: t.name,
      state,
      idleBehavior: rng() < 0.02 ? 'hold' : 'run',
      containers: [],
      stateSince: new Date(NOW.getTime() - Math.floor(rng() * 3600) * 1000),
      createdAt: new Date(NOW.getTime() - 7200_000),
    };
    if (state === 'running') {
      // Fill to 70-100% of the type's cpus with running containers.
      let cpu = t.vcpus * (0.7 + rng() * 0.3);
      let ram = t.ram;
      for (let k = 0; cpu > 0; k++) {
        const c = shapeContainer(`r-${i}-${k}`, rng, { state: 'Running', instance: id, lockCount: 1 });
        if (c.vcpus > cpu || c.ram > ram || c.gpus > t.gpus) break;
        cpu -= c.vcpus;
        ram -= c.ram;
        containers.push(c);
        inst.containers.push(c.id);
      }
    }
    instances.push(inst);
  }
  for (let n = 0; n < a.queued; n++) containers.push(shapeContainer(`q-${n}`, rng, {}));
  expectRuns(containers, a);
  return {
    now: NOW,
    config: schedulerConfig(a),
    instanceTypes: types,
    instances,
    containers,
    cloud: { quotaMaxInstances: null, unavailableTypes: [pick(rng, types).name], rateLimitedUntil: null },
    arrivals: [],
  };
}

/**
 * Gives a share `--expected` of the containers an expected run time of 1 min to 2 h (and the Running ones
 * among them a start in the last hour), from a generator of their own: the rest of the snapshot is the
 * same as without.
 */
function expectRuns(containers: SnapshotContainer[], a: Args): void {
  if (a.expected > 1) throw new UsageError(`--expected: expected a share from 0 to 1, got ${a.expected}`);
  if (a.expected === 0) return;
  const rng = seededRng(a.seed + 1_000_003);
  for (const c of containers) {
    if (rng() >= a.expected) continue;
    c.expectedRunMs = pick(rng, [1, 2, 5, 10, 30, 60, 120]) * 60_000;
    if (c.state === 'Running') c.startedAt = new Date(NOW.getTime() - Math.floor(rng() * 3600) * 1000);
  }
}

/** The snapshot's scheduler config: max_instances a little above M, 256 MiB overhead, then `--set`. */
function schedulerConfig(a: Args): Snapshot['config'] {
  const raw: Record<string, unknown> = {
    max_instances: a.instances + Math.ceil(a.instances / 20),
    ram_overhead: '256MiB',
  };
  for (const kv of a.set) {
    const eq = kv.indexOf('=');
    if (eq <= 0) throw new UsageError(`--set: expected key=value, got ${JSON.stringify(kv)}`);
    const text = kv.slice(eq + 1);
    let value: unknown = text;
    try {
      value = JSON.parse(text);
    } catch {
      // Not JSON: the text itself (a duration such as 5m).
    }
    raw[kv.slice(0, eq)] = value;
  }
  try {
    return SCHEDULER_OPTIONS.parse(raw);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(`--set: ${err.message}`);
    throw err;
  }
}

/** The world after the act layer carried out `p`: the next pass's input. */
export function applied(s: Snapshot, p: Plan): Snapshot {
  const byId = new Map(s.containers.map((c) => [c.id, { ...c }]));
  const instances = new Map(s.instances.map((i) => [i.id, { ...i, containers: [...i.containers] }]));
  let n = 0;
  for (const a of p.actions) {
    if (a.op === 'lock') byId.get(a.container)!.state = 'Locked';
    else if (a.op === 'start') {
      byId.get(a.container)!.instance = a.instance;
      instances.get(a.instance)!.containers.push(a.container);
    } else if (a.op === 'unlock') Object.assign(byId.get(a.container)!, { state: 'Queued', instance: null });
    else if (a.op === 'cancel' || a.op === 'kill') byId.delete(a.container);
    else if (a.op === 'shutdown') instances.delete(a.instance);
    else if (a.op === 'create') {
      const id = `new-${n++}`;
      instances.set(id, {
        id,
        type: a.type,
        state: 'booting',
        idleBehavior: 'run',
        containers: [],
        stateSince: s.now,
        createdAt: s.now,
      });
    }
  }
  return {
    ...s,
    config: { ...s.config, maxInstances: instances.size },
    containers: [...byId.values()],
    instances: [...instances.values()],
  };
}

interface Timing {
  median_ms: number;
  p99_ms: number;
  /** CPU time of the process per pass (all threads, so GC helpers count): less sensitive to other load. */
  cpu_median_ms: number;
  reps: number;
}

function time(
  s: Snapshot,
  minReps: number,
  planner: (s: Snapshot) => Plan = plan,
  /** Run untimed before each timed pass. */
  before: () => void = () => {},
): { timing: Timing; last: Plan } {
  const samples: number[] = [];
  const cpu: number[] = [];
  let last: Plan | null = null;
  const budget = performance.now() + 10_000;
  // At least minReps passes, more while they are cheap (up to 200 or 10 s).
  while (samples.length < minReps || (samples.length < 200 && performance.now() < budget)) {
    before();
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    last = planner(s);
    samples.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
  samples.sort((x, y) => x - y);
  cpu.sort((x, y) => x - y);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.ceil(q * samples.length) - 1)]!;
  const r = (x: number) => Math.round(x * 100) / 100;
  return {
    timing: {
      median_ms: r(at(0.5)),
      p99_ms: r(at(0.99)),
      cpu_median_ms: r(cpu[Math.floor(cpu.length / 2)]!),
      reps: samples.length,
    },
    last: last!,
  };
}

export async function run(argv: string[]): Promise<number> {
  const args = benchArgs('scheduler', argv, OPTIONS);
  const s = buildSnapshot(args);
  const first = time(s, args['min-reps']);
  const count = (p: Plan, op: string) => p.actions.filter((a) => a.op === op).length;
  const steady = applied(s, first.last);
  const still = time(steady, args['min-reps']);
  const placedAgain = count(still.last, 'start') + count(still.last, 'lock') + count(still.last, 'create');
  // The dispatcher's pass with nothing changed: the incremental planner, handed a new snapshot object
  // made of the same parts (as the container view hands over the same array).
  const incremental = new IncrementalPlanner();
  incremental.plan(steady);
  const reuse = time(steady, args['min-reps'], (snap) => incremental.plan({ ...snap }));
  const reuseStats = { ...incremental.stats };
  // The dispatcher's pass after the smallest change: one container arrived (a new array with one more
  // container, the others the same objects). Any change is a full pass, with what the planner keeps
  // across passes (kept.ts: the queue order and facts, into which it merges the change), which this shows.
  const arrival = shapeContainer('q-arrival', seededRng(args.seed + 7), { queuedAt: steady.now });
  const arrived = { ...steady, containers: [...steady.containers, arrival] };
  // Each timed pass follows an untimed pass over the steady snapshot, so that it sees the one change.
  const one = time(
    arrived,
    args['min-reps'],
    (snap) => incremental.plan({ ...snap }),
    () => incremental.plan({ ...steady }),
  );
  // The pass after a container started (Locked → Running on its instance, which lists it already): what a
  // dispatcher sees most. Its instance's group of assigned containers changes (kept-pool.ts), not the queue.
  // The timed passes alternate as above: one start, then the same container Locked again.
  const k = steady.containers.findIndex((c) => c.state === 'Locked' && c.instance !== null);
  let oneStart: Timing | null = null;
  if (k >= 0) {
    const containers = [...steady.containers];
    containers[k] = { ...containers[k]!, state: 'Running', startedAt: steady.now };
    const started = { ...steady, containers };
    oneStart = time(
      started,
      args['min-reps'],
      (snap) => incremental.plan({ ...snap }),
      () => incremental.plan({ ...steady }),
    ).timing;
  }
  const result = {
    queued: args.queued,
    instances: args.instances,
    types: args.types,
    expected: args.expected,
    set: args.set,
    containers_total: s.containers.length,
    ...first.timing,
    actions: {
      lock: count(first.last, 'lock'),
      start: count(first.last, 'start'),
      create: count(first.last, 'create'),
      shutdown: count(first.last, 'shutdown'),
    },
    no_change_median_ms: still.timing.median_ms,
    no_change_cpu_median_ms: still.timing.cpu_median_ms,
    no_change_p99_ms: still.timing.p99_ms,
    no_change_reps: still.timing.reps,
    no_change_placements: placedAgain,
    incremental_no_change_median_ms: reuse.timing.median_ms,
    one_arrival_median_ms: one.timing.median_ms,
    one_arrival_cpu_median_ms: one.timing.cpu_median_ms,
    one_start_median_ms: oneStart?.median_ms ?? null,
    one_start_cpu_median_ms: oneStart?.cpu_median_ms ?? null,
    incremental_reused: reuseStats.reused,
    incremental_full: reuseStats.full,
    rss_mb: Math.round(process.memoryUsage().rss / 1024 ** 2),
    // The machine is shared: a load average above the core count inflates wall times.
    loadavg_1m: Math.round(loadavg()[0]! * 100) / 100,
  };
  if (args.json) console.log(JSON.stringify(result));
  else
    console.log(
      `queued=${result.queued} instances=${result.instances} types=${result.types}` +
        `${result.expected > 0 ? ` expected=${result.expected}` : ''}${result.set.map((kv) => ` ${kv}`).join('')}: ` +
        `median_ms=${result.median_ms} p99_ms=${result.p99_ms} cpu_median_ms=${result.cpu_median_ms} (reps=${result.reps}) ` +
        `no_change_median_ms=${result.no_change_median_ms} no_change_p99_ms=${result.no_change_p99_ms} ` +
        `no_change_cpu_median_ms=${result.no_change_cpu_median_ms} no_change_placements=${result.no_change_placements} ` +
        `incremental_no_change_median_ms=${result.incremental_no_change_median_ms} ` +
        `(reused ${result.incremental_reused}, full ${result.incremental_full}) ` +
        `one_arrival_median_ms=${result.one_arrival_median_ms} one_arrival_cpu_median_ms=${result.one_arrival_cpu_median_ms} ` +
        `one_start_median_ms=${result.one_start_median_ms} one_start_cpu_median_ms=${result.one_start_cpu_median_ms} ` +
        `rss_mb=${result.rss_mb} loadavg=${result.loadavg_1m} actions=${JSON.stringify(result.actions)}`,
    );
  return 0;
}
