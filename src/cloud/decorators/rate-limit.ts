// A decorator that keeps calls within Berth's own limits and the cloud's (DESIGN §6.2 rule 6):
// `max_cloud_ops_per_second` (a token bucket over all operations), `max_concurrent_creates`, and the
// earliest retry time of the last RateLimitError the cloud returned. It never waits: a call over a limit
// fails at once with a local RateLimitError saying when to retry, and the dispatcher's next pass retries
// (DESIGN §6.1: failed actions are retried by the next pass, not by ad-hoc loops). That also keeps it
// free of timers, so it behaves the same on the virtual clock.
import type { Clock } from '../../model/clock.js';
import type { Driver, DriverOp } from '../driver.js';
import { RateLimitError } from '../errors.js';
import { TokenBucket } from './token-bucket.js';

/** Options of withRateLimit; a null or absent limit is not enforced. */
export interface RateLimitOptions {
  clock: Clock;
  /** max_cloud_ops_per_second: sustained operations per second over all four operations. */
  opsPerSecond?: number | null;
  /** Burst size of the token bucket. Default max(1, opsPerSecond). */
  burst?: number;
  /** max_concurrent_creates: creates in flight at once. */
  maxConcurrentCreates?: number | null;
}

/** A rate-limited driver; `blockedUntil` exposes the cloud's last earliest-retry time for snapshots. */
export interface RateLimitedDriver extends Driver {
  /** Until when the cloud told us to make no calls (null when not blocked). */
  blockedUntil(): Date | null;
  /** Creates currently in flight. */
  inFlightCreates(): number;
}

/** Wraps `driver` with the limits in `opts`. */
export function withRateLimit(driver: Driver, opts: RateLimitOptions): RateLimitedDriver {
  const rate = opts.opsPerSecond ?? null;
  const bucket = rate === null ? null : new TokenBucket(rate, opts.burst ?? Math.max(1, rate));
  const maxCreates = opts.maxConcurrentCreates ?? null;
  if (maxCreates !== null && (!Number.isInteger(maxCreates) || maxCreates < 1))
    throw new Error(`maxConcurrentCreates: expected a whole number >= 1, got ${String(maxCreates)}`);
  let blocked: number | null = null;
  let creating = 0;

  function admit(): void {
    const now = opts.clock.now().getTime();
    if (blocked !== null && now < blocked)
      throw new RateLimitError(new Date(blocked), 'local', 'the cloud asked for no calls before this time');
    if (bucket !== null) {
      const retryAt = bucket.take(now);
      if (retryAt !== null)
        throw new RateLimitError(new Date(retryAt), 'local', `max_cloud_ops_per_second (${rate}) reached`);
    }
  }

  async function call<T>(_op: DriverOp, fn: () => Promise<T>): Promise<T> {
    admit();
    try {
      return await fn();
    } catch (err) {
      if (err instanceof RateLimitError && err.source === 'cloud') {
        const t = err.earliestRetry.getTime();
        if (blocked === null || t > blocked) blocked = t;
      }
      throw err;
    }
  }

  return {
    create: (type, tags, bootData) => {
      if (maxCreates !== null && creating >= maxCreates)
        // No time is known at which a create will finish: retry from the next pass (earliest retry = now).
        return Promise.reject(
          new RateLimitError(opts.clock.now(), 'local', `max_concurrent_creates (${maxCreates}) in flight`),
        );
      creating++;
      return call('create', () => driver.create(type, tags, bootData)).finally(() => {
        creating--;
      });
    },
    list: (filter) => call('list', () => driver.list(filter)),
    destroy: (id) => call('destroy', () => driver.destroy(id)),
    setTags: (id, tags) => call('setTags', () => driver.setTags(id, tags)),
    blockedUntil: () => (blocked !== null && opts.clock.now().getTime() < blocked ? new Date(blocked) : null),
    inFlightCreates: () => creating,
  };
}
