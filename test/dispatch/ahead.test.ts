// Boot ahead of fan-outs (boot_ahead, src/dispatch/scheduler/ahead.ts): the fan-out estimate from
// histories (src/dispatch/fan-outs.ts), and the pure rule on hand-computed snapshots: capacity for the
// containers expected to arrive when running ones end is created a boot time before those ends, bounded
// by the cap, and idle instances that will take them are kept.
import { describe, expect, it } from 'vitest';
import { FanOuts, FAN_OUT_WINDOW_MS } from '../../src/dispatch/fan-outs.js';
import { RunHistory } from '../../src/dispatch/run-history.js';
import { meanPerEnd, unitsIn } from '../../src/dispatch/scheduler/ahead.js';
import { shapeOf } from '../../src/dispatch/scheduler/fitting.js';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { RunEstimates, Snapshot } from '../../src/dispatch/scheduler/types.js';
import { parseSnapshot } from '../../src/dispatch/snapshot-json.js';
import { ago, ctr, GiB, inst, NOW, snap, type } from './builders.js';

const t = NOW.getTime();
const at = (s: number) => t + s * 1000;
/** The builders' default container shape: 1 vcpu, 1 GiB. */
const ONE = shapeOf(ctr('shape'));
// t2 holds two 1-vcpu containers; t4 is 2× the price, beyond max_price_factor 1.5 for one of them.
const TYPES = [type('t2', 2, 4, 0.2), type('t4', 4, 16, 0.4)];

describe('the fan-out estimate', () => {
  it('is the mean of the samples (a fan-in step gets 1/N per end), null with none', () => {
    expect(meanPerEnd([])).toBeNull();
    expect(meanPerEnd([0, 0, 0, 4])).toBe(1);
    expect(meanPerEnd([28])).toBe(28);
  });

  it('counts how many fit in a room', () => {
    expect(
      unitsIn(
        { mcpu: 2000, ram: 4 * GiB, scratch: 0, gpus: 0 },
        { mcpu: 1000, ram: GiB, scratch: 0, gpus: 0 },
      ),
    ).toBe(2);
    expect(
      unitsIn({ mcpu: 4000, ram: GiB, scratch: 0, gpus: 0 }, { mcpu: 1000, ram: GiB, scratch: 0, gpus: 0 }),
    ).toBe(1);
    expect(
      unitsIn({ mcpu: 500, ram: GiB, scratch: 0, gpus: 0 }, { mcpu: 1000, ram: GiB, scratch: 0, gpus: 0 }),
    ).toBe(0);
  });

  const arrived = (id: string, s: number) => ctr(id, { queuedAt: new Date(at(s)), name: `child_${id}` });

  it('knows nothing without history, and nothing of arrivals no end preceded', () => {
    const f = new FanOuts();
    expect(f.observe(at(0), [], [])).toBe(false);
    expect(f.estimates()).toEqual({});
    // Arrivals with no end before them (a workflow's first tasks) are nobody's fan-out.
    expect(f.observe(at(1), [], [arrived('a', 1), arrived('b', 1)])).toBe(false);
    expect(f.estimates()).toEqual({});
  });

  it('gives an end the arrivals of its pass and of the window after, shared among the ends', () => {
    const f = new FanOuts();
    f.observe(at(0), [], []);
    // "split" ends with 3 arrivals in its pass, 1 more 5 s later: 4, known once the batch closes.
    f.observe(at(10), ['split'], [arrived('a', 10), arrived('b', 10), arrived('c', 9)]);
    f.observe(at(15), [], [arrived('d', 15)]);
    expect(f.estimates()).toEqual({});
    // Past the window: closed, and what arrives then is not split's.
    expect(f.observe(at(15) + FAN_OUT_WINDOW_MS + 1, [], [arrived('e', 30)])).toBe(true);
    expect(f.estimates()).toEqual({ split: { perEnd: 4, shape: ONE } });
    // Two ends of different steps in one pass, 2 arrivals, closed by the next end: 1 each; split's mean
    // is (4 + 1) / 2; the last end ("merge", nothing arrived yet) is still open.
    f.observe(at(100), ['split', 'align'], [arrived('f', 100), arrived('g', 100)]);
    f.observe(at(200), ['merge'], []);
    expect(f.estimates()).toEqual({ split: { perEnd: 2.5, shape: ONE }, align: { perEnd: 1, shape: ONE } });
  });

  it('is learnt by the run history and handed over in the estimates', () => {
    const h = new RunHistory();
    const ready = inst('i-1', 't2', 'idle', { createdAt: new Date(at(0)), stateSince: new Date(at(60)) });
    h.observe([], [{ ...ready, state: 'booting', stateSince: new Date(at(0)) }], at(0));
    const parent = ctr('p', { state: 'Running', instance: 'i-1', name: 'split_1' });
    h.observe([parent], [ready], at(100));
    // It ends; two children arrive in the same pass; a third end closes the batch.
    h.observe([arrived('k1', 120), arrived('k2', 120)], [ready], at(120));
    const e = h.observe([], [ready], at(120) + FAN_OUT_WINDOW_MS + 1)!;
    expect(e.fanOut).toEqual({ split: { perEnd: 2, shape: ONE } });
    expect(e.steps).toEqual({ split: 20_000 });
  });
});

