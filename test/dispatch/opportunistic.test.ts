// Opportunistic placement (src/dispatch/scheduler/opportunistic.ts), one pure pass per row: an
// opportunistic container goes into what running guaranteed containers reserve and measurably do not
// use (with the margin, after the minimum observation); a guaranteed container never does.
import { describe, expect, it } from 'vitest';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import { lent, RECLAIM_AVOID_MS } from '../../src/dispatch/scheduler/opportunistic.js';
import { parseSnapshot } from '../../src/dispatch/snapshot-json.js';
import type {
  MeasuredUsage,
  RunEstimates,
  SchedulerConfig,
  SnapshotContainer,
  SnapshotInstance,
} from '../../src/dispatch/scheduler/types.js';
import { toVacate } from '../../src/dispatch/scheduler/vacate.js';
import { ago, ctr, GiB, inst, NOW, snap, type } from './builders.js';

const TYPES = [type('t4', 4, 16, 0.8)];
const HOUR = 3_600_000;
/** The default margin and minimum observation (src/config/scheduler.ts), said here so rows read alone. */
const CONFIG = { opportunisticMargin: 0.25, opportunisticMinObservationMs: 300_000 };

/** i-1 as the lending tests need it: its agent can claim lent room back (`reclaims`). */
const lender = (extra: Partial<SnapshotInstance> = {}) =>
  inst('i-1', 't4', 'running', { reclaims: true, ...extra });

/** A guaranteed container running on i-1 with all of t4 (4 CPUs, 16 GiB) reserved, using `usage`. */
const big = (usage?: Partial<MeasuredUsage>, extra: Partial<SnapshotContainer> = {}) =>
  ctr('g', {
    state: 'Running',
    instance: 'i-1',
    vcpus: 4,
    ram: 16 * GiB,
    ...(usage ? { usage: { ram: 2 * GiB, vcpus: 1, observedMs: HOUR, ...usage } } : {}),
    ...extra,
  });

const actionsFor = (containers: SnapshotContainer[], config = CONFIG, instance = lender()) =>
  plan(snap({ types: TYPES, config, instances: [instance], containers })).actions;

