// Work-proportional boots (boot_budget, src/dispatch/scheduler/budget.ts), on hand-made passes: the vcpus a
// step holds on capacity not up yet stay within Σ vcpus × expected run time / (k × boot time). The catalog
// has one type, t2 (2 vcpus), so each new instance takes two of the 1-vcpu containers below.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/declare.js';
import { parseDispatchConfig } from '../../src/dispatch/config.js';
import { planToJson } from '../../src/dispatch/snapshot-json.js';
import { IncrementalPlanner } from '../../src/dispatch/scheduler/incremental.js';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type {
  Plan,
  RunEstimates,
  SnapshotContainer,
  SnapshotInstance,
} from '../../src/dispatch/scheduler/types.js';
import { berthInProcess } from '../helpers/cli.js';
import { ago, ctr, inst, NOW, snap, type } from './builders.js';

const T2 = [type('t2', 2, 4, 0.2)];
const t = NOW.getTime();
const BOOT = 60_000;

/** `n` waiting 1-vcpu containers of step `step` (names step_ID0001, …). */
function fanOut(step: string, n: number, extra: Partial<SnapshotContainer> = {}): SnapshotContainer[] {
  return Array.from({ length: n }, (_, i) =>
    ctr(`${step}-${i + 1}`, { name: `${step}_ID${String(i + 1).padStart(4, '0')}`, ...extra }),
  );
}

function run(
  containers: SnapshotContainer[],
  est: Partial<RunEstimates> | undefined,
  k = 4,
  instances: SnapshotInstance[] = [],
): Plan {
  const s = snap({ types: T2, config: { bootBudget: k }, instances, containers });
  if (est !== undefined) s.estimates = { bootMs: BOOT, endsAt: {}, steps: {}, ...est };
  return plan(s);
}

const creates = (p: Plan) => p.actions.filter((a) => a.op === 'create');
const budgetWaits = (p: Plan) => [...p.status.values()].filter((s) => /boot_budget/.test(s)).length;

