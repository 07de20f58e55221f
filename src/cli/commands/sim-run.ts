// The implementation of `berth sim` (sim.ts loads it when the command runs): run a workload through the
// real dispatcher on the simulated cloud and virtual clock (DESIGN §10), write report.json and
// report.html, print a summary; `berth sim compare A B` prints two reports side by side.
import { performance } from 'node:perf_hooks';
import { formatDuration } from '../../model/units.js';
import { ConfigError } from '../../config/declare.js';
import { defaultSimConfig, loadSimConfig, type SimConfig } from '../../sim/config.js';
import { isPolicyName, POLICIES, type PolicyName } from '../../sim/policy-names.js';
import type { Report } from '../../sim/report/build.js';
import { compareReports } from '../../sim/report/compare.js';
import { readReport, writeReport } from '../../sim/report/files.js';
import { runSimulation, type Progress } from '../../sim/run.js';
import { prepareWorkload } from '../../sim/workload/prepare.js';
import { WorkloadError, type WorkflowRun, type WorkloadJob } from '../../sim/workload/types.js';
import { UsageError } from '../errors.js';

export interface SimOpts {
  workload?: string;
  config?: string;
  seed: string;
  policy: string;
  limitJobs?: string;
  timeScale?: string;
  out?: string;
  json?: boolean;
  waitCauses?: boolean;
}

function wholeNumber(flag: string, v: string, min: number): number {
  if (!/^-?\d+$/.test(v) || Number(v) < min || !Number.isSafeInteger(Number(v)))
    throw new UsageError(`${flag}: expected a whole number >= ${min}, got ${JSON.stringify(v)}`);
  return Number(v);
}

function scaleFlag(v: string): number {
  const f = Number(v);
  if (v.trim() === '' || !Number.isFinite(f) || f <= 0)
    throw new UsageError(`--time-scale: expected a number above 0 such as 0.5, got ${JSON.stringify(v)}`);
  return f;
}

const r3 = (x: number): number => Math.round(x * 1000) / 1000;
const money = (x: number | null): string => (x === null ? '-' : x.toFixed(2));
const secs = (x: number | null): string => (x === null ? '-' : `${x.toFixed(1)}s`);

/** The short text summary of one run. */
export function summary(r: Report): string {
  const c = r.containers;
  return [
    `policy ${r.policy}, seed ${r.seed}: ${c.total} containers, ${c.completed} completed, ${c.neverStarted} never started; ${r.instances.created} instances`,
    `cost ${money(r.cost.total)}  lower bound ${money(r.cost.lowerBound)}  ratio ${r.cost.ratio === null ? '-' : r.cost.ratio.toFixed(3)}  (boot ${money(r.cost.boot)}, work ${money(r.cost.work)}, idle ${money(r.cost.idle)})`,
    `wait p50 ${secs(r.wait.p50)}  p90 ${secs(r.wait.p90)}  p99 ${secs(r.wait.p99)}  max ${secs(r.wait.max)}`,
    `makespan ${r.makespan === null ? '-' : formatDuration(r.makespan * 1000)}  utilization vcpu ${r.utilization.vcpu ?? '-'} ram ${r.utilization.ram ?? '-'}`,
    ...waitCauseLines(r),
    ...workflowLines(r),
    ...pathBoundLine(r),
    ...(r.rightSizing === null
      ? []
      : [
          `right-sizing from recorded usage: cost lower bound ${r.rightSizing.lowerBound.asked.toFixed(4)} as asked, ${r.rightSizing.lowerBound.rightSized.toFixed(4)} right-sized (berth usage --report for the table)`,
        ]),
  ].join('\n');
}

/** The wait breakdown (--wait-causes): mean seconds by cause, overall, in the tail, and the tail's top steps. */
function waitCauseLines(r: Report): string[] {
  const w = r.waitCauses;
  if (w === undefined) return [];
  const by = (m: Record<string, number>): string =>
    Object.entries(m)
      .filter(([, s]) => s > 0)
      .map(([k, s]) => `${k} ${s.toFixed(1)}s`)
      .join(', ');
  return [
    `wait by cause, mean per container: ${by(w.mean)}`,
    `  the ${w.tail.containers} that waited >= ${w.tail.threshold.toFixed(1)}s: ${by(w.tail.mean)}`,
    ...w.steps
      .filter((s) => s.tail > 0)
      .map(
        (s) =>
          `  ${s.step || '(unnamed)'}: ${s.tail} of ${s.containers} in the tail (fan-out ${s.fanOut}, run p50 ${secs(s.runP50)}, wait p50 ${secs(s.waitP50)} p90 ${secs(s.waitP90)}): ${by(s.tailMean)}`,
      ),
  ];
}

/** A single run's critical-path bound (report.criticalPathBound), when it has one. */
function pathBoundLine(r: Report): string[] {
  const b = r.criticalPathBound;
  if (b === null) return [];
  const x = (v: number | null) => (v === null ? '-' : v.toFixed(3));
  return [
    `critical-path bound ${money(b.cost)} (max(critical path ${formatDuration(b.criticalPath * 1000)}, billing minimum ${formatDuration(b.minimumBilled * 1000)}) × cheapest instance ${b.instancePrice ?? '-'}/h): ${x(b.overLowerBound)} × the lower bound; cost / it ${x(b.ratio)}`,
  ];
}

