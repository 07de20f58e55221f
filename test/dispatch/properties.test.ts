// Invariants over random snapshots (fast-check): resources and limits never exceeded, no container
// placed twice, nothing placed where it must not be, and the same input always gives the same bytes.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { seededRng, type Rng } from '../../src/model/clock.js';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type {
  Plan,
  Snapshot,
  SnapshotContainer,
  SnapshotInstance,
} from '../../src/dispatch/scheduler/types.js';
import { planToJson } from '../../src/dispatch/snapshot-json.js';
import { INSTANCE_STATES, IDLE_BEHAVIORS, type InstanceType } from '../../src/model/types.js';
import { ago, ctr, DEFAULT_CONFIG, GiB, inst, NOW, type } from './builders.js';

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)]!;

/** A random but consistent snapshot: existing assignments never over-commit an instance. */
function randomSnapshot(seed: number): Snapshot {
  const rng = seededRng(seed);
  const types: InstanceType[] = Array.from({ length: 1 + Math.floor(rng() * 4) }, (_, i) =>
    type(
      `t${i}`,
      pick(rng, [1, 2, 4, 8]),
      pick(rng, [1, 2, 4, 8, 16]),
      pick(rng, [0.05, 0.1, 0.2, 0.5, 1, 2]),
      {
        gpus: pick(rng, [0, 0, 1]),
        preemptible: rng() < 0.3,
      },
    ),
  );
  const config = {
    ...DEFAULT_CONFIG,
    maxInstances: pick(rng, [null, 0, 1, 2, 4, 6]),
    maxSpendPerHour: pick(rng, [null, 0.3, 1, 3]),
    maxPriceFactor: pick(rng, [1, 1.5, 3]),
    maxContainersPerInstance: pick(rng, [0, 0, 1, 2, 3]),
    minInstances: pick(rng, [0, 0, 1, 2]),
    ramOverhead: pick(rng, [0, GiB / 4]),
    maxInstancesPerType: (rng() < 0.3 ? { t0: 1 } : {}) as Record<string, number>,
    billingPeriodMs: pick(rng, [0, 3_600_000]),
    shutdownWindowMs: pick(rng, [0, 300_000]),
    maxDispatchAttempts: pick(rng, [3, 10]),
  };
  const typeNames = [...types.map((t) => t.name), 'old'];
  const instances: SnapshotInstance[] = Array.from({ length: Math.floor(rng() * 7) }, (_, i) =>
    inst(`i-${i}`, pick(rng, typeNames), pick(rng, INSTANCE_STATES), {
      idleBehavior: pick(rng, [...IDLE_BEHAVIORS, 'run', 'run']),
      stateSince: ago(Math.floor(rng() * 1200)),
      createdAt: ago(1200 + Math.floor(rng() * 4000)),
    }),
  );
  // Free capacity per instance while assigning existing containers.
  const free = new Map(
    instances.map((i) => {
      const t = types.find((x) => x.name === i.type);
      return [i.id, t ? { mcpu: t.vcpus * 1000, ram: t.ram - config.ramOverhead, gpus: t.gpus, n: 0 } : null];
    }),
  );
  const containers: SnapshotContainer[] = [];
  const n = Math.floor(rng() * 26);
  for (let k = 0; k < n; k++) {
    const c = ctr(`c${k}`, {
      state: pick(rng, ['Queued', 'Queued', 'Locked', 'Running'] as const),
      priority: pick(rng, [0, 1, 1, 2, 3, 5]),
      queuedAt: ago(Math.floor(rng() * 5) * 60),
      vcpus: pick(rng, [0.5, 1, 2, 3]),
      ram: pick(rng, [0.5, 1, 3, 10]) * GiB,
      gpus: pick(rng, [0, 0, 0, 1]),
      preemptible: rng() < 0.3,
      instanceTypes: rng() < 0.15 ? [pick(rng, typeNames)] : null,
      lockCount: pick(rng, [0, 0, 1, 9, 11]),
    });
    if (c.state !== 'Queued' && (c.state === 'Running' || rng() < 0.5)) {
      const target = pick(rng, [...instances, null]);
      const f = target ? free.get(target.id) : null;
      const max = config.maxContainersPerInstance;
      const mcpu = Math.round(c.vcpus * 1000);
      // Only Locked containers wait on booting instances; Running ones run where an agent is up.
      const canRun = target !== null && ['idle', 'running', 'unknown'].includes(target.state);
      if (
        target &&
        f &&
        target.state !== 'gone' &&
        (c.state === 'Locked' || canRun) &&
        mcpu <= f.mcpu &&
        c.ram <= f.ram &&
        c.gpus <= f.gpus &&
        (max === 0 || f.n < max)
      ) {
        f.mcpu -= mcpu;
        f.ram -= c.ram;
        f.gpus -= c.gpus;
        f.n++;
        c.instance = target.id;
        target.containers.push(c.id);
      } else if (c.state === 'Running') c.state = 'Queued';
    }
    containers.push(c);
  }
  const cloud = {
    quotaMaxInstances: pick(rng, [null, null, 2, 5]),
    unavailableTypes: rng() < 0.3 ? [pick(rng, typeNames)] : [],
    rateLimitedUntil: pick(rng, [null, null, new Date(NOW.getTime() + 1000), new Date(NOW.getTime() - 1000)]),
  };
  return { now: NOW, config, instanceTypes: types, instances, containers, cloud };
}

