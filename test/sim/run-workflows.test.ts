// Closed-loop workflows: the engine on its own, then through the real dispatcher with hand-computed times.
import { describe, expect, it } from 'vitest';
import { runSimulation } from '../../src/sim/run.js';
import { WorkflowEngine } from '../../src/sim/workflows.js';
import type { Workflow, WorkflowRun, WorkloadJob } from '../../src/sim/workload/types.js';
import { criticalPath } from '../../src/sim/workload/wfcommons.js';
import { GiB, smallConfig } from './helpers.js';

/** A workflow from (id, seconds, parent ids) rows, listed parents first. */
function workflow(name: string, rows: Array<[string, number, string[]]>): Workflow {
  const index = new Map(rows.map(([id], i) => [id, i]));
  const tasks = rows.map(([id, secs, parents]) => ({
    id,
    name: id.replace(/\d+$/, ''),
    parents: parents.map((p) => index.get(p)!),
    children: [] as number[],
    vcpus: 1,
    ram: GiB,
    duration: secs * 1000,
    usage: { cpuSeconds: null, peakRam: null },
  }));
  tasks.forEach((t, i) => t.parents.forEach((p) => tasks[p]!.children.push(i)));
  return { name, tasks, criticalPath: criticalPath(tasks) };
}

const run = (w: Workflow, id: string, arrivalS = 0): WorkflowRun => ({
  id,
  workflow: w,
  arrival: arrivalS * 1000,
  priority: 500,
  preemptible: false,
});

// a → (b, c) → d
const DIAMOND = workflow('diamond', [
  ['a', 100, []],
  ['b', 50, ['a']],
  ['c', 20, ['a']],
  ['d', 10, ['b', 'c']],
]);

