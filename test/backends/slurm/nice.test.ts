// Berth's priority order as SLURM nice values.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planNice, reniceCalls, type NiceJob } from '../../../src/backends/slurm/nice.js';

const job = (key: string, berthPriority: number, base: number | null, nice = 0): NiceJob => ({
  key,
  berthPriority,
  base,
  nice,
});
const actual = (jobs: NiceJob[], plan: Map<string, number>) =>
  new Map(jobs.filter((j) => j.base !== null).map((j) => [j.key, j.base! - plan.get(j.key)!]));

describe('planNice', () => {
  it('one priority: nothing moves', () => {
    const jobs = [job('1', 500, 100), job('2', 500, 99), job('3', 500, 98)];
    expect([...planNice(jobs, { spread: 10, canLower: true })]).toEqual([
      ['1', 0],
      ['2', 0],
      ['3', 0],
    ]);
  });

  it('a later job of higher priority: the earlier ones go below it, in one band', () => {
    // SLURM's basic plugin: each job 1 lower than the one submitted before.
    const jobs = [job('1', 100, 100), job('2', 100, 99), job('3', 900, 98)];
    const plan = planNice(jobs, { spread: 10, canLower: true });
    expect(plan.get('3')).toBe(0);
    // below 98: 100 - n ≤ 97 → n ≥ 3; band = 3 + 10
    expect(plan.get('1')).toBe(13);
    expect(plan.get('2')).toBe(13);
    expect(reniceCalls(new Map(jobs.map((j) => [j.key, j.nice])), plan)).toEqual([
      { nice: 13, jobs: ['1', '2'] },
    ]);
  });

  it('jobs already low enough keep their nice (no renice)', () => {
    const jobs = [job('1', 100, 100, 20), job('2', 900, 98)];
    const plan = planNice(jobs, { spread: 10, canLower: true });
    expect(plan.get('1')).toBe(20);
    expect(
      reniceCalls(
        new Map([
          ['1', 20],
          ['2', 0],
        ]),
        plan,
      ),
    ).toEqual([]);
  });

  it('with the right to lower, a nice far above what is needed comes down; without it, it stays', () => {
    const jobs = [job('1', 900, 100, 5000), job('2', 100, 90, 0)];
    expect(planNice(jobs, { spread: 10, canLower: true }).get('1')).toBe(0);
    expect(planNice(jobs, { spread: 10, canLower: false }).get('1')).toBe(5000);
  });

  it('without the right to lower, a nice never decreases', () => {
    const jobs = [job('1', 100, 100, 50), job('2', 900, 98, 0)];
    const plan = planNice(jobs, { spread: 10, canLower: false });
    expect(plan.get('1')).toBe(50);
  });

  it('new jobs (no SLURM priority yet) are placed by a guess below every known job', () => {
    const jobs = [job('1', 100, 100), job('new-a', 900, null), job('new-b', 100, null)];
    const plan = planNice(jobs, { spread: 10, canLower: true });
    // guessed bases: new-a 99, new-b 98
    expect(plan.get('new-a')).toBe(0);
    expect(plan.get('1')).toBe(100 - 99 + 1 + 10);
    // new-b's guessed base (98) is already below new-a's (99): it keeps nice 0.
    expect(plan.get('new-b')).toBe(0);
  });

  it('property: every job ends up strictly below every job of a higher Berth priority', () => {
    const arb = fc.array(
      fc.record({
        berthPriority: fc.integer({ min: 1, max: 5 }).map((p) => p * 100),
        base: fc.option(fc.integer({ min: 1_000, max: 1_000_000 }), { nil: null }),
        nice: fc.integer({ min: 0, max: 50_000 }),
      }),
      { minLength: 1, maxLength: 40 },
    );
    fc.assert(
      fc.property(arb, fc.boolean(), fc.integer({ min: 1, max: 1000 }), (raw, canLower, spread) => {
        const jobs = raw.map((r, i) => job(String(i), r.berthPriority, r.base, r.base === null ? 0 : r.nice));
        const plan = planNice(jobs, { spread, canLower });
        // Every job gets a nice in SLURM's range; without the right to lower, never below its current one.
        for (const j of jobs) {
          const n = plan.get(j.key)!;
          expect(n).toBeGreaterThanOrEqual(0);
          if (!canLower) expect(n).toBeGreaterThanOrEqual(j.nice);
        }
        // The guessed bases of new jobs, as planNice assumes them.
        const known = jobs.filter((j) => j.base !== null).map((j) => j.base!);
        let guess = (known.length ? Math.min(...known) : 0) - 1;
        const based = jobs.map((j) => ({ ...j, base: j.base ?? guess-- }));
        const a = actual(based, plan);
        for (const hi of based)
          for (const lo of based)
            if (hi.berthPriority > lo.berthPriority) expect(a.get(lo.key)!).toBeLessThan(a.get(hi.key)!);
      }),
      { numRuns: Number(process.env.BERTH_FUZZ_RUNS ?? 300) },
    );
  });
});
