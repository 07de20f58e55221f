// The dispatcher's log (issue 9, done-when): a dispatcher whose driver fails destroys logs one line per
// failure naming the instance, through the real service loop (startDispatcher), a real PostgreSQL queue,
// the sim cloud refusing every destroy, and the real process logger writing JSON lines.
import { describe, expect, it } from 'vitest';
import { SimCloud } from '../../src/cloud/sim/sim-cloud.js';
import { parseDispatchConfig } from '../../src/dispatch/config.js';
import { logDispatchEvents } from '../../src/dispatch/log.js';
import { startDispatcher } from '../../src/dispatch/run.js';
import { seededRng } from '../../src/model/clock.js';
import { VirtualClock } from '../../src/sim/clock.js';
import { Store } from '../../src/store/store.js';
import { testDb } from '../helpers/db.js';
import { captureLog } from '../helpers/log.js';
import { submit } from '../helpers/store.js';

describe('dispatcher log', () => {
  it('a driver that fails every destroy: one error line per failed destroy, naming the instance and its type', async () => {
    const db = await testDb();
    const clock = new VirtualClock('2026-01-01T00:00:00Z');
    const store = new Store(db.pool, { clock, rng: seededRng(1) });
    const cloud = new SimCloud(clock, {
      seed: 1,
      bootTime: { kind: 'fixed', ms: 1_000 },
      destroyErrorRate: 1,
    });
    const cfg = parseDispatchConfig({
      cluster: 'logs',
      instance_types: [{ name: 'small', vcpus: 1, ram: '1GiB', price: 0.1 }],
      scheduler: { max_instances: 1, boot_timeout: '1m' },
      shutdown_retry: '5s',
      // Passes only when the test asks (the loop's own safety tick is an hour away).
      sync_interval: '1h',
      tick_interval: '1h',
    });
    await submit(store, 'alice', { vcpus: 1, ram: '512MiB' });
    const log = captureLog('info', 'berth dispatch');
    const running = await startDispatcher({
      cfg,
      store,
      dbUrl: db.url,
      notifier: null,
      driver: cloud,
      apiUrl: 'http://127.0.0.1:9',
      clock,
      logger: log.logger,
    });
    // A pass at the clock's time, and the operations it started. The loop also runs passes of its own
    // when an operation ends; one may still be in flight from before the clock moved (a tick then shares
    // it): the second pass is surely at the new time.
    const pass = async () => {
      for (let i = 0; i < 2; i++) {
        await running.dispatcher.tick();
        await running.dispatcher.settled();
      }
    };
    try {
      // The loop's own first pass is in flight (at the start time): let it end before time moves.
      await pass();
      // The first pass created the instance; its agent never registers, so boot_timeout shuts it down.
      const [created] = log.entries().filter((e) => e.msg === 'instance created');
      expect(created).toMatchObject({ dispatcher: 'logs/default', instance_type: 'small', level: 30 });
      clock.runUntil(clock.nowMs() + 61_000);
      await pass(); // shutdown: the destroy fails
      for (let i = 0; i < 3; i++) {
        clock.runUntil(clock.nowMs() + 5_000);
        await pass(); // shutdown_retry passed: destroyed again, fails again
      }
    } finally {
      await running.stop();
    }
    const destroys = cloud.controls.calls.filter((c) => c.op === 'destroy');
    expect(destroys).toHaveLength(4);
    // Every destroy was of the one instance the first pass created.
    const created = log.entries().find((e) => e.msg === 'instance created')!;
    expect(new Set(destroys.map((c) => c.args[0]))).toEqual(new Set([created.instance]));
    const failures = log.entries().filter((e) => e.op === 'destroy');
    expect(failures).toHaveLength(destroys.length);
    for (const [i, f] of failures.entries())
      expect(f).toMatchObject({
        level: 50,
        name: 'berth dispatch',
        dispatcher: 'logs/default',
        instance: destroys[i]!.args[0],
        instance_type: 'small',
        error_class: 'CloudApiError',
        error: 'simulated destroy failure (destroyErrorRate)',
        msg: 'destroy failed (retried at a later pass)',
      });
    expect(log.entries().filter((e) => e.msg === 'instance shutting down')).toMatchObject([
      { instance: destroys[0]!.args[0], reason: expect.stringMatching(/boot_timeout/) },
    ]);
  });
});

describe('logDispatchEvents', () => {
  const at = new Date('2026-01-01T00:00:00Z');

  it('logs every failed action with the ids it concerned and the class of its error', () => {
    const log = captureLog('info');
    const onEvent = logDispatchEvents(log.logger);
    onEvent({
      kind: 'error',
      at,
      op: 'start',
      message: 'gone',
      errorClass: 'ConflictError',
      container: 'c-1',
      instance: 'i-1',
      type: 't1',
    });
    onEvent({ kind: 'error', at, op: 'failNode', message: 'db down', errorClass: 'Error', node: 'n-1' });
    onEvent({ kind: 'create-failed', at, type: 't1', message: 'no capacity', errorClass: 'CapacityError' });
    expect(log.entries()).toMatchObject([
      {
        level: 50,
        op: 'start',
        container: 'c-1',
        instance: 'i-1',
        instance_type: 't1',
        error_class: 'ConflictError',
        error: 'gone',
      },
      { level: 50, op: 'failNode', node: 'n-1', error_class: 'Error' },
      { level: 40, op: 'create', instance_type: 't1', error_class: 'CapacityError', error: 'no capacity' },
    ]);
  });

  it('logs the actions taken at info, locks and deferred starts at debug', () => {
    const info = captureLog('info');
    const debug = captureLog('debug');
    for (const log of [info, debug]) {
      const onEvent = logDispatchEvents(log.logger);
      onEvent({ kind: 'containers-locked', at, containers: ['c-1'], refused: ['c-2'] });
      onEvent({ kind: 'start-deferred', at, container: 'c-1', instance: 'i-1', reason: 'instance booting' });
      onEvent({ kind: 'container-placed', at, container: 'c-1', instance: 'i-1' });
      onEvent({ kind: 'container-unlocked', at, container: 'c-3', reason: 'a higher priority needs it' });
      onEvent({
        kind: 'container-cancelled',
        at,
        container: 'c-4',
        failureClass: 'perm',
        reason: 'no type fits',
      });
      onEvent({ kind: 'instance-destroyed', at, instance: 'i-1', type: 't1' });
    }
    expect(info.entries().map((e) => [e.msg, e.container ?? e.instance])).toEqual([
      ['container placed', 'c-1'],
      ['container unlocked', 'c-3'],
      ['container cancelled', 'c-4'],
      ['instance destroy requested', 'i-1'],
    ]);
    expect(debug.entries().map((e) => e.container ?? e.instance)).toEqual([
      'c-1',
      'c-2',
      'c-1',
      'c-1',
      'c-3',
      'c-4',
      'i-1',
    ]);
  });
});
