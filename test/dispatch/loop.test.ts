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

  it('a finished container alone wakes a quick placing pass; any other payload, or one with it, a full pass', async () => {
    const notifier = new Notifier(db.url);
    await notifier.start();
    const passes: string[] = [];
    const loop = runPassLoop({
      tick: async () => void passes.push('full'),
      quick: async () => void passes.push('quick'),
      notifier,
      intervalMs: 3_600_000, // the last full pass is always recent enough
      onLeaseLost: () => {},
      onPassFailed: () => {},
    });
    // Both sent in one statement, they arrive in one wait.
    const notify = (...payloads: string[]) =>
      db.pool.query('SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p', ['berth_dispatch', payloads]);
    // The loop's LISTEN is in place once a probe on a channel listened to after it arrives (one connection
    // runs its LISTENs in order); probes are sent until one does.
    let probed = false;
    const unprobe = notifier.subscribe('berth_test_probe', () => (probed = true));
    const listening = () =>
      until(
        async () => (await db.pool.query("SELECT pg_notify('berth_test_probe', 'x')"), probed),
        10_000,
        'the LISTENs in place',
      );
    try {
      await until(() => passes.length === 1, 10_000, 'the first pass');
      await listening();
      await notify('finish');
      await until(() => passes.length === 2, 10_000, 'a pass for the finish');
      await notify('queue');
      await until(() => passes.length === 3, 10_000, 'a pass for new work');
      await notify('finish', 'node');
      await until(() => passes.length >= 4, 10_000, 'a pass for both');
      // (Two notifications in one wait may wake one more pass after it: the waiter saw the second too.)
      expect(passes.slice(0, 4)).toEqual(['full', 'quick', 'full', 'full']);
    } finally {
      await loop.stop();
      unprobe();
      await notifier.stop();
    }
  });
});

describe('Notifier.waiter', () => {
  it('answers with the payloads it let through since the last call, each once; none after a timeout or an abort', async () => {
    const notifier = new Notifier(db.url);
    await notifier.start();
    const waiter = notifier.waiter('berth_test_wake', ['finish', 'queue']);
    let probed = false;
    const unprobe = notifier.subscribe('berth_test_probe', () => (probed = true));
    const notify = (...payloads: string[]) =>
      db.pool.query('SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p', ['berth_test_wake', payloads]);
    try {
      // The waiter's LISTEN is in place once a probe on a channel listened to after it arrives.
      await until(
        async () => (await db.pool.query("SELECT pg_notify('berth_test_probe', 'x')"), probed),
        10_000,
        'the LISTENs in place',
      );
      // Sent while nobody waits, in one statement: held, and the filter (not the caller) drops 'node'.
      await notify('finish', 'node', 'finish', 'queue');
      probed = false;
      await until(
        async () => (await db.pool.query("SELECT pg_notify('berth_test_probe', 'x')"), probed),
        10_000,
        'the notifications delivered',
      );
      expect((await waiter.next(30_000)).sort()).toEqual(['finish', 'queue']);
      const aborted = new AbortController();
      const waiting = waiter.next(3_600_000, aborted.signal);
      aborted.abort();
      expect(await waiting).toEqual([]);
      expect(await waiter.next(1)).toEqual([]);
      const woken = waiter.next(3_600_000);
      await notify('node', 'queue');
      expect(await woken).toEqual(['queue']);
    } finally {
      waiter.close();
      unprobe();
      await notifier.stop();
    }
  });
});
