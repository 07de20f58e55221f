// Spot fallback through the whole simulator (issue 14): a preemptible container runs on the cheaper spot
// type; when the cloud reclaims the instance under it, its request counts an interruption, and from
// on_demand_after_interruptions on its retry runs on an on-demand type.
import { describe, expect, it } from 'vitest';
import { parseSimConfig } from '../../src/sim/config.js';
import { runSimulation } from '../../src/sim/run.js';
import { job } from './helpers.js';

const config = (onDemandAfter: number) =>
  parseSimConfig({
    catalog: [
      { name: 't2', vcpus: 2, ram: '8GiB', scratch: '100GiB', price: 3.6 },
      { name: 't2-spot', vcpus: 2, ram: '8GiB', scratch: '100GiB', price: 1.2, preemptible: true },
    ],
    boot_time: { kind: 'fixed', time: '60s' },
    agent: { start_delay: 0 },
    // An interruption every 10 minutes on average: a 2-hour container almost never finishes on spot.
    faults: { spot: { interruptions_per_hour: 6, notice: '2m' } },
    scheduler: { on_demand_after_interruptions: onDemandAfter },
  });

describe('spot fallback in the simulator', () => {
  const jobs = Array.from({ length: 4 }, (_, i) => job(`j${i}`, 10 * i, 7200, { preemptible: true }));

  it('after on_demand_after_interruptions a preemptible container finishes on an on-demand instance', async () => {
    const { record, stats } = await runSimulation({ jobs, config: config(1), seed: 1, policy: 'berth' });
    expect(stats.requests).toEqual({ success: jobs.length, failed: 0, cancelled: 0, open: 0 });
    const typeOf = new Map(record.instances.map((i) => [i.id, i.type]));
    // Every container started on spot first (cheaper); the ones that completed after an interruption ran
    // on demand.
    const starts = record.containers.filter((c) => c.start !== null);
    expect(typeOf.get(starts[0]!.instance!)).toBe('t2-spot');
    const completed = record.containers.filter((c) => c.exitCode === 0);
    expect(completed).toHaveLength(jobs.length);
    const retried = completed.filter((c) => !jobs.some((j) => j.id === c.id));
    expect(retried.length).toBeGreaterThan(0);
    for (const c of retried) expect(typeOf.get(c.instance!)).toBe('t2');
  });

  it('with a high on_demand_after_interruptions the same containers keep being interrupted on spot', async () => {
    const { record } = await runSimulation({ jobs, config: config(1000), seed: 1, policy: 'berth' });
    const typeOf = new Map(record.instances.map((i) => [i.id, i.type]));
    const started = record.containers.filter((c) => c.instance !== null);
    expect(started.every((c) => typeOf.get(c.instance!) === 't2-spot')).toBe(true);
  });
});
