// The simulator's workload: the container requests a run submits, whatever file they came from.

/** One container request to submit during a simulation. */
export interface WorkloadJob {
  id: string;
  /** When it is submitted, in ms after the workload's start. */
  arrival: number;
  vcpus: number;
  /** Bytes. */
  ram: number;
  /** Bytes. */
  scratch: number;
  gpus: number;
  /** How long it runs once started, in ms. */
  duration: number;
  /** 1–1000, higher first (DESIGN §3.1). */
  priority: number;
  preemptible: boolean;
  /** The run time its user asked for (SWF field 9, requested time), ms; absent: not recorded. */
  requestedTime?: number;
  /** Who submitted it (SWF field 12, user id); absent: not recorded. */
  user?: string;
  /** What the request is called (right-sizing groups by it); default none. */
  name?: string;
  /** What the job really used, where the trace recorded it (right-sizing). */
  usage?: Usage;
}

/** Resources a job used, as far as its trace recorded them (null = not recorded). */
export interface Usage {
  /** CPU time in seconds over the whole run (all cores). */
  cpuSeconds: number | null;
  /** Peak memory in bytes. */
  peakRam: number | null;
}

/** One task of a workflow: a container request submitted once all its parents have succeeded. */
export interface WorkflowTask {
  /** The task's id in its file. */
  id: string;
  /** Its kind (the program or step), shared by the tasks that run the same thing. */
  name: string;
  /** Indices into Workflow.tasks. */
  parents: number[];
  children: number[];
  vcpus: number;
  /** Bytes. */
  ram: number;
  /** Run time in ms (at least 1). */
  duration: number;
  usage: Usage;
}

/** A workflow (a DAG of tasks) as read from one file; runs of it share this object. */
export interface Workflow {
  /** The file's name without directory and extensions ("rnaseq-dirt02-001"). */
  name: string;
  /** In topological order: every task comes after its parents. */
  tasks: WorkflowTask[];
  /** The longest path of run times through the DAG, in ms: no run can finish sooner. */
  criticalPath: number;
}

/** One run of a workflow: its tasks are submitted by the simulated workflow engine from `arrival` on. */
export interface WorkflowRun {
  /** Unique in the workload ("rnaseq-dirt02-001/3"); task requests are "<run id>/<task id>". */
  id: string;
  workflow: Workflow;
  /** When the run starts (its first tasks are submitted), in ms after the workload's start. */
  arrival: number;
  priority: number;
  preemptible: boolean;
}

/** Lines of a trace that did not become jobs, by reason. */
export interface SkipCounts {
  /** Unparseable lines or impossible values (wrong field count, no processors, unknown run time). */
  malformed: number;
  /** Jobs the trace records as cancelled (SWF status 5). */
  cancelled: number;
  /** Jobs that ran for zero seconds. */
  zeroRuntime: number;
}

/** A parsed workload: jobs and workflow runs, each sorted by arrival (ties in file order). */
export interface Workload {
  jobs: WorkloadJob[];
  /** Closed-loop work: each run's tasks are submitted as their parents finish. */
  workflows: WorkflowRun[];
  skipped: SkipCounts;
  /** Up to five examples of skipped lines, "line N: reason", so a user can see what was dropped. */
  skippedExamples: string[];
}

/** A workload file that cannot be used; the message names the field or line and what was expected. */
export class WorkloadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WorkloadError';
  }
}

/** Sorts by arrival, keeping file order for equal arrivals (Array.prototype.sort is stable). */
export function sortByArrival<T extends { arrival: number }>(items: T[]): T[] {
  return items.sort((a, b) => a.arrival - b.arrival);
}
