import { describe, expect, it } from 'vitest';
import { exponential, sample } from '../../src/cloud/sim/distribution.js';
import { seededRng } from '../../src/model/clock.js';

describe('sim cloud distributions', () => {
  const draws = (n: number, f: () => number) => Array.from({ length: n }, f).sort((a, b) => a - b);

  it('lognormal has the configured median; exponential the configured mean; both reproducible', () => {
    const rng = seededRng(5);
    const ln = draws(4001, () => sample({ kind: 'lognormal', medianMs: 60_000, sigma: 0.5 }, rng));
    expect(ln[2000]! / 60_000).toBeGreaterThan(0.93);
    expect(ln[2000]! / 60_000).toBeLessThan(1.07);
    const ex = draws(4000, () => exponential(1000, rng));
    const mean = ex.reduce((s, x) => s + x, 0) / ex.length;
    expect(mean).toBeGreaterThan(930);
    expect(mean).toBeLessThan(1070);
    const again = seededRng(5);
    expect(sample({ kind: 'lognormal', medianMs: 60_000, sigma: 0.5 }, again)).toBe(
      sample({ kind: 'lognormal', medianMs: 60_000, sigma: 0.5 }, seededRng(5)),
    );
  });

  it('fixed and uniform stay in range and are never negative', () => {
    const rng = seededRng(1);
    expect(sample({ kind: 'fixed', ms: 1500 }, rng)).toBe(1500);
    for (const x of draws(500, () => sample({ kind: 'uniform', minMs: 10, maxMs: 20 }, rng))) {
      expect(x).toBeGreaterThanOrEqual(10);
      expect(x).toBeLessThanOrEqual(20);
    }
  });
});
