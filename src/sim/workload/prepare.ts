// What `berth sim` and the quality gates do to a workload before a run: keep the first N jobs (and the
// first N workflow runs), and scale time (0.5 plays the same workload in half the virtual time: arrivals
// and run times, task run times and so critical paths included; boot times and timeouts are not scaled).
import { loadWorkload } from './load.js';
import type { Workflow, WorkflowRun, WorkloadJob } from './types.js';
import { criticalPath } from './wfcommons.js';

export interface PrepareOptions {
  /** Keep the first N jobs and the first N workflow runs. */
  limit?: number;
  /** Multiply arrival offsets and run times. Default 1. */
  timeScale?: number;
}

const scaleMs = (ms: number, f: number): number => Math.max(1, Math.round(ms * f));

function scaledJobs(jobs: WorkloadJob[], f: number): WorkloadJob[] {
  if (f === 1) return jobs;
  return jobs.map((j) => ({
    ...j,
    arrival: Math.round(j.arrival * f),
    duration: scaleMs(j.duration, f),
    ...(j.requestedTime === undefined ? {} : { requestedTime: scaleMs(j.requestedTime, f) }),
  }));
}

function scaledRuns(runs: WorkflowRun[], f: number): WorkflowRun[] {
  if (f === 1) return runs;
  const done = new Map<Workflow, Workflow>();
  const scale = (w: Workflow): Workflow => {
    const tasks = w.tasks.map((t) => ({ ...t, duration: scaleMs(t.duration, f) }));
    return { ...w, tasks, criticalPath: criticalPath(tasks) };
  };
  return runs.map((r) => {
    let w = done.get(r.workflow);
    if (w === undefined) done.set(r.workflow, (w = scale(r.workflow)));
    return { ...r, arrival: Math.round(r.arrival * f), workflow: w };
  });
}

/** Loads a workload file for a run. Throws WorkloadError naming the file and field. */
export function prepareWorkload(
  path: string,
  o: PrepareOptions = {},
): { jobs: WorkloadJob[]; workflows: WorkflowRun[] } {
  const w = loadWorkload(path, o.limit === undefined ? {} : { limit: o.limit });
  const f = o.timeScale ?? 1;
  return {
    jobs: scaledJobs(o.limit === undefined ? w.jobs : w.jobs.slice(0, o.limit), f),
    workflows: scaledRuns(o.limit === undefined ? w.workflows : w.workflows.slice(0, o.limit), f),
  };
}