/** Checks every invariant; returns the first violation or null. */
function violations(s: Snapshot, p: Plan): string | null {
  const types = new Map(s.instanceTypes.map((t) => [t.name, t]));
  const byId = new Map(s.containers.map((c) => [c.id, c]));
  const instances = new Map(s.instances.map((i) => [i.id, i]));
  const placed = new Map<string, string>();
  const locked = new Set<string>();
  const shut = new Set(p.actions.flatMap((a) => (a.op === 'shutdown' ? [a.instance] : [])));
  const { config, cloud } = s;
  for (const a of p.actions) {
    if (a.op === 'lock') {
      if (byId.get(a.container)?.state !== 'Queued') return `lock of non-Queued ${a.container}`;
      if (locked.has(a.container)) return `locked twice: ${a.container}`;
      locked.add(a.container);
    }
    if (a.op === 'start' || a.op === 'create') {
      for (const id of a.op === 'start' ? [a.container] : a.for) {
        const c = byId.get(id)!;
        if (placed.has(id)) return `${id} placed twice`;
        placed.set(id, a.op === 'start' ? a.instance : 'new');
        if (c.state === 'Running') return `start of running ${id}`;
        if (c.state === 'Queued' && !locked.has(id)) return `start of ${id} before its lock`;
      }
    }
    if (a.op === 'start') {
      const i = instances.get(a.instance);
      if (i === undefined) return `start on unknown instance ${a.instance}`;
      if (i.idleBehavior !== 'run') return `start on ${i.idleBehavior} instance ${i.id}`;
      if (i.state !== 'idle' && i.state !== 'running') return `start on ${i.state} instance ${i.id}`;
      if (shut.has(i.id)) return `start on instance ${i.id} being shut down`;
    }
    if (a.op === 'shutdown') {
      const i = instances.get(a.instance)!;
      if (i.idleBehavior === 'hold') return `shutdown of held ${i.id}`;
      if (s.containers.some((c) => c.instance === i.id && c.state === 'Running'))
        return `shutdown of busy ${i.id}`;
    }
  }
  // Resources: what stays assigned plus what starts fits every instance.
  for (const i of s.instances) {
    const t = types.get(i.type);
    if (t === undefined) continue;
    const mine = s.containers.filter(
      (c) => (c.instance === i.id && c.state !== 'Queued') || placed.get(c.id) === i.id,
    );
    const stillMine = mine.filter(
      (c) => !p.actions.some((a) => a.op === 'unlock' && a.container === c.id) || c.state === 'Running',
    );
    const mcpu = stillMine.reduce((x, c) => x + Math.round(c.vcpus * 1000), 0);
    const ram = stillMine.reduce((x, c) => x + c.ram, 0);
    if (mcpu > t.vcpus * 1000 || ram > t.ram - config.ramOverhead) return `instance ${i.id} over-committed`;
    const max = config.maxContainersPerInstance;
    if (max > 0 && stillMine.length > max && mine.some((c) => placed.get(c.id) === i.id))
      return `too many on ${i.id}`;
  }
  // Limits.
  const creates = p.actions.filter((a) => a.op === 'create');
  for (const a of creates) {
    const t = types.get(a.type)!;
    const cs = a.for.map((id) => byId.get(id)!);
    if (cs.reduce((x, c) => x + Math.round(c.vcpus * 1000), 0) > t.vcpus * 1000)
      return `create ${a.type} too small (vcpus)`;
    if (cs.reduce((x, c) => x + c.ram, 0) > t.ram - config.ramOverhead)
      return `create ${a.type} too small (ram)`;
    if (cloud.unavailableTypes.includes(a.type)) return `create of unavailable ${a.type}`;
  }
  if (creates.length > 0) {
    if (cloud.rateLimitedUntil !== null && cloud.rateLimitedUntil > s.now) return 'create while rate limited';
    const live = s.instances.filter((i) => i.state !== 'shutdown' && i.state !== 'gone');
    const count = live.length + creates.length;
    if (config.maxInstances !== null && count > config.maxInstances) return 'max_instances exceeded';
    if (cloud.quotaMaxInstances !== null && count > cloud.quotaMaxInstances) return 'quota exceeded';
    const spend =
      live.reduce((x, i) => x + (types.get(i.type)?.price ?? 0), 0) +
      creates.reduce((x, a) => x + types.get(a.type)!.price, 0);
    if (config.maxSpendPerHour !== null && spend > config.maxSpendPerHour + 1e-9) return 'spend exceeded';
    for (const [name, cap] of Object.entries(config.maxInstancesPerType)) {
      const n = live.filter((i) => i.type === name).length + creates.filter((a) => a.type === name).length;
      if (creates.some((a) => a.type === name) && n > cap) return `per-type cap ${name} exceeded`;
    }
  }
  for (const c of s.containers)
    if (c.state !== 'Running' && !(typeof p.status.get(c.id) === 'string' && p.status.get(c.id)!.length > 0))
      return `no status for ${c.id}`;
  return null;
}

