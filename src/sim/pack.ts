// What a clairvoyant scheduler could pay for a workload: an offline packer that knows every job's arrival
// and run time in advance (docs/performance/sim.md, "Session 8 (h-cost5)"). It answers "is the issue's
// cost target reachable at all with this catalog and billing?" before anyone writes another rule.
//
// Model. Each job starts at its arrival (no wait: the packer boots every instance ahead, so its schedule's
// waits are all zero and "p90 wait no worse" holds trivially) and runs for its run time. A workflow task
// arrives when its parents would end with zero waits (its run's arrival + the longest path of its
// ancestors' run times). An instance is created `bootMs` before its first job starts and lives until its
// last job ends; it is billed price × billedMs(life) (the sim report's rule: at least 60 s on EC2, boot
// included). Types and fitting are the lower bound's (src/sim/lower-bound.ts `fits`).
//
// Method: jobs in arrival order (longer first on ties); each goes where it adds least to the bill:
//   - on a live instance where it fits at its start: the bill grows by the instance's extension past its
//     current end (0 when the instance already outlives the job). Because jobs come in arrival order, the
//     instance's use never grows after the job's start, so fitting at the start is fitting for its whole run;
//   - on a new instance of the fitting type whose bill for this job alone is least;
//   - with `lookahead`, a new instance may also be of a larger type, when the jobs arriving in the next
//     `lookahead` ms that fit beside it, ending no later, would otherwise each open an instance: the larger
//     type is chosen if its bill is below this job's own plus theirs, and they are then placed on it when
//     they come (by the rule above, which finds them a zero-cost place).
// Ties go to a live instance, the fullest after placement. An instance whose end is more than a boot in the
// past is dropped from the candidates: reusing it would cost more idle than a new boot.
//
// With estimates (PackJob.estimate, from pack-input.ts), the decisions use expected ends and the bill the
// true ones. The other methods: pack-decreasing.ts (first fit decreasing), pack-wait.ts (jobs may wait).
//
// The result is achievable (a schedule exists that pays it), so the optimum is at most this; with the
// lower bound it brackets what any scheduler could reach. It is not the optimum: a packer that looked
// further ahead could pay less.
import type { InstanceType } from '../model/types.js';
import { billedMs, type BillingRule } from '../model/billing.js';
import { costLowerBound, fits, type Demand } from './lower-bound.js';

/** One job for the packer: a demand with its (zero-wait) start time in ms. */
export interface PackJob extends Demand {
  start: number;
  /**
   * The run time (ms) the packer decides by; absent: the true one (clairvoyant). With the SWF requested
   * time here, the packer is what a scheduler that trusts users' estimates could do at best.
   */
  estimate?: number;
  /** A workflow task's parents (indices into the same list): method `wait` starts it after their ends. */
  parents?: number[];
}

/** How the packer bills and looks ahead. */
export interface PackOptions {
  types: InstanceType[];
  billing: BillingRule;
  /** Time from create to ready, billed (ms). */
  bootMs: number;
  /** How far ahead (ms) a new instance may be sized for jobs still to come; 0 = never larger than needed. */
  lookahead?: number;
  /** Return the schedule itself (tests check it never over-commits an instance). */
  keepSchedule?: boolean;
}

/** One instance of the packed schedule. */
export interface PackedInstance {
  type: InstanceType;
  /** Created at (ms): a boot before its first job starts. */
  created: number;
  /** Its last job's end (ms). */
  end: number;
  /** Indices into the packer's input. */
  jobs: number[];
}

/** What the packed schedule costs and how it spends. */
export interface PackResult {
  cost: number;
  lowerBound: number;
  /** cost / lowerBound; null when the bound is 0. */
  ratio: number | null;
  instances: number;
  /** Σ price × boot time. */
  boot: number;
  /** Σ price × time an instance is alive, booted and running nothing (the 60 s minimum included). */
  idle: number;
  /** Each job alone on the type that bills it least (boot and minimum included): the no-co-location figure. */
  alone: number;
  /** Jobs no type fits (left out, as in the lower bound). */
  unfit: number;
  /** With keepSchedule. */
  schedule?: PackedInstance[];
  /** Method `wait`: each job's start (ms), with keepSchedule; and the 90th percentile of the waits. */
  starts?: number[];
  waitP90?: number;
}

