// The report's workflow section: each run's makespan (first submission → last task end) against its
// workflow's critical path (the longest path of run times: what the run would take with every task
// started the moment its parents ended), and both summarised per workflow.
import type { WorkflowRunRecord } from '../workflows.js';
import { ReportInputError } from './input.js';
import { percentile, round } from './stats.js';

/** Median, mean and maximum of a set of values; nulls when the set is empty. */
export interface Spread {
  p50: number | null;
  mean: number | null;
  max: number | null;
}

/** One workflow's runs. Makespans in seconds; ratios are makespan / critical path. */
export interface WorkflowSummary {
  runs: number;
  succeeded: number;
  tasks: number;
  criticalPath: number;
  /** Over succeeded runs. */
  makespan: Spread;
  ratio: Spread;
}

export interface WorkflowSection {
  runs: { total: number; succeeded: number; failed: number; open: number };
  /** Over every succeeded run of every workflow. */
  ratio: Spread;
  byWorkflow: Record<string, WorkflowSummary>;
  /** Every run, in start order. `start` is seconds after the period's start; null fields while open. */
  list: Array<{
    id: string;
    workflow: string;
    start: number;
    makespan: number | null;
    criticalPath: number;
    ratio: number | null;
    outcome: WorkflowRunRecord['outcome'];
  }>;
}

function spread(values: number[], digits: number): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  const r = (x: number | null) => (x === null ? null : round(x, digits));
  return {
    p50: r(percentile(sorted, 50)),
    mean: sorted.length === 0 ? null : round(sorted.reduce((s, x) => s + x, 0) / sorted.length, digits),
    max: r(percentile(sorted, 100)),
  };
}

/** Summarises workflow runs; `start` is the period's start (ms). */
export function workflowSection(runs: WorkflowRunRecord[], start: number): WorkflowSection {
  for (const r of runs) {
    if (r.end !== null && r.end < r.arrival)
      throw new ReportInputError(`workflow run ${r.id}: ends before it starts`);
    if (!(r.criticalPath > 0))
      throw new ReportInputError(`workflow run ${r.id}: critical path must be above 0`);
  }
  const list = runs.map((r) => {
    const makespan = r.end === null ? null : (r.end - r.arrival) / 1000;
    return {
      id: r.id,
      workflow: r.workflow,
      start: round((r.arrival - start) / 1000, 3),
      makespan: makespan === null ? null : round(makespan, 3),
      criticalPath: round(r.criticalPath / 1000, 3),
      ratio: makespan === null ? null : round(makespan / (r.criticalPath / 1000), 4),
      outcome: r.outcome,
    };
  });
  const succeeded = list.filter((r) => r.outcome === 'success');
  const names = [...new Set(runs.map((r) => r.workflow))].sort();
  const byWorkflow: Record<string, WorkflowSummary> = {};
  for (const name of names) {
    const mine = runs.filter((r) => r.workflow === name);
    const ok = succeeded.filter((r) => r.workflow === name);
    byWorkflow[name] = {
      runs: mine.length,
      succeeded: ok.length,
      tasks: mine[0]!.tasks,
      criticalPath: round(mine[0]!.criticalPath / 1000, 3),
      makespan: spread(
        ok.map((r) => r.makespan!),
        3,
      ),
      ratio: spread(
        ok.map((r) => r.makespan! / r.criticalPath),
        4,
      ),
    };
  }
  return {
    runs: {
      total: runs.length,
      succeeded: succeeded.length,
      failed: list.filter((r) => r.outcome === 'failed').length,
      open: list.filter((r) => r.outcome === 'open').length,
    },
    ratio: spread(
      succeeded.map((r) => r.makespan! / r.criticalPath),
      4,
    ),
    byWorkflow,
    list,
  };
}
