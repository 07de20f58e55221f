// Repeated authentication failures are slowed down (DESIGN §4): the FailureThrottle's delays as a pure
// function of a client's failures and the time, and the API applying them per client. Assertions are on
// the delays the throttle computes, never on measured time.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FailureThrottle } from '../../src/api/auth.js';
import { testApi } from '../helpers/api.js';

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
  afterEach(() => vi.restoreAllMocks());

  it('slows the failing client more with each failure; another client with a good token is not slowed', async () => {
    const t = await testApi();
    const computed: { client: string; delay: number }[] = [];
    const original = FailureThrottle.prototype.delayFor;
    vi.spyOn(FailureThrottle.prototype, 'delayFor').mockImplementation(function (
      this: FailureThrottle,
      client: string,
      nowMs: number,
    ) {
      const delay = original.call(this, client, nowMs);
      computed.push({ client, delay });
      return delay;
    });
    const bad = '203.0.113.9';
    const good = '203.0.113.10';
    const get = (token: string | null, remoteAddress: string) =>
      t.call(token, { method: 'GET', url: '/v1/requests', remoteAddress });

    for (let i = 0; i < 4; i++) {
      const res = await get(`bt_guess${i}`, bad);
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('unauthorized');
      const other = await get(t.tokens.alice, good);
      expect(other.statusCode).toBe(200);
    }
    // a missing token counts as a failure too
    expect((await get(null, bad)).statusCode).toBe(401);

    const of = (c: string) => computed.filter((x) => x.client === c).map((x) => x.delay);
    expect(of(bad)).toEqual([0, 100, 200, 400, 800]);
    expect(of(good)).toEqual([0, 0, 0, 0]);

    // The failing client's own good token is still accepted (after its delay), and clears its record.
    expect((await get(t.tokens.alice, bad)).statusCode).toBe(200);
    expect((await get(t.tokens.alice, bad)).statusCode).toBe(200);
    expect(of(bad).slice(-2)).toEqual([1600, 0]);
  }, 30_000);
});
