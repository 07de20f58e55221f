// The harness end to end on hand-computed workloads: the real Dispatcher, SimQueue, agents, sim cloud.
import { describe, expect, it } from 'vitest';
import { runSimulation } from '../../src/sim/run.js';
import { job, smallConfig as config } from './helpers.js';

describe('runSimulation', () => {
  it('one container: pays boot + run + idle timeout', async () => {
    const { report, stats } = await runSimulation({
      jobs: [job('a', 0, 100)],
      config: config(),
      seed: 1,
      policy: 'berth',
    });
    expect(stats.hitTimeLimit).toBe(false);
    expect(report.containers).toEqual({ total: 1, started: 1, completed: 1, neverStarted: 0 });
    expect(report.instances.created).toBe(1);
    expect(report.wait.p50).toBe(60);
    // 60 s boot + 100 s run + 60 s idle; the shutdown comes at the first instant past the idle timeout
    // (the scheduler's test is strict), so per-second billing counts one started second more.
    expect(report.cost.total).toBeCloseTo((3.6 * (60 + 100 + 60 + 1)) / 3600, 6);
    expect(report.cost.lowerBound).toBeCloseTo((3.6 * 100) / 3600 / 2, 6);
  });

  it('two containers that pack onto one instance cost less than one per instance', async () => {
    const jobs = [job('a', 0, 100), job('b', 0, 100)];
    const berth = await runSimulation({ jobs, config: config(), seed: 1, policy: 'berth' });
    const single = await runSimulation({ jobs, config: config(), seed: 1, policy: 'one-per-instance' });
    expect(berth.report.instances.created).toBe(1);
    expect(single.report.instances.created).toBe(2);
    expect(berth.report.cost.total).toBeCloseTo((3.6 * 221) / 3600, 6);
    expect(single.report.cost.total).toBeCloseTo((2 * 3.6 * 221) / 3600, 6);
    expect(berth.report.cost.total).toBeLessThan(single.report.cost.total);
  });

  it('a later container reuses the idle instance instead of booting another', async () => {
    const { report } = await runSimulation({
      jobs: [job('a', 0, 100), job('b', 170, 10)],
      config: config(),
      seed: 1,
      policy: 'berth',
    });
    expect(report.instances.created).toBe(1);
    // b arrives 10 s into a's idle time and starts at once.
    expect(report.wait.p50).toBe(0);
  });
});
