// The packer's input (src/sim/pack.ts): a workload's jobs and workflow tasks with their zero-wait starts,
// and the run times the packer decides by.
import { estimateMs, runKey } from '../dispatch/scheduler/durations.js';
import type { PackJob } from './pack.js';
import type { WorkflowRun, WorkloadJob } from './workload/types.js';

/**
 * Where the packer's run-time estimates come from: the true run times (clairvoyant); the users' requested
 * times (SWF field 9); history known at the job's arrival, the median run time of the last
 * HISTORY finished jobs of the same user (`user`, SWF field 12) or the same size (`size`, vcpus); the
 * median of the job's step over the whole workload (`step`: its name's run key, as the dispatcher's step
 * history groups names, durations.ts; more than a scheduler learns, since it is known from the start); or
 * nothing (`none`: every job is expected to take NOTHING_MS).
 */
export type PackEstimates = 'exact' | 'requested' | 'user' | 'size' | 'step' | 'none';
export const PACK_ESTIMATES: readonly PackEstimates[] = [
  'exact',
  'requested',
  'user',
  'size',
  'step',
  'none',
];

/** The run time every job is expected to take with `none` (any constant: only the order of ends counts). */
export const NOTHING_MS = 1000;

/** How many finished jobs a history estimate looks back on (as the dispatcher's run history: 32). */
export const HISTORY = 32;

/**
 * Zero-wait start times for SWF/JSON jobs and workflow tasks, with the run time each job is judged by.
 * Workflow tasks are judged by their true run times except under `step` and `none` (which judge every job),
 * as are jobs the chosen source says nothing about (no requested time), except under history, where a job
 * with no history yet takes the median of all finished jobs.
 */
export function packJobs(
  jobs: WorkloadJob[],
  runs: WorkflowRun[],
  estimates: PackEstimates = 'exact',
): PackJob[] {
  if (estimates === 'step' || estimates === 'none') return estimated(jobs, runs, estimates);
  const guess = estimates === 'user' || estimates === 'size' ? historyEstimates(jobs, estimates) : null;
  const out: PackJob[] = jobs.map((j, i) => ({
    ...(estimates === 'requested' && j.requestedTime !== undefined ? { estimate: j.requestedTime } : {}),
    ...(guess !== null && guess[i] !== null ? { estimate: guess[i] } : {}),
    start: j.arrival,
    vcpus: j.vcpus,
    ram: j.ram,
    scratch: j.scratch,
    gpus: j.gpus,
    preemptible: j.preemptible,
    duration: j.duration,
  }));
  for (const r of runs) {
    const finish: number[] = [];
    const base = out.length;
    r.workflow.tasks.forEach((t, i) => {
      let ready = r.arrival;
      for (const p of t.parents) ready = Math.max(ready, finish[p]!);
      finish[i] = ready + t.duration;
      out.push({
        start: ready,
        vcpus: t.vcpus,
        ram: t.ram,
        scratch: 0,
        gpus: 0,
        preemptible: r.preemptible,
        duration: t.duration,
        ...(t.parents.length > 0 ? { parents: t.parents.map((p) => base + p) } : {}),
      });
    });
  }
  return out;
}

/** The jobs and workflow tasks judged by `step` or `none`. */
function estimated(jobs: WorkloadJob[], runs: WorkflowRun[], estimates: 'step' | 'none'): PackJob[] {
  const all = packJobs(jobs, runs, 'exact');
  if (estimates === 'none') return all.map((j) => ({ ...j, estimate: NOTHING_MS }));
  const names = [
    ...jobs.map((j) => j.name ?? ''),
    ...runs.flatMap((r) => r.workflow.tasks.map((t) => t.name)),
  ];
  const byStep = new Map<string, number[]>();
  all.forEach((j, i) => {
    const k = runKey(names[i]!);
    let xs = byStep.get(k);
    if (xs === undefined) byStep.set(k, (xs = []));
    xs.push(j.duration);
  });
  const median = new Map([...byStep].map(([k, xs]) => [k, xs.sort((a, b) => a - b)[(xs.length - 1) >> 1]!]));
  return all.map((j, i) => ({ ...j, estimate: median.get(runKey(names[i]!))! }));
}

/**
 * Per job, what history known at its arrival says of its run time: the median of the last HISTORY jobs of
 * its key (user or size) that ended by then; with none, of the last HISTORY jobs of any key; null before
 * any job ended. Jobs in `jobs` are in arrival order (Workload sorts them).
 */
function historyEstimates(jobs: WorkloadJob[], by: 'user' | 'size'): Array<number | null> {
  const keyOf = (j: WorkloadJob): string => (by === 'user' ? (j.user ?? '') : String(j.vcpus));
  // Ends not yet seen, in end order: a sorted array consumed from the front (jobs are few enough).
  const pending = jobs
    .map((j, i) => ({ end: j.arrival + j.duration, i }))
    .sort((a, b) => a.end - b.end || a.i - b.i);
  let next = 0;
  const byKey = new Map<string, number[]>();
  const any: number[] = [];
  const push = (xs: number[], x: number): void => {
    xs.push(x);
    if (xs.length > HISTORY) xs.shift();
  };
  return jobs.map((j) => {
    while (next < pending.length && pending[next]!.end <= j.arrival) {
      const done = jobs[pending[next]!.i]!;
      let xs = byKey.get(keyOf(done));
      if (xs === undefined) byKey.set(keyOf(done), (xs = []));
      push(xs, done.duration);
      push(any, done.duration);
      next++;
    }
    return estimateMs(byKey.get(keyOf(j)) ?? []) ?? estimateMs(any);
  });
}
