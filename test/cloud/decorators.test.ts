import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { withMetrics } from '../../src/cloud/decorators/metrics.js';
import { withRateLimit } from '../../src/cloud/decorators/rate-limit.js';
import { TokenBucket } from '../../src/cloud/decorators/token-bucket.js';
import { CapacityError, NotFoundError, RateLimitError } from '../../src/cloud/errors.js';
import { SimCloud } from '../../src/cloud/sim/sim-cloud.js';
import { VirtualClock } from '../../src/sim/clock.js';
import { itype } from './helpers.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');

function setup() {
  const clock = new VirtualClock(T0);
  const cloud = new SimCloud(clock, { seed: 1, bootTime: { kind: 'fixed', ms: 1000 } });
  return { clock, cloud };
}

async function outcome(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => 'ok',
    (e: Error) => e.name,
  );
}

describe('TokenBucket', () => {
  it('grants a burst, then one token per 1/rate seconds, and says when the next one comes', () => {
    const b = new TokenBucket(4, 2);
    expect([b.take(0), b.take(0)]).toEqual([null, null]);
    expect(b.take(0)).toBe(250);
    expect(b.take(249)).toBe(250);
    expect(b.take(250)).toBeNull();
    // Long idle refills only up to the burst.
    expect([b.take(10_000), b.take(10_000), b.take(10_000)]).toEqual([null, null, 10_250]);
  });
  it('rejects bad parameters', () => {
    expect(() => new TokenBucket(0, 1)).toThrow(/ratePerSecond: expected a positive number/);
    expect(() => new TokenBucket(1, 0)).toThrow(/burst: expected a number >= 1/);
  });
});

describe('withMetrics', () => {
  it('counts operations by outcome and errors by kind in the registry passed in, timed on the clock', async () => {
    const { clock, cloud } = setup();
    const registry = new Registry();
    const driver = withMetrics(cloud, { registry, clock, driverName: 'sim' });
    await driver.create(itype('a'), {}, '');
    await driver.list({});
    cloud.controls.failNext('create', new CapacityError('type', 'a'));
    await expect(driver.create(itype('a'), {}, '')).rejects.toBeInstanceOf(CapacityError);
    await expect(driver.destroy('missing')).rejects.toBeInstanceOf(NotFoundError);
    // A held create that the test releases two virtual seconds later is timed at 2 s.
    cloud.controls.hold('create');
    const slow = driver.create(itype('a'), {}, '');
    clock.advance(2000);
    cloud.controls.release('create');
    await slow;

    const text = await registry.metrics();
    expect(text).toContain('berth_cloud_operations_total{driver="sim",op="create",outcome="ok"} 2');
    expect(text).toContain('berth_cloud_operations_total{driver="sim",op="create",outcome="error"} 1');
    expect(text).toContain('berth_cloud_operations_total{driver="sim",op="list",outcome="ok"} 1');
    expect(text).toContain('berth_cloud_errors_total{driver="sim",op="create",kind="capacity"} 1');
    expect(text).toContain('berth_cloud_errors_total{driver="sim",op="destroy",kind="not-found"} 1');
    expect(text).toContain('berth_cloud_operation_duration_seconds_sum{driver="sim",op="create"} 2');
    expect(text).toContain(
      'berth_cloud_operation_duration_seconds_bucket{le="1",driver="sim",op="create"} 2',
    );
  });

  it('two decorated drivers share one registry without a duplicate-metric error', async () => {
    const { clock, cloud } = setup();
    const registry = new Registry();
    const a = withMetrics(cloud, { registry, clock, driverName: 'one' });
    const b = withMetrics(cloud, { registry, clock, driverName: 'two' });
    await a.list({});
    await b.list({});
    const text = await registry.metrics();
    expect(text).toContain('op="list",outcome="ok"} 1');
    expect(text).toMatch(/driver="two",op="list",outcome="ok"\} 1/);
  });
});

