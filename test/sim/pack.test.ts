// The offline packer (src/sim/pack.ts, pack-decreasing.ts): hand-computed schedules, and properties of
// any packed schedule (never over-committed, between the lower bound and each job alone).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PER_SECOND, EC2_BILLING } from '../../src/model/billing.js';
import type { InstanceType } from '../../src/model/types.js';
import { pack, type PackJob, type PackOptions, type PackResult } from '../../src/sim/pack.js';
import { packJobs } from '../../src/sim/pack-input.js';
import { packDecreasing } from '../../src/sim/pack-decreasing.js';
import { packWaiting } from '../../src/sim/pack-wait.js';
import type { Workflow, WorkloadJob } from '../../src/sim/workload/types.js';

const GiB = 1024 ** 3;
const H = 3_600_000;

function type(name: string, vcpus: number, price: number): InstanceType {
  return {
    name,
    providerType: name,
    vcpus,
    ram: vcpus * 2 * GiB,
    scratch: 100 * GiB,
    gpus: 0,
    price,
    preemptible: false,
  };
}

// Price proportional to size, as in the default catalog.
const TYPES = [type('small', 2, 1), type('big', 4, 2)];
const NO_BOOT: PackOptions = { types: TYPES, billing: PER_SECOND, bootMs: 0, keepSchedule: true };

function job(vcpus: number, startH: number, hours: number, extra: Partial<PackJob> = {}): PackJob {
  return {
    start: startH * H,
    vcpus,
    ram: vcpus * 2 * GiB,
    scratch: 0,
    gpus: 0,
    preemptible: false,
    duration: hours * H,
    ...extra,
  };
}

const types = (r: PackResult) => r.schedule!.map((i) => i.type.name);