describe('boot_budget (pure planner)', () => {
  it('100 containers of 10 s, boot 60 s, k = 4: 1,000 vcpu·s / 240 s = 4.17 vcpus, so two t2 instances', () => {
    const p = run(fanOut('bwa', 100), { steps: { bwa: 10_000 } });
    // Opening an instance for the 3rd container makes 3 vcpus (3 × 240 = 720 ≤ 1,000), the 5th 5 (1,200 > 1,000).
    expect(creates(p)).toEqual([
      { op: 'create', type: 't2', for: ['bwa-1', 'bwa-2'] },
      { op: 'create', type: 't2', for: ['bwa-3', 'bwa-4'] },
    ]);
    expect(budgetWaits(p)).toBe(96);
    expect(p.status.get('bwa-5')).toMatch(/busy 4 boot times \(boot_budget\)/);
    // Known run times: nothing changes with the clock alone.
    expect(p.validUntil).toBe(Infinity);
    // k = 2: 1,000 / 120 = 8.3 vcpus, four instances; off (0): one instance per two containers, as before.
    expect(creates(run(fanOut('bwa', 100), { steps: { bwa: 10_000 } }, 2))).toHaveLength(4);
    expect(creates(run(fanOut('bwa', 100), { steps: { bwa: 10_000 } }, 0))).toHaveLength(50);
    // No boot observed yet: boot_estimate (default 60 s) stands in for it, the same two instances.
    expect(creates(run(fanOut('bwa', 100), { bootMs: null, steps: { bwa: 10_000 } }))).toHaveLength(2);
  });

  it('long tasks get all they ask: 100 × 1 h is 1,500 vcpus of budget', () => {
    const p = run(fanOut('blast', 100), { steps: { blast: 3_600_000 } });
    expect(creates(p)).toHaveLength(50);
    expect(budgetWaits(p)).toBe(0);
  });

  it('counts the vcpus of the step already booting, and their work', () => {
    // b-1 (booting) holds two containers of the step: 102 × 10 s = 1,020 vcpu·s, 4.25 vcpus; 2 held already.
    const locked = fanOut('bwa', 2).map((c, i) => ({
      ...c,
      id: `l-${i}`,
      state: 'Locked' as const,
      instance: 'b-1',
    }));
    const p = run([...locked, ...fanOut('bwa', 100)], { steps: { bwa: 10_000 } }, 4, [
      inst('b-1', 't2', 'booting'),
    ]);
    expect(creates(p)).toEqual([{ op: 'create', type: 't2', for: ['bwa-1', 'bwa-2'] }]);
    expect(budgetWaits(p)).toBe(98);
  });

  it('slow start: a step with no run time known and none running gets one instance', () => {
    const p = run(fanOut('bwa', 100), {});
    expect(creates(p)).toEqual([{ op: 'create', type: 't2', for: ['bwa-1', 'bwa-2'] }]);
    expect(p.validUntil).toBe(Infinity);
    // No estimates at all: the same.
    expect(creates(run(fanOut('bwa', 100), undefined))).toHaveLength(1);
  });

  it('an unknown run time counts as long as the step has run: the budget grows with it', () => {
    // Two of the step run on i-1 since 30 s: 100 waiting × 30 s = 3,000 vcpu·s, 12.5 vcpus: six instances.
    const runningNow = fanOut('bwa', 2).map((c, i) => ({
      ...c,
      id: `r-${i}`,
      state: 'Running' as const,
      instance: 'i-1',
      startedAt: ago(30 - i),
    }));
    const p = run([...runningNow, ...fanOut('bwa', 100)], {}, 4, [inst('i-1', 't2', 'running')]);
    expect(creates(p)).toHaveLength(6);
    expect(budgetWaits(p)).toBe(88);
    // The 13th vcpu is allowed when 100 × bound ≥ 13 × 240 s: a bound of 31.2 s, 1.2 s from now.
    expect(p.validUntil).toBe(t + 1_200);
  });

  it('the incremental planner replans when the bound allows more (validUntil), as a full pass would', () => {
    const runningNow = fanOut('bwa', 2).map((c, i) => ({
      ...c,
      id: `r-${i}`,
      state: 'Running' as const,
      instance: 'i-1',
      startedAt: ago(30 - i),
    }));
    const s = snap({
      types: T2,
      config: { bootBudget: 4 },
      instances: [inst('i-1', 't2', 'running')],
      containers: [...runningNow, ...fanOut('bwa', 100)],
    });
    s.estimates = { bootMs: BOOT, endsAt: {}, steps: {} };
    const planner = new IncrementalPlanner();
    expect(creates(planner.plan(s))).toHaveLength(6);
    const before = { ...s, now: new Date(t + 1_199) };
    expect(creates(planner.plan(before))).toHaveLength(6);
    // At a bound of 31.2 s: 3,120 vcpu·s, 13 vcpus: a seventh instance (its second place is free room).
    const at = { ...s, now: new Date(t + 1_200) };
    const p = planner.plan(at);
    expect(planToJson(p)).toEqual(planToJson(plan(at)));
    expect(creates(p)).toHaveLength(7);
    expect(planner.stats).toEqual({ full: 2, reused: 1 });
  });

  it('containers without a name have no step: left alone', () => {
    const unnamed = Array.from({ length: 10 }, (_, i) => ctr(`u-${i}`));
    expect(creates(run(unnamed, { steps: {} }))).toHaveLength(5);
  });

  it('rejects a bad value, naming the field', () => {
    const errorOf = (v: unknown): string => {
      try {
        parseDispatchConfig({
          instance_types: [{ name: 't', vcpus: 2, ram: '4GiB', price: 1 }],
          scheduler: { boot_budget: v },
        });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message;
      }
      return 'parsed';
    };
    expect(errorOf(-1)).toMatch(/^scheduler\.boot_budget: expected a number >= 0, got -1$/);
    expect(errorOf('lots')).toMatch(/^scheduler\.boot_budget: expected a number >= 0, got "lots"$/);
    expect(errorOf(2.5)).toBe('parsed');
  });
});

