// Random durations for the sim cloud (boot times, time to an agent crash), drawn from a seeded Rng.
import type { Rng } from '../../model/clock.js';

/** A distribution of durations in ms. */
export type Distribution =
  | { kind: 'fixed'; ms: number }
  | { kind: 'uniform'; minMs: number; maxMs: number }
  /** Log-normal: boot times are right-skewed (most near the median, a few very slow). */
  | { kind: 'lognormal'; medianMs: number; sigma: number }
  | { kind: 'exponential'; meanMs: number };

/** Draws one duration (ms, rounded to whole ms, never negative). */
export function sample(d: Distribution, rng: Rng): number {
  switch (d.kind) {
    case 'fixed':
      return Math.max(0, Math.round(d.ms));
    case 'uniform':
      return Math.max(0, Math.round(d.minMs + rng() * (d.maxMs - d.minMs)));
    case 'lognormal':
      return Math.max(0, Math.round(d.medianMs * Math.exp(d.sigma * normal(rng))));
    case 'exponential':
      return Math.max(0, Math.round(exponential(d.meanMs, rng)));
  }
}

/** The distribution's mean in ms (what a deterministic model charges per draw). */
export function mean(d: Distribution): number {
  switch (d.kind) {
    case 'fixed':
      return d.ms;
    case 'uniform':
      return (d.minMs + d.maxMs) / 2;
    case 'lognormal':
      return d.medianMs * Math.exp((d.sigma * d.sigma) / 2);
    case 'exponential':
      return d.meanMs;
  }
}

/** An exponentially distributed value with the given mean. */
export function exponential(mean: number, rng: Rng): number {
  // 1 - u is in (0, 1], so the log is finite.
  return -mean * Math.log(1 - rng());
}

/** A standard normal variate (Box-Muller). */
function normal(rng: Rng): number {
  const u = 1 - rng();
  const v = rng();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

/** Checks a distribution's fields, naming the offending one. */
export function validateDistribution(d: Distribution, field: string): void {
  const nonNeg = (v: number, name: string): void => {
    if (!Number.isFinite(v) || v < 0)
      throw new Error(`${field}.${name}: expected a non-negative number of ms, got ${String(v)}`);
  };
  switch (d.kind) {
    case 'fixed':
      return nonNeg(d.ms, 'ms');
    case 'uniform':
      nonNeg(d.minMs, 'minMs');
      nonNeg(d.maxMs, 'maxMs');
      if (d.maxMs < d.minMs)
        throw new Error(`${field}.maxMs: expected >= minMs (${d.minMs}), got ${d.maxMs}`);
      return;
    case 'lognormal':
      nonNeg(d.medianMs, 'medianMs');
      nonNeg(d.sigma, 'sigma');
      return;
    case 'exponential':
      return nonNeg(d.meanMs, 'meanMs');
    default:
      throw new Error(
        `${field}.kind: expected fixed, uniform, lognormal or exponential, got ${JSON.stringify((d as { kind: unknown }).kind)}`,
      );
  }
}
