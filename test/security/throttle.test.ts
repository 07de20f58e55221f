// Repeated authentication failures are slowed down (DESIGN §4): the FailureThrottle's delays as a pure
// function of a client's failures and the time, and the API applying them per client. The API's waits go
// through an injected sleep that the test holds: a request with a delay stays unanswered until released,
// never measured in time.
import { describe, expect, it } from 'vitest';
import { FailureThrottle } from '../../src/api/auth.js';
import { testApi } from '../helpers/api.js';
import { until } from '../helpers/cli.js';

describe('FailureThrottle', () => {
  it('doubles the delay with each failure from 100 ms, capped at 2 s', () => {
    const th = new FailureThrottle();
    const delays: number[] = [];
    for (let i = 0; i < 8; i++) {
      delays.push(th.delayFor('a', 1000));
      th.fail('a', 1000);
    }
    expect(delays).toEqual([0, 100, 200, 400, 800, 1600, 2000, 2000]);
  });

  it('keeps clients apart, forgets on success and after a quiet minute', () => {
    const th = new FailureThrottle(100, 2000, 60_000);
    for (let i = 0; i < 3; i++) th.fail('a', 0);
    expect(th.delayFor('a', 0)).toBe(400);
    expect(th.delayFor('b', 0)).toBe(0);
    // failures spaced under the forget time accumulate
    th.fail('a', 59_000);
    expect(th.delayFor('a', 59_000)).toBe(800);
    // a minute after the last failure, the slate is clean, and the next failure starts again
    expect(th.delayFor('a', 59_000 + 60_001)).toBe(0);
    th.fail('a', 59_000 + 60_001);
    expect(th.delayFor('a', 59_000 + 60_001)).toBe(100);
    th.succeed('a');
    expect(th.delayFor('a', 59_000 + 60_001)).toBe(0);
  });

  it('takes its step, cap and forget time as parameters', () => {
    const th = new FailureThrottle(10, 35, 5);
    for (let i = 0; i < 5; i++) th.fail('x', 0);
    expect(th.delayFor('x', 0)).toBe(35);
    expect(th.delayFor('x', 5)).toBe(35);
    expect(th.delayFor('x', 6)).toBe(0);
  });

  it('bounds its memory: past 10,000 clients it starts over rather than growing', () => {
    const th = new FailureThrottle();
    for (let i = 0; i <= 10_000; i++) th.fail(`c${i}`, 0);
    // the table was cleared when it passed 10,000 entries
    expect(th.delayFor('c0', 0)).toBe(0);
  });
});

describe('the API under repeated bad tokens', () => {
  /** A throttle whose waits are recorded and held until the test releases them. */
  function heldThrottle() {
    const waits: { ms: number; release: () => void }[] = [];
    const throttle = new FailureThrottle(
      100,
      2000,
      60_000,
      (ms) => new Promise((r) => waits.push({ ms, release: r })),
    );
    return { throttle, waits };
  }

  it('slows the failing client more with each failure; another client with a good token is not slowed', async () => {
    const { throttle, waits } = heldThrottle();
    const t = await testApi({ throttle });
    const bad = '203.0.113.9';
    const good = '203.0.113.10';
    const get = (token: string | null, remoteAddress: string) =>
      t.call(token, { method: 'GET', url: '/v1/requests', remoteAddress });
    /** Sends a request that must wait `ms` first: it has no answer until that wait is released. */
    const delayed = async (token: string | null, ms: number) => {
      let answered = false;
      const res = get(token, bad).finally(() => (answered = true));
      await until(() => waits.length > 0, 10_000, `the API to wait ${ms} ms`);
      const w = waits.shift()!;
      expect(w.ms).toBe(ms);
      // Other work goes on meanwhile (the good client's request below), and this one stays unanswered.
      expect((await get(t.tokens.alice, good)).statusCode).toBe(200);
      expect(answered).toBe(false);
      w.release();
      return res;
    };

    // The first failure waits nothing; each later one waits twice as long before it is refused.
    expect((await get('bt_guess0', bad)).statusCode).toBe(401);
    for (const [i, ms] of [100, 200, 400].entries()) {
      const res = await delayed(`bt_guess${i + 1}`, ms);
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('unauthorized');
    }
    // a missing token counts as a failure too
    expect((await delayed(null, 800)).statusCode).toBe(401);
    // The failing client's own good token is still accepted after its delay, and clears its record.
    expect((await delayed(t.tokens.alice, 1600)).statusCode).toBe(200);
    expect((await get(t.tokens.alice, bad)).statusCode).toBe(200);
    // The good client never waited, and nothing waits now.
    expect(waits).toEqual([]);
  });
});