describe('opportunistic placement', () => {
  it('an opportunistic container goes into the idle part of a running reservation; no instance is created', () => {
    // g uses 1 CPU and 2 GiB of 4 and 16: it lends 4 − 1.25 = 2.75 CPUs and 16 − 2.5 = 13.5 GiB.
    const o = ctr('o', { opportunistic: true, vcpus: 2, ram: 8 * GiB });
    expect(actionsFor([big({}), o])).toEqual([
      { op: 'lock', container: 'o' },
      { op: 'start', container: 'o', instance: 'i-1' },
    ]);
  });

  it('only an instance whose agent can claim lent room back lends it (reclaims)', () => {
    // The same instance and containers: with a pressure watcher it lends; without one (an agent without
    // usable cgroups still reports usage) a borrower would have no way out, so a new instance is created.
    const o = ctr('o', { opportunistic: true, vcpus: 2, ram: 8 * GiB });
    expect(actionsFor([big({}), o], CONFIG, lender())).toContainEqual({
      op: 'start',
      container: 'o',
      instance: 'i-1',
    });
    for (const cannot of [lender({ reclaims: false }), inst('i-1', 't4', 'running')])
      expect(actionsFor([big({}), o], CONFIG, cannot)).toEqual([
        { op: 'lock', container: 'o' },
        { op: 'create', type: 't4', for: ['o'] },
      ]);
  });

  it('a guaranteed container of the same shape gets a new instance instead', () => {
    const g2 = ctr('g2', { vcpus: 2, ram: 8 * GiB });
    expect(actionsFor([big({}), g2])).toEqual([
      { op: 'lock', container: 'g2' },
      { op: 'create', type: 't4', for: ['g2'] },
    ]);
  });

  it('what is lent is lent once: a second borrower that would not fit too waits for a new instance', () => {
    const o1 = ctr('o1', { opportunistic: true, vcpus: 2, ram: 8 * GiB });
    const o2 = ctr('o2', { opportunistic: true, vcpus: 2, ram: 8 * GiB });
    expect(actionsFor([big({}), o1, o2])).toEqual([
      { op: 'lock', container: 'o1' },
      { op: 'start', container: 'o1', instance: 'i-1' },
      { op: 'lock', container: 'o2' },
      { op: 'create', type: 't4', for: ['o2'] },
    ]);
  });

  it('a running borrower counts: what it borrows is not lent again on the next pass', () => {
    const o1 = ctr('o1', { opportunistic: true, vcpus: 2, ram: 8 * GiB, state: 'Running', instance: 'i-1' });
    const o2 = ctr('o2', { opportunistic: true, vcpus: 2, ram: 8 * GiB });
    expect(actionsFor([big({}), o1, o2])).toContainEqual({ op: 'create', type: 't4', for: ['o2'] });
  });

  it('nothing is lent before the minimum observation, nor by a container never measured', () => {
    const o = ctr('o', { opportunistic: true, vcpus: 1, ram: GiB });
    const young = big({ observedMs: CONFIG.opportunisticMinObservationMs - 1 });
    expect(actionsFor([young, o])).toContainEqual({ op: 'create', type: 't4', for: ['o'] });
    expect(actionsFor([big(), o])).toContainEqual({ op: 'create', type: 't4', for: ['o'] });
  });

  it('the margin is kept: use × (1 + margin) is not lent', () => {
    // g used 12 GiB at its peak: it keeps 15 GiB and lends 1 GiB; 2 GiB does not fit, 1 GiB does.
    const peak = big({ ram: 12 * GiB });
    expect(actionsFor([peak, ctr('o', { opportunistic: true, vcpus: 1, ram: 2 * GiB })])).toContainEqual({
      op: 'create',
      type: 't4',
      for: ['o'],
    });
    expect(actionsFor([peak, ctr('o', { opportunistic: true, vcpus: 1, ram: GiB })])).toContainEqual({
      op: 'start',
      container: 'o',
      instance: 'i-1',
    });
  });

  it('opportunistic containers lend nothing, and scratch and GPUs are never lent', () => {
    const usage = { ram: 0, vcpus: 0, observedMs: HOUR };
    expect(lent([big(usage, { opportunistic: true })], CONFIG)).toEqual({
      mcpu: 0,
      ram: 0,
      scratch: 0,
      gpus: 0,
    });
    expect(lent([big(usage, { scratch: 50 * GiB })], CONFIG)).toEqual({
      mcpu: 4000,
      ram: 16 * GiB,
      scratch: 0,
      gpus: 0,
    });
    // g holds 50 of t4's 100 GiB scratch: 60 GiB fits the type, not what is free, and none is lent.
    const o = ctr('o', { opportunistic: true, vcpus: 1, ram: GiB, scratch: 60 * GiB });
    expect(actionsFor([big({}, { scratch: 50 * GiB }), o])).toContainEqual({
      op: 'create',
      type: 't4',
      for: ['o'],
    });
  });
});

describe('the snapshot JSON (berth plan)', () => {
  const json = (usage: unknown, reclaims: unknown = true) => ({
    now: '2026-01-01T00:00:00Z',
    instance_types: [{ name: 't4', vcpus: 4, ram: '16GiB', price: 0.8 }],
    instances: [{ id: 'i-1', type: 't4', state: 'running', state_since: '2025-12-31T23:00:00Z', reclaims }],
    containers: [
      {
        id: 'g',
        state: 'Running',
        priority: 1,
        queued_at: '2025-12-31T22:00:00Z',
        vcpus: 4,
        ram: '16GiB',
        instance: 'i-1',
        usage,
      },
      {
        id: 'o',
        state: 'Queued',
        priority: 1,
        queued_at: '2025-12-31T23:00:00Z',
        vcpus: 1,
        ram: '1GiB',
        opportunistic: true,
      },
    ],
  });

  it('carries opportunistic and a running container usage, and the plan borrows with them', () => {
    const s = parseSnapshot(json({ ram: '2GiB', vcpus: 0.5, observed: '1h' }));
    expect(s.containers[0]!.usage).toEqual({ ram: 2 * GiB, vcpus: 0.5, observedMs: HOUR });
    expect(s.containers[1]!.opportunistic).toBe(true);
    expect(plan(s).actions).toContainEqual({ op: 'start', container: 'o', instance: 'i-1' });
  });

  it('carries reclaims: the same instance lends with true, not with false nor when absent (older snapshots)', () => {
    const usage = { ram: '2GiB', vcpus: 0.5, observed: '1h' };
    const lends = (s: ReturnType<typeof parseSnapshot>) =>
      plan(s).actions.some((a) => a.op === 'start' && a.container === 'o' && a.instance === 'i-1');
    expect(parseSnapshot(json(usage, true)).instances[0]!.reclaims).toBe(true);
    expect(lends(parseSnapshot(json(usage, true)))).toBe(true);
    expect(lends(parseSnapshot(json(usage, false)))).toBe(false);
    const old = json(usage);
    delete (old.instances[0] as { reclaims?: unknown }).reclaims;
    expect(parseSnapshot(old).instances[0]!.reclaims).toBeUndefined();
    expect(lends(parseSnapshot(old))).toBe(false);
    expect(() => parseSnapshot(json(usage, 'yes'))).toThrow(/^instances\[0\]\.reclaims: expected /);
  });

  it('a bad usage names its field', () => {
    expect(() => parseSnapshot(json({ ram: '2 gigs', vcpus: 0.5, observed: '1h' }))).toThrow(
      /^containers\[0\]\.usage\.ram: /,
    );
    expect(() => parseSnapshot(json({ ram: '2GiB', vcpus: 0.5, observed: '1h', peak: 1 }))).toThrow(
      'containers[0].usage.peak: unknown field',
    );
  });
});

