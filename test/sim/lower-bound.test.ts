import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { InstanceType } from '../../src/model/types.js';
import { buildReport } from '../../src/sim/report/build.js';
import type { ContainerRecord, InstanceRecord } from '../../src/sim/report/input.js';
import { costLowerBound, criticalPathBound, fits, type Demand } from '../../src/sim/lower-bound.js';
import { GiB, type as t } from '../dispatch/builders.js';

const HOUR = 3_600_000;

function d(vcpus: number, ramGiB: number, hours: number, extra: Partial<Demand> = {}): Demand {
  return {
    vcpus,
    ram: ramGiB * GiB,
    scratch: 0,
    gpus: 0,
    preemptible: false,
    duration: hours * HOUR,
    ...extra,
  };
}

describe('critical-path bound', () => {
  // A chain of three 1-vcpu tasks of 20 min (critical path 1 h, work 1 vcpu-hour). Types: small
  // (2 vcpu, 0.20/h) and big (8 vcpu, 0.64/h, 0.08 per vcpu-hour): the lower bound charges the work at
  // big's per-vcpu price, 0.08, but the path needs some instance up for 1 h, at least small's 0.20.
  const types = [
    t('small', 2, 4, 0.2),
    t('big', 8, 16, 0.64),
    t('tiny-spot', 2, 4, 0.05, { preemptible: true }),
  ];
  const chain = [d(1, 1, 1 / 3), d(1, 1, 1 / 3), d(1, 1, 1 / 3)];

  it('is max(lower bound, critical path × the cheapest instance a container fits on): 0.20 against 0.08', () => {
    const lb = costLowerBound(chain, types);
    expect(lb.cost).toBeCloseTo(0.08, 12);
    expect(lb.cheapestInstance).toBe(0.2);
    expect(criticalPathBound(lb, HOUR)).toBeCloseTo(0.2, 12);
    // A short path leaves the lower bound: 10 min × 0.20 = 0.033 < 0.08.
    expect(criticalPathBound(lb, HOUR / 6)).toBeCloseTo(0.08, 12);
    // Unless the billing minimum is longer: some instance is billed at least 2 h × 0.20 = 0.40.
    expect(criticalPathBound(lb, HOUR / 6, 2 * HOUR)).toBeCloseTo(0.4, 12);
    expect(criticalPathBound(lb, HOUR, HOUR / 60)).toBeCloseTo(0.2, 12);
  });

  it('spot types count only for preemptible work; nothing fits: the lower bound alone', () => {
    const spot = costLowerBound(
      chain.map((c) => ({ ...c, preemptible: true })),
      types,
    );
    expect(spot.cheapestInstance).toBe(0.05);
    expect(criticalPathBound(spot, HOUR)).toBeCloseTo(Math.max(spot.cost, 0.05), 12);
    const none = costLowerBound([d(64, 1, 1)], types);
    expect(none.cheapestInstance).toBeNull();
    expect(criticalPathBound(none, HOUR)).toBe(0);
  });
});

