// Invariants over random snapshots (fast-check): resources and limits never exceeded, no container
// placed twice, nothing placed where it must not be, and the same input always gives the same bytes.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { seededRng } from '../../src/model/clock.js';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { Plan, Snapshot } from '../../src/dispatch/scheduler/types.js';
import { planToJson } from '../../src/dispatch/snapshot-json.js';
import { snapshotArb } from './arbitraries.js';

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
  // Per-user cap: an owner that got a place in this pass has at most max_running_per_user placed.
  if (config.maxRunningPerUser !== null) {
    const kept = new Set(s.instances.filter((i) => !shut.has(i.id)).map((i) => i.id));
    const unlocked = new Set(p.actions.flatMap((a) => (a.op === 'unlock' ? [a.container] : [])));
    const count = new Map<string, number>();
    for (const c of s.containers) {
      const stays =
        c.instance !== null && c.state !== 'Queued' && kept.has(c.instance) && !unlocked.has(c.id);
      if (stays || (placed.has(c.id) && !unlocked.has(c.id)))
        count.set(c.owner, (count.get(c.owner) ?? 0) + 1);
    }
    for (const id of placed.keys()) {
      const owner = byId.get(id)!.owner;
      if (!unlocked.has(id) && count.get(owner)! > config.maxRunningPerUser)
        return `owner ${owner} over its cap`;
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
      fc.property(snapshotArb, (s) => {
        expect(violations(s, plan(s))).toBeNull();
      }),
      { numRuns: 400, seed: 42 },
    );
  });

  it('identical input gives identical output, whatever the input order, and the input is left as it was', () => {
    fc.assert(
      fc.property(snapshotArb, fc.nat(), (s, seed) => {
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
    for (const s of fc.sample(snapshotArb, { numRuns: 300, seed: 1 }))
      for (const a of plan(s).actions) seen.add(a.op);
    expect([...seen].sort()).toEqual(['cancel', 'create', 'kill', 'lock', 'shutdown', 'start', 'unlock']);
  });
});
