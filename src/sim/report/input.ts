// What a simulation run records for its report: one row per container (attempt) and per instance.
// All times are virtual ms since the epoch (the VirtualClock's nowMs()).
import type { BillingRule } from '../../model/billing.js';
import type { InstanceType } from '../../model/types.js';
import type { WorkflowRunRecord } from '../workflows.js';
import type { Usage } from '../workload/types.js';

/** One container as the run saw it. */
export interface ContainerRecord {
  id: string;
  /** When it was submitted. */
  arrival: number;
  /** When it started running; null if it never did. */
  start: number | null;
  /** When it stopped running (completed or killed); null if it was still running at the end. */
  end: number | null;
  vcpus: number;
  /** Bytes. */
  ram: number;
  /** Bytes. */
  scratch: number;
  gpus: number;
  preemptible: boolean;
  /** The instance it ran on; null if it never started. */
  instance: string | null;
  /** The exit code it reported; null or absent when it did not complete (killed, cancelled, running). */
  exitCode?: number | null;
  /** The request's name (right-sizing groups by it). */
  name?: string;
  /** What the job used, as its trace recorded it. */
  usage?: Usage;
  /** Its wait by cause (ms, in src/sim/wait-causes.ts CAUSES order), when the run recorded causes. */
  waitCauses?: number[];
}

/** One instance as the run saw it. */
export interface InstanceRecord {
  id: string;
  /** Instance type name (must be in RunRecord.instanceTypes). */
  type: string;
  /** Price per hour it was billed at. */
  price: number;
  created: number;
  /** When its agent registered; null if it never did. */
  ready: number | null;
  /** When it was destroyed; null if still alive at the end of the run. */
  destroyed: number | null;
  /** The cloud reclaimed it (a spot interruption) rather than Berth destroying it. */
  interrupted?: boolean;
}

/** Everything buildReport needs: the recorded events of one run plus its identity. */
export interface RunRecord {
  /** Name of the scheduling policy (the real scheduler, or a baseline). */
  policy: string;
  seed: number;
  instanceTypes: InstanceType[];
  containers: ContainerRecord[];
  instances: InstanceRecord[];
  /** How instances are billed; default per started second (PER_SECOND). */
  billing?: BillingRule;
  /** Workflow runs (closed-loop workloads); absent for job-only workloads. */
  workflows?: WorkflowRunRecord[];
  /** When the run started; default the earliest arrival or creation. */
  startTime?: number;
  /** When the run ended; instances never destroyed are billed up to here. Default the latest recorded time. */
  endTime?: number;
}

/** A run record that does not add up (a dangling reference, an end before a start). */
export class ReportInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReportInputError';
  }
}
