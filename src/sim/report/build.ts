// buildReport: the figures of one simulation run (docs/SIMULATOR.md, "Report fields"). Pure and
// deterministic: the same record gives the same report, byte for byte once serialised, because every
// number is rounded to a fixed precision and every map is built in sorted key order.
import { billedMs, PER_SECOND } from '../../model/billing.js';
import { costLowerBound, criticalPathBound } from '../lower-bound.js';
import { ReportInputError, type ContainerRecord, type RunRecord } from './input.js';
import { bucketMax, percentile, round, unionLength } from './stats.js';
import { rightSizingSection, type RightSizingSection } from './usage.js';
import { waitCausesSection, type WaitCausesSection } from './waits.js';
import { workflowSection, type WorkflowSection } from './workflows.js';

/** Number of buckets in the time series (enough for a chart, small enough for a 1M-container run). */
export const SERIES_BUCKETS = 200;

/** Wait-time histogram buckets: upper bounds in seconds and labels. */
const WAIT_BUCKETS: Array<[number, string]> = [
  [10, '<10s'],
  [60, '10s-1m'],
  [600, '1m-10m'],
  [3600, '10m-1h'],
  [6 * 3600, '1h-6h'],
  [24 * 3600, '6h-24h'],
  [Number.POSITIVE_INFINITY, '>=24h'],
];

/** Queue wait statistics in seconds; null when no container started. */
export interface WaitStats {
  p50: number | null;
  p90: number | null;
  p99: number | null;
  max: number | null;
  mean: number | null;
}

/** The report of one run (report.json). Money is in the catalog's currency, times in seconds. */
export interface Report {
  format: 'berth-sim-report/1';
  policy: string;
  seed: number;
  period: { start: string; end: string; seconds: number };
  containers: { total: number; started: number; completed: number; neverStarted: number };
  cost: {
    /** Σ instances: price × billed lifetime (create → destroy, or the run's end) under the billing rule. */
    total: number;
    /** See src/sim/lower-bound.ts; over completed containers and their run times. */
    lowerBound: number;
    /** total / lowerBound; null when the bound is 0. */
    ratio: number | null;
    /** The part of total paid while an instance booted (create → agent registered; all of a never-ready one). */
    boot: number;
    /** The part of total paid while an instance ran at least one container. */
    work: number;
    /** The rest: paid while a ready instance ran nothing (idle, draining, the billing minimum's padding). */
    idle: number;
    byType: Record<string, number>;
  };
  lowerBound: { weights: { vcpus: number; ram: number; gpus: number }; unfitContainers: number };
  /**
   * For a workload of one workflow run that completed, a bound the lower bound ignores: no schedule pays
   * less than max(the critical path, the billing minimum) × the cheapest fitting instance's price
   * (src/sim/lower-bound.ts, criticalPathBound); null otherwise. `cost` is the larger of the two bounds, `overLowerBound` it / the
   * lower bound (above 1.5: no scheduler meets 1.5 × the lower bound), `ratio` total cost / it.
   */
  criticalPathBound: {
    cost: number;
    criticalPath: number;
    /** The billing rule's minimum (s): one instance at least is billed that long. */
    minimumBilled: number;
    instancePrice: number | null;
    overLowerBound: number | null;
    ratio: number | null;
  } | null;
  wait: WaitStats;
  waitHistogram: Array<{ bucket: string; count: number }>;
  /** What the waits were spent on (`berth sim --wait-causes`); absent when the run did not record it. */
  waitCauses?: WaitCausesSection;
  /** From the first arrival to the last container end; null when nothing ended. */
  makespan: number | null;
  instances: {
    created: number;
    /** Instances the cloud reclaimed (spot interruptions). */
    interrupted: number;
    hoursByType: Record<string, number>;
    /** Create → agent registered, for instances that registered. */
    bootSeconds: { p50: number | null; max: number | null };
  };
  /** Allocated resource-seconds / paid resource-seconds. */
  utilization: { vcpu: number | null; ram: number | null };
  /** Maximum within each of SERIES_BUCKETS equal slices of the period. */
  series: { bucketSeconds: number; instances: number[]; queue: number[] };
  /** Workflow runs: makespan against the critical path; null when the workload had none. */
  workflows: WorkflowSection | null;
  /** Right-sizing per request name from the traces' recorded usage; null when nothing was recorded. */
  rightSizing: RightSizingSection | null;
}

function sortedRecord(m: Map<string, number>, digits: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of [...m.keys()].sort()) out[k] = round(m.get(k)!, digits);
  return out;
}

