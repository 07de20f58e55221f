// The harness end to end on hand-computed workloads: the real Dispatcher, SimQueue, agents, sim cloud.
import { describe, expect, it } from 'vitest';
import { runSimulation } from '../../src/sim/run.js';
import { job, smallConfig as config } from './helpers.js';

describe('runSimulation', () => {
  it('one container: pays boot + run, and its instance goes at once (no arrival is likely to use it)', async () => {
    const { report, stats } = await runSimulation({
      jobs: [job('a', 0, 100)],
      config: config(),
      seed: 1,
      policy: 'berth',
    });
    expect(stats.hitTimeLimit).toBe(false);
    // Every pass either planned in full or reused the last plan (stats.planner, docs/SIMULATOR.md).
    expect(stats.planner.full).toBeGreaterThan(0);
    expect(stats.planner.full + stats.planner.reused).toBe(stats.passes);
    // Every full pass merged or sorted the queue and built or reused the pool view (scheduler/kept*.ts).
    expect(stats.planner.queue.merged + stats.planner.queue.sorted).toBe(stats.planner.full);
    expect(stats.planner.pool.built + stats.planner.pool.reused).toBe(stats.planner.full);
    expect(report.containers).toEqual({ total: 1, started: 1, completed: 1, neverStarted: 0 });
    expect(report.instances.created).toBe(1);
    expect(report.wait.p50).toBe(60);
    // 60 s boot + 100 s run: the instance is shut down in the pass that sees it idle.
    expect(report.cost.total).toBeCloseTo((3.6 * (60 + 100)) / 3600, 6);
    expect(report.cost.lowerBound).toBeCloseTo((3.6 * 100) / 3600 / 2, 6);
  });

  it('two containers that pack onto one instance cost less than one per instance', async () => {
    const jobs = [job('a', 0, 100), job('b', 0, 100)];
    const berth = await runSimulation({ jobs, config: config(), seed: 1, policy: 'berth' });
    const single = await runSimulation({ jobs, config: config(), seed: 1, policy: 'one-per-instance' });
    expect(berth.report.instances.created).toBe(1);
    expect(single.report.instances.created).toBe(2);
    expect(berth.report.cost.total).toBeCloseTo((3.6 * 160) / 3600, 6);
    expect(single.report.cost.total).toBeCloseTo((2 * 3.6 * 160) / 3600, 6);
    expect(berth.report.cost.total).toBeLessThan(single.report.cost.total);
  });

  it('min_billing_period: a later container reuses the idle instance it paid for instead of booting another', async () => {
    const jobs = [job('a', 0, 100), job('b', 170, 10)];
    const run = (minBilling: string) =>
      runSimulation({
        jobs,
        config: config({ scheduler: { min_billing_period: minBilling } }),
        seed: 1,
        policy: 'berth',
      });
    // Billed 3 minutes at least: kept idle until then, b arrives 10 s into a's idle time and starts at once.
    const kept = await run('3m');
    expect(kept.report.instances.created).toBe(1);
    expect(kept.report.wait.p50).toBe(0);
    // Billed per second: a's instance went when it emptied; b boots another.
    const gone = await run('0s');
    expect(gone.report.instances.created).toBe(2);
    expect(gone.report.wait.max).toBe(60);
  });

  it('an instance is kept warm while arrivals that could use it keep coming', async () => {
    // A 5-second job every 20 s: the recent rate (3 a minute) expects 1.5 within idle_timeout (30 s).
    const jobs = Array.from({ length: 16 }, (_, i) => job(`j${i}`, 100 + 20 * i, 5));
    const run = (idle: string) =>
      runSimulation({
        jobs,
        config: config({ scheduler: { idle_timeout: idle } }),
        seed: 1,
        policy: 'berth',
      });
    // Two instances while the first boots (three jobs arrive in its 60 s boot; it holds two), then the
    // stream is served by a kept instance.
    const warm = await run('30s');
    expect(warm.report.instances.created).toBe(2);
    // With no horizon to keep instances for, jobs keep finding their instance gone and booting one.
    const cold = await run('0s');
    expect(cold.report.instances.created).toBeGreaterThanOrEqual(5);
    expect(warm.report.wait.mean!).toBeLessThan(cold.report.wait.mean! / 2);
  });

  it('dispatcher.min_pass_interval defers a pass wanted too soon after the last one', async () => {
    const jobs = [job('a', 0, 100), job('b', 10, 100)];
    const run = (gap: string) =>
      runSimulation({
        jobs,
        config: config({ dispatcher: { min_pass_interval: gap } }),
        seed: 1,
        policy: 'berth',
      });
    // Passes at 0 (a: create), 10 (b: onto the booting instance), 60 (registered: both start).
    const every = await run('0s');
    expect(every.record.containers.map((c) => c.start! - c.arrival)).toEqual([60_000, 50_000]);
    // With 45 s between passes: b waits for the pass at 45 s, the registration at 60 s for the one at 90 s.
    const spaced = await run('45s');
    expect(spaced.record.containers.map((c) => c.start! - c.arrival)).toEqual([90_000, 80_000]);
    expect(spaced.report.instances.created).toBe(1);
  });
});
