// Boot ahead of fan-outs (issue 14, `boot_ahead`): a workflow's children arrive when their parent ends,
// and the ones beyond the room the parent frees wait a whole boot. History says, per step (durations.ts
// runKey), how many containers arrived per end of one of its containers and of what shape (the snapshot's
// `estimates.fanOut`, learnt by ../fan-outs.ts), and when each running container is expected to end
// (`estimates.endsAt`). This rule creates the capacity those arrivals will need a boot time before the
// expected ends, and keeps idle instances that will take them, so that they find it ready.
//
// Bounded: at most `boot_ahead` containers' worth is held at once (all shapes together), and only for
// running containers whose expected end is within one boot time and not yet past. A container past its
// expected end holds nothing any more, so a wrong estimate costs at most a boot and the idle time until
// then; the instances then go like any idle instance (shutdown.ts).
//
// The warm pool (`warm_pool` = f, warmAhead below) does the same for arrivals no end announces (a
// workflow's first tasks, a user's next submission): at the recent arrival rate of each shape (the
// snapshot's `arrivals`, counted over arrival_window), f × the arrivals expected within one boot time
// should find room on instances that are up or booting. That room is counted once across shapes (free
// room, after this pass's placements), idle instances holding it are kept, and the cheapest instances are
// created for what is missing (only while no container waits for room: those would take it, and the new
// capacity they get is boot_budget's decision), at most `warm_pool_max` vcpus held in all. When the
// arrivals leave the window the pool holds nothing, and its instances go like any idle instance
// (shutdown.ts). Off by default: docs/performance/sim.md, session 17.
import type { InstanceType } from '../../model/types.js';
import { bootTimeMs, runKey } from './durations.js';
import type { Shape } from './fitting.js';
import type { Pass } from './pass.js';
import { add, containerNeed, subtract, typeCapacity, type Res } from './resources.js';
import type { ContainerShape, RunEstimates, SnapshotContainer } from './types.js';

/** What the rule decided: instances to create, and idle instances to keep for the expected arrivals. */
export interface Ahead {
  creates: InstanceType[];
  keep: Set<string>;
}

/** The fan-out estimate from recent samples (arrivals per end): their mean, or null with none. */
export function meanPerEnd(samples: readonly number[]): number | null {
  if (samples.length === 0) return null;
  let sum = 0;
  for (const s of samples) sum += s;
  return sum / samples.length;
}

/** How many containers of `need` fit in `room` (no other limit). */
export function unitsIn(room: Res, need: Res): number {
  let n = Infinity;
  for (const k of ['mcpu', 'ram', 'scratch', 'gpus'] as const)
    if (need[k] > 0) n = Math.min(n, Math.floor(room[k] / need[k]));
  return n === Infinity ? 0 : Math.max(0, n);
}

interface Expected {
  shape: Shape;
  /** Arrivals expected within a boot time. */
  count: number;
}

/** The instances to create and keep for arrivals expected within a boot time (see the file comment). */
export function bootAhead(pass: Pass): Ahead {
  const out: Ahead = { creates: [], keep: new Set() };
  const cap = pass.config.bootAhead;
  const est = pass.snap.estimates;
  // A limit that blocks the queue: the waiting containers come first (rule 5).
  if (cap <= 0 || pass.head !== null) return out;
  if (est?.fanOut === undefined || est.bootMs === null || est.bootMs <= 0) return out;
  const bootMs = est.bootMs;
  const horizon = pass.now + bootMs;
  const expected = new Map<string, Expected>();
  /** Room the ending containers free, by instance id. */
  const freed = new Map<string, Res>();
  for (const { c, end, instance } of ending(pass, est)) {
    if (end <= pass.now) continue;
    const f = est.fanOut[runKey(c.name!)];
    if (f === undefined || f.perEnd <= 0) continue;
    if (end > horizon) {
      pass.until(end - bootMs);
      continue;
    }
    pass.until(end);
    const shape = pass.shapes.get(probe(f.shape, pass.snap.now));
    if (shape.unsatisfiable !== null) continue;
    const e = expected.get(shape.key);
    if (e === undefined) expected.set(shape.key, { shape, count: f.perEnd });
    else e.count += f.perEnd;
    if (instance !== null) {
      const room = freed.get(instance);
      if (room === undefined) freed.set(instance, containerNeed(c));
      else add(room, containerNeed(c));
    }
  }
  let held = 0;
  // By shape key: the plan must not depend on the order of the containers.
  for (const key of [...expected.keys()].sort()) {
    const { shape, count } = expected.get(key)!;
    const wanted = Math.min(cap - held, Math.round(count));
    if (wanted <= 0) continue;
    held += wanted;
    const have = roomFor(pass, shape, wanted, freed, out.keep);
    out.creates.push(...createsFor(pass, shape, wanted - have));
  }
  return out;
}

