// End-aligned placement (end_aligned, src/dispatch/scheduler/aligned.ts) on hand-computed snapshots: a
// waiting container whose run time is expected goes on an instance where another container is expected
// to run longer (it adds nothing to that instance's bill) rather than on the better-filled instance it
// would keep alive longer; with no such instance the old choice stands.
import { describe, expect, it } from 'vitest';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { SchedulerConfig, SnapshotContainer } from '../../src/dispatch/scheduler/types.js';
import { parseSnapshot, SnapshotError } from '../../src/dispatch/snapshot-json.js';
import { ago, ctr, GiB, inst, NOW, snap, type } from './builders.js';

const MIN = 60_000;
// Both instances are t4s at 0.4 $/h. i-a: `a` (3 vcpus, 12 GiB) started 5 min ago, expected to run 15 min:
// it ends at +10 min, leaving 1 vcpu, 4 GiB. i-b: `b` (2 vcpus, 2 GiB) started 5 min ago, expected to run
// 65 min: it ends at +60 min, leaving 2 vcpus, 14 GiB. The old choice (capacity.ts, the busier, fuller
// one first) is i-a: the newcomer fills it.
const T4 = type('t4', 4, 16, 0.4);
const running = (id: string, instance: string, vcpus: number, ramGiB: number, runMin: number) =>
  ctr(id, {
    state: 'Running',
    instance,
    vcpus,
    ram: ramGiB * GiB,
    startedAt: ago(5 * 60),
    expectedRunMs: runMin * MIN,
  });
const world = (waiting: SnapshotContainer, config: Partial<SchedulerConfig> = {}, types = [T4]) =>
  plan(
    snap({
      config: { waitForRunning: false, ...config },
      types,
      instances: [inst('i-a', 't4', 'running'), inst('i-b', 't4', 'running')],
      containers: [running('a', 'i-a', 3, 12, 15), running('b', 'i-b', 2, 2, 65), waiting],
    }),
  );
const startOn = (p: ReturnType<typeof plan>) =>
  p.actions.filter((x) => x.op === 'start').map((x) => (x.op === 'start' ? x.instance : ''));