function shuffled<T>(xs: T[], seed: number): T[] {
  const rng = seededRng(seed);
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe('scheduler invariants over random snapshots', () => {
  it('never exceeds resources or limits, never places twice or on hold/drain/shutdown instances', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), (seed) => {
        const s = randomSnapshot(seed);
        expect(violations(s, plan(s))).toBeNull();
      }),
      { numRuns: 400, seed: 42 },
    );
  });

  it('identical input gives identical output, whatever the input order, and the input is left as it was', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), (seed) => {
        const s = randomSnapshot(seed);
        const before = structuredClone(s);
        const first = planToJson(plan(s));
        // plan() is pure: it does not touch its input either.
        expect(s).toEqual(before);
        expect(planToJson(plan(structuredClone(s)))).toBe(first);
        const permuted = {
          ...s,
          containers: shuffled(s.containers, seed),
          instances: shuffled(s.instances, seed + 1),
        };
        expect(planToJson(plan(permuted))).toBe(first);
      }),
      { numRuns: 300, seed: 7 },
    );
  });

  it('the generator produces the situations the invariants are about', () => {
    // Guards against a generator that silently stops exercising placements, creates and shutdowns.
    const seen = new Set<string>();
    for (let seed = 0; seed < 300; seed++) for (const a of plan(randomSnapshot(seed)).actions) seen.add(a.op);
    expect([...seen].sort()).toEqual(['cancel', 'create', 'kill', 'lock', 'shutdown', 'start', 'unlock']);
  });
});