/**
 * The warm pool (see the file comment): adds to `out` the idle instances to keep and the instances to
 * create so that f × the arrivals expected within a boot time at the recent rate find room.
 */
export function warmAhead(pass: Pass, out: Ahead): void {
  const { config } = pass;
  const f = config.warmPool;
  // A limit that blocks the queue: the waiting containers come first (rule 5).
  if (!(f > 0) || pass.head !== null || pass.snap.arrivals.length === 0) return;
  const bootMs = bootTimeMs(pass);
  const expected = new Map<string, Expected>();
  for (const a of pass.snap.arrivals) {
    if (a.count <= 0) continue;
    const shape = pass.shapes.get(probe(a, pass.snap.now));
    if (shape.unsatisfiable !== null) continue;
    const e = expected.get(shape.key);
    if (e === undefined) expected.set(shape.key, { shape, count: a.count });
    else e.count += a.count;
  }
  // While containers wait for room, they would take a new instance's room as soon as it is up: how much
  // new capacity they get is the placement's decision (boot_budget), so the pool creates nothing then.
  const creates = pass.statuses.waiting.length === 0;
  const max = config.warmPoolMaxVcpus ?? Infinity;
  /** Room counted for a shape already, by instance id: each vcpu is counted for one arrival only. */
  const taken = new Map<string, Res>();
  let held = 0;
  for (const key of [...expected.keys()].sort()) {
    const { shape, count } = expected.get(key)!;
    const vcpus = shape.need.mcpu / 1000;
    let wanted = Math.round((f * count * bootMs) / config.arrivalWindowMs);
    if (vcpus > 0) wanted = Math.min(wanted, Math.floor((max - held) / vcpus + 1e-9));
    if (wanted <= 0) continue;
    held += wanted * vcpus;
    const have = roomFor(pass, shape, wanted, NONE_FREED, out.keep, taken);
    if (creates) out.creates.push(...createsFor(pass, shape, wanted - have));
  }
}

/** A container expected to end, when, and the instance whose room it frees. */
interface Ending {
  c: SnapshotContainer;
  end: number;
  instance: string | null;
}

/**
 * The containers expected to end, and when: the Running ones with an estimate, and those this pass starts
 * (now + their step's run time; a short run may end before the next pass sees it Running).
 */
function ending(pass: Pass, est: RunEstimates): Ending[] {
  const out: Ending[] = [];
  for (const c of pass.snap.containers) {
    if (c.state !== 'Running' || c.name === undefined) continue;
    const end = est.endsAt[c.id];
    if (end !== undefined) out.push({ c, end, instance: c.instance });
  }
  const started = new Map<string, string>();
  for (const a of pass.placeActions) if (a !== null && a.op === 'start') started.set(a.container, a.instance);
  if (started.size === 0) return out;
  for (const c of pass.waiting) {
    if (!started.has(c.id) || c.name === undefined) continue;
    const run = est.steps[runKey(c.name)];
    if (run !== undefined) out.push({ c, end: pass.now + run, instance: started.get(c.id)! });
  }
  return out;
}

