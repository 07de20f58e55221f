// The warm pool sized to the arrival rate (warm_pool, src/dispatch/scheduler/ahead.ts warmAhead), on
// hand-computed snapshots: free room is kept on instances that are up or booting for f × the arrivals
// expected within one boot time at the recent rate (the snapshot's `arrivals` over arrival_window), idle
// instances holding it are kept, the cheapest instances are created for what is missing, never while a
// container waits for room, at most warm_pool_max vcpus, each vcpu counted for one arrival only.
import { describe, expect, it } from 'vitest';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { SchedulerConfig, Snapshot } from '../../src/dispatch/scheduler/types.js';
import { parseSnapshot } from '../../src/dispatch/snapshot-json.js';
import { ago, ctr, GiB, inst, NOW, snap, type } from './builders.js';

// t2 holds two 1-vcpu containers; t4 is 2× the price, beyond max_price_factor 1.5 for one of them, so
// the pool creates t2s only.
const TYPES = [type('t2', 2, 4, 0.2), type('t4', 4, 16, 0.4)];
/** `n` arrivals of 1 vcpu and `ramGiB` in the last arrival_window (60 s by default). */
const arrived = (count: number, ramGiB = 1) => ({
  vcpus: 1,
  ram: ramGiB * GiB,
  scratch: 0,
  gpus: 0,
  preemptible: false,
  instanceTypes: null,
  count,
});
const T2 = { op: 'create', type: 't2', for: [] };

/**
 * i-1: a running t2 with one 1-vcpu container (1 vcpu free); `idle`: i-2, an idle t2 for 10 min; `bootMs`:
 * the measured boot time (null: none measured, boot_estimate counts).
 */
const world = (o: {
  config: Partial<SchedulerConfig>;
  arrivals: Snapshot['arrivals'];
  bootMs?: number | null;
  idle?: boolean;
  waiting?: boolean;
}): Snapshot => {
  const s = snap({
    types: TYPES,
    config: { waitForRunning: false, ...o.config },
    instances: [
      inst('i-1', 't2', 'running'),
      ...(o.idle === true ? [inst('i-2', 't2', 'idle', { stateSince: ago(600), createdAt: ago(700) })] : []),
    ],
    containers: [
      ctr('r', { state: 'Running', instance: 'i-1' }),
      // Two 2-vcpu containers of a step of 1 s tasks: boot_budget (k = 4) lets the first one have a new
      // t2 and holds the second back (2 × 1 s of work does not keep (2 + 2) × 4 boot times busy).
      ...(o.waiting === true
        ? [ctr('x1', { name: 'x_1', vcpus: 2 }), ctr('x2', { name: 'x_2', vcpus: 2 })]
        : []),
    ],
    arrivals: o.arrivals,
  });
  const boot = o.bootMs === undefined ? 60_000 : o.bootMs;
  s.estimates = { bootMs: boot, endsAt: {}, steps: { x: 1_000 }, fanOut: {} };
  return s;
};
const creates = (s: Snapshot) => plan(s).actions.filter((a) => a.op === 'create');

