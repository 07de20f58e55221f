// A dispatcher on a real PostgreSQL queue and the sim cloud, on a virtual clock, with hand-driven agents:
// each test says when agents register, ping, start and finish containers.
import { bootDataFor, parseBootData } from '../../src/cloud/boot-data.js';
import { SimCloud, type SimCloudEvent } from '../../src/cloud/sim/sim-cloud.js';
import { DISPATCHER_TIMERS } from '../../src/dispatch/config.js';
import { Dispatcher, type DispatchEvent, type DispatcherOptions } from '../../src/dispatch/dispatcher.js';
import { PgQueue } from '../../src/dispatch/pg-queue.js';
import type { SchedulerConfig } from '../../src/dispatch/scheduler/types.js';
import { seededRng } from '../../src/model/clock.js';
import { normalizeRequest, type RequestInput } from '../../src/model/request.js';
import type { InstanceType } from '../../src/model/types.js';
import { VirtualClock } from '../../src/sim/clock.js';
import { Store } from '../../src/store/store.js';
import { DEFAULT_CONFIG } from '../dispatch/builders.js';
import { testDb } from '../helpers/db.js';

export const GiB = 1024 ** 3;

export const TYPES: InstanceType[] = [
  {
    name: 'small',
    providerType: 'small',
    vcpus: 1,
    ram: 2 * GiB,
    scratch: 10 * GiB,
    gpus: 0,
    price: 0.1,
    preemptible: false,
  },
  {
    name: 'big',
    providerType: 'big',
    vcpus: 4,
    ram: 16 * GiB,
    scratch: 50 * GiB,
    gpus: 0,
    price: 0.4,
    preemptible: false,
  },
];

/** The scheduler defaults of the scenario tests, with a cap of 10 instances. */
export const CONFIG: SchedulerConfig = { ...DEFAULT_CONFIG, maxInstances: 10 };

/** An agent the test drives: registered with the boot data's secret, holding its node token. */
export interface FakeAgent {
  instanceId: string;
  nodeId: string;
  running: Map<string, string>; // container → lock token
}

export async function harness(
  opts: {
    config?: Partial<SchedulerConfig>;
    bootMs?: number;
    cloud?: Partial<ConstructorParameters<typeof SimCloud>[1]>;
  } = {},
) {
  const db = await testDb();
  const clock = new VirtualClock('2026-01-01T00:00:00Z');
  const store = new Store(db.pool, { clock, rng: seededRng(1) });
  const cloud = new SimCloud(clock, {
    seed: 1,
    bootTime: { kind: 'fixed', ms: opts.bootMs ?? 30_000 },
    ...opts.cloud,
  });
  const booted: { id: string; bootData: { nodeId: string; secret: string } }[] = [];
  cloud.onEvent((e: SimCloudEvent) => {
    if (e.type !== 'agent-started') return;
    const b = parseBootData(e.bootData);
    booted.push({ id: e.id, bootData: { nodeId: b.node_id, secret: b.bootstrap_secret } });
  });
  const events: DispatchEvent[] = [];
  const queue = new PgQueue(store, db.url);
  /** A dispatcher; `extra` replaces options (a fault-injecting queue, a pass gap, an API probe). */
  const make = (extra: Partial<DispatcherOptions> = {}) =>
    new Dispatcher({
      id: 'c1/t1',
      cluster: 'c1',
      tag: 't1',
      queue,
      driver: cloud,
      clock,
      instanceTypes: TYPES,
      config: { ...CONFIG, ...opts.config },
      ...DISPATCHER_TIMERS.parse({ shutdown_retry: '5s' }),
      bootData: bootDataFor('sim:'),
      onEvent: (e) => events.push(e),
      ...extra,
    });
  const agents = new Map<string, FakeAgent>();

  const h = {
    db,
    clock,
    store,
    cloud,
    events,
    queue,
    make,
    agents,
    /** One pass, then until the creates and destroys it started have ended and their outcomes applied. */
    async pass(d: Dispatcher): Promise<void> {
      await d.tick();
      await d.settled();
    },
    /** Submits requests and returns their first containers' ids. */
    async submit(...inputs: RequestInput[]): Promise<string[]> {
      const reqs = await store.requests.create(
        'alice',
        inputs.map((i) => normalizeRequest({ command: ['true'], ...i })),
      );
      return reqs.map((r) => r.container_id!);
    },
    /** Advances virtual time (running cloud events); agents whose instance booted register. */
    async advance(ms: number): Promise<void> {
      clock.runUntil(clock.nowMs() + ms);
      for (const b of booted.splice(0)) {
        await store.nodes.register(b.bootData.nodeId, b.bootData.secret, {});
        agents.set(b.id, { instanceId: b.id, nodeId: b.bootData.nodeId, running: new Map() });
      }
    },
    /** Every live agent pings (and starts whatever was assigned to it). */
    async pingAll(): Promise<void> {
      for (const a of agents.values()) {
        if (!cloud.get(a.instanceId) || cloud.get(a.instanceId)!.state === 'terminated') continue;
        try {
          await store.nodes.ping(a.nodeId, a.running.size > 0 ? 'busy' : 'idle');
        } catch {
          continue; // failed node: its agent stops
        }
        const work = await store.containers.workFor(a.nodeId, [...a.running.keys()]);
        for (const s of work.start) {
          await store.containers.start(s.id, a.nodeId, s.lock_token);
          a.running.set(s.id, s.lock_token);
        }
        for (const k of work.kill) a.running.delete(k);
      }
    },
    /** Agents finish every container they run with the given exit code. */
    async finishAll(exitCode = 0): Promise<string[]> {
      const done: string[] = [];
      for (const a of agents.values()) {
        // An agent whose machine is gone reports nothing more.
        if (cloud.get(a.instanceId)?.state !== 'running') {
          a.running.clear();
          continue;
        }
        for (const [id, token] of a.running) {
          await store.containers.complete(id, a.nodeId, token, { exitCode, oomKilled: false, usage: null });
          done.push(id);
        }
        a.running.clear();
      }
      return done;
    },
    async state(id: string) {
      return (await store.containers.get(id)).state;
    },
    /** Its scheduling status as the API shows it (statuses are stored by group: read through the store). */
    async status(id: string) {
      return (await store.containers.get(id)).scheduling_status;
    },
    /** A dispatcher with one container Running on the one instance it created (booted, agent started it). */
    async oneRunning(input: RequestInput = { vcpus: 1, ram: '1GiB' }) {
      const d = make();
      const [id] = await h.submit(input);
      await h.pass(d);
      await h.advance(opts.bootMs ?? 30_000);
      await h.pass(d);
      await h.pingAll();
      if ((await h.state(id!)) !== 'Running') throw new Error(`container ${id} is not Running`);
      return { d, id: id!, agent: [...agents.values()][0]! };
    },
  };
  return h;
}