interface Running {
  end: number;
  /** start + estimate: when the packer expects it to end. */
  expected: number;
  vcpus: number;
  ram: number;
  scratch: number;
  gpus: number;
}

interface Bin {
  type: InstanceType;
  created: number;
  end: number;
  running: Running[];
  jobs: number[];
  used: { vcpus: number; ram: number; scratch: number; gpus: number };
}

export const HOUR = 3_600_000;

const estimateOf = (j: PackJob): number => j.estimate ?? j.duration;

/**
 * When the packer expects the instance to be free at `now`: its running jobs' expected ends (a job past
 * its estimate is expected to end now: nothing more is known of it); an empty instance, its last end.
 */
function expectedEnd(b: Bin, now: number): number {
  if (b.running.length === 0) return b.end;
  let at = now;
  for (const r of b.running) at = Math.max(at, r.expected);
  return at;
}

/** A job placed at a start (ms), for the interval fit check. */
export interface Placed {
  start: number;
  end: number;
  job: PackJob;
}

/** An instance of the interval packers (decreasing, wait): its schedule entry and its jobs placed in time. */
export interface IntervalBin extends PackedInstance {
  placed: Placed[];
}

/** Puts job `i` on `b` started at `s`: its life grows to cover the run (created a boot before its start). */
export function placeAt(b: IntervalBin, i: number, j: PackJob, s: number, bootMs: number): void {
  b.jobs.push(i);
  b.placed.push({ start: s, end: s + j.duration, job: j });
  b.created = Math.min(b.created, s - bootMs);
  b.end = Math.max(b.end, s + j.duration);
}

/** The schedule entries of interval bins (without their placements). */
export function scheduleOf(bins: readonly IntervalBin[]): PackedInstance[] {
  return bins.map(({ type, created, end, jobs }) => ({ type, created, end, jobs }));
}

/**
 * Whether `j`, started at `s`, fits on type `t` beside the placed jobs for its whole run. Use over the run
 * is highest at its start or at a placed job's start inside it, so those are the points checked.
 */
export function fitsBeside(t: InstanceType, j: PackJob, s: number, placed: readonly Placed[]): boolean {
  if (!j.preemptible && t.preemptible) return false;
  const e = s + j.duration;
  const points = [s];
  for (const x of placed) if (x.start > s && x.start < e) points.push(x.start);
  for (const p of points) {
    let [v, r, d, g] = [j.vcpus, j.ram, j.scratch, j.gpus];
    for (const x of placed)
      if (x.start <= p && p < x.end)
        [v, r, d, g] = [v + x.job.vcpus, r + x.job.ram, d + x.job.scratch, g + x.job.gpus];
    if (v > t.vcpus || r > t.ram || d > t.scratch || g > t.gpus) return false;
  }
  return true;
}

function roomFor(b: Bin, j: PackJob): boolean {
  const t = b.type;
  return (
    b.used.vcpus + j.vcpus <= t.vcpus &&
    b.used.ram + j.ram <= t.ram &&
    b.used.scratch + j.scratch <= t.scratch &&
    b.used.gpus + j.gpus <= t.gpus &&
    (j.preemptible || !t.preemptible)
  );
}

/** Drops the jobs that ended by `at` from the instance's use. */
function release(b: Bin, at: number): void {
  if (!b.running.some((r) => r.end <= at)) return;
  const still: Running[] = [];
  for (const r of b.running)
    if (r.end > at) still.push(r);
    else {
      b.used.vcpus -= r.vcpus;
      b.used.ram -= r.ram;
      b.used.scratch -= r.scratch;
      b.used.gpus -= r.gpus;
    }
  b.running = still;
}

function place(b: Bin, j: PackJob, index: number): void {
  const end = j.start + j.duration;
  b.jobs.push(index);
  b.running.push({
    end,
    expected: j.start + estimateOf(j),
    vcpus: j.vcpus,
    ram: j.ram,
    scratch: j.scratch,
    gpus: j.gpus,
  });
  b.used.vcpus += j.vcpus;
  b.used.ram += j.ram;
  b.used.scratch += j.scratch;
  b.used.gpus += j.gpus;
  b.end = Math.max(b.end, end);
}