describe('lent room on a type beyond max_price_factor (opportunistic_any_type)', () => {
  // c1 costs 0.1; t4 (0.8) is far above 1.5 × 0.1: a 1-CPU borrower may not take free room there.
  const types = [type('c1', 1, 2, 0.1), type('t4', 4, 16, 0.8)];
  const o = (extra: Partial<SnapshotContainer> = {}) =>
    ctr('o', { opportunistic: true, vcpus: 1, ram: GiB, name: 'small-7', ...extra });
  const run = (config: Partial<SchedulerConfig>, containers: SnapshotContainer[], estimates?: RunEstimates) =>
    plan({
      ...snap({
        types,
        config: { ...CONFIG, shareRule: 'price', ...config },
        instances: [lender()],
        containers,
      }),
      ...(estimates === undefined ? {} : { estimates }),
    }).actions;
  const borrowed = { op: 'start', container: 'o', instance: 'i-1' };
  const created = { op: 'create', type: 'c1', for: ['o'] };
  /** The estimates: g is expected to end in `gEndsIn` ms, a "small" step runs `smallMs`. */
  const known = (gEndsIn: number, smallMs?: number): RunEstimates => ({
    bootMs: 60_000,
    endsAt: { g: NOW.getTime() + gEndsIn },
    steps: smallMs === undefined ? {} : { small: smallMs },
  });

  it('off: a borrower keeps to max_price_factor and an instance is created for it', () => {
    expect(run({ opportunisticAnyType: false }, [big({}), o()])).toContainEqual(created);
  });

  it('on: it borrows on the bigger instance instead of a create when nothing is known of run times', () => {
    const actions = run({ opportunisticAnyType: true }, [big({}), o()]);
    expect(actions).toContainEqual(borrowed);
    expect(actions.some((a) => a.op === 'create')).toBe(false);
  });

  it('on: next to a lender expected to outlast it, yes; next to one about to end, no', () => {
    const on = { opportunisticAnyType: true };
    expect(run(on, [big({}), o()], known(2 * HOUR, HOUR))).toContainEqual(borrowed);
    // The yes lasts until g's expected end less o's run: the plan is redone then.
    const p = plan({
      ...snap({
        types,
        config: { ...CONFIG, shareRule: 'price', ...on },
        instances: [lender()],
        containers: [big({}), o()],
      }),
      estimates: known(2 * HOUR, HOUR),
    });
    expect(p.validUntil).toBe(NOW.getTime() + HOUR + 1);
    expect(run(on, [big({}), o()], known(10 * 60_000, HOUR))).toContainEqual(created);
    // Its own run time unknown: not next to a lender known to end.
    expect(run(on, [big({}), o({ name: 'other-1' })], known(2 * HOUR, HOUR))).toContainEqual(created);
  });

  it('on a type within max_price_factor the lender need not outlast it', () => {
    const actions = plan({
      ...snap({
        types: TYPES,
        config: { ...CONFIG, opportunisticAnyType: true },
        instances: [lender()],
        containers: [big({}), ctr('o', { opportunistic: true, vcpus: 2, ram: 8 * GiB, name: 'x-1' })],
      }),
      estimates: known(60_000, HOUR),
    }).actions;
    expect(actions).toContainEqual(borrowed);
  });
});