describe('warm_pool (pure planner)', () => {
  it('holds f × the arrivals of a boot time: 6 a minute, boot 60 s, f 0.5 → 3, 1 free on i-1 → one t2', () => {
    expect(plan(world({ config: { warmPool: 0.5 }, arrivals: [arrived(6)] })).actions).toEqual([T2]);
    // f 1: 6 − 1 = 5 missing → three t2 (the last one half used).
    expect(creates(world({ config: { warmPool: 1 }, arrivals: [arrived(6)] }))).toEqual([T2, T2, T2]);
  });

  it('counts with the measured boot time, else boot_estimate', () => {
    // Boot 120 s: 0.5 × 6 × 2 = 6, 1 free → 5 missing → three t2.
    expect(creates(world({ config: { warmPool: 0.5 }, arrivals: [arrived(6)], bootMs: 120_000 }))).toEqual([
      T2,
      T2,
      T2,
    ]);
    // None measured, boot_estimate 30 s: 0.5 × 6 × 0.5 = 1.5 → 2, 1 free → one t2.
    const s = world({
      config: { warmPool: 0.5, bootEstimateMs: 30_000 },
      arrivals: [arrived(6)],
      bootMs: null,
    });
    expect(creates(s)).toEqual([T2]);
  });

  it('nothing when off, with no arrivals, or when the free room is enough', () => {
    expect(creates(world({ config: { warmPool: 0 }, arrivals: [arrived(6)] }))).toEqual([]);
    expect(creates(world({ config: { warmPool: 1 }, arrivals: [] }))).toEqual([]);
    // 1 a minute: 1 expected, i-1's free vcpu holds it.
    expect(creates(world({ config: { warmPool: 1 }, arrivals: [arrived(1)] }))).toEqual([]);
  });

  it('is bounded by warm_pool_max: 3 of 6 vcpus held, 1 free → one t2', () => {
    expect(creates(world({ config: { warmPool: 1, warmPoolMaxVcpus: 3 }, arrivals: [arrived(6)] }))).toEqual([
      T2,
    ]);
  });

  it('keeps an idle instance the pool holds, and lets it go otherwise', () => {
    // 3 a minute: the idle rule expects 3 × 10 s / 60 s = 0.5 arrivals within idle_timeout, so i-2 goes…
    const gone = plan(world({ config: { warmPool: 0 }, arrivals: [arrived(3)], idle: true }));
    expect(gone.actions).toEqual([expect.objectContaining({ op: 'shutdown', instance: 'i-2' })]);
    // …but the pool holds 3: 1 on i-1, 2 on i-2, which is kept; nothing created.
    expect(plan(world({ config: { warmPool: 1 }, arrivals: [arrived(3)], idle: true })).actions).toEqual([]);
  });

  it('counts each vcpu for one arrival only: two shapes of 2 each, an idle t2 holds one of them → one t2', () => {
    const arrivals = [arrived(2), arrived(2, 2)];
    const s = world({ config: { warmPool: 1 }, arrivals, idle: true });
    // Shapes in key order: the first takes i-1's free vcpu and one of i-2's; the second has i-2's other
    // vcpu and misses one: one t2.
    expect(creates(s)).toEqual([T2]);
  });

  it('creates nothing while a container waits for room: the budget decides its new capacity', () => {
    const s = world({ config: { warmPool: 1 }, arrivals: [arrived(6)], waiting: true });
    const p = plan(s);
    // Only x1's own instance; x2 waits (boot_budget).
    expect(p.actions.filter((a) => a.op === 'create')).toEqual([{ op: 'create', type: 't2', for: ['x1'] }]);
    expect(p.status.get('x2')).toMatch(/boot_budget/);
  });
});

describe('warm_pool in the snapshot JSON (berth plan)', () => {
  const doc = (config: Record<string, unknown>) => ({
    now: NOW.toISOString(),
    config: { wait_for_running: false, ...config },
    instance_types: [{ name: 't2', vcpus: 2, ram: '4GiB', price: 0.2 }],
    instances: [],
    containers: [],
    arrivals: [{ vcpus: 1, ram: '1GiB', count: 4 }],
  });

  it('reads warm_pool and warm_pool_max: 4 a minute, boot_estimate 60 s, f 1 → two t2; max 2 → one', () => {
    expect(creates(parseSnapshot(doc({ warm_pool: 1 })))).toEqual([T2, T2]);
    expect(creates(parseSnapshot(doc({ warm_pool: 1, warm_pool_max: 2 })))).toEqual([T2]);
  });

  it('a bad value is an error naming its field', () => {
    expect(() => parseSnapshot(doc({ warm_pool: -1 }))).toThrow(/config\.warm_pool\b/);
    expect(() => parseSnapshot(doc({ warm_pool: 'big' }))).toThrow(/config\.warm_pool\b/);
    expect(() => parseSnapshot(doc({ warm_pool_max: -2 }))).toThrow(/config\.warm_pool_max/);
  });
});