/** Billing and type choice, shared by both packing methods. */
export interface Pricing {
  /** What type t bills for a life of lifeMs (the billing rule applied). */
  billed(t: InstanceType, lifeMs: number): number;
  /** The types that fit the job, cheapest first (ties by name). */
  typesFor(j: PackJob): InstanceType[];
  /** The cheapest new instance for the job alone for runMs after its boot; null when none fits. */
  cheapestAlone(j: PackJob, runMs: number): { type: InstanceType; cost: number } | null;
}

export function pricing(o: PackOptions): Pricing {
  if (!Number.isFinite(o.bootMs) || o.bootMs < 0)
    throw new Error(`bootMs: expected a non-negative number of ms, got ${String(o.bootMs)}`);
  const billed = (t: InstanceType, lifeMs: number): number => (t.price * billedMs(lifeMs, o.billing)) / HOUR;
  const fitting = new Map<string, InstanceType[]>();
  const typesFor = (j: PackJob): InstanceType[] => {
    const key = `${j.vcpus}|${j.ram}|${j.scratch}|${j.gpus}|${j.preemptible}`;
    let ts = fitting.get(key);
    if (ts === undefined)
      fitting.set(
        key,
        (ts = o.types
          .filter((t) => fits(j, t))
          .sort((a, b) => a.price - b.price || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))),
      );
    return ts;
  };
  const cheapestAlone = (j: PackJob, runMs: number): { type: InstanceType; cost: number } | null => {
    let best: { type: InstanceType; cost: number } | null = null;
    for (const t of typesFor(j)) {
      const c = billed(t, o.bootMs + runMs);
      if (best === null || c < best.cost) best = { type: t, cost: c };
    }
    return best;
  };
  return { billed, typesFor, cheapestAlone };
}

/** Packs the jobs; deterministic (no randomness, stable order). */
export function pack(jobs: PackJob[], o: PackOptions): PackResult {
  const lookahead = o.lookahead ?? 0;
  if (!Number.isFinite(lookahead) || lookahead < 0)
    throw new Error(`lookahead: expected a non-negative number of ms, got ${String(o.lookahead)}`);
  const { billed, typesFor, cheapestAlone } = pricing(o);
  const order = jobs
    .map((j, i) => ({ j, i }))
    .sort((a, b) => a.j.start - b.j.start || estimateOf(b.j) - estimateOf(a.j) || a.i - b.i);

  let live: Bin[] = [];
  const all: Bin[] = [];
  let alone = 0;
  let unfit = 0;
  const jobsInOrder = order.map((x) => x.j);
  for (let k = 0; k < order.length; k++) {
    const { j, i: index } = order[k]!;
    const own = cheapestAlone(j, estimateOf(j));
    if (own === null) {
      unfit++;
      continue;
    }
    alone += cheapestAlone(j, j.duration)!.cost;
    const s = j.start;
    // Decisions use the expected end; the bill, the true one.
    const e = s + estimateOf(j);
    live = live.filter((b) => b.end + o.bootMs >= s);
    let best: Bin | null = null;
    let bestCost = own.cost;
    let bestFree = 0;
    for (const b of live) {
      release(b, s);
      if (!roomFor(b, j)) continue;
      const until = expectedEnd(b, s);
      const added = until >= e ? 0 : billed(b.type, e - b.created) - billed(b.type, until - b.created);
      const free = b.type.vcpus - b.used.vcpus - j.vcpus;
      if (added < bestCost - 1e-12 || (added <= bestCost + 1e-12 && (best === null || free < bestFree))) {
        best = b;
        bestCost = added;
        bestFree = free;
      }
    }
    if (best === null) {
      const type =
        lookahead > 0 ? sizeAhead(jobsInOrder, k, j, own, live, o, lookahead, typesFor, billed) : own.type;
      best = {
        type,
        created: s - o.bootMs,
        end: s,
        running: [],
        jobs: [],
        used: { vcpus: 0, ram: 0, scratch: 0, gpus: 0 },
      };
      live.push(best);
      all.push(best);
    }
    place(best, j, index);
  }

  return summarize(
    jobs,
    all.map((b) => ({ type: b.type, created: b.created, end: b.end, jobs: b.jobs })),
    o,
    alone,
    unfit,
  );
}