/** A container of the arrivals' shape, to find its Shape in the pass's cache. */
function probe(s: ContainerShape, now: Date): SnapshotContainer {
  return {
    vcpus: s.vcpus,
    ram: s.ram,
    scratch: s.scratch,
    gpus: s.gpus,
    preemptible: s.preemptible,
    instanceTypes: s.instanceTypes,
    id: '',
    state: 'Queued',
    priority: 1,
    queuedAt: now,
    instance: null,
    lockCount: 0,
    owner: '',
  };
}

/**
 * How many of `wanted` arrivals the pass's instances will have room for (free now, or freed by the
 * containers ending), up to `wanted`; the idle ones counted are kept. `taken`: room already counted for
 * other arrivals, by instance id, which this call adds to (the warm pool counts each vcpu once).
 */
/** roomFor's `freed` when nothing is freed (the warm pool counts only free room). */
const NONE_FREED: ReadonlyMap<string, Res> = new Map();

function roomFor(
  pass: Pass,
  shape: Shape,
  wanted: number,
  freed: ReadonlyMap<string, Res>,
  keep: Set<string>,
  taken?: Map<string, Res>,
): number {
  let have = 0;
  for (const slot of pass.capacity.slots) {
    if (have >= wanted) break;
    if (!pass.capacity.mayTake(slot, shape, 1)) continue;
    const room = { ...slot.free };
    const more = freed.get(slot.id);
    if (more !== undefined) add(room, more);
    const already = taken?.get(slot.id);
    if (already !== undefined) subtract(room, already);
    const n = Math.min(unitsIn(room, shape.need), wanted - have);
    if (n <= 0) continue;
    have += n;
    if (taken !== undefined) {
      const used = scaled(shape.need, n);
      if (already === undefined) taken.set(slot.id, used);
      else add(already, used);
    }
    if (slot.bin === null && !slot.used && slot.count === 0 && slot.state === 'idle') keep.add(slot.id);
  }
  return have;
}

/** `r` × `by`. */
function scaled(r: Res, by: number): Res {
  return { mcpu: r.mcpu * by, ram: r.ram * by, scratch: r.scratch * by, gpus: r.gpus * by };
}

/**
 * New instances for `missing` arrivals: the largest type that holds no more than are missing at no more
 * per container than the cheapest type (fewer boots for the same price), then the next, within limits.
 */
function createsFor(pass: Pass, shape: Shape, missing: number): InstanceType[] {
  const out: InstanceType[] = [];
  const { limits } = pass;
  const cheapest = shape.fitting[0];
  if (cheapest === undefined) return out;
  const perUnit = (t: InstanceType): number =>
    t.price / Math.max(1, unitsIn(typeCapacity(t, pass.config.ramOverhead), shape.need));
  const base = perUnit(cheapest);
  while (missing > 0) {
    // The largest that does not overshoot; else (fewer missing than the cheapest type holds) the cheapest.
    let best: { t: InstanceType; n: number } | null = null;
    let fallback: { t: InstanceType; n: number } | null = null;
    for (const t of shape.fitting) {
      // Only types the arrivals may use once it is up (the share rule, fitting.ts): no one is created for it.
      if (shape.usableByIndex[pass.typeIndex.get(t.name)!] !== 1) continue;
      if (limits.isUnavailable(t.name) || limits.typeCapped(t) !== null || limits.check(t) !== null) continue;
      const n = unitsIn(typeCapacity(t, pass.config.ramOverhead), shape.need);
      if (n <= 0 || perUnit(t) > base * (1 + 1e-9)) continue;
      if (fallback === null) fallback = { t, n };
      if (n <= missing && (best === null || n > best.n)) best = { t, n };
    }
    const pick = best ?? fallback;
    if (pick === null) break;
    limits.add(pick.t.name, pick.t.price);
    out.push(pick.t);
    missing -= pick.n;
  }
  return out;
}
