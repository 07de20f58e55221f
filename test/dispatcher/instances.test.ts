// The instance state machine (DESIGN §6.3) and the dispatcher's background creates and destroys (issue 11
// item 3): on a real PostgreSQL queue and the sim cloud, whose operations a test can hold until released.
import { describe, expect, it } from 'vitest';
import { CloudApiError } from '../../src/cloud/errors.js';
import type { DispatchQueue } from '../../src/dispatch/ports.js';
import { IllegalInstanceTransition, setState, type PoolInstance } from '../../src/dispatch/pool.js';
import { INSTANCE_STATES, INSTANCE_TRANSITIONS, type InstanceState } from '../../src/model/types.js';
import { MAX_TIMER_MS } from '../../src/model/clock.js';
import { ManualTimers } from '../helpers/timers.js';
import { until } from '../helpers/cli.js';
import { harness } from './harness.js';

function instance(state: InstanceState): PoolInstance {
  return {
    id: 'i-1',
    type: 'small',
    providerType: 'small',
    price: 0.1,
    createdAt: new Date(0),
    state,
    stateSince: new Date(0),
    idleBehavior: 'run',
    nodeId: null,
    containers: [],
    destroyAttemptAt: null,
    preemptible: false,
    interruptionNotice: null,
  };
}

/** The real queue, whose failNode throws the first `times` calls (the database refused the write). */
function failNodeThrows(queue: DispatchQueue, times: number): DispatchQueue & { refused: number } {
  const state = { refused: 0 };
  return new Proxy(queue, {
    get(target, key, receiver) {
      if (key === 'refused') return state.refused;
      const v = Reflect.get(target, key, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (key === 'failNode' && state.refused < times) {
          state.refused++;
          throw new Error('failNode: the database refused the write (injected)');
        }
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as DispatchQueue & { refused: number };
}

describe('instance state machine', () => {
  it('every transition of INSTANCE_TRANSITIONS is taken; every other one throws and changes nothing', () => {
    const at = new Date(1000);
    let legal = 0;
    for (const from of INSTANCE_STATES) {
      for (const to of INSTANCE_STATES) {
        if (from === to) continue;
        const inst = instance(from);
        if (INSTANCE_TRANSITIONS[from].includes(to)) {
          expect(setState(inst, to, at), `${from} → ${to}`).toBe(true);
          expect(inst).toMatchObject({ state: to, stateSince: at });
          legal++;
        } else {
          expect(() => setState(inst, to, at), `${from} → ${to}`).toThrow(IllegalInstanceTransition);
          expect(inst).toMatchObject({ state: from, stateSince: new Date(0) });
        }
      }
    }
    expect(legal).toBe(18);
    // Nothing leaves gone; nothing chosen for shutdown comes back to work.
    expect(INSTANCE_TRANSITIONS.gone).toEqual([]);
    for (const s of ['shutdown', 'destroy_pending'] as const)
      for (const live of ['booting', 'unknown', 'idle', 'running'] as const)
        expect(INSTANCE_TRANSITIONS[s]).not.toContain(live);
  });

  it('an instance walks booting → idle → running → idle → shutdown → destroy_pending → gone', async () => {
    const h = await harness();
    const d = h.make();
    const states: string[] = [];
    const seen = () => {
      const s = [...d.instances.values()][0]?.state ?? 'gone';
      if (states.at(-1) !== s) states.push(s);
    };
    h.cloud.controls.hold('destroy');
    await h.submit({ vcpus: 1, ram: '1GiB' });
    await h.pass(d);
    seen(); // booting
    await h.advance(30_000);
    await h.pass(d); // the agent registered: the container is placed on it
    seen(); // running
    await h.pingAll();
    await h.finishAll(0);
    await h.advance(1_000);
    await h.pingAll();
    // idle, then (no arrival is likely to use it) chosen for shutdown while its destroy is held
    await d.tick();
    seen();
    expect(states).toEqual(['booting', 'running', 'shutdown']);
    expect(d.operationsInFlight).toEqual({ creates: 0, destroys: 1 });
    await until(() => h.cloud.controls.parked('destroy') === 1, 10_000, 'the destroy to reach the cloud');
    h.cloud.controls.release('destroy');
    await d.settled();
    seen();
    await h.advance(1_000);
    await h.pass(d); // a destroy accepted since the last list: this pass's sync confirms it gone
    seen();
    expect(states).toEqual(['booting', 'running', 'shutdown', 'destroy_pending', 'gone']);
    // idle passed through on the way (running → idle → shutdown in one pass): shown by the event log
    expect(h.events.map((e) => e.kind).filter((k) => k.startsWith('instance-'))).toEqual([
      'instance-created',
      'instance-ready',
      'instance-shutdown',
      'instance-destroyed',
      'instance-gone',
    ]);
    expect(h.events.filter((e) => e.kind === 'error')).toEqual([]);
  });

  it('after a restart: unknown → booting while its agent has not come, then idle or running', async () => {
    const h = await harness({ bootMs: 120_000 });
    const d1 = h.make();
    await h.submit({ vcpus: 1, ram: '1GiB' });
    await h.pass(d1);
    const d2 = h.make(); // d1 is "killed -9": its lease is taken over once it is stale
    await h.advance(61_000);
    await h.pass(d2); // adopted (unknown), then observed with no registered agent: booting
    const [adopted] = [...d2.instances.values()];
    expect(adopted).toMatchObject({ state: 'booting' });
    await h.advance(60_000); // booted: its agent registers
    await h.pingAll();
    await h.pass(d2);
    expect(adopted!.state === 'idle' || adopted!.state === 'running').toBe(true);
    expect(h.cloud.controls.count('create')).toBe(1);
  });
});

describe('no path forgets an instance the cloud still bills', () => {
  it('failNode throws and the first destroy fails: the instance is destroyed anyway, and counts against max_instances until gone', async () => {
    const h = await harness({ config: { maxInstances: 1 } });
    const queue = failNodeThrows(h.queue, 1);
    const d = h.make({ queue });
    const [first] = await h.submit({ vcpus: 1, ram: '1GiB' });
    await h.pass(d);
    await h.advance(30_000);
    await h.pass(d);
    await h.pingAll();
    expect(await h.state(first!)).toBe('Running');
    const id = [...h.agents.values()][0]!.instanceId;

    // Idle, and no arrival is likely to use it: chosen for shutdown. The node bookkeeping before the
    // destroy throws, and the destroy itself is refused.
    await h.finishAll(0);
    h.cloud.controls.failNext('destroy', new CloudApiError('destroy refused (injected)'));
    await h.pass(d);
    expect(queue.refused).toBe(1);
    expect(d.instances.get(id)).toMatchObject({ state: 'shutdown' });
    expect(h.cloud.get(id)!.state).not.toBe('terminated');

    // New work cannot have an instance: the one shutting down still counts against max_instances.
    const created = () => h.events.filter((e) => e.kind === 'instance-created').length;
    const [second] = await h.submit({ vcpus: 1, ram: '1GiB' });
    await h.advance(2_000);
    await h.pass(d);
    expect(created()).toBe(1);
    expect(await h.status(second!)).toMatch(/max_instances=1/);

    await h.advance(4_000); // shutdown_retry (5 s) passed: destroyed again, accepted; counted until listed gone
    await h.pass(d);
    expect(h.cloud.controls.count('destroy')).toBe(2);
    expect(h.cloud.get(id)!.state).toBe('terminated');
    expect(d.instances.get(id)).toMatchObject({ state: 'destroy_pending' });
    expect(created()).toBe(1);
    // The next pass lists the cloud: gone, so the limit frees and the new work gets its instance.
    await h.advance(1_000);
    await h.pass(d);
    expect(d.instances.has(id)).toBe(false);
    expect(created()).toBe(2);
    expect(h.events.filter((e) => e.kind === 'error').map((e) => (e as { op: string }).op)).toEqual([
      'failNode',
      'destroy',
    ]);
  });
});

describe('creates and destroys in flight', () => {
  const four = { vcpus: 1, ram: '1GiB' };

  it('passes go on while creates are held; the creates in flight count against max_instances', async () => {
    const h = await harness({ config: { maxInstances: 4, batchPacking: 'off', shareRule: 'price' } });
    const d = h.make();
    h.cloud.controls.hold('create');
    await h.submit(four, four, four, four, four, four);
    await d.tick(); // returns with every create still in flight
    await until(() => h.cloud.controls.parked('create') === 4, 10_000, '4 creates to reach the cloud');
    expect(d.operationsInFlight.creates).toBe(4);
    await h.advance(1_000);
    await d.tick(); // the provisional instances count: no fifth create
    await h.advance(1_000);
    await d.tick();
    expect(h.cloud.controls.count('create')).toBe(4);
    expect(h.events.filter((e) => e.kind === 'instance-created')).toHaveLength(0);
    h.cloud.controls.release('create');
    await d.settled();
    expect(h.events.filter((e) => e.kind === 'instance-created')).toHaveLength(4);
    await h.pass(d);
    expect(h.cloud.live).toBe(4);
    expect(h.cloud.controls.count('create')).toBe(4);
  });

  it('max_concurrent_creates bounds the creates in flight; the rest start when one ends', async () => {
    const h = await harness({ config: { batchPacking: 'off', shareRule: 'price' } });
    const d = h.make({ maxConcurrentCreates: 2 });
    h.cloud.controls.hold('create');
    await h.submit(four, four, four, four, four);
    await d.tick();
    await until(() => h.cloud.controls.parked('create') === 2, 10_000, '2 creates to reach the cloud');
    await d.tick();
    expect(h.cloud.controls.count('create')).toBe(2);
    expect(h.cloud.controls.releaseOne('create')).toBe(true);
    await until(() => d.operationsInFlight.creates === 1, 10_000, 'one create to end');
    await d.tick(); // one slot free: one more create
    await until(() => h.cloud.controls.count('create') === 3, 10_000, 'a third create');
    expect(d.operationsInFlight.creates).toBe(2);
    h.cloud.controls.release('create');
    await d.settled();
    await h.pass(d);
    await h.pass(d);
    expect(h.cloud.live).toBe(5);
  });

  it('a create that ends during a pass: its node, bound before the instance is applied, is not failed', async () => {
    const h = await harness();
    let bound: Promise<unknown> | null = null;
    let arm = false;
    // The real queue; once armed, the pass's read of the nodes lets the held create end (and bind its
    // node) first: the pass sees a bound node whose instance it does not know yet.
    const queue = new Proxy(h.queue, {
      get(target, key, receiver) {
        const v = Reflect.get(target, key, receiver) as unknown;
        if (typeof v !== 'function') return v;
        return async (...args: unknown[]) => {
          const call = () => (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          if (key === 'bindNode') return (bound = call());
          if (key === 'nodeChanges' && arm) {
            arm = false;
            h.cloud.controls.release('create');
            await until(() => bound !== null, 10_000, 'the node to be bound');
            await bound;
          }
          return call();
        };
      },
    });
    const d = h.make({ queue });
    h.cloud.controls.hold('create');
    const [id] = await h.submit(four);
    await d.tick();
    await until(() => h.cloud.controls.parked('create') === 1, 10_000, 'the create to reach the cloud');
    arm = true;
    await h.advance(1_000);
    await h.pass(d);
    await h.pass(d);
    expect(h.events.filter((e) => e.kind === 'node-lost')).toEqual([]);
    await h.advance(30_000);
    await h.pass(d);
    await h.pingAll();
    expect(await h.state(id!)).toBe('Running');
    expect(h.cloud.controls.count('create')).toBe(1);
  });

  it('a stop waits for the creates in flight, then releases the lease', async () => {
    const h = await harness();
    const order: string[] = [];
    const queue = new Proxy(h.queue, {
      get(target, key, receiver) {
        const v = Reflect.get(target, key, receiver) as unknown;
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => {
          if (key === 'release') order.push('release');
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const d = h.make({
      queue,
      onEvent: (e) => {
        h.events.push(e);
        if (e.kind === 'instance-created') order.push('created');
      },
    });
    h.cloud.controls.hold('create');
    await h.submit(four);
    await d.tick();
    await until(() => h.cloud.controls.parked('create') === 1, 10_000, 'the create to reach the cloud');
    const stopping = d.stop();
    h.cloud.controls.release('create');
    await stopping;
    expect(order).toEqual(['created', 'release']);
  });

  it("a stop_grace past a Node timer's 24.8 days (30 d) is waited out, not fired after 1 ms", async () => {
    const h = await harness();
    const timers = new ManualTimers();
    const d = h.make({ stopGraceMs: 30 * 24 * 3_600_000, timers });
    h.cloud.controls.hold('create');
    await h.submit(four);
    await d.tick();
    await until(() => h.cloud.controls.parked('create') === 1, 10_000, 'the create to reach the cloud');
    const stopping = d.stop();
    await until(() => timers.count === 1, 10_000, 'stop to arm its grace');
    await timers.advance(1_000);
    expect(timers.count).toBe(1); // before the fix: the grace fired after 1 ms
    expect(timers.longest).toBeLessThanOrEqual(MAX_TIMER_MS);
    h.cloud.controls.release('create');
    await stopping;
    expect(timers.count).toBe(0);
    expect(h.cloud.live).toBe(1);
  });

  it('a create cut short by a stop is adopted by the next dispatcher through its tags: one instance, not two', async () => {
    const h = await harness();
    const d1 = h.make({ stopGraceMs: 1 });
    h.cloud.controls.hold('create');
    const [id] = await h.submit(four);
    await d1.tick();
    await until(() => h.cloud.controls.parked('create') === 1, 10_000, 'the create to reach the cloud');
    await d1.stop(); // stop_grace passes with the create still held
    expect(h.cloud.live).toBe(0);
    h.cloud.controls.release('create'); // the cloud made it; the response went to a stopped dispatcher
    await d1.settled();
    const d2 = h.make();
    await h.pass(d2);
    expect(d2.instances.size).toBe(1);
    await h.advance(30_000);
    await h.pass(d2);
    await h.pingAll();
    expect(await h.state(id!)).toBe('Running');
    expect(h.cloud.controls.count('create')).toBe(1);
  });
});