describe('end_aligned (pure planner)', () => {
  it('puts a 30-min container beside the one ending at +60 min, not on the fuller instance it would extend', () => {
    // On i-a it would end at +30 min, 20 min after `a`: i-a billed 20 min × 0.4 $/h = 0.1333 $ more.
    // On i-b it ends before `b` (+60 min): 0 $ more. End-aligned chooses i-b.
    const w = ctr('w', { expectedRunMs: 30 * MIN });
    expect(startOn(world(w))).toEqual(['i-b']);
    // Off, the old choice: i-a (it fills i-a; costs the 0.1333 $).
    expect(startOn(world(w, { endAligned: 'off' }))).toEqual(['i-a']);
  });

  it('an opportunistic occupant guarantees nothing: it may be vacated before the container ends', () => {
    const s = snap({
      config: { waitForRunning: false },
      types: [T4],
      instances: [inst('i-a', 't4', 'running'), inst('i-b', 't4', 'running')],
      containers: [
        running('a', 'i-a', 3, 12, 15),
        { ...running('b', 'i-b', 2, 2, 65), opportunistic: true },
        ctr('w', { expectedRunMs: 30 * MIN }),
      ],
    });
    expect(startOn(plan(s))).toEqual(['i-a']);
  });

  it('keeps the old choice when no occupant outlasts the container', () => {
    // A 90-min container ends after both (+10, +60 min): on i-a it adds 80 min (0.5333 $), on i-b 30 min
    // (0.2 $); the rule guarantees nothing here and leaves the choice to the old order: i-a.
    expect(startOn(world(ctr('w', { expectedRunMs: 90 * MIN })))).toEqual(['i-a']);
    // Nothing expected of it (no run time, no history): the old choice too.
    expect(startOn(world(ctr('w')))).toEqual(['i-a']);
  });

  it('uses an instance beyond max_price_factor only when an occupant outlasts the container', () => {
    // With a t1 (1 vcpu, 0.1 $/h) in the catalog, a t4 (0.4 $/h) is beyond 1.5 × 0.1 for a 1-vcpu
    // container: without the rule it gets a new t1 (30 min × 0.1 $/h = 0.05 $ plus its boot).
    const types = [type('t1', 1, 2, 0.1), T4];
    const create = { op: 'create', type: 't1', for: ['w'] };
    // 30 min: beside `b` on i-b, 0 $ more.
    expect(startOn(world(ctr('w', { expectedRunMs: 30 * MIN }), {}, types))).toEqual(['i-b']);
    // 90 min: nothing outlasts it, so the price factor holds: a new t1.
    expect(world(ctr('w', { expectedRunMs: 90 * MIN }), {}, types).actions).toContainEqual(create);
    expect(world(ctr('w', { expectedRunMs: 30 * MIN }), { endAligned: 'off' }, types).actions).toContainEqual(
      create,
    );
  });

  it('history: step medians count as expected run times only in that mode', () => {
    const w = ctr('w', { name: 'align_7' });
    const s = snap({
      config: { waitForRunning: false, endAligned: 'history' },
      types: [T4],
      instances: [inst('i-a', 't4', 'running'), inst('i-b', 't4', 'running')],
      containers: [
        ctr('a', { state: 'Running', instance: 'i-a', vcpus: 3, ram: 12 * GiB }),
        ctr('b', { state: 'Running', instance: 'i-b', vcpus: 2, ram: 2 * GiB }),
        w,
      ],
    });
    s.estimates = {
      bootMs: 60_000,
      endsAt: { a: NOW.getTime() + 10 * MIN, b: NOW.getTime() + 60 * MIN },
      steps: { align: 30 * MIN },
    };
    expect(startOn(plan(s))).toEqual(['i-b']);
    expect(startOn(plan({ ...s, config: { ...s.config, endAligned: 'expected' } }))).toEqual(['i-a']);
  });

  it('places two aligned containers one after the other, each on room that is still free', () => {
    // i-b has 2 vcpus free: two 1-vcpu 30-min containers both go there; a third finds i-b full and no other
    // instance outlasting it, so it takes the old choice, i-a.
    const s = snap({
      config: { waitForRunning: false },
      types: [T4],
      instances: [inst('i-a', 't4', 'running'), inst('i-b', 't4', 'running')],
      containers: [
        running('a', 'i-a', 3, 12, 15),
        running('b', 'i-b', 2, 2, 65),
        ...['w1', 'w2', 'w3'].map((id) => ctr(id, { expectedRunMs: 30 * MIN })),
      ],
    });
    expect(startOn(plan(s))).toEqual(['i-b', 'i-b', 'i-a']);
  });
});

describe('expected_run in the snapshot JSON (berth plan)', () => {
  const doc = (expectedRun: unknown) => ({
    now: NOW.toISOString(),
    instance_types: [{ name: 't4', vcpus: 4, ram: '16GiB', price: 0.4 }],
    instances: [{ id: 'i-b', type: 't4', state: 'running', state_since: NOW.toISOString() }],
    containers: [
      {
        id: 'b',
        state: 'Running',
        priority: 1,
        queued_at: '2025-12-31T23:00:00Z',
        vcpus: 2,
        ram: '2GiB',
        instance: 'i-b',
        started_at: '2025-12-31T23:55:00Z',
        expected_run: '65m',
      },
      {
        id: 'w',
        state: 'Queued',
        priority: 1,
        queued_at: '2025-12-31T23:30:00Z',
        vcpus: 1,
        ram: '1GiB',
        expected_run: expectedRun,
      },
    ],
  });

  it('reads a duration', () => {
    const s = parseSnapshot(doc('30m'));
    expect(s.containers.map((c) => c.expectedRunMs)).toEqual([65 * MIN, 30 * MIN]);
    expect(startOn(plan(s))).toEqual(['i-b']);
  });

  it('rejects a value that is not a duration, naming the field', () => {
    expect(() => parseSnapshot(doc('soon'))).toThrow(SnapshotError);
    expect(() => parseSnapshot(doc('soon'))).toThrow(/containers\[1\]\.expected_run/);
    expect(() => parseSnapshot(doc(-5))).toThrow(/containers\[1\]\.expected_run/);
  });
});
