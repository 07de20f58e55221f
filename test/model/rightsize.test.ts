// The right-sizing rule on its own: percentile, rounding, headroom, savings, missing measurements.
import { describe, expect, it } from 'vitest';
import { aggregateUsage, rightSize, suggestRam, suggestVcpus } from '../../src/model/rightsize.js';

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

describe('right-sizing', () => {
  it('CPU: the 95th percentile of cores used, up to a quarter core (at least a quarter)', () => {
    expect(suggestVcpus(0)).toBe(0.25);
    expect(suggestVcpus(0.25)).toBe(0.25);
    expect(suggestVcpus(0.26)).toBe(0.5);
    expect(suggestVcpus(3.9)).toBe(4);
  });

  it('RAM: the highest peak plus 20 %, up to 64 MiB', () => {
    expect(suggestRam(0)).toBe(64 * MiB);
    expect(suggestRam(100 * MiB)).toBe(128 * MiB);
    expect(suggestRam(10 * GiB)).toBe(12 * GiB);
  });

  it('the percentile is nearest-rank over every measured container', () => {
    // 20 containers using 0.1 … 2.0 cores: the 95th percentile is the 19th, 1.9 cores → 2.
    const samples = Array.from({ length: 20 }, (_, i) => ({
      vcpus: 4,
      ram: GiB,
      runSeconds: 3600,
      cpuSeconds: 360 * (i + 1),
      peakRam: null,
    }));
    const a = aggregateUsage('x', samples);
    expect(a.cpu!.coresP95).toBeCloseTo(1.9, 9);
    expect(a.ram).toBeNull();
    const r = rightSize(a);
    expect(r.cpu).toMatchObject({
      suggested: 2,
      askedHours: 80,
      suggestedHours: 40,
      savedHours: 40,
      savedShare: 0.5,
    });
    expect(r.ram).toBeNull();
  });

  it('asking for less than used gives a negative saving (the suggestion is larger)', () => {
    const r = rightSize(
      aggregateUsage('tight', [{ vcpus: 1, ram: GiB, runSeconds: 3600, cpuSeconds: 7200, peakRam: GiB }]),
    );
    expect(r.cpu).toMatchObject({ suggested: 2, savedHours: -1, savedShare: -1 });
    expect(r.ram!.suggested).toBe(1.25 * GiB);
    expect(r.ram!.savedShare).toBe(-0.25);
  });

  it('containers without measurements are counted but do not shape the suggestion', () => {
    const r = rightSize(
      aggregateUsage('mixed', [
        { vcpus: 2, ram: GiB, runSeconds: 100, cpuSeconds: null, peakRam: null },
        { vcpus: 2, ram: GiB, runSeconds: 100, cpuSeconds: 50, peakRam: null },
      ]),
    );
    expect(r.containers).toBe(2);
    expect(r.cpu!.measured).toBe(1);
    expect(r.cpu!.suggested).toBe(0.5);
  });
});