describe('boot_ahead (pure planner)', () => {
  /** `split_1` runs on i-1 (a t2, one of its 2 vcpus) and is expected to end in `endsInS` s; boot 60 s. */
  const world = (o: { endsInS: number; perEnd: number; cap: number; idle?: boolean }): Snapshot => {
    const s = snap({
      types: TYPES,
      config: { bootAhead: o.cap, waitForRunning: false },
      instances: [
        inst('i-1', 't2', 'running'),
        ...(o.idle === true
          ? [inst('i-2', 't2', 'idle', { stateSince: ago(600), createdAt: ago(700) })]
          : []),
      ],
      containers: [ctr('r', { state: 'Running', instance: 'i-1', name: 'split_1' })],
    });
    const est: RunEstimates = {
      bootMs: 60_000,
      endsAt: { r: at(o.endsInS) },
      steps: { split: 100_000 },
      fanOut: { split: { perEnd: o.perEnd, shape: ONE } },
    };
    s.estimates = est;
    return s;
  };
  const creates = (s: Snapshot) => plan(s).actions.filter((a) => a.op === 'create');

  it('pays: 6 arrivals expected within a boot, room for 2 (1 free + 1 freed) → two t2 for the other 4', () => {
    const p = plan(world({ endsInS: 40, perEnd: 6, cap: 32 }));
    expect(p.actions).toEqual([
      { op: 'create', type: 't2', for: [] },
      { op: 'create', type: 't2', for: [] },
    ]);
    // When r is overdue, the decision changes.
    expect(p.validUntil).toBe(at(40));
  });

  it('does not pay while the end is more than a boot away: nothing yet, a pass a boot before it', () => {
    const p = plan(world({ endsInS: 90, perEnd: 6, cap: 32 }));
    expect(p.actions).toEqual([]);
    expect(p.validUntil).toBe(at(30));
  });

  it('nothing when off, past the expected end, or when the freed room is enough', () => {
    expect(creates(world({ endsInS: 40, perEnd: 6, cap: 0 }))).toEqual([]);
    expect(creates(world({ endsInS: 0, perEnd: 6, cap: 32 }))).toEqual([]);
    expect(creates(world({ endsInS: 40, perEnd: 2, cap: 32 }))).toEqual([]);
  });

  it('is bounded by the cap: 3 of 6 held, 2 of them in room already → one t2', () => {
    expect(creates(world({ endsInS: 40, perEnd: 6, cap: 3 }))).toEqual([
      { op: 'create', type: 't2', for: [] },
    ]);
  });

  it('keeps an idle instance the arrivals will take, and lets it go otherwise', () => {
    const kept = plan(world({ endsInS: 40, perEnd: 4, cap: 32, idle: true }));
    expect(kept.actions).toEqual([]);
    const gone = plan(world({ endsInS: 40, perEnd: 4, cap: 0, idle: true }));
    expect(gone.actions).toEqual([expect.objectContaining({ op: 'shutdown', instance: 'i-2' })]);
  });

  it('counts a container this pass starts: a short parent may end before the next pass', () => {
    const s = snap({
      types: TYPES,
      config: { bootAhead: 32, waitForRunning: false },
      instances: [inst('i-1', 't2', 'idle', { stateSince: ago(600), createdAt: ago(700) })],
      containers: [ctr('q', { name: 'split_2' })],
    });
    s.estimates = {
      bootMs: 60_000,
      endsAt: {},
      steps: { split: 3_000 },
      fanOut: { split: { perEnd: 5, shape: ONE } },
    };
    // q starts on i-1 (room for 1 more, +1 when q ends): 5 − 2 → two t2.
    expect(plan(s).actions).toEqual([
      { op: 'lock', container: 'q' },
      { op: 'start', container: 'q', instance: 'i-1' },
      { op: 'create', type: 't2', for: [] },
      { op: 'create', type: 't2', for: [] },
    ]);
  });
});

describe('fan_out in the snapshot JSON (berth plan)', () => {
  const doc = (fanOut: unknown) => ({
    now: NOW.toISOString(),
    config: { boot_ahead: 8, wait_for_running: false },
    instance_types: [{ name: 't2', vcpus: 2, ram: '4GiB', price: 0.2 }],
    instances: [{ id: 'i-1', type: 't2', state: 'running', state_since: NOW.toISOString() }],
    containers: [
      {
        id: 'r',
        state: 'Running',
        priority: 1,
        queued_at: '2025-12-31T23:00:00Z',
        vcpus: 1,
        ram: '1GiB',
        instance: 'i-1',
        name: 'split_1',
      },
    ],
    estimates: { boot: '60s', ends_at: { r: new Date(at(30)).toISOString() }, steps: {}, fan_out: fanOut },
  });

  it('reads per_end and the shape: two t2 created ahead', () => {
    const s = parseSnapshot(doc({ split: { per_end: 6, vcpus: 1, ram: '1GiB' } }));
    expect(s.estimates!.fanOut).toEqual({ split: { perEnd: 6, shape: ONE } });
    expect(plan(s).actions.filter((a) => a.op === 'create')).toHaveLength(2);
  });

  it('a bad fan-out is an error naming its field', () => {
    expect(() => parseSnapshot(doc({ split: { per_end: -1, vcpus: 1, ram: '1GiB' } }))).toThrow(
      /estimates\.fan_out\.split\.per_end/,
    );
    expect(() => parseSnapshot(doc({ split: { per_end: 1, ram: '1GiB' } }))).toThrow(
      /estimates\.fan_out\.split\.vcpus/,
    );
    expect(() => parseSnapshot(doc({ split: 3 }))).toThrow(/estimates\.fan_out\.split/);
  });
});
