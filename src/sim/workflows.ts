// The simulated workflow engine (closed loop): it submits a run's tasks as a workflow engine (Nextflow,
// Pegasus, Makeflow) would, each task once all its parents have succeeded, so a slow start or a long
// queue wait of one task delays its children. A task that fails for good (failed or cancelled after its
// retries) fails its run: nothing more of it is submitted, and the run ends when its submitted tasks
// have. Pure bookkeeping on the injected clock; the harness wires `submit` to the queue and calls
// `requestFinal` from the queue's observer.
import type { WorkloadJob, WorkflowRun } from './workload/types.js';

/** How a run ended: every task succeeded, one failed for good, or the simulation stopped first. */
export type RunOutcome = 'success' | 'failed' | 'open';

/** One workflow run as the simulation saw it (for the report). Times in virtual ms since the epoch. */
export interface WorkflowRunRecord {
  id: string;
  /** The workflow's name (its file). */
  workflow: string;
  /** When the run started: its first tasks were submitted. */
  arrival: number;
  /** When its last task ended; null while open. */
  end: number | null;
  /** The workflow's critical path in ms (the least makespan possible). */
  criticalPath: number;
  tasks: number;
  /** Tasks that succeeded. */
  succeeded: number;
  outcome: RunOutcome;
}

interface RunState {
  run: WorkflowRun;
  /** Per task: parents not yet succeeded. */
  waiting: Int32Array;
  /** Tasks submitted and not final. */
  active: number;
  failed: boolean;
  record: WorkflowRunRecord;
}

export interface WorkflowEngineOptions {
  /** The current virtual time in ms since the epoch. */
  now(): number;
  /** Where the workload's time 0 is (arrival offsets are relative to it). */
  start: number;
  /** Submits one task as a container request (the harness's submission path). */
  submit(job: WorkloadJob): void;
  /**
   * The engine passes a task's run time in the last completed run of the same workflow as the request's
   * expected run time (`requestedTime`); false (default): nothing.
   */
  rememberRuns?: boolean;
}

/** Runs workflows: submits ready tasks and follows their outcomes. */
export class WorkflowEngine {
  private readonly byRequest = new Map<string, { state: RunState; task: number }>();
  private readonly records: WorkflowRunRecord[] = [];
  private openRuns = 0;
  /** Tasks submitted so far. */
  submitted = 0;
  /** With rememberRuns: each task's run time when it last succeeded, by workflow name and task id. */
  private readonly lastRun = new Map<string, number>();

  constructor(private readonly o: WorkflowEngineOptions) {}

  /** Runs started and not yet ended. */
  get open(): number {
    return this.openRuns;
  }

  /** Every run started so far, in start order. */
  runs(): WorkflowRunRecord[] {
    return this.records;
  }

  /** Starts a run now: its tasks without parents are submitted at once. */
  start(run: WorkflowRun): void {
    const tasks = run.workflow.tasks;
    const state: RunState = {
      run,
      waiting: Int32Array.from(tasks, (t) => t.parents.length),
      active: 0,
      failed: false,
      record: {
        id: run.id,
        workflow: run.workflow.name,
        arrival: this.o.now(),
        end: null,
        criticalPath: run.workflow.criticalPath,
        tasks: tasks.length,
        succeeded: 0,
        outcome: 'open',
      },
    };
    this.records.push(state.record);
    this.openRuns++;
    tasks.forEach((t, i) => {
      if (t.parents.length === 0) this.submitTask(state, i);
    });
  }

  /**
   * A request became final. Returns false when it is not a task of a run (an open-loop job). A success
   * releases the task's children whose parents have now all succeeded; anything else fails the run.
   */
  requestFinal(requestId: string, outcome: 'success' | 'failed' | 'cancelled'): boolean {
    const entry = this.byRequest.get(requestId);
    if (entry === undefined) return false;
    this.byRequest.delete(requestId);
    const { state, task } = entry;
    state.active--;
    if (outcome === 'success') {
      state.record.succeeded++;
      if (this.o.rememberRuns === true) {
        const t = state.run.workflow.tasks[task]!;
        this.lastRun.set(`${state.run.workflow.name}/${t.id}`, t.duration);
      }
      if (!state.failed)
        for (const c of state.run.workflow.tasks[task]!.children)
          if (--state.waiting[c]! === 0) this.submitTask(state, c);
    } else state.failed = true;
    if (state.active === 0) this.end(state);
    return true;
  }

  private end(state: RunState): void {
    const r = state.record;
    r.end = this.o.now();
    r.outcome = state.failed ? 'failed' : 'success';
    this.openRuns--;
  }

  private submitTask(state: RunState, i: number): void {
    const t = state.run.workflow.tasks[i]!;
    const id = `${state.run.id}/${t.id}`;
    const expected =
      this.o.rememberRuns === true ? this.lastRun.get(`${state.run.workflow.name}/${t.id}`) : undefined;
    state.active++;
    this.submitted++;
    this.byRequest.set(id, { state, task: i });
    this.o.submit({
      id,
      arrival: this.o.now() - this.o.start,
      vcpus: t.vcpus,
      ram: t.ram,
      scratch: 0,
      gpus: 0,
      duration: t.duration,
      priority: state.run.priority,
      preemptible: state.run.preemptible,
      name: t.name,
      usage: t.usage,
      ...(expected === undefined ? {} : { requestedTime: expected }),
    });
  }
}