/** One line for all workflow runs, then one per workflow: makespan and its ratio to the critical path. */
function workflowLines(r: Report): string[] {
  const w = r.workflows;
  if (w === null) return [];
  const ratio = (x: number | null) => (x === null ? '-' : x.toFixed(2));
  const span = (x: number | null) => (x === null ? '-' : formatDuration(x * 1000));
  return [
    `workflows: ${w.runs.total} runs, ${w.runs.succeeded} succeeded, ${w.runs.failed} failed, ${w.runs.open} open; makespan / critical path p50 ${ratio(w.ratio.p50)} mean ${ratio(w.ratio.mean)} max ${ratio(w.ratio.max)}`,
    ...Object.entries(w.byWorkflow).map(
      ([name, s]) =>
        `  ${name}: ${s.succeeded}/${s.runs} runs, ${s.tasks} tasks, critical path ${span(s.criticalPath)}, makespan p50 ${span(s.makespan.p50)} max ${span(s.makespan.max)}, ratio p50 ${ratio(s.ratio.p50)} max ${ratio(s.ratio.max)}`,
    ),
  ];
}

export async function runCommand(opts: SimOpts): Promise<void> {
  if (opts.workload === undefined)
    throw new UsageError('--workload: required (a .swf, .swf.gz or .json file)');
  if (opts.out === undefined)
    throw new UsageError('--out: required (the directory for report.json and report.html)');
  if (!isPolicyName(opts.policy))
    throw new UsageError(
      `--policy: expected one of ${POLICIES.join(', ')}, got ${JSON.stringify(opts.policy)}`,
    );
  const policy: PolicyName = opts.policy;
  const seed = wholeNumber('--seed', opts.seed, 0);
  const limit = opts.limitJobs === undefined ? undefined : wholeNumber('--limit-jobs', opts.limitJobs, 1);
  const scale = opts.timeScale === undefined ? 1 : scaleFlag(opts.timeScale);

  let config: SimConfig;
  let jobs: WorkloadJob[];
  let workflows: WorkflowRun[];
  // Wall and CPU time per phase, for --json: on a shared machine CPU time is the steadier figure.
  const cpu0 = process.cpuUsage();
  const load0 = performance.now();
  try {
    config = opts.config === undefined ? defaultSimConfig() : loadSimConfig(opts.config);
    ({ jobs, workflows } = prepareWorkload(opts.workload, { limit, timeScale: scale }));
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(`--config ${err.message}`);
    if (err instanceof WorkloadError) throw new UsageError(`--workload ${err.message}`);
    throw err;
  }

  const loadSeconds = (performance.now() - load0) / 1000;
  const t0 = performance.now();
  let lastLine = t0;
  const onProgress = (p: Progress): void => {
    const t = performance.now();
    if (t - lastLine < 2000) return;
    lastLine = t;
    process.stderr.write(
      `sim: ${formatDuration(p.virtualMs)} virtual, ${p.submitted}/${p.jobs} submitted, ${p.active} active, ` +
        `${p.liveInstances} instances, ${p.passes} passes, ${((t - t0) / 1000).toFixed(0)}s` +
        // CPU since the start (loading included): what each stretch of passes cost, even under shared load.
        ` (${cpuSince(cpu0).toFixed(0)}s CPU)\n`,
    );
  };
  const { report, stats } = await runSimulation({
    jobs,
    workflows,
    config,
    seed,
    policy,
    onProgress,
    progressEvery: 500,
    waitCauses: opts.waitCauses === true,
  });
  const elapsed = (performance.now() - t0) / 1000;
  const cpuSeconds = cpuSince(cpu0);
  const files = writeReport(opts.out, report);
  if (opts.json) {
    process.stdout.write(
      `${JSON.stringify(
        {
          report,
          stats,
          seconds: r3(elapsed),
          timings: { loadSeconds: r3(loadSeconds), cpuSeconds: r3(cpuSeconds) },
        },
        null,
        2,
      )}\n`,
    );
    return;
  }
  process.stdout.write(`${summary(report)}\n`);
  if (stats.hitTimeLimit)
    process.stdout.write(
      `warning: stopped at the time limit (${formatDuration(stats.virtualMs)} virtual) with work or instances left\n`,
    );
  process.stdout.write(
    `wrote ${files.json} and ${files.html}; ${formatDuration(stats.virtualMs)} simulated in ${elapsed.toFixed(1)}s (${stats.passes} dispatcher passes)\n`,
  );
}

/** `berth sim compare A B`. */
export function compareCommand(a: string, b: string): void {
  let ra: Report;
  let rb: Report;
  try {
    ra = readReport(a);
    rb = readReport(b);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  process.stdout.write(compareReports(ra, rb));
}

/** User + system CPU seconds of this process since `from` (process.cpuUsage). */
function cpuSince(from: NodeJS.CpuUsage): number {
  const cpu = process.cpuUsage(from);
  return (cpu.user + cpu.system) / 1e6;
}