describe('offline packer: hand-computed schedules', () => {
  it('a job inside a larger job room and life adds nothing', () => {
    // A (3 vcpus) rounds up to big, 2/h × 1 h; B (1 vcpu) runs inside A's life in its spare vcpu.
    const r = pack([job(3, 0, 1), job(1, 0.5, 0.5)], NO_BOOT);
    expect(r.cost).toBeCloseTo(2, 9);
    expect(r.instances).toBe(1);
    // Alone: big 2 + small 0.5.
    expect(r.alone).toBeCloseTo(2.5, 9);
  });

  it('widens an instance when that bills less than a new one, not when it bills more', () => {
    // B ends 0.25 h after A: widening big costs 2 × 0.25 = 0.5 < small for 0.75 h = 0.75.
    const wide = pack([job(3, 0, 1), job(1, 0.5, 0.75)], NO_BOOT);
    expect(wide.cost).toBeCloseTo(2.5, 9);
    expect(wide.instances).toBe(1);
    // B ends 0.6 h after A: widening costs 1.2 > small for 1.1 h = 1.1.
    const apart = pack([job(3, 0, 1), job(1, 0.5, 1.1)], NO_BOOT);
    expect(apart.cost).toBeCloseTo(3.1, 9);
    expect(types(apart)).toEqual(['big', 'small']);
  });

  it('bills the boot and the 60 s minimum (EC2)', () => {
    // 10 s of work after a 30 s boot: billed 60 s on small (1/h).
    const r = pack([job(1, 0, 10 / 3600)], { ...NO_BOOT, billing: EC2_BILLING, bootMs: 30_000 });
    expect(r.cost).toBeCloseTo(60 / 3600, 12);
    expect(r.boot).toBeCloseTo(30 / 3600, 12);
    expect(r.idle).toBeCloseTo(20 / 3600, 12);
    expect(r.schedule![0]!.created).toBe(-30_000);
  });

  it('decreasing order finds the room a later, larger job leaves; arrival order cannot', () => {
    // S (1 vcpu, 0–1 h) arrives before L (3 vcpus, 0.1–1 h).
    const jobs = [job(1, 0, 1), job(3, 0.1, 0.9)];
    // Arrival: S opens small (1), L opens big (2 × 0.9 = 1.8).
    expect(pack(jobs, NO_BOOT).cost).toBeCloseTo(2.8, 9);
    // Decreasing: L opens big, S widens it by 0.1 h (0.2) rather than open small (1).
    const d = packDecreasing(jobs, NO_BOOT);
    expect(d.cost).toBeCloseTo(2, 9);
    expect(d.schedule).toEqual([{ type: TYPES[1], created: 0, end: H, jobs: [1, 0] }]);
  });

  it('decides by the estimate and bills the true run time', () => {
    // A: 3 vcpus, 0–1 h, but expected to end at 0.5 h. B: 1 vcpu, 0.25–0.85 h.
    // Exact: B is inside A's life, free. With A's estimate, widening A to 0.85 h looks like
    // 2 × 0.35 = 0.7 > small for 0.6 h = 0.6, so B gets its own small: 2 + 0.6.
    const a = job(3, 0, 1);
    const b = job(1, 0.25, 0.6);
    expect(pack([a, b], NO_BOOT).cost).toBeCloseTo(2, 9);
    const est = pack([{ ...a, estimate: 0.5 * H }, b], NO_BOOT);
    expect(est.cost).toBeCloseTo(2.6, 9);
    expect(types(est)).toEqual(['big', 'small']);
  });

  it('with lookahead, opens a larger type for jobs about to come that would each open one', () => {
    // A (1 vcpu, 0–1 h) then C (3 vcpus, 0.1–0.9 h): without lookahead small (1) + big (1.6) = 2.6;
    // looking 0.2 h ahead, A opens big (2), and C fits in it for free.
    const jobs = [job(1, 0, 1), job(3, 0.1, 0.8)];
    expect(pack(jobs, NO_BOOT).cost).toBeCloseTo(2.6, 9);
    const ahead = pack(jobs, { ...NO_BOOT, lookahead: 0.2 * H });
    expect(ahead.cost).toBeCloseTo(2, 9);
    expect(types(ahead)).toEqual(['big']);
  });

  it('wait: a job waits for room when that bills less than a boot, and its child starts after it', () => {
    // Boot 0.05 h. A (2 vcpus, 0–1 h) fills a small. P (2 vcpus) arrives at 0.9 h for 0.5 h: alone it
    // would pay 0.55 (boot + run); waiting 0.1 h for A's room extends A's small by 0.5. C (P's child,
    // 1 vcpu, 0.1 h) is released at P's true end, 1.5 h (not 1.4 h), and extends the same small by 0.1
    // (alone: 0.15).
    const boot = 0.05 * H;
    const jobs = [job(2, 0, 1), job(2, 0.9, 0.5), job(1, 1.4, 0.1, { parents: [1] })];
    const o = { ...NO_BOOT, bootMs: boot };
    expect(pack(jobs, o).cost).toBeCloseTo(1.05 + 0.55 + 0.1, 9);
    const r = packWaiting(jobs, { ...o, maxWait: 0.1 * H });
    expect(r.starts).toEqual([0, H, 1.5 * H]);
    expect(r.cost).toBeCloseTo(1.05 + 0.5 + 0.1, 9);
    expect(r.instances).toBe(1);
    // A waiting limit under 0.1 h: P boots its own small at 0.9 h; C goes beside it at 1.4 h.
    const short = packWaiting(jobs, { ...o, maxWait: 0.09 * H });
    expect(short.starts).toEqual([0, 0.9 * H, 1.4 * H]);
    expect(short.cost).toBeCloseTo(1.05 + 0.55 + 0.1, 9);
  });

  it('wait: a job placed before a waiting job starts leaves it its room', () => {
    // One 4-vcpu type. B (1 vcpu, 0–2 h) and A (2 vcpus, 0–1 h) share an instance until 2 h. X (3 vcpus)
    // arrives at 0.95 h and waits for A's end (1 h), free. J (1 vcpu, 0.97–1.47 h) fits at its arrival
    // (A + B + J = 4), but from 1 h on B + X + J would be 5: it gets an instance of its own.
    const only = [type('big', 4, 2)];
    const jobs = [job(2, 0, 1), job(1, 0, 2), job(3, 0.95, 0.5), job(1, 0.97, 0.5)];
    const r = packWaiting(jobs, { ...NO_BOOT, types: only, maxWait: 0.1 * H });
    checkSchedule(jobs, r, 0);
    expect(r.starts).toEqual([0, 0, H, 0.97 * H]);
    expect(r.schedule!.map((i) => i.jobs)).toEqual([[1, 0, 2], [3]]);
    expect(r.cost).toBeCloseTo(4 + 1, 9);
  });

  it('wait with an estimate: waits for room expected to free, then gives up at the wait and boots', () => {
    // Boot 0.05 h. A (2 vcpus, 0–1 h) fills a small, expected to end at 0.5 h. P (2 vcpus, 0.5 h)
    // arrives at 0.45 h: waiting for A's expected end (0.05 h) looks cheaper (0.45 added) than a boot
    // (0.55). A is still running at 0.55 h (the wait's end): P boots its own small, ready then.
    // Bill: A's small 1.05 + P's 0.05 + 0.5 = 1.6; P waited 0.1 h. Exact: P boots at once (A ends past
    // the wait), same bill, no wait.
    const boot = 0.05 * H;
    const o = { ...NO_BOOT, bootMs: boot, maxWait: 0.1 * H };
    const exact = packWaiting([job(2, 0, 1), job(2, 0.45, 0.5)], o);
    expect(exact.starts).toEqual([0, 0.45 * H]);
    const r = packWaiting([job(2, 0, 1, { estimate: 0.5 * H }), job(2, 0.45, 0.5)], o);
    checkSchedule([job(2, 0, 1), job(2, 0.45, 0.5)], r, boot);
    expect(r.starts).toEqual([0, 0.45 * H + 0.1 * H]);
    expect(r.cost).toBeCloseTo(1.05 + 0.55, 9);
    expect(r.instances).toBe(2);
    // Expected to end at 0.52 h, truly then: P starts on A's small at 0.52 h; the small lives to 1.02 h.
    const right = packWaiting([job(2, 0, 0.52, { estimate: 0.52 * H }), job(2, 0.45, 0.5)], o);
    expect(right.starts).toEqual([0, 0.52 * H]);
    expect(right.cost).toBeCloseTo(0.05 + 1.02, 9);
  });

  it('starts workflow tasks when their parents would end with no wait', () => {
    const wf: Workflow = {
      name: 'w',
      criticalPath: 30_000,
      tasks: [
        {
          id: 'a',
          name: 'a',
          parents: [],
          children: [1],
          vcpus: 1,
          ram: GiB,
          duration: 10_000,
          usage: { cpuSeconds: null, peakRam: null },
        },
        {
          id: 'b',
          name: 'b',
          parents: [0],
          children: [],
          vcpus: 1,
          ram: GiB,
          duration: 20_000,
          usage: { cpuSeconds: null, peakRam: null },
        },
      ],
    };
    const jobs = packJobs(
      [],
      [{ id: 'w/1', workflow: wf, arrival: 5000, priority: 500, preemptible: false }],
    );
    expect(jobs.map((j) => [j.start, j.duration])).toEqual([
      [5000, 10_000],
      [15_000, 20_000],
    ]);
  });

  it('estimates from requested times or from history known at arrival', () => {
    const w = (
      id: string,
      arrival: number,
      duration: number,
      extra: Partial<WorkloadJob> = {},
    ): WorkloadJob => ({
      id,
      arrival,
      duration,
      vcpus: 1,
      ram: GiB,
      scratch: 0,
      gpus: 0,
      priority: 500,
      preemptible: false,
      ...extra,
    });
    const jobs = [
      w('1', 0, 100, { user: 'u', requestedTime: 500 }),
      w('2', 50, 300, { user: 'v' }),
      w('3', 200, 40, { user: 'u' }),
      w('4', 400, 40, { user: 'v' }),
    ];
    expect(packJobs(jobs, [], 'requested').map((j) => j.estimate)).toEqual([
      500,
      undefined,
      undefined,
      undefined,
    ]);
    // At 200 only job 1 (u, 100) has ended; at 400, job 2 (v, 300) too.
    expect(packJobs(jobs, [], 'user').map((j) => j.estimate)).toEqual([undefined, undefined, 100, 300]);
    // By size (all 1 vcpu): the median of all ended jobs: at 400, [100, 300] → 100 (lower middle).
    expect(packJobs(jobs, [], 'size').map((j) => j.estimate)).toEqual([undefined, undefined, 100, 100]);
    // By step (the name's run key, over the whole workload, known from the start): a-1, a-2, a-3 are
    // step a ([100, 40, 40] → 40); b alone. None: a constant for every job.
    const named = jobs.map((j, i) => ({ ...j, name: i === 1 ? 'b' : `a-${i + 1}` }));
    expect(packJobs(named, [], 'step').map((j) => j.estimate)).toEqual([40, 300, 40, 40]);
    expect(new Set(packJobs(named, [], 'none').map((j) => j.estimate)).size).toBe(1);
  });
});

