// A token bucket on caller-supplied time (ms), so it runs the same on a real or a virtual clock.

const EPS = 1e-9;

/** Allows `ratePerSecond` operations per second on average and bursts of up to `burst`. */
export class TokenBucket {
  private tokens: number;
  private last: number | null = null;

  constructor(
    readonly ratePerSecond: number,
    readonly burst: number,
  ) {
    if (!(ratePerSecond > 0) || !Number.isFinite(ratePerSecond))
      throw new Error(`ratePerSecond: expected a positive number, got ${String(ratePerSecond)}`);
    if (!(burst >= 1) || !Number.isFinite(burst))
      throw new Error(`burst: expected a number >= 1, got ${String(burst)}`);
    this.tokens = burst;
  }

  /**
   * Takes one token at time `nowMs`. Returns null when granted, else the earliest time (ms) at which a
   * token will be available; a refused take consumes nothing.
   */
  take(nowMs: number): number | null {
    this.refill(nowMs);
    // EPS absorbs floating-point residue so that a token due at exactly t is granted at t, not t + 1 ms.
    if (this.tokens >= 1 - EPS) {
      this.tokens = Math.max(0, this.tokens - 1);
      return null;
    }
    return nowMs + Math.ceil(((1 - this.tokens) * 1000) / this.ratePerSecond - EPS);
  }

  private refill(nowMs: number): void {
    // Time going backwards (a reset clock) must not mint or destroy tokens.
    if (this.last !== null && nowMs > this.last)
      this.tokens = Math.min(this.burst, this.tokens + ((nowMs - this.last) * this.ratePerSecond) / 1000);
    if (this.last === null || nowMs > this.last) this.last = nowMs;
  }
}
