// Duration-aware reuse (wait_for_running, src/dispatch/scheduler/durations.ts): the estimate from
// histories, the step of a name, and the pure rule: a waiting container waits for an instance expected to
// free up before a new one could boot, and creates one otherwise. The history that fills the snapshot's
// estimates (src/dispatch/run-history.ts) is checked on hand-made passes.
import { describe, expect, it } from 'vitest';
import { estimateMs, runKey } from '../../src/dispatch/scheduler/durations.js';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import type { RunEstimates, SnapshotContainer } from '../../src/dispatch/scheduler/types.js';
import { RunHistory, SAMPLES } from '../../src/dispatch/run-history.js';
import { parseSnapshot } from '../../src/dispatch/snapshot-json.js';
import { ctr, inst, NOW, snap, type } from './builders.js';

const T2 = [type('t2', 2, 4, 0.2)];
const t = NOW.getTime();
/** On i-1 (a t2): one running container `r` expected to end `endsInS` seconds from now; boot 60 s. */
const running = ctr('r', { state: 'Running', instance: 'i-1', vcpus: 2, name: 'align_ID0001' });
const estimates = (endsInS: number, steps: Record<string, number> = {}): RunEstimates => ({
  bootMs: 60_000,
  endsAt: { r: t + endsInS * 1000 },
  steps,
});

const actions = (waiting: SnapshotContainer[], est: RunEstimates | undefined, on = true) => {
  const s = snap({
    types: T2,
    config: { waitForRunning: on, waitMarginMs: 10_000 },
    instances: [inst('i-1', 't2', 'running')],
    containers: [running, ...waiting],
  });
  if (est !== undefined) s.estimates = est;
  return plan(s);
};

describe('the run-time estimate', () => {
  it('is the median of the history, the lower middle one of an even count, and null with no history', () => {
    expect(estimateMs([])).toBeNull();
    expect(estimateMs([42])).toBe(42);
    expect(estimateMs([30, 10, 20])).toBe(20);
    expect(estimateMs([40, 10, 30, 20])).toBe(20);
  });

  it('keys a name by its step: the task number and an argument list go', () => {
    expect(runKey('individuals_ID0000012')).toBe('individuals');
    expect(runKey('individuals_merge_ID0000026')).toBe('individuals_merge');
    expect(runKey('FASTQC (sample1)')).toBe('FASTQC');
    expect(runKey('split-7')).toBe('split');
    expect(runKey('12345')).toBe('12345');
    expect(runKey('render')).toBe('render');
  });
});

describe('wait_for_running (pure planner)', () => {
  it('waits for an instance that frees up before a new one could boot (20 s < 60 s − 10 s)', () => {
    const p = actions([ctr('w', { vcpus: 2 })], estimates(20));
    // It stays Queued (no lock, no create) until i-1 has room.
    expect(p.actions).toEqual([]);
    expect(p.status.get('w')).toMatch(/waiting for instance i-1 to free up/);
    // The plan changes when r is overdue: wake the dispatcher then.
    expect(p.validUntil).toBe(t + 20_000);
  });

  it('creates an instance when the running one frees up too late (55 s > 50 s), off, or with no boot time', () => {
    const create = [
      { op: 'lock', container: 'w' },
      { op: 'create', type: 't2', for: ['w'] },
    ];
    expect(actions([ctr('w', { vcpus: 2 })], estimates(55)).actions).toEqual(create);
    expect(actions([ctr('w', { vcpus: 2 })], estimates(20), false).actions).toEqual(create);
    expect(actions([ctr('w', { vcpus: 2 })], { ...estimates(20), bootMs: null }).actions).toEqual(create);
    expect(actions([ctr('w', { vcpus: 2 })], undefined).actions).toEqual(create);
  });

  it('a container past its expected end frees nothing: a wrong estimate does not hold the queue', () => {
    const p = actions([ctr('w', { vcpus: 2 })], estimates(-5));
    expect(p.actions).toContainEqual({ op: 'create', type: 't2', for: ['w'] });
  });

  it('room that frees up is taken once; a short known run gives it back to the next waiter', () => {
    // r ends at +20 s; a (run 16 s) takes i-1 from +20 s to +36 s; b from +36 s: both before +50 s.
    const short = { wf: 16_000 };
    const a = ctr('a', { vcpus: 2, name: 'wf_1' });
    const b = ctr('b', { vcpus: 2, name: 'wf_2' });
    const c = ctr('c', { vcpus: 2, name: 'wf_3' });
    const p = actions([a, b, c], estimates(20, short));
    // c would start at +52 s: later than a new instance would be ready (less the margin), so it gets one.
    expect(p.actions.filter((x) => x.op === 'create')).toEqual([{ op: 'create', type: 't2', for: ['c'] }]);
    expect(p.status.get('a')).toMatch(/free up/);
    expect(p.status.get('b')).toMatch(/free up/);
    // With no known run time, the first waiter holds the room for good: b and c boot.
    const q = actions([ctr('a2', { vcpus: 2 }), ctr('b2', { vcpus: 2 })], estimates(20));
    expect(q.actions.filter((x) => x.op === 'create')).toEqual([{ op: 'create', type: 't2', for: ['b2'] }]);
  });
});