function checkContainer(c: ContainerRecord, instances: Set<string>): void {
  const at = `container ${c.id}`;
  if (c.start !== null && c.start < c.arrival) throw new ReportInputError(`${at}: start before arrival`);
  if (c.end !== null && (c.start === null || c.end < c.start))
    throw new ReportInputError(`${at}: end without a start, or before it`);
  if (c.start !== null && c.instance === null)
    throw new ReportInputError(`${at}: started but has no instance`);
  if (c.instance !== null && !instances.has(c.instance))
    throw new ReportInputError(`${at}: instance ${c.instance} is not in the run's instances`);
}

function pathBound(
  run: RunRecord,
  lb: ReturnType<typeof costLowerBound>,
  total: number,
): Report['criticalPathBound'] {
  const runs = run.workflows ?? [];
  if (runs.length !== 1 || runs[0]!.outcome !== 'success') return null;
  const minimum = (run.billing ?? PER_SECOND).minimumMs;
  const bound = criticalPathBound(lb, runs[0]!.criticalPath, minimum);
  return {
    cost: round(bound, 6),
    criticalPath: round(runs[0]!.criticalPath / 1000, 3),
    minimumBilled: minimum / 1000,
    instancePrice: lb.cheapestInstance,
    overLowerBound: lb.cost > 0 ? round(bound / lb.cost, 4) : null,
    ratio: bound > 0 ? round(total / bound, 4) : null,
  };
}