/** Checks a schedule: every job once, within its instance's life, never over the type's resources. */
function checkSchedule(given: PackJob[], r: PackResult, bootMs: number): void {
  const jobs = r.starts === undefined ? given : given.map((j, i) => ({ ...j, start: r.starts![i]! }));
  const seen = new Set<number>();
  for (const inst of r.schedule!) {
    for (const i of inst.jobs) {
      expect(seen.has(i)).toBe(false);
      seen.add(i);
      const j = jobs[i]!;
      expect(j.start - bootMs).toBeGreaterThanOrEqual(inst.created);
      expect(j.start + j.duration).toBeLessThanOrEqual(inst.end);
    }
    for (const i of inst.jobs) {
      const at = jobs[i]!.start;
      let v = 0;
      let ram = 0;
      for (const k of inst.jobs) {
        const x = jobs[k]!;
        if (x.start <= at && at < x.start + x.duration) [v, ram] = [v + x.vcpus, ram + x.ram];
      }
      expect(v).toBeLessThanOrEqual(inst.type.vcpus);
      expect(ram).toBeLessThanOrEqual(inst.type.ram);
    }
  }
  expect(seen.size).toBe(jobs.length);
}

describe('offline packer: properties', () => {
  const catalog = [type('c2', 2, 0.1), type('c4', 4, 0.2), type('c8', 8, 0.4), type('m4', 4, 0.3)];
  const arbJobs = fc.array(
    fc.record({
      start: fc.integer({ min: 0, max: 4 * H }),
      vcpus: fc.integer({ min: 1, max: 8 }),
      duration: fc.integer({ min: 1000, max: 2 * H }),
    }),
    { minLength: 1, maxLength: 40 },
  );
  const toJobs = (xs: Array<{ start: number; vcpus: number; duration: number }>): PackJob[] =>
    xs.map((x) => ({ ...x, ram: x.vcpus * 2 * GiB, scratch: 0, gpus: 0, preemptible: false }));

  for (const [name, method] of [
    ['arrival', pack],
    ['decreasing', packDecreasing],
  ] as const)
    it(`${name}: a valid schedule, billed between the lower bound and each job alone`, () => {
      fc.assert(
        fc.property(arbJobs, fc.integer({ min: 0, max: 120_000 }), (xs, bootMs) => {
          const jobs = toJobs(xs);
          const r = method(jobs, { types: catalog, billing: EC2_BILLING, bootMs, keepSchedule: true });
          checkSchedule(jobs, r, bootMs);
          expect(r.cost).toBeGreaterThanOrEqual(r.lowerBound - 1e-9);
          expect(r.cost).toBeLessThanOrEqual(r.alone + 1e-9);
        }),
        { seed: 14, numRuns: 200 },
      );
    });

  it('wait: a valid schedule; no job waits longer than allowed or starts before its parent ends', () => {
    const arbChain = fc.array(
      fc.record({
        start: fc.integer({ min: 0, max: 4 * H }),
        vcpus: fc.integer({ min: 1, max: 8 }),
        duration: fc.integer({ min: 1000, max: 2 * H }),
        parent: fc.integer({ min: -1, max: 39 }),
        estimate: fc.option(fc.integer({ min: 1000, max: 2 * H })),
      }),
      { minLength: 1, maxLength: 40 },
    );
    fc.assert(
      fc.property(arbChain, fc.integer({ min: 0, max: 600_000 }), (xs, maxWait) => {
        // A task's zero-wait start is its parent's zero-wait end.
        // Some jobs decided by an estimate (wrong in general): the waits are still capped.
        const jobs = toJobs(xs.map(({ start, vcpus, duration }) => ({ start, vcpus, duration }))).map(
          (j, i) => ({
            ...j,
            ...(xs[i]!.parent >= 0 && xs[i]!.parent < i ? { parents: [xs[i]!.parent] } : {}),
            ...(xs[i]!.estimate !== null ? { estimate: xs[i]!.estimate } : {}),
          }),
        );
        jobs.forEach((j) => {
          if (j.parents !== undefined) j.start = jobs[j.parents[0]!]!.start + jobs[j.parents[0]!]!.duration;
        });
        const r = packWaiting(jobs, {
          types: catalog,
          billing: EC2_BILLING,
          bootMs: 60_000,
          maxWait,
          keepSchedule: true,
        });
        checkSchedule(jobs, r, 60_000);
        jobs.forEach((j, i) => {
          const ready =
            j.parents === undefined ? j.start : r.starts![j.parents[0]!]! + jobs[j.parents[0]!]!.duration;
          expect(r.starts![i]!).toBeGreaterThanOrEqual(ready);
          expect(r.starts![i]! - ready).toBeLessThanOrEqual(maxWait);
        });
        // Decided by wrong estimates, it may pay more than each job alone; never less than the bound.
        if (jobs.every((j) => j.estimate === undefined)) expect(r.cost).toBeLessThanOrEqual(r.alone + 1e-9);
        expect(r.cost).toBeGreaterThanOrEqual(r.lowerBound - 1e-9);
      }),
      { seed: 14, numRuns: 200 },
    );
  });

  it('rejects a negative boot time or lookahead, naming it', () => {
    expect(() => pack([], { ...NO_BOOT, bootMs: -1 })).toThrow(
      'bootMs: expected a non-negative number of ms, got -1',
    );
    expect(() => packWaiting([], { ...NO_BOOT, maxWait: -1 })).toThrow(
      'maxWait: expected a non-negative number of ms, got -1',
    );
    expect(() => pack([], { ...NO_BOOT, lookahead: -5 })).toThrow(
      'lookahead: expected a non-negative number of ms, got -5',
    );
  });
});