describe('vacating an instance only borrowers are left on (opportunistic_vacate)', () => {
  const types = [type('c1', 1, 2, 0.1), type('t4', 4, 16, 0.8)];
  const running = (id: string, extra: Partial<SnapshotContainer> = {}) =>
    ctr(id, { opportunistic: true, vcpus: 1, ram: GiB, state: 'Running', instance: 'i-1', ...extra });
  const run = (containers: SnapshotContainer[], config: Partial<SchedulerConfig> = {}, created = ago(3600)) =>
    plan(
      snap({
        types,
        config: { ...CONFIG, opportunisticVacate: true, ...config },
        instances: [lender({ createdAt: created })],
        containers,
      }),
    );
  const cancels = (p: ReturnType<typeof run>) => p.actions.filter((a) => a.op === 'cancel');

  it('its borrowers are requeued as reclaimed (no retry spent), so the instance can go', () => {
    // Each would pay 1.5 × 0.1 on its own; t4 costs 0.8 > 0.3.
    const out = cancels(run([running('o1'), running('o2')]));
    expect(out.map((a) => a.op === 'cancel' && [a.container, a.class, a.reclaimed])).toEqual([
      ['o1', 'temp', true],
      ['o2', 'temp', true],
    ]);
    expect(out[0]!.op === 'cancel' && out[0]!.reason).toMatch(
      /^vacated: no guaranteed container is left on instance i-1/,
    );
  });

  it('not while a guaranteed container is on it, nor when they would pay its price anyway, nor when off', () => {
    expect(cancels(run([running('o1'), big({})]))).toEqual([]);
    // Six 1-CPU borrowers would pay 6 × 0.15 = 0.9 ≥ 0.8 on their own.
    const six = ['a', 'b', 'c', 'd', 'e', 'f'].map((id) => running(id));
    expect(cancels(run(six))).toEqual([]);
    expect(cancels(run([running('o1')], { opportunisticVacate: false }))).toEqual([]);
  });

  it('not while the instance is paid for anyway (min_billing_period); the plan is redone then', () => {
    const p = run([running('o1')], { minBillingPeriodMs: 2 * HOUR }, ago(3600));
    expect(cancels(p)).toEqual([]);
    expect(p.validUntil).toBe(NOW.getTime() + HOUR);
  });

  it('toVacate: only Running opportunistic containers of a positive priority', () => {
    const price = () => 0.15;
    expect(toVacate(0.8, [running('o1')], price).map((c) => c.id)).toEqual(['o1']);
    expect(toVacate(0.8, [running('o1', { state: 'Locked' })], price)).toEqual([]);
    expect(toVacate(0.8, [running('o1', { priority: 0 })], price)).toEqual([]);
    expect(toVacate(0.8, [], price)).toEqual([]);
  });
});

describe('a reclaimed container is kept off the instance that reclaimed it, for a while', () => {
  const o = (reclaimedAt: number) =>
    ctr('o', {
      opportunistic: true,
      vcpus: 2,
      ram: 8 * GiB,
      reclaimedFrom: { instance: 'i-1', at: reclaimedAt },
    });
  const run = (c: SnapshotContainer) =>
    plan(
      snap({
        types: TYPES,
        config: CONFIG,
        instances: [lender()],
        containers: [big({}), c],
      }),
    );

  it('not into the lent room of i-1 within RECLAIM_AVOID_MS of the reclaim; the plan is redone when it ends', () => {
    const at = NOW.getTime() - 60_000;
    const p = run(o(at));
    expect(p.actions).toEqual([
      { op: 'lock', container: 'o' },
      { op: 'create', type: 't4', for: ['o'] },
    ]);
    expect(p.validUntil).toBeLessThanOrEqual(at + RECLAIM_AVOID_MS);
  });

  it('back into it once that time has passed, and at once when another instance reclaimed it', () => {
    const borrowed = [
      { op: 'lock', container: 'o' },
      { op: 'start', container: 'o', instance: 'i-1' },
    ];
    expect(run(o(NOW.getTime() - RECLAIM_AVOID_MS - 1)).actions).toEqual(borrowed);
    const elsewhere = ctr('o', {
      opportunistic: true,
      vcpus: 2,
      ram: 8 * GiB,
      reclaimedFrom: { instance: 'i-9', at: NOW.getTime() },
    });
    expect(run(elsewhere).actions).toEqual(borrowed);
  });
});