/** Computes the report of one run. Throws ReportInputError when the record is inconsistent. */
export function buildReport(run: RunRecord): Report {
  const typeByName = new Map(run.instanceTypes.map((t) => [t.name, t]));
  const instanceIds = new Set<string>();
  for (const i of run.instances) {
    if (instanceIds.has(i.id)) throw new ReportInputError(`instance ${i.id}: recorded twice`);
    instanceIds.add(i.id);
    if (!typeByName.has(i.type)) throw new ReportInputError(`instance ${i.id}: unknown type ${i.type}`);
    if (i.destroyed !== null && i.destroyed < i.created)
      throw new ReportInputError(`instance ${i.id}: destroyed before created`);
  }
  for (const c of run.containers) checkContainer(c, instanceIds);

  // Loops, not Math.min(...spread): a million-container run would overflow the call stack.
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  const see = (t: number): void => {
    if (t < lo) lo = t;
    if (t > hi) hi = t;
  };
  for (const c of run.containers) {
    see(c.arrival);
    if (c.start !== null) see(c.start);
    if (c.end !== null) see(c.end);
  }
  for (const i of run.instances) {
    see(i.created);
    if (i.destroyed !== null) see(i.destroyed);
  }
  const start = run.startTime ?? (lo === Number.POSITIVE_INFINITY ? 0 : lo);
  const end = run.endTime ?? (hi === Number.NEGATIVE_INFINITY ? start : hi);
  if (end < start) throw new ReportInputError(`endTime: expected a time at or after the start, got ${end}`);

  // Busy intervals per instance, for idle cost.
  const busy = new Map<string, Array<[number, number]>>();
  let vcpuUsed = 0;
  let ramUsed = 0;
  for (const c of run.containers) {
    if (c.start === null || c.instance === null) continue;
    const stop = c.end ?? end;
    const list = busy.get(c.instance) ?? [];
    list.push([c.start, stop]);
    busy.set(c.instance, list);
    const secs = (stop - c.start) / 1000;
    vcpuUsed += c.vcpus * secs;
    ramUsed += c.ram * secs;
  }

  const billing = run.billing ?? PER_SECOND;
  let total = 0;
  let boot = 0;
  let work = 0;
  let vcpuPaid = 0;
  let ramPaid = 0;
  const costByType = new Map<string, number>();
  const hoursByType = new Map<string, number>();
  const boots: number[] = [];
  for (const i of run.instances) {
    const t = typeByName.get(i.type)!;
    const stop = i.destroyed ?? Math.max(end, i.created);
    const billed = billedMs(stop - i.created, billing) / 1000;
    const cost = (i.price * billed) / 3600;
    total += cost;
    costByType.set(i.type, (costByType.get(i.type) ?? 0) + cost);
    hoursByType.set(i.type, (hoursByType.get(i.type) ?? 0) + billed / 3600);
    const clipped = (busy.get(i.id) ?? []).map(([a, b]): [number, number] => [
      Math.max(a, i.created),
      Math.min(b, stop),
    ]);
    const busySecs = unionLength(clipped) / 1000;
    const bootSecs =
      ((i.ready === null ? stop : Math.min(Math.max(i.ready, i.created), stop)) - i.created) / 1000;
    boot += (i.price * bootSecs) / 3600;
    work += (i.price * busySecs) / 3600;
    vcpuPaid += t.vcpus * billed;
    ramPaid += t.ram * billed;
    if (i.ready !== null) boots.push((i.ready - i.created) / 1000);
  }

  const completed = run.containers.filter((c) => c.start !== null && c.end !== null);
  const lb = costLowerBound(
    (function* () {
      for (const c of completed)
        yield {
          vcpus: c.vcpus,
          ram: c.ram,
          scratch: c.scratch,
          gpus: c.gpus,
          preemptible: c.preemptible,
          duration: c.end! - c.start!,
        };
    })(),
    run.instanceTypes,
  );

  // A typed array sorts numerically without a comparator: much faster at a million waits.
  const waits = Float64Array.from(
    (function* () {
      for (const c of run.containers) if (c.start !== null) yield (c.start - c.arrival) / 1000;
    })(),
  ).sort();
  const r3 = (x: number | null) => (x === null ? null : round(x, 3));
  const wait: WaitStats = {
    p50: r3(percentile(waits, 50)),
    p90: r3(percentile(waits, 90)),
    p99: r3(percentile(waits, 99)),
    max: r3(percentile(waits, 100)),
    mean: waits.length === 0 ? null : round(waits.reduce((s, w) => s + w, 0) / waits.length, 3),
  };
  const histogram = WAIT_BUCKETS.map(([, bucket]) => ({ bucket, count: 0 }));
  for (const w of waits) histogram[WAIT_BUCKETS.findIndex(([le]) => w < le)]!.count++;

  let lastEnd = Number.NEGATIVE_INFINITY;
  let firstArrival = Number.POSITIVE_INFINITY;
  for (const c of run.containers) {
    firstArrival = Math.min(firstArrival, c.arrival);
    if (c.end !== null) lastEnd = Math.max(lastEnd, c.end);
  }

  const created: number[] = [];
  const destroyed: number[] = [];
  for (const i of run.instances) {
    created.push(i.created);
    if (i.destroyed !== null) destroyed.push(i.destroyed);
  }
  const queued: number[] = [];
  const started: number[] = [];
  for (const c of run.containers) {
    queued.push(c.arrival);
    if (c.start !== null) started.push(c.start);
  }
  const bootSorted = boots.sort((a, b) => a - b);

  return {
    format: 'berth-sim-report/1',
    policy: run.policy,
    seed: run.seed,
    period: {
      start: new Date(start).toISOString(),
      end: new Date(end).toISOString(),
      seconds: round((end - start) / 1000, 3),
    },
    containers: {
      total: run.containers.length,
      started: waits.length,
      completed: completed.length,
      neverStarted: run.containers.length - waits.length,
    },
    cost: {
      total: round(total, 6),
      lowerBound: round(lb.cost, 6),
      ratio: lb.cost > 0 ? round(total / lb.cost, 4) : null,
      boot: round(boot, 6),
      work: round(work, 6),
      idle: round(Math.max(0, total - boot - work), 6),
      byType: sortedRecord(costByType, 6),
    },
    lowerBound: { weights: lb.weights, unfitContainers: lb.unfit },
    criticalPathBound: pathBound(run, lb, total),
    wait,
    waitHistogram: histogram,
    ...waitCausesField(run),
    makespan: lastEnd === Number.NEGATIVE_INFINITY ? null : round((lastEnd - firstArrival) / 1000, 3),
    instances: {
      created: run.instances.length,
      interrupted: run.instances.filter((i) => i.interrupted === true).length,
      hoursByType: sortedRecord(hoursByType, 6),
      bootSeconds: { p50: r3(percentile(bootSorted, 50)), max: r3(percentile(bootSorted, 100)) },
    },
    utilization: {
      vcpu: vcpuPaid > 0 ? round(vcpuUsed / vcpuPaid, 4) : null,
      ram: ramPaid > 0 ? round(ramUsed / ramPaid, 4) : null,
    },
    series: {
      bucketSeconds: round(Math.max(1, (end - start) / SERIES_BUCKETS) / 1000, 3),
      instances: bucketMax(created, destroyed, start, end, SERIES_BUCKETS),
      queue: bucketMax(queued, started, start, end, SERIES_BUCKETS),
    },
    workflows: run.workflows === undefined ? null : workflowSection(run.workflows, start),
    rightSizing: rightSizingSection(run.containers, run.instanceTypes),
  };
}

/** The wait breakdown as an optional field: reports of runs that did not record causes stay as they were. */
function waitCausesField(run: RunRecord): { waitCauses?: WaitCausesSection } {
  const section = waitCausesSection(run.containers);
  return section === null ? {} : { waitCauses: section };
}

/** Serialises a report as report.json: two-space indentation and a final newline. */
export function reportJson(report: Report): string {
  return `${JSON.stringify(report, null, 2)}\n`;
}