describe('cost lower bound', () => {
  it('one container: its duration times the cheapest fitting type, prorated by the binding weight', () => {
    // 2 vcpus, 2 GiB for 1 h; types: a (4 vcpu, 8 GiB, 0.40/h) and b (2 vcpu, 4 GiB, 0.30/h).
    // Weight on vcpus: min(0.40·2/4, 0.30·2/2) = 0.20. Weight on ram: min(0.40·2/8, 0.30·2/4) = 0.10.
    // Linear in the weights, so the best is all on vcpus: 0.20.
    const lb = costLowerBound([d(2, 2, 1)], [t('a', 4, 8, 0.4), t('b', 2, 4, 0.3)]);
    expect(lb.cost).toBeCloseTo(0.2, 12);
    expect(lb.weights).toEqual({ vcpus: 1, ram: 0, gpus: 0 });
  });

  it('mixed weights can beat either pure bound', () => {
    // c1 is cheap by vcpu on type v and c2 cheap by ram on type r; each pure weighting lets one of them
    // off cheaply, a mix charges both. Hand check of w = (0.5, 0.5):
    //   c1 (1 vcpu, 4 GiB): on v (1 vcpu, 8 GiB, 1.0/h): 1.0·(0.5·1 + 0.5·0.5) = 0.75; on r (4 vcpu, 4 GiB, 1.0/h): 1.0·(0.5·0.25 + 0.5·1) = 0.625
    //   c2 (4 vcpu, 1 GiB): on v: does not fit (4 > 1); on r: 1.0·(0.5·1 + 0.5·0.25) = 0.625
    // LB_(.5,.5) = 1.25. Pure vcpu: c1 min(1, 0.25) + c2 1 = 1.25; pure ram: c1 min(0.5, 1) + c2 0.25 = 0.75.
    const types = [t('v', 1, 8, 1), t('r', 4, 4, 1)];
    const lb = costLowerBound([d(1, 4, 1), d(4, 1, 1)], types);
    expect(lb.cost).toBeCloseTo(1.25, 12);
  });

  it('stays below the cost of two complementary containers sharing one instance (where max-per-container would not)', () => {
    // One 4 vcpu / 16 GiB instance at 1/h for 1 h runs both: cost 1.
    // Naive Σ max(vcpus/T.vcpus, ram/T.ram) = 0.75 + 0.9375 = 1.6875 > 1; the bound must not exceed 1.
    const lb = costLowerBound([d(3, 1, 1), d(1, 15, 1)], [t('x', 4, 16, 1)]);
    expect(lb.cost).toBeLessThanOrEqual(1 + 1e-12);
    expect(lb.cost).toBeCloseTo(1, 12);
  });

  it('only preemptible work may use spot types; gpus must fit; unfit containers are counted and left out', () => {
    const spot = t('s', 4, 16, 0.1, { preemptible: true });
    const od = t('o', 4, 16, 0.4);
    const gpu = t('g', 8, 32, 2, { gpus: 1 });
    expect(fits(d(1, 1, 1), spot)).toBe(false);
    expect(fits(d(1, 1, 1, { preemptible: true }), spot)).toBe(true);
    expect(fits(d(1, 1, 1, { gpus: 1 }), od)).toBe(false);
    const lb = costLowerBound(
      [d(4, 1, 1), d(4, 1, 1, { preemptible: true }), d(8, 1, 1, { gpus: 1 }), d(64, 1, 1)],
      [spot, od, gpu],
    );
    // On-demand 0.4 + spot 0.1 + gpu container 2 (it needs the whole machine's vcpus and its only gpu).
    expect(lb.cost).toBeCloseTo(2.5, 12);
    expect(lb.unfit).toBe(1);
  });

  it('property: never above the cost of any feasible schedule', () => {
    const typeArb = fc.record({
      vcpus: fc.integer({ min: 1, max: 16 }),
      ramGiB: fc.integer({ min: 1, max: 64 }),
      gpus: fc.integer({ min: 0, max: 2 }),
      price: fc.double({ min: 0.01, max: 10, noNaN: true }),
      preemptible: fc.boolean(),
    });
    const wishArb = fc.record({
      instance: fc.nat(),
      vcpuFrac: fc.double({ min: 0.05, max: 1, noNaN: true }),
      ramFrac: fc.double({ min: 0.05, max: 1, noNaN: true }),
      gpuFrac: fc.double({ min: 0, max: 1, noNaN: true }),
      start: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 2 * HOUR })),
      duration: fc.oneof(fc.constant(HOUR), fc.integer({ min: 1000, max: 3 * HOUR })),
      preemptible: fc.boolean(),
      // Also place the complementary container (the rest of each resource, same interval): the tight,
      // lopsided packings where a per-container max() "bound" would exceed the real cost.
      pair: fc.boolean(),
    });
    const instArb = fc.record({
      type: fc.nat(),
      // Often no slack at all, so that tight packings (where a wrong bound would show) are common.
      before: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: HOUR })),
      after: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: HOUR })),
    });
    fc.assert(
      fc.property(
        fc.array(typeArb, { minLength: 1, maxLength: 3 }),
        fc.array(instArb, { minLength: 1, maxLength: 3 }),
        fc.array(wishArb, { minLength: 1, maxLength: 60 }),
        (typeSpecs, instSpecs, wishes) => {
          const types = typeSpecs.map((s, i) =>
            t(`t${i}`, s.vcpus, s.ramGiB, s.price, { gpus: s.gpus, preemptible: s.preemptible }),
          );
          const placed: Array<ContainerRecord & { on: number }> = [];
          // Accept a wished container only if its instance never becomes over-committed: usage only rises
          // at starts, so checking at its own start and at every overlapping start suffices.
          for (const [n, w] of wishes.entries()) {
            const k = w.instance % instSpecs.length;
            const type = types[instSpecs[k]!.type % types.length]!;
            const c: ContainerRecord & { on: number } = {
              id: `c${n}`,
              arrival: w.start,
              start: w.start,
              end: w.start + w.duration,
              vcpus: Math.round(type.vcpus * w.vcpuFrac * 1000) / 1000 || 0.001,
              ram: Math.max(1, Math.floor(type.ram * w.ramFrac)),
              scratch: 0,
              gpus: Math.floor(type.gpus * w.gpuFrac),
              preemptible: type.preemptible || w.preemptible,
              instance: `i${k}`,
              on: k,
            };
            const twin: ContainerRecord & { on: number } = {
              ...c,
              id: `c${n}b`,
              vcpus: Math.round((type.vcpus - c.vcpus) * 1000) / 1000,
              ram: type.ram - c.ram,
              gpus: type.gpus - c.gpus,
            };
            const candidates = w.pair && twin.vcpus > 0 && twin.ram > 0 ? [c, twin] : [c];
            for (const cand of candidates) if (fitsOn(cand, k, type)) placed.push(cand);
          }
          function fitsOn(c: ContainerRecord & { on: number }, k: number, type: InstanceType): boolean {
            const mates = placed.filter((p) => p.on === k && p.start! < c.end! && c.start! < p.end!);
            const ok = [c, ...mates].every((probe) => {
              const at = probe.start!;
              const live = [c, ...mates].filter((p) => p.start! <= at && at < p.end!);
              return (
                live.reduce((s, p) => s + p.vcpus, 0) <= type.vcpus + 1e-9 &&
                live.reduce((s, p) => s + p.ram, 0) <= type.ram &&
                live.reduce((s, p) => s + p.gpus, 0) <= type.gpus
              );
            });
            return ok;
          }
          // Instances live from before their first container to after their last one.
          const instances: InstanceRecord[] = [];
          let cost = 0;
          instSpecs.forEach((s, k) => {
            const mine = placed.filter((p) => p.on === k);
            if (mine.length === 0) return;
            const type = types[s.type % types.length]!;
            const created = Math.min(...mine.map((p) => p.start!)) - s.before;
            const destroyed = Math.max(...mine.map((p) => p.end!)) + s.after;
            instances.push({
              id: `i${k}`,
              type: type.name,
              price: type.price,
              created,
              ready: created,
              destroyed,
            });
            cost += (type.price * (destroyed - created)) / HOUR;
          });
          const lb = costLowerBound(
            placed.map((p) => ({ ...p, duration: p.end! - p.start! })),
            types,
          );
          expect(lb.unfit).toBe(0);
          expect(lb.cost).toBeLessThanOrEqual(cost * (1 + 1e-9) + 1e-12);
          const report = buildReport({
            policy: 'p',
            seed: 0,
            instanceTypes: types,
            containers: placed,
            instances,
          });
          expect(report.cost.lowerBound).toBeLessThanOrEqual(report.cost.total + 1e-6);
        },
      ),
      { numRuns: 300, seed: 42 },
    );
  });
});
