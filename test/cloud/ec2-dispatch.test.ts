// The real dispatcher (PostgreSQL queue) driving the ec2 driver against the emulated EC2: a type without
// capacity in any zone is passed over for the next type within the price factor, never for one beyond
// it, and the waiting container blocks no other work.
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { bootDataFor } from '../../src/cloud/boot-data.js';
import { DISPATCHER_TIMERS } from '../../src/dispatch/config.js';
import { Dispatcher, type DispatchEvent } from '../../src/dispatch/dispatcher.js';
import { PgQueue } from '../../src/dispatch/pg-queue.js';
import { ManualClock, seededRng } from '../../src/model/clock.js';
import { normalizeRequest } from '../../src/model/request.js';
import { Store } from '../../src/store/store.js';
import { DEFAULT_CONFIG } from '../dispatch/builders.js';
import { testDb } from '../helpers/db.js';
import { itIf } from '../helpers/needs.js';
import { ec2type, ec2World, noMoto, type Ec2World } from './ec2-helpers.js';

const it = itIf(noMoto);
const GiB = 1024 ** 3;
// Cheapest first: a and b are within the price factor (1.5) of each other, big is far beyond.
const TYPES = [
  ec2type('a', 't3a.small', { price: 0.0188 }),
  ec2type('b', 't3.small', { price: 0.0208 }),
  ec2type('big', 't3.xlarge', { vcpus: 4, ram: 16 * GiB, price: 0.1664 }),
];

let w: Ec2World;
beforeAll(async () => {
  if (!noMoto) w = await ec2World();
});
afterAll(async () => {
  await w?.stop();
});

describe('dispatcher on the ec2 driver', () => {
  it('capacity errors move to the next type within the price factor, not beyond; other work goes on', async () => {
    const db = await testDb();
    const clock = new ManualClock('2026-01-01T00:00:00Z');
    const store = new Store(db.pool, { clock, rng: seededRng(1) });
    const events: DispatchEvent[] = [];
    const driver = w.driver({}, clock);
    const d = new Dispatcher({
      id: 'c1/t1',
      cluster: 'c1',
      tag: 't1',
      queue: new PgQueue(store, db.url),
      driver,
      clock,
      instanceTypes: TYPES,
      config: DEFAULT_CONFIG,
      ...DISPATCHER_TIMERS.parse({ capacity_ttl: '10m' }),
      bootData: bootDataFor('http://127.0.0.1:9'),
      onEvent: (e) => events.push(e),
    });
    w.emu.setFaults({
      rules: [{ action: 'RunInstances', error: 'InsufficientInstanceCapacity', instance_type: 't3a.small' }],
    });
    const [small] = await store.requests.create('alice', [
      normalizeRequest({ command: ['true'], vcpus: 1, ram: '1GiB', name: 'small' }),
    ]);
    const mine = async () =>
      (await driver.list({ 'berth-cluster': 'c1', 'berth-tag': 't1' })).map((i) => i.providerType);

    await d.tick().then(() => d.settled()); // a: no capacity in any subnet
    expect(events.filter((e) => e.kind === 'create-failed').map((e) => (e as { type: string }).type)).toEqual(
      ['a'],
    );
    expect(await mine()).toEqual([]);
    clock.advance(1000);
    await d.tick().then(() => d.settled()); // b: created
    expect(await mine()).toEqual(['t3.small']);
    expect(events.find((e) => e.kind === 'instance-created')).toMatchObject({
      type: 'b',
      for: [small!.container_id],
    });

    // Now b has no capacity either: a second small container waits (big is beyond the price factor), and
    // a container that needs big is not held up behind it.
    w.emu.setFaults({
      rules: [{ action: 'RunInstances', error: 'InsufficientInstanceCapacity', instance_type: 't3.small' }],
    });
    // Fill b so the next small container needs a new instance.
    const reqs = await store.requests.create('alice', [
      normalizeRequest({ command: ['true'], vcpus: 1, ram: '1GiB', name: 'small-2', priority: 600 }),
      normalizeRequest({ command: ['true'], vcpus: 1, ram: '1GiB', name: 'small-3', priority: 600 }),
      normalizeRequest({ command: ['true'], vcpus: 4, ram: '12GiB', name: 'large', priority: 100 }),
    ]);
    for (let i = 0; i < 4; i++) {
      clock.advance(1000);
      await d.tick().then(() => d.settled());
    }
    const types = await mine();
    expect(types.filter((t) => t === 't3.xlarge')).toHaveLength(1); // the lower-priority large one went ahead
    expect(types.filter((t) => t === 't3a.small')).toHaveLength(0);
    // Two small containers fit b's instance (2 CPUs): the higher-priority pair takes it, and the third
    // waits for a type with capacity instead of taking big.
    expect(types.filter((t) => t === 't3.small')).toHaveLength(1);
    const smalls = [small!.container_id!, reqs[0]!.container_id!, reqs[1]!.container_id!];
    const waiting = smalls.filter((id) =>
      /unavailable \(cloud capacity error\)/.test(d.lastPlan!.status.get(id) ?? ''),
    );
    expect(waiting).toEqual([small!.container_id]);
    expect(d.lastPlan!.status.get(waiting[0]!)).toContain(
      'a unavailable (cloud capacity error), b unavailable',
    );
    expect((await store.containers.get(waiting[0]!)).instance_id).toBeNull();
    await d.stop();
  });
});