describe('withRateLimit', () => {
  it('max_cloud_ops_per_second: refuses locally (without calling the cloud) until a token is due', async () => {
    const { clock, cloud } = setup();
    const driver = withRateLimit(cloud, { clock, opsPerSecond: 2, burst: 1 });
    expect(await outcome(driver.list({}))).toBe('ok');
    const err = (await driver.list({}).catch((e: unknown) => e)) as RateLimitError;
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err.source).toBe('local');
    expect(err.earliestRetry).toEqual(new Date(T0 + 500));
    expect(err.message).toMatch(/max_cloud_ops_per_second \(2\)/);
    expect(cloud.controls.count()).toBe(1);
    clock.advance(500);
    expect(await outcome(driver.list({}))).toBe('ok');
    expect(cloud.controls.count()).toBe(2);
  });

  it('max_concurrent_creates: refuses a create while the limit is in flight, other operations proceed', async () => {
    const { clock, cloud } = setup();
    const driver = withRateLimit(cloud, { clock, maxConcurrentCreates: 2 });
    cloud.controls.hold('create');
    const first = driver.create(itype('a'), {}, '');
    const second = driver.create(itype('a'), {}, '');
    expect(driver.inFlightCreates()).toBe(2);
    const third = (await driver.create(itype('a'), {}, '').catch((e: unknown) => e)) as RateLimitError;
    expect(third).toBeInstanceOf(RateLimitError);
    expect(third.message).toMatch(/max_concurrent_creates \(2\) in flight/);
    expect(await outcome(driver.list({}))).toBe('ok');
    cloud.controls.releaseOne('create');
    await first;
    expect(driver.inFlightCreates()).toBe(1);
    expect(await outcome(Promise.race([driver.create(itype('a'), {}, ''), Promise.resolve('parked')]))).toBe(
      'ok',
    );
    expect(driver.inFlightCreates()).toBe(2);
    cloud.controls.release('create');
    await second;
    // A failed create frees its slot too.
    cloud.controls.failNext('create', new CapacityError('all', null));
    await expect(driver.create(itype('a'), {}, '')).rejects.toBeInstanceOf(CapacityError);
    await Promise.resolve();
    expect(driver.inFlightCreates()).toBe(0);
  });

  it("honours the cloud's earliestRetry: no call reaches the cloud before it", async () => {
    const { clock, cloud } = setup();
    const driver = withRateLimit(cloud, { clock });
    const retry = new Date(T0 + 30_000);
    cloud.controls.failNext('create', new RateLimitError(retry, 'cloud'));
    await expect(driver.create(itype('a'), {}, '')).rejects.toBeInstanceOf(RateLimitError);
    expect(driver.blockedUntil()).toEqual(retry);
    clock.advance(29_999);
    const err = (await driver.destroy('x').catch((e: unknown) => e)) as RateLimitError;
    expect(err).toMatchObject({ source: 'local', earliestRetry: retry });
    expect(cloud.controls.count()).toBe(1);
    clock.advance(1);
    expect(driver.blockedUntil()).toBeNull();
    expect(await outcome(driver.list({}))).toBe('ok');
    expect(cloud.controls.count()).toBe(2);
  });

  it('composes with metrics: local refusals are counted as rate-limit errors', async () => {
    const { clock, cloud } = setup();
    const registry = new Registry();
    const driver = withMetrics(withRateLimit(cloud, { clock, opsPerSecond: 1, burst: 1 }), {
      registry,
      clock,
    });
    await driver.list({});
    await expect(driver.list({})).rejects.toBeInstanceOf(RateLimitError);
    expect(await registry.metrics()).toContain(
      'berth_cloud_errors_total{driver="default",op="list",kind="rate-limit"} 1',
    );
  });

  it('rejects a bad limit naming it', () => {
    const { clock, cloud } = setup();
    expect(() => withRateLimit(cloud, { clock, maxConcurrentCreates: 0 })).toThrow(
      'maxConcurrentCreates: expected a whole number >= 1, got 0',
    );
  });
});
