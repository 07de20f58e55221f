// The harness under the sim cloud's fault knobs, and reproducibility from the seed.
import { describe, expect, it } from 'vitest';
import { reportJson } from '../../src/sim/report/build.js';
import { runSimulation, type SimJob } from '../../src/sim/run.js';
import { job, smallConfig } from './helpers.js';

const jobs: SimJob[] = Array.from({ length: 40 }, (_, i) =>
  job(`j${i}`, i * 45, 200 + ((i * 137) % 900), { vcpus: 1 + (i % 2), preemptible: i % 3 === 0 }),
);

const faulty = () =>
  smallConfig({
    catalog: [
      { name: 't2', vcpus: 2, ram: '8GiB', scratch: '100GiB', price: 3.6 },
      { name: 't4', vcpus: 4, ram: '16GiB', scratch: '100GiB', price: 7.2 },
      { name: 't2-spot', vcpus: 2, ram: '8GiB', scratch: '100GiB', price: 1.2, preemptible: true },
    ],
    boot_time: { kind: 'lognormal', median: '60s', sigma: 0.4 },
    agent: { start_delay: '2s', ping_interval: '10s' },
    faults: {
      create_error_rate: 0.15,
      destroy_error_rate: 0.15,
      capacity_error_rate: { t2: 0.3 },
      never_boot_rate: 0.1,
      agent_crash_rate: 0.3,
      agent_crash_after: { kind: 'exponential', mean: '10m' },
      spot: { interruptions_per_hour: 2, notice: '2m' },
      rate_limit: { ops_per_second: 2, burst: 4 },
    },
    limits: { max_cloud_ops_per_second: 5, max_concurrent_creates: 3 },
  });

describe('runSimulation under faults', () => {
  it('finishes every container despite crashing agents, broken instances and cloud errors', async () => {
    const { report, stats } = await runSimulation({ jobs, config: faulty(), seed: 7, policy: 'berth' });
    expect(stats.hitTimeLimit).toBe(false);
    expect(stats.refusedAgents).toBe(0);
    expect(stats.requests).toEqual({ success: jobs.length, failed: 0, cancelled: 0, open: 0 });
    // The knobs really fired: some attempts were lost and retried, some creates failed.
    expect(report.containers.total).toBeGreaterThan(jobs.length);
    expect(stats.createFailures).toBeGreaterThan(0);
    expect(report.cost.lowerBound).toBeLessThanOrEqual(report.cost.total);
  });

  it('spot only, with interruptions: interrupted work is retried (temp) until every request completes', async () => {
    const spotJobs = Array.from({ length: 12 }, (_, i) => job(`s${i}`, i * 60, 3600, { preemptible: true }));
    const config = smallConfig({
      catalog: [{ name: 't2-spot', vcpus: 2, ram: '8GiB', scratch: '100GiB', price: 1.2, preemptible: true }],
      faults: { spot: { interruptions_per_hour: 1, notice: '2m' } },
    });
    const { report, stats } = await runSimulation({ jobs: spotJobs, config, seed: 5, policy: 'berth' });
    expect(stats.hitTimeLimit).toBe(false);
    expect(stats.requests).toEqual({ success: 12, failed: 0, cancelled: 0, open: 0 });
    expect(report.instances.interrupted).toBeGreaterThan(0);
    // Every interrupted attempt was lost with its machine and retried: more attempts than requests.
    expect(report.containers.total).toBeGreaterThan(12);
    expect(report.containers.completed).toBe(report.containers.total);
    // Per-type rate 0 for the only spot type: nothing is interrupted, one attempt per request.
    const calm = await runSimulation({
      jobs: spotJobs,
      config: smallConfig({
        catalog: [
          { name: 't2-spot', vcpus: 2, ram: '8GiB', scratch: '100GiB', price: 1.2, preemptible: true },
        ],
        faults: { spot: { interruptions_per_hour: 1, by_type: { 't2-spot': 0 } } },
      }),
      seed: 5,
      policy: 'berth',
    });
    expect(calm.report.instances.interrupted).toBe(0);
    expect(calm.report.containers.total).toBe(12);
  });

  it('survives every policy', async () => {
    for (const policy of ['one-per-instance', 'fifo'] as const) {
      const { stats } = await runSimulation({ jobs, config: faulty(), seed: 3, policy });
      expect(stats.requests).toEqual({ success: jobs.length, failed: 0, cancelled: 0, open: 0 });
    }
  });

  it('the same seed gives a byte-identical report.json; another seed does not', async () => {
    const a = await runSimulation({ jobs, config: faulty(), seed: 11, policy: 'berth' });
    const b = await runSimulation({ jobs, config: faulty(), seed: 11, policy: 'berth' });
    const c = await runSimulation({ jobs, config: faulty(), seed: 12, policy: 'berth' });
    expect(reportJson(b.report)).toBe(reportJson(a.report));
    expect(reportJson(c.report)).not.toBe(reportJson(a.report));
  });

  it('a crashed agent is noticed through node_lost_after; the request gives up after max_temp_retries', async () => {
    // Every agent crashes 100 s after it starts, and the job needs 1000 s: every attempt is lost.
    const config = smallConfig({
      faults: { agent_crash_rate: 1, agent_crash_after: { kind: 'fixed', time: '100s' } },
      dispatcher: { node_lost_after: '60s' },
    });
    const { record, stats } = await runSimulation({
      jobs: [job('x', 0, 1000)],
      config,
      seed: 1,
      policy: 'berth',
    });
    expect(stats.requests).toEqual({ success: 0, failed: 1, cancelled: 0, open: 0 });
    // The first attempt and max_temp_retries (10) retries, each on a new instance whose node was lost.
    expect(record.containers.length).toBe(11);
    expect(stats.nodesLost).toBe(11);
    const first = record.containers[0]!;
    // Boot 60 s, start at once, crash 100 s after the agent started: it stopped running at 160 s.
    expect([first.start! - first.arrival, first.end! - first.arrival]).toEqual([60_000, 160_000]);
    // The retry is queued once the dispatcher noticed: no ping for more than 60 s after the last one.
    const second = record.containers[1]!;
    expect(second.arrival - first.arrival).toBeGreaterThan(160_000 + 60_000);
    expect(second.arrival - first.arrival).toBeLessThanOrEqual(160_000 + 60_000 + 10_000 + 1);
  });

  it('a cloud list refused by the rate limit does not stop the pass; the sync is retried and everything finishes', async () => {
    // One cloud call every 20 s: creates and the periodic sync's list compete for it.
    const config = smallConfig({ limits: { max_cloud_ops_per_second: 0.05, burst: 1 } });
    const many = Array.from({ length: 30 }, (_, i) => job(`m${i}`, i * 7, 400));
    const { stats } = await runSimulation({ jobs: many, config, seed: 1, policy: 'berth' });
    // The dispatcher reports the refused list as an error event and carries on with its view.
    expect(stats.failedPasses).toBe(0);
    expect(stats.requests).toEqual({ success: 30, failed: 0, cancelled: 0, open: 0 });
  });

  it('stops at the time limit and says so', async () => {
    const config = smallConfig({ time_limit: '30m' });
    const { stats, report } = await runSimulation({
      jobs: [job('long', 0, 7200)],
      config,
      seed: 1,
      policy: 'berth',
    });
    expect(stats.hitTimeLimit).toBe(true);
    expect(stats.requests.open).toBe(1);
    expect(report.period.seconds).toBeLessThanOrEqual(1800);
  });
});
