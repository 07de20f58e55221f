// Opportunistic packing through the simulator (issue 16 item 6): the real dispatcher and scheduler, a
// guaranteed job that uses an eighth of its big instance, and small opportunistic jobs that borrow there
// (opportunistic_any_type) instead of booting small instances, then are vacated when the lender ends
// (opportunistic_vacate) so the big instance can go. Hand-computed times.
import { describe, expect, it } from 'vitest';
import type { RunResult } from '../../src/sim/run.js';
import { endsOf, GiB, job, simulateSmall, startsOf } from './helpers.js';

// c1: 1 vcpu at $0.36/h; t8: 8 vcpus at $3.60/h, ten times that: beyond max_price_factor (1.5) for a
// 1-vcpu job. A fixed 60 s boot.
const catalog = [
  { name: 'c1', vcpus: 1, ram: '4GiB', scratch: '100GiB', price: 0.36 },
  { name: 't8', vcpus: 8, ram: '32GiB', scratch: '100GiB', price: 3.6 },
];
// g (guaranteed) asks for all of t8 and uses 1 vcpu and 4 GiB: from 360 s (booted at 60, measured for the
// default 5 min) it lends 8 − 1.25 vcpus and 32 − 5 GiB. It ends at 60 + 3600 = 3660 s.
// o1–o4 (opportunistic, 1 vcpu, 1800 s) arrive at 600 s and end by 2400 s, before g.
// o5–o6 arrive at 3000 s and would run until 6600 s, long after g.
const use = (vcpus: number, ram: number, durationS: number) => ({
  usage: { cpuSeconds: vcpus * durationS, peakRam: ram },
});
const jobs = [
  job('g', 0, 3600, { vcpus: 8, ram: 32 * GiB, opportunistic: false, ...use(1, 4 * GiB, 3600) }),
  ...[1, 2, 3, 4].map((i) =>
    job(`o${i}`, 600, 1800, { ram: 2 * GiB, opportunistic: true, ...use(1, 2 * GiB, 1800) }),
  ),
  ...[5, 6].map((i) =>
    job(`o${i}`, 3000, 3600, { ram: 2 * GiB, opportunistic: true, ...use(1, 2 * GiB, 3600) }),
  ),
];

const simulate = (anyType: boolean, vacate: boolean, resume = false) =>
  simulateSmall(jobs, {
    catalog,
    scheduler: { opportunistic_any_type: anyType, opportunistic_vacate: vacate, idle_timeout: '0s' },
    opportunistic: { fraction: 0, claim_probability: 0, resume, move_time: '5s' },
  });

const created = (r: RunResult, type: string) => r.record.instances.filter((i) => i.type === type).length;

describe('opportunistic packing in the simulator', () => {
  it('borrowers use the big instance while its lender runs, and are vacated when it ends', async () => {
    const [off, anyType, both] = [
      await simulate(false, false),
      await simulate(true, false),
      await simulate(true, true),
    ];
    for (const r of [off, anyType, both]) {
      expect(r.stats.hitTimeLimit).toBe(false);
      expect(r.record.containers.filter((c) => c.exitCode === 0).length).toBe(jobs.length);
      expect(r.stats.opportunistic.guaranteedShort).toBe(0);
    }
    // Off: every borrower boots a c1 of its own (t8 is beyond its max_price_factor).
    expect(created(off, 't8')).toBe(1);
    expect(created(off, 'c1')).toBe(6);
    // Any type: o1–o4 start on g's t8 at 600 s, no c1 booted for them; o5, o6 too at 3000 s, but then
    // keep the t8 alive until 6600 s for two 1-vcpu jobs.
    expect(startsOf(anyType, 'o1')).toEqual([600]);
    expect(created(anyType, 'c1')).toBe(0);
    expect(anyType.stats.opportunistic.vacated).toBe(0);
    // And vacate: when g ends at 3660 s, o5 and o6 are requeued (no retry spent) and boot a c1 each.
    expect(both.stats.opportunistic.vacated).toBe(2);
    expect(created(both, 'c1')).toBe(2);
    expect(startsOf(both, 'o5')).toEqual([3000, 3720]);
    // Started over, the retry runs its whole 3600 s.
    expect(endsOf(both, 'o5')).toEqual([3660, 7320]);
    expect(both.report.cost.total).toBeLessThan(anyType.report.cost.total);
    expect(both.report.cost.total).toBeLessThan(off.report.cost.total);
  });

  it('with resume, a vacated container runs only what was left, plus the move', async () => {
    const r = await simulate(true, true, true);
    expect(r.stats.opportunistic.vacated).toBe(2);
    // o5 ran 3000–3660 on the t8: its retry starts at 3720 and runs 3600 − 660 + 5 s.
    expect(endsOf(r, 'o5')).toEqual([3660, 3720 + 2940 + 5]);
    expect(r.record.containers.filter((c) => c.exitCode === 0).length).toBe(jobs.length);
  });
});
