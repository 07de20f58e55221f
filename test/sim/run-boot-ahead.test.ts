// boot_ahead through the simulator: the real dispatcher learns from what it sees how many containers
// arrive when a container of a step ends (src/dispatch/fan-outs.ts, via run-history.ts), hands it to the
// planner in the snapshot's estimates, and the planner creates an instance a boot time before the next
// expected end of that step (src/dispatch/scheduler/ahead.ts). Hand-computed times.
import { describe, expect, it } from 'vitest';
import { job, simulateSmall, startsOf } from './helpers.js';

describe('boot_ahead in the simulator', () => {
  // One 2-vcpu type, 60 s fixed boot; every job takes the whole instance.
  // p1 (step "split", 100 s) at 0: boots 0–60, runs 60–160. Its two children arrive at 160: k1 takes p1's
  // instance, k2 boots 160–220. When k1 ends (260) the history knows: split runs 100 s, brings 2 per end.
  // p2 (split) at 1000: boots 1000–1060, runs 1060–1160, expected to end at 1160. Its children k3, k4
  // arrive at 1160: k3 takes p2's instance; k4 needs another.
  const jobs = [
    job('p1', 0, 100, { vcpus: 2, name: 'split_1' }),
    job('k1', 160, 100, { vcpus: 2, name: 'work_1' }),
    job('k2', 160, 100, { vcpus: 2, name: 'work_2' }),
    job('p2', 1000, 100, { vcpus: 2, name: 'split_2' }),
    job('k3', 1160, 100, { vcpus: 2, name: 'work_3' }),
    job('k4', 1160, 100, { vcpus: 2, name: 'work_4' }),
  ];
  const simulate = (cap: number) =>
    simulateSmall(jobs, { scheduler: { boot_ahead: cap, wait_for_running: false, idle_timeout: '0s' } });

  it('on: an instance is created at 1100, a boot before p2 is expected to end, and k4 starts at once', async () => {
    const on = await simulate(4);
    const off = await simulate(0);
    expect(on.stats.hitTimeLimit).toBe(false);
    expect(off.stats.hitTimeLimit).toBe(false);
    // The first fan-out is what teaches: the same in both.
    expect(startsOf(on, 'k2')).toEqual([220]);
    expect(startsOf(off, 'k2')).toEqual([220]);
    expect(startsOf(on, 'k3')).toEqual([1160]);
    expect(startsOf(on, 'k4')).toEqual([1160]);
    // Off, k4 waits for a boot started when it arrived.
    expect(startsOf(off, 'k4')).toEqual([1220]);
    // As many instances either way: the boot is only earlier.
    expect(on.report.instances.created).toBe(4);
    expect(off.report.instances.created).toBe(4);
  });
});
