// Issue 10 item 5 through the whole simulator (dispatcher, queue, agents, cloud): under max_instances: 1,
// a priority-1000 container that needs the big type waited as long as priority-100 one-CPU containers
// kept arriving every 5 s. The scenario test (test/dispatch/scenarios.test.ts) pins the pass; this one
// pins the outcome over time.
import { describe, expect, it } from 'vitest';
import { parseSimConfig } from '../../src/sim/config.js';
import { runSimulation } from '../../src/sim/run.js';
import { GiB, job } from './helpers.js';

const config = parseSimConfig({
  catalog: [
    { name: 'small', vcpus: 1, ram: '4GiB', scratch: '10GiB', price: 1 },
    { name: 'big', vcpus: 4, ram: '16GiB', scratch: '50GiB', price: 4 },
  ],
  boot_time: { kind: 'fixed', time: '60s' },
  agent: { start_delay: 0 },
  scheduler: { max_instances: 1 },
});

describe('no starvation under a limit (issue 10 item 5)', () => {
  it('a priority-1000 container needing the big type starts once the small instance drains, while one-CPU work keeps arriving', async () => {
    // A 20-second one-CPU job every 5 s for 10 minutes; the head arrives at 100 s.
    const stream = Array.from({ length: 120 }, (_, i) => job(`small-${i}`, 5 * i, 20, { priority: 100 }));
    const head = job('head', 100, 50, { priority: 1000, vcpus: 4, ram: 8 * GiB });
    const jobs = [...stream, head].sort((a, b) => a.arrival - b.arrival);
    const { report, record } = await runSimulation({ jobs, config, seed: 1, policy: 'berth' });

    const h = record.containers.find((c) => c.id === 'head')!;
    expect(h.start).not.toBeNull();
    const waitS = (h.start! - h.arrival) / 1000;
    // At most: the one-CPU job running when it arrived (20 s), the small instance's shutdown, and the big
    // instance's boot (60 s). Before the fix it waited until the stream stopped (over 500 s).
    expect(waitS).toBeLessThanOrEqual(20 + 60 + 10);
    // Nothing is starved the other way: every job completes.
    expect(report.containers.completed).toBe(jobs.length);
  });
});
