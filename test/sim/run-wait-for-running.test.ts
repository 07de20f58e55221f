// wait_for_running through the simulator: the real dispatcher learns run and boot times from what it sees
// (src/dispatch/run-history.ts), hands them to the planner in the snapshot, and a container waits for a
// busy instance expected to free up before a new one could boot. Hand-computed times.
import { describe, expect, it } from 'vitest';
import { job, simulateSmall, startsOf } from './helpers.js';

describe('wait_for_running in the simulator', () => {
  // One 2-vcpu type, 60 s fixed boot; every job takes the whole instance.
  // a (step "align", 30 s) at 0: boots 0–60, runs 60–90: history says boot 60 s, align 30 s; i-1 goes at 90.
  // b (align) at 200: boots 200–260, runs 260–290, expected to end at 290.
  // c (align) at 270: b's instance frees up in 20 s, a new one would take 60 s.
  const jobs = [
    job('a', 0, 30, { vcpus: 2, name: 'align_1' }),
    job('b', 200, 30, { vcpus: 2, name: 'align_2' }),
    job('c', 270, 30, { vcpus: 2, name: 'align_3' }),
  ];
  const simulate = (on: boolean) =>
    simulateSmall(jobs, { scheduler: { wait_for_running: on, idle_timeout: '0s' } });

  it('on: c waits 20 s for b to end and runs on its instance; off: c boots a third instance for nothing', async () => {
    const on = await simulate(true);
    const off = await simulate(false);
    expect(on.stats.hitTimeLimit).toBe(false);
    expect(off.stats.hitTimeLimit).toBe(false);
    expect(startsOf(on, 'c')).toEqual([290]);
    expect(on.report.instances.created).toBe(2);
    // Off, c takes b's instance all the same when it frees up at 290, but the third instance was created
    // at 270 and is paid for its boot (270–330) before it goes.
    expect(startsOf(off, 'c')).toEqual([290]);
    expect(off.report.instances.created).toBe(3);
    // Two boots and 90 s of work against three boots and the same work.
    expect(on.report.cost.total).toBeCloseTo((3.6 * (2 * 60 + 90)) / 3600, 6);
    expect(off.report.cost.total).toBeCloseTo((3.6 * (3 * 60 + 90)) / 3600, 6);
  });
});
