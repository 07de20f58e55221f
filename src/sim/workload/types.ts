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

/** A parsed workload: jobs sorted by arrival (ties in file order). */
export interface Workload {
  jobs: WorkloadJob[];
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

/** Sorts jobs by arrival, keeping file order for equal arrivals (Array.prototype.sort is stable). */
export function sortByArrival(jobs: WorkloadJob[]): WorkloadJob[] {
  return jobs.sort((a, b) => a.arrival - b.arrival);
}