/** The figures of a packed schedule (both methods): its bill, boot and idle, the bound, the alone figure. */
export function summarize(
  jobs: PackJob[],
  schedule: PackedInstance[],
  o: PackOptions,
  alone: number,
  unfit: number,
): PackResult {
  let cost = 0;
  let boot = 0;
  let idle = 0;
  for (const b of schedule) {
    const lifeBilled = billedMs(b.end - b.created, o.billing);
    cost += (b.type.price * lifeBilled) / HOUR;
    boot += (b.type.price * o.bootMs) / HOUR;
    // Idle: billed time after boot with no job running (gaps and the 60 s minimum). Room a job leaves
    // unused on a busy instance is rounding, not idle (as in the sim report).
    idle += (b.type.price * Math.max(0, lifeBilled - o.bootMs - coveredMs(jobs, b.jobs))) / HOUR;
  }
  const lb = costLowerBound(jobs, o.types);
  return {
    cost,
    lowerBound: lb.cost,
    ratio: lb.cost > 0 ? cost / lb.cost : null,
    instances: schedule.length,
    boot,
    idle,
    alone,
    unfit,
    ...(o.keepSchedule === true ? { schedule } : {}),
  };
}

/** Wall time (ms) during which at least one of the jobs runs: the length of the union of their runs. */
function coveredMs(jobs: PackJob[], on: number[]): number {
  const runs = on.map((i) => jobs[i]!).sort((a, b) => a.start - b.start);
  let covered = 0;
  let until = Number.NEGATIVE_INFINITY;
  for (const j of runs) {
    const end = j.start + j.duration;
    covered += Math.max(0, end - Math.max(j.start, until));
    until = Math.max(until, end);
  }
  return covered;
}

/** Whether a live instance would take `c` at no extra cost: it outlives c and has room at c's start. */
function freeHome(b: Bin, c: PackJob): boolean {
  if (expectedEnd(b, c.start) < c.start + estimateOf(c) || (!c.preemptible && b.type.preemptible))
    return false;
  let [v, r, d, g] = [c.vcpus, c.ram, c.scratch, c.gpus];
  for (const x of b.running)
    if (x.expected > c.start) [v, r, d, g] = [v + x.vcpus, r + x.ram, d + x.scratch, g + x.gpus];
  return v <= b.type.vcpus && r <= b.type.ram && d <= b.type.scratch && g <= b.type.gpus;
}

/**
 * The type to open for job `j` (order[k]) when it goes on a new instance, with lookahead: a larger fitting
 * type wins when its bill over j's life is below j's own bill plus the own bills of the coming jobs that
 * would fit beside j on it (arriving within `lookahead`, ending no later than j, and with no free home on a
 * live instance already).
 */
function sizeAhead(
  order: PackJob[],
  k: number,
  j: PackJob,
  own: { type: InstanceType; cost: number },
  live: Bin[],
  o: PackOptions,
  lookahead: number,
  typesFor: (j: PackJob) => InstanceType[],
  billed: (t: InstanceType, lifeMs: number) => number,
): InstanceType {
  const e = j.start + estimateOf(j);
  const coming: Array<{ job: PackJob; own: number }> = [];
  for (let i = k + 1; i < order.length && order[i]!.start <= j.start + lookahead; i++) {
    const c = order[i]!;
    if (c.start + estimateOf(c) > e || live.some((b) => freeHome(b, c))) continue;
    const ts = typesFor(c);
    if (ts.length === 0) continue;
    let ownCost = Number.POSITIVE_INFINITY;
    for (const t of ts) ownCost = Math.min(ownCost, billed(t, o.bootMs + estimateOf(c)));
    coming.push({ job: c, own: ownCost });
  }
  if (coming.length === 0) return own.type;
  let bestType = own.type;
  let bestGain = 0;
  for (const t of typesFor(j)) {
    if (t === own.type) continue;
    // Greedy fill of t's room beside j, largest first (the coming jobs overlap j's life by construction,
    // so the fill is checked against the sum of their demands: conservative).
    let room = { vcpus: t.vcpus - j.vcpus, ram: t.ram - j.ram };
    let saved = 0;
    for (const c of [...coming].sort((a, b) => b.own - a.own)) {
      if (c.job.vcpus > room.vcpus || c.job.ram > room.ram || !fits(c.job, t)) continue;
      room = { vcpus: room.vcpus - c.job.vcpus, ram: room.ram - c.job.ram };
      saved += c.own;
    }
    const gain = own.cost + saved - billed(t, o.bootMs + estimateOf(j));
    if (gain > bestGain + 1e-12) {
      bestGain = gain;
      bestType = t;
    }
  }
  return bestType;
}