describe('the history behind the estimates (run-history.ts)', () => {
  const at = (s: number) => t + s * 1000;
  const booting = inst('i-1', 't2', 'booting', { createdAt: new Date(at(0)), stateSince: new Date(at(0)) });
  // Ready at +45 s.
  const ready = { ...booting, state: 'idle' as const, stateSince: new Date(at(45)) };

  it('knows nothing before any run or boot was seen', () => {
    const h = new RunHistory();
    expect(h.observe([ctr('q')], [booting], at(0))).toBeUndefined();
  });

  it('measures boots and runs by step, and expects a running container to end at its start + the median', () => {
    const h = new RunHistory();
    h.observe([], [booting], at(0));
    // A pass sees it ready at +50 s; it was ready at +45 s: the boot took 45 s.
    const afterBoot = h.observe([], [ready], at(50));
    expect(afterBoot).toEqual({ bootMs: 45_000, endsAt: {}, steps: {} });
    // Two runs of step "align": 30 s and 50 s; the median of two is the lower one.
    const run = (id: string) => ctr(id, { state: 'Running', instance: 'i-1', name: `align_${id}` });
    h.observe([run('1'), run('2')], [ready], at(100));
    h.observe([run('2')], [ready], at(130));
    h.observe([], [ready], at(150));
    const third = [run('3')];
    const e = h.observe(third, [ready], at(200))!;
    expect(e.steps).toEqual({ align: 30_000 });
    expect(e.endsAt).toEqual({ '3': at(230) });
    // Nothing changed: the same object, so the incremental planner reuses its plan.
    expect(h.observe(third, [ready], at(210))).toBe(e);
  });

  it('a run started by a pass and gone by the next is measured from that pass; a requeued one is not', () => {
    const h = new RunHistory();
    h.observe([], [booting], at(0));
    const queued = ctr('q', { name: 'sort_7' });
    const s1 = snap({ now: new Date(at(100)), containers: [queued] });
    // As the dispatcher does: the pass's snapshot is observed, planned, then its starts are taken in.
    h.observe(s1.containers, [ready], at(100));
    h.started(s1, { ...plan(s1), actions: [{ op: 'start', container: 'q', instance: 'i-1' }] });
    expect(h.observe([], [ready], at(125))!.steps).toEqual({ sort: 25_000 });
    // Started, then given back to the queue: no sample (the median stays 25 s, not 12.5 s).
    const again = ctr('r2', { name: 'sort_8' });
    const s2 = snap({ now: new Date(at(200)), containers: [again] });
    h.observe(s2.containers, [ready], at(200));
    h.started(s2, { ...plan(s2), actions: [{ op: 'start', container: 'r2', instance: 'i-1' }] });
    h.observe([{ ...again, state: 'Queued' }], [ready], at(201));
    expect(h.observe([], [ready], at(300))!.steps).toEqual({ sort: 25_000 });
  });

  it('an instance already ready at the first pass says nothing of boot times', () => {
    const h = new RunHistory();
    expect(h.observe([], [ready], at(50))).toBeUndefined();
    expect(h.observe([], [ready, { ...ready, id: 'i-2' }], at(60))!.bootMs).toBe(45_000);
  });

  it('keeps the last SAMPLES runs of a step', () => {
    const h = new RunHistory();
    h.observe([], [booting], at(0));
    h.observe([], [ready], at(10));
    for (let i = 0; i < SAMPLES + 5; i++) {
      const c = [ctr(`c${i}`, { state: 'Running', instance: 'i-1', name: 'x_1' })];
      const start = 1000 * i;
      h.observe(c, [ready], at(start));
      // The first 5 ran 1 s, the rest 100 s: only the 100 s runs are left.
      h.observe([], [ready], at(start + (i < 5 ? 1 : 100)));
    }
    expect(h.observe([], [ready], at(99_999))!.steps).toEqual({ x: 100_000 });
  });
});

describe('estimates in the snapshot JSON (berth plan)', () => {
  const doc = (estimates: unknown) => ({
    now: '2026-01-01T00:00:00Z',
    config: { wait_for_running: true },
    instance_types: [{ name: 't2', vcpus: 2, ram: '4GiB', price: 0.2 }],
    instances: [{ id: 'i-1', type: 't2', state: 'running', state_since: '2025-12-31T23:00:00Z' }],
    containers: [
      {
        id: 'r',
        state: 'Running',
        priority: 1,
        queued_at: '2025-12-31T23:00:00Z',
        vcpus: 2,
        ram: '1GiB',
        instance: 'i-1',
        name: 'align_1',
        started_at: '2025-12-31T23:59:40Z',
      },
      { id: 'w', state: 'Queued', priority: 1, queued_at: '2025-12-31T23:59:00Z', vcpus: 2, ram: '1GiB' },
    ],
    estimates,
  });

  it('reads boot, ends_at and steps: the waiting container waits for i-1', () => {
    const s = parseSnapshot(
      doc({ boot: '60s', ends_at: { r: '2026-01-01T00:00:20Z' }, steps: { align: '40s' } }),
    );
    expect(s.estimates).toEqual({ bootMs: 60_000, endsAt: { r: t + 20_000 }, steps: { align: 40_000 } });
    expect(s.containers[0]).toMatchObject({ name: 'align_1', startedAt: new Date(t - 20_000) });
    expect(plan(s).actions).toEqual([]);
  });

  it('a bad estimate is an error naming its field', () => {
    expect(() => parseSnapshot(doc({ boot: '60s', steps: { align: 'soon' } }))).toThrow(
      /^estimates\.steps\.align: /,
    );
    expect(() => parseSnapshot(doc({ boot: '60s', when: 1 }))).toThrow('estimates.when: unknown field');
  });
});
