// The policies' planners on single snapshots (the scheduler test builders of test/dispatch).
import { describe, expect, it } from 'vitest';
import { plan } from '../../src/dispatch/scheduler/plan.js';
import { fifoPlanner, makePolicy } from '../../src/sim/policies.js';
import { ctr, DEFAULT_CONFIG, inst, snap, type } from '../dispatch/builders.js';

const types = [type('small', 2, 8, 1), type('big', 16, 64, 8)];

describe('fifoPlanner', () => {
  // One instance allowed; an idle small instance; the head H needs a big one, L behind it fits the small one.
  const s = snap({
    config: { maxInstances: 1 },
    types,
    instances: [inst('i-1', 'small', 'idle')],
    containers: [ctr('H', { vcpus: 8 }), ctr('L', { vcpus: 1 })],
  });

  it('berth lets L use the idle instance while H waits at the limit', () => {
    const ops = plan(s).actions.map(
      (a) => `${a.op}:${'container' in a ? a.container : a.op === 'shutdown' ? a.instance : ''}`,
    );
    expect(ops).toContain('start:L');
    expect(ops).not.toContain('shutdown:i-1');
  });

  it('fifo holds L behind H and frees the idle instance for H', () => {
    const p = fifoPlanner(plan)(s);
    expect(p.actions.some((a) => (a.op === 'lock' || a.op === 'start') && a.container === 'L')).toBe(false);
    expect(p.actions).toContainEqual(expect.objectContaining({ op: 'shutdown', instance: 'i-1' }));
    expect(p.status.get('L')).toBe('fifo: behind container H at the head of the queue');
  });

  it('changes nothing when no container is blocked', () => {
    const free = snap({ types, containers: [ctr('a'), ctr('b', { vcpus: 8 })] });
    expect(fifoPlanner(plan)(free)).toEqual(plan(free));
  });

  it('still cancels an unsatisfiable container behind the head', () => {
    const p = fifoPlanner(plan)({ ...s, containers: [...s.containers, ctr('X', { vcpus: 64 })] });
    expect(p.actions).toContainEqual(
      expect.objectContaining({ op: 'cancel', container: 'X', class: 'perm' }),
    );
  });
});

describe('makePolicy', () => {
  it('one-per-instance caps containers per instance at 1 and keeps the rest of the config', () => {
    const p = makePolicy('one-per-instance', { ...DEFAULT_CONFIG, idleTimeoutMs: 5000 });
    expect(p.config).toMatchObject({ maxContainersPerInstance: 1, idleTimeoutMs: 5000 });
    expect(makePolicy('berth', DEFAULT_CONFIG).planner).toBe(plan);
  });
});