describe('WorkflowEngine', () => {
  function engine(rememberRuns = false) {
    let now = 0;
    const submitted: WorkloadJob[] = [];
    const e = new WorkflowEngine({
      now: () => now,
      start: 0,
      submit: (j) => submitted.push(j),
      rememberRuns,
    });
    return { e, submitted, at: (t: number) => (now = t), ids: () => submitted.map((j) => j.id) };
  }

  it('submits a task once every parent succeeded, and ends the run with its last task', () => {
    const { e, at, ids, submitted } = engine();
    e.start(run(DIAMOND, 'r'));
    expect(ids()).toEqual(['r/a']);
    expect(submitted[0]).toMatchObject({ name: 'a', vcpus: 1, ram: GiB, duration: 100_000, arrival: 0 });
    at(5);
    e.requestFinal('r/a', 'success');
    expect(ids()).toEqual(['r/a', 'r/b', 'r/c']);
    e.requestFinal('r/c', 'success');
    expect(ids()).toHaveLength(3);
    at(9);
    e.requestFinal('r/b', 'success');
    expect(ids()).toEqual(['r/a', 'r/b', 'r/c', 'r/d']);
    expect(e.open).toBe(1);
    at(12);
    e.requestFinal('r/d', 'success');
    expect(e.open).toBe(0);
    expect(e.runs()).toEqual([
      {
        id: 'r',
        workflow: 'diamond',
        arrival: 0,
        end: 12,
        criticalPath: 160_000,
        tasks: 4,
        succeeded: 4,
        outcome: 'success',
      },
    ]);
  });

  it('a task that fails for good fails its run: nothing more is submitted, the run ends with its last task', () => {
    const { e, at, ids } = engine();
    e.start(run(DIAMOND, 'r'));
    e.requestFinal('r/a', 'success');
    at(7);
    e.requestFinal('r/c', 'failed');
    expect(e.open).toBe(1);
    at(8);
    e.requestFinal('r/b', 'success');
    expect(ids()).toEqual(['r/a', 'r/b', 'r/c']);
    expect(e.open).toBe(0);
    expect(e.runs()[0]).toMatchObject({ end: 8, succeeded: 2, outcome: 'failed' });
  });

  it('rememberRuns (workflow_estimates: previous): a task carries its run time in the last run of the workflow that completed it', () => {
    const { e, submitted } = engine(true);
    const expected = (id: string) => submitted.find((j) => j.id === id)!.requestedTime;
    e.start(run(DIAMOND, 'r1'));
    e.start(run(DIAMOND, 'r2'));
    // Nothing known yet: neither run's `a` carries an expected run time.
    expect(expected('r1/a')).toBeUndefined();
    expect(expected('r2/a')).toBeUndefined();
    e.requestFinal('r1/a', 'success');
    e.requestFinal('r1/b', 'success');
    e.requestFinal('r1/c', 'failed');
    // A third run starts: `a` and `b` succeeded in r1 (100 s, 50 s); `c` never did, so it carries nothing.
    e.start(run(DIAMOND, 'r3'));
    expect(expected('r3/a')).toBe(100_000);
    e.requestFinal('r3/a', 'success');
    expect(expected('r3/b')).toBe(50_000);
    expect(expected('r3/c')).toBeUndefined();
    // Another workflow's task of the same id learns nothing from this one.
    e.start(run(workflow('other', [['a', 7, []]]), 'o1'));
    expect(expected('o1/a')).toBeUndefined();
  });

  it('without rememberRuns no task carries an expected run time', () => {
    const { e, submitted } = engine();
    e.start(run(DIAMOND, 'r1'));
    e.requestFinal('r1/a', 'success');
    e.start(run(DIAMOND, 'r2'));
    expect(submitted.map((j) => j.requestedTime)).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('requests that are not its tasks are not its business', () => {
    const { e } = engine();
    expect(e.requestFinal('job-1', 'success')).toBe(false);
  });
});

describe('workflows through the simulator (closed loop)', () => {
  // One 2-vcpu type at a cent per second, 60 s fixed boot, no start delay, 60 s idle timeout.
  it('children are submitted when their parents end: hand-computed times and makespan', async () => {
    const chain = workflow('chain', [
      ['a', 100, []],
      ['b', 50, ['a']],
    ]);
    const { record, report, stats } = await runSimulation({
      jobs: [],
      workflows: [run(chain, 'chain/1', 10)],
      config: smallConfig(),
      seed: 1,
      policy: 'berth',
    });
    expect(stats.hitTimeLimit).toBe(false);
    // a: submitted at 10, boots 10–70, runs 70–170. b: submitted at 170 (not before), onto the idle
    // instance at once, runs 170–220.
    const times = record.containers.map((c) => [c.id, c.arrival / 1000, c.start! / 1000, c.end! / 1000]);
    const t0 = record.startTime! / 1000;
    expect(times.map(([id, a, s, e]) => [id, Number(a) - t0, Number(s) - t0, Number(e) - t0])).toEqual([
      ['chain/1/a', 10, 70, 170],
      ['chain/1/b', 170, 170, 220],
    ]);
    expect(report.instances.created).toBe(1);
    expect(report.workflows).toEqual({
      runs: { total: 1, succeeded: 1, failed: 0, open: 0 },
      ratio: { p50: 1.4, mean: 1.4, max: 1.4 },
      byWorkflow: {
        chain: {
          runs: 1,
          succeeded: 1,
          tasks: 2,
          criticalPath: 150,
          makespan: { p50: 210, mean: 210, max: 210 },
          ratio: { p50: 1.4, mean: 1.4, max: 1.4 },
        },
      },
      list: [
        {
          id: 'chain/1',
          workflow: 'chain',
          start: 10,
          makespan: 210,
          criticalPath: 150,
          ratio: 1.4,
          outcome: 'success',
        },
      ],
    });
  });

  it('the critical-path bound of a single run: critical path × the cheapest instance, above the lower bound', async () => {
    // DIAMOND: critical path a + b + d = 160 s; work 180 vcpu-seconds, 1 GiB per task. Types: t2 (2 vcpu,
    // 8 GiB, 3.6/h) and t16 (16 vcpu, 64 GiB, 14.4/h: 0.9 per vcpu-hour, 0.225 per GiB-hour).
    // Lower bound: 180 s × 0.9/h = 0.045 (ram: 180 s × 0.225/h = 0.01125). Some instance is up for the whole
    // path, at least t2's 3.6/h: 160 s × 3.6/h = 0.16, 3.5556 × the lower bound.
    const catalog = [
      { name: 't2', vcpus: 2, ram: '8GiB', scratch: '100GiB', price: 3.6 },
      { name: 't16', vcpus: 16, ram: '64GiB', scratch: '100GiB', price: 14.4 },
    ];
    const config = smallConfig({ catalog });
    const one = await runSimulation({
      jobs: [],
      workflows: [run(DIAMOND, 'd/1')],
      config,
      seed: 1,
      policy: 'berth',
    });
    expect(one.report.cost.lowerBound).toBe(0.045);
    expect(one.report.criticalPathBound).toEqual({
      cost: 0.16,
      criticalPath: 160,
      minimumBilled: 60,
      instancePrice: 3.6,
      overLowerBound: 3.5556,
      ratio: Math.round((one.report.cost.total / 0.16) * 1e4) / 1e4,
    });
    expect(one.report.cost.total).toBeGreaterThanOrEqual(0.16);
    // Two runs may share instances side by side: no bound for them.
    const two = await runSimulation({
      jobs: [],
      workflows: [run(DIAMOND, 'd/1'), run(DIAMOND, 'd/2')],
      config,
      seed: 1,
      policy: 'berth',
    });
    expect(two.report.criticalPathBound).toBeNull();
    // A path shorter than the billing minimum (EC2's 60 s here): a alone, 100 s, under a 10-minute minimum:
    // 600 s × 3.6/h = 0.6 (the lower bound: 100 s × 0.9/h = 0.025).
    const short = await runSimulation({
      jobs: [],
      workflows: [run(workflow('one', [['a', 100, []]]), 'o/1')],
      config: smallConfig({ catalog, billing: { minimum: '10m' } }),
      seed: 1,
      policy: 'berth',
    });
    expect(short.report.criticalPathBound).toMatchObject({
      cost: 0.6,
      minimumBilled: 600,
      overLowerBound: 24,
    });
  });

  it('a slow start delays the children: 120 s boots add 60 s to the makespan', async () => {
    const makespan = async (boot: string) =>
      (
        await runSimulation({
          jobs: [],
          workflows: [run(DIAMOND, 'd/1')],
          config: smallConfig({ boot_time: { kind: 'fixed', time: boot } }),
          seed: 1,
          policy: 'berth',
        })
      ).report.workflows!.list[0]!.makespan;
    // a boots 0–60 and runs to 160; b and c pack on the same 2-vcpu instance (160–210, 160–180); d 210–220.
    expect(await makespan('60s')).toBe(220);
    expect(await makespan('120s')).toBe(280);
  });

  it('runs of several workflows and open-loop jobs share one simulation; every task completes', async () => {
    const { report, stats } = await runSimulation({
      jobs: [
        {
          id: 'job',
          arrival: 0,
          vcpus: 1,
          ram: GiB,
          scratch: 0,
          gpus: 0,
          duration: 30_000,
          priority: 500,
          preemptible: false,
        },
      ],
      workflows: [run(DIAMOND, 'd/1', 0), run(DIAMOND, 'd/2', 500)],
      config: smallConfig(),
      seed: 1,
      policy: 'berth',
    });
    expect(stats.requests).toEqual({ success: 9, failed: 0, cancelled: 0, open: 0 });
    expect(report.containers.completed).toBe(9);
    expect(report.workflows!.runs).toEqual({ total: 2, succeeded: 2, failed: 0, open: 0 });
    expect(report.workflows!.list.map((r) => r.start)).toEqual([0, 500]);
  });
});
