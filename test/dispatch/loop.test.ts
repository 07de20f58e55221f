// The dispatcher's pass loop (src/dispatch/loop.ts): a poke (a create or destroy in flight finished) runs
// a pass at once, whether it comes while the loop waits or while a pass runs; otherwise the loop waits.
// Notifications wake it too, only those it asks for (wakeOn), and one that comes during a pass is not lost.
import { describe, expect, it } from 'vitest';
import { SLURM_WAKE_ON } from '../../src/backends/slurm/service.js';
import { runPassLoop } from '../../src/dispatch/loop.js';
import { Notifier } from '../../src/store/notifier.js';
import { until } from '../helpers/cli.js';
import { testDb } from '../helpers/db.js';

const db = await testDb();

describe('runPassLoop', () => {
  it('a poke during a pass or during the wait runs the next pass without waiting for the interval', async () => {
    let passes = 0;
    let pokeInPass = false;
    const loop = runPassLoop({
      tick: async () => {
        passes++;
        if (pokeInPass) {
          pokeInPass = false;
          loop.poke();
        }
      },
      notifier: null,
      intervalMs: 3_600_000, // no pass from the interval within the test
      onLeaseLost: () => {},
      onPassFailed: () => {},
    });
    try {
      await until(() => passes === 1, 10_000, 'the first pass');
      pokeInPass = true;
      loop.poke(); // during the wait: pass 2, which pokes during itself: pass 3
      await until(() => passes === 3, 10_000, 'two more passes');
      loop.poke();
      await until(() => passes === 4, 10_000, 'a fourth pass');
      expect(passes).toBe(4);
    } finally {
      await loop.stop();
    }
  });

  it('wakes only on the payloads of wakeOn (the slurm dispatcher: new work, priorities), even one sent during a pass', async () => {
    const notifier = new Notifier(db.url);
    await notifier.start();
    const notify = (channel: string, payload: string) =>
      db.pool.query('SELECT pg_notify($1, $2)', [channel, payload]);
    const settled = async () => {
      await notify('berth_test_probe', 'x');
      await probe.next(30_000);
      await db.pool.query('SELECT 1'); // a round trip: a pass the notifications started has begun by now
    };
    let passes = 0;
    let inPass: (() => Promise<void>) | null = null;
    const loop = runPassLoop({
      tick: async () => {
        passes++;
        const f = inPass;
        inPass = null;
        await f?.();
      },
      notifier,
      intervalMs: 3_600_000,
      wakeOn: SLURM_WAKE_ON,
      onLeaseLost: () => {},
      onPassFailed: () => {},
    });
    // A probe on another channel, listened to after the loop's (one connection runs its LISTENs in order):
    // notifications arrive in the order they were sent, so once the probe is seen, every notification sent
    // before it has been handled.
    const probe = notifier.waiter('berth_test_probe', null);
    try {
      await until(() => passes === 1, 10_000, 'the first pass');
      await settled(); // both LISTENs are in place
      for (const other of ['finish', 'node', 'operator']) await notify('berth_dispatch', other);
      await settled();
      expect(passes).toBe(1);
      await notify('berth_dispatch', 'queue');
      await until(() => passes === 2, 10_000, 'a pass for new work');
      // New work that arrives while a pass runs (after it read the queue): the next pass follows at once.
      inPass = async () => {
        await notify('berth_dispatch', 'queue');
        await settled();
      };
      await notify('berth_dispatch', 'priority');
      await until(() => passes === 4, 10_000, 'a pass for the priority change, then one for the work');
      await settled();
      expect(passes).toBe(4);
    } finally {
      await loop.stop();
      probe.close();
      await notifier.stop();
    }
  });
});
