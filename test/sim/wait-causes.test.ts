// The wait breakdown (`berth sim --wait-causes`): the status classifier, the report section on hand-made
// records, and a hand-computed run where boot_budget holds containers back.
import { describe, expect, it } from 'vitest';
import { statusText, waitCause } from '../../src/dispatch/scheduler/status.js';
import type { ContainerRecord } from '../../src/sim/report/input.js';
import { waitCausesSection } from '../../src/sim/report/waits.js';
import { runSimulation } from '../../src/sim/run.js';
import { job, smallConfig } from './helpers.js';

describe('waitCause', () => {
  it('classifies every waiting text of status.ts', () => {
    expect(waitCause(statusText.waitingNew('t1'))).toBe('boot');
    expect(waitCause(statusText.waitingExisting('i-1', 'booting', 't1'))).toBe('boot');
    expect(waitCause(statusText.bootBudget(4))).toBe('budget');
    expect(waitCause(statusText.waitingFreeing('i-1'))).toBe('freeing');
    expect(waitCause(statusText.starting('i-1'))).toBe('start');
    expect(waitCause(statusText.assigned('i-1', 'running'))).toBe('start');
    expect(waitCause(statusText.limit('t1', 'max_instances=2 reached'))).toBe('limit');
    expect(waitCause(statusText.behindHead('t1', 'max_instances=2 reached', 'c-1'))).toBe('limit');
    expect(waitCause(statusText.noType('t1', 'unavailable'))).toBe('limit');
    expect(waitCause(statusText.rateLimited('t1', 'rate limited'))).toBe('limit');
    expect(waitCause(statusText.ownerFull('max 3 per owner'))).toBe('limit');
    expect(waitCause(statusText.unlocked(statusText.unlockedForHigher('i-1', 'c-1', 'x')))).toBe('limit');
    expect(waitCause(statusText.unlocked(statusText.priorityZero))).toBe('other');
  });
});

describe('waitCausesSection', () => {
  const T0 = Date.parse('2026-01-01T00:00:00Z');
  // Causes in CAUSES order: boot, budget, freeing, limit, start, other, unseen (ms).
  const c = (id: string, name: string, arrival: number, wait: number, causes: number[]): ContainerRecord => ({
    id,
    name,
    arrival: T0 + arrival * 1000,
    start: T0 + (arrival + wait) * 1000,
    end: T0 + (arrival + wait + 10) * 1000,
    vcpus: 1,
    ram: 1,
    scratch: 0,
    gpus: 0,
    preemptible: false,
    instance: 'i-1',
    waitCauses: causes.map((s) => s * 1000),
  });

  it('means by cause, the p90 tail and the steps with most in it (hand-computed)', () => {
    // Ten containers: nine of step "map" (fan-out 9 at 0 s), waits 10..90 s; one "reduce" at 100 s, 100 s.
    const list = [
      ...Array.from({ length: 9 }, (_, i) =>
        c(`m${i}`, `map_${i}`, 0, 10 * (i + 1), [10, 10 * i, 0, 0, 0, 0, 0]),
      ),
      c('r', 'reduce_1', 100, 100, [60, 0, 40, 0, 0, 0, 0]),
    ];
    const w = waitCausesSection(list)!;
    // Boot: 9 × 10 + 60 = 150 s over 10; budget 10 × (0 + … + 8) = 360 s; freeing 40 s.
    expect(w.mean).toEqual({ boot: 15, budget: 36, freeing: 4, limit: 0, start: 0, other: 0, unseen: 0 });
    // p90 of 10, 20, …, 100 (nearest rank 9): 90 s; in the tail m8 (90 s) and r (100 s).
    expect(w.tail).toEqual({
      threshold: 90,
      containers: 2,
      mean: { boot: 35, budget: 40, freeing: 20, limit: 0, start: 0, other: 0, unseen: 0 },
    });
    expect(
      w.steps.map((s) => [s.step, s.containers, s.fanOut, s.runP50, s.waitP50, s.waitP90, s.tail]),
    ).toEqual([
      ['map', 9, 9, 10, 50, 90, 1],
      ['reduce', 1, 1, 10, 100, 100, 1],
    ]);
    expect(w.steps[0]!.tailMean.budget).toBe(80);
  });

  it('is null when no container recorded causes', () => {
    const { waitCauses: _, ...plain } = c('x', 'x_1', 0, 5, [5, 0, 0, 0, 0, 0, 0]);
    expect(waitCausesSection([plain])).toBeNull();
  });
});

describe('berth sim --wait-causes on a hand-computed run', () => {
  // One 2-vcpu type, a fixed 60 s boot, no start delay. Four 1-vcpu 10 s tasks of step "s" at 0 s; their run
  // time is unknown (no history): boot_budget's slow start lets the step have one instance (a and b on it,
  // booting 0–60 s); c and d wait for the budget. At 60 s i-1 is up, nothing of the step is booting: c and
  // d get an instance of their own (booting from 60 s). At 70 s a and b end and c and d take their room on
  // i-1 instead: 60 s held back by the budget, then 10 s of boot.
  const jobs = ['a', 'b', 'c', 'd'].map((id, i) => job(id, 0, 10, { name: `s_${i}` }));

  it('a and b wait 60 s for a boot; c and d 60 s for the budget, then 10 s for a boot', async () => {
    const config = smallConfig({ scheduler: { boot_budget: 4 } });
    const r = await runSimulation({ jobs, config, seed: 1, policy: 'berth', waitCauses: true });
    const ms = (id: string) => r.record.containers.find((c) => c.id === id)!.waitCauses;
    // boot, budget, freeing, limit, start, other, unseen
    expect(ms('a')).toEqual([60_000, 0, 0, 0, 0, 0, 0]);
    expect(ms('b')).toEqual([60_000, 0, 0, 0, 0, 0, 0]);
    expect(ms('c')).toEqual([10_000, 60_000, 0, 0, 0, 0, 0]);
    expect(ms('d')).toEqual([10_000, 60_000, 0, 0, 0, 0, 0]);
    expect(r.report.waitCauses!.mean).toMatchObject({ boot: 35, budget: 30 });
  });

  it('without the flag the report has no waitCauses field', async () => {
    const r = await runSimulation({ jobs, config: smallConfig(), seed: 1, policy: 'berth' });
    expect(r.report.waitCauses).toBeUndefined();
    expect(r.record.containers.every((c) => c.waitCauses === undefined)).toBe(true);
  });
});