describe('boot_budget before any boot was measured (berth plan --snapshot)', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'berth-budget-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  let written = 0;

  /**
   * `berth plan` on a fresh install's first fan-out: 100 waiting 1-vcpu containers of step `align`, each
   * with `expected_run` (its request's max_run_time) when given, nothing booting or running, and the
   * snapshot's `estimates` as given (absent: none). Returns the creates and the boot_budget waits.
   */
  async function firstFanOut(o: {
    run?: string;
    estimates?: object;
    config?: object;
  }): Promise<{ creates: number; waits: number }> {
    const containers = Array.from({ length: 100 }, (_, i) => ({
      id: `a-${i + 1}`,
      state: 'Queued',
      priority: 1,
      queued_at: '2026-01-01T00:00:00Z',
      vcpus: 1,
      ram: '1GiB',
      name: `align_ID${String(i + 1).padStart(4, '0')}`,
      ...(o.run === undefined ? {} : { expected_run: o.run }),
    }));
    const file = join(tmp, `snap-${++written}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        now: '2026-01-01T00:00:00Z',
        config: o.config ?? {},
        instance_types: [{ name: 't2', vcpus: 2, ram: '4GiB', scratch: '100GiB', price: 0.2 }],
        containers,
        ...(o.estimates === undefined ? {} : { estimates: o.estimates }),
      }),
    );
    const r = await berthInProcess('plan', '--snapshot', file);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { actions: { op: string }[]; status: Record<string, string> };
    return {
      creates: out.actions.filter((a) => a.op === 'create').length,
      waits: Object.values(out.status).filter((s) => /boot_budget/.test(s)).length,
    };
  }

  it('uses boot_estimate (default 60 s) as the boot time: 100 × 60 s of work opens 13 instances, not 1', async () => {
    // Work 100 × 60 s = 6,000 vcpu·s; k = 4, boot 60 s: 6,000 / 240 = 25 vcpus. Opening an instance for
    // container 2m+1 makes 2m+1 vcpus held: allowed while (2m+1) × 240 ≤ 6,000, i.e. for containers 1, 3,
    // …, 25: 13 t2 instances for 26 containers; the 27th (6,480 > 6,000) and the 73 after it wait.
    expect(await firstFanOut({ run: '60s' })).toEqual({ creates: 13, waits: 74 });
    // `estimates` with no boot measured yet (boot null): the same.
    expect(await firstFanOut({ run: '60s', estimates: { boot: null } })).toEqual({ creates: 13, waits: 74 });
    // The run time from history (estimates.steps) instead of expected_run: the same.
    expect(await firstFanOut({ estimates: { boot: null, steps: { align: '60s' } } })).toEqual({
      creates: 13,
      waits: 74,
    });
    // boot_estimate 30 s: 6,000 / 120 = 50 vcpus: containers 1, 3, …, 49 open 25 instances for 50.
    expect(await firstFanOut({ run: '60s', config: { boot_estimate: '30s' } })).toEqual({
      creates: 25,
      waits: 50,
    });
  });

  it('a measured boot time wins over boot_estimate', async () => {
    // Boot 120 s measured: 6,000 / 480 = 12.5 vcpus: containers 1, 3, …, 11 open 6 instances for 12.
    const measured = { boot: '120s' };
    expect(await firstFanOut({ run: '60s', estimates: measured })).toEqual({ creates: 6, waits: 88 });
    expect(await firstFanOut({ run: '60s', estimates: measured, config: { boot_estimate: '30s' } })).toEqual({
      creates: 6,
      waits: 88,
    });
  });

  it('keeps the slow start of a step whose run time is unknown: one instance', async () => {
    expect(await firstFanOut({})).toEqual({ creates: 1, waits: 98 });
    expect(await firstFanOut({ estimates: { boot: '60s' } })).toEqual({ creates: 1, waits: 98 });
  });

  it('refuses a bad boot_estimate, naming the key', async () => {
    const errorOf = (v: unknown): string => {
      try {
        parseDispatchConfig({
          instance_types: [{ name: 't', vcpus: 2, ram: '4GiB', price: 1 }],
          scheduler: { boot_estimate: v },
        });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message;
      }
      return 'parsed';
    };
    expect(errorOf(0)).toBe('scheduler.boot_estimate: expected a duration above 0, got 0');
    expect(errorOf('soon')).toBe(
      'scheduler.boot_estimate: expected a duration such as 90s, 10m, 1h30m or a number of seconds, got "soon"',
    );
    expect(errorOf('90s')).toBe('parsed');
    // The same key in a `berth plan` snapshot's config.
    const file = join(tmp, 'bad.json');
    writeFileSync(file, JSON.stringify({ now: '2026-01-01T00:00:00Z', config: { boot_estimate: -5 } }));
    const r = await berthInProcess('plan', '--snapshot', file);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `berth: snapshot ${file}: config.boot_estimate: expected a duration such as 90s, 10m, 1h30m or a number of seconds, got -5\n`,
    );
  });
});
