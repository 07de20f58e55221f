// The pressure rule (pure) and the watcher's tick on an injected clock; the real-cgroup test is
// test/agent-e2e/pressure.test.ts.
import { describe, expect, it } from 'vitest';
import {
  decidePressure,
  PressureWatcher,
  readPsi,
  type PressureSample,
  type Reclaimable,
} from '../../src/agent/pressure.js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const MiB = 1024 * 1024;
const limits = { capacityBytes: 1024 * MiB, headroomBytes: 64 * MiB, psiPercent: null };

describe('decidePressure', () => {
  it('is under pressure once free memory is under the headroom, not before', () => {
    expect(decidePressure({ ramBytes: 960 * MiB, limitBytes: 0 }, limits)).toBeNull();
    expect(decidePressure({ ramBytes: 961 * MiB, limitBytes: 0 }, limits)).toBe(
      'memory pressure: 961MiB of 1024MiB in use, under 64MiB free',
    );
  });

  it("takes the sample's limit when no capacity is configured", () => {
    const l = { ...limits, capacityBytes: null };
    expect(decidePressure({ ramBytes: 100 * MiB, limitBytes: 512 * MiB }, l)).toBeNull();
    expect(decidePressure({ ramBytes: 500 * MiB, limitBytes: 512 * MiB }, l)).toMatch(/of 512MiB/);
  });

  it('counts PSI only when a threshold is set', () => {
    const s: PressureSample = { ramBytes: 0, limitBytes: 0, psi: { memory: 3, cpu: 40 } };
    expect(decidePressure(s, limits)).toBeNull();
    expect(decidePressure(s, { ...limits, psiPercent: 50 })).toBeNull();
    expect(decidePressure(s, { ...limits, psiPercent: 25 })).toBe(
      'cpu pressure: PSI some avg10 40.0% >= 25%',
    );
  });
});

describe('PressureWatcher.tick', () => {
  function setup(samples: number[]) {
    let t = 1000;
    const frozen: string[] = [];
    const victims: Reclaimable[] = ['o1', 'o2'].map((id) => ({
      id,
      reclaim: async () => {
        t += 7; // the freeze takes 7 ms on this clock
        frozen.push(id);
      },
    }));
    let opportunistic = victims;
    let sampled = 0;
    const w = new PressureWatcher({
      limits,
      sample: async () => ({ ramBytes: samples[sampled++]! * MiB, limitBytes: 0 }),
      opportunistic: () => opportunistic,
      intervalMs: 10,
      now: () => t,
    });
    return { w, frozen, sampledCount: () => sampled, none: () => (opportunistic = []) };
  }

  it('reclaims every opportunistic container once, and reports the freeze latency from the signal', async () => {
    const s = setup([100, 1000, 1000]);
    expect(await s.w.tick()).toBeNull();
    const e = await s.w.tick();
    expect(e).toMatchObject({ ids: ['o1', 'o2'], signalAt: 1000 });
    expect(e!.frozenAt - e!.signalAt).toBe(14);
    expect(s.frozen).toEqual(['o1', 'o2']);
    // Already reclaimed: not again, and no sample is taken while nothing can be reclaimed.
    expect(await s.w.tick()).toBeNull();
    expect(s.sampledCount()).toBe(2);
  });

  it('samples nothing while no opportunistic container runs', async () => {
    const s = setup([1000]);
    s.none();
    expect(await s.w.tick()).toBeNull();
    expect(s.sampledCount()).toBe(0);
  });
});

describe('readPsi', () => {
  it('reads "some avg10" and is undefined without a PSI file', async () => {
    const d = await mkdtemp(join(tmpdir(), 'berth-psi-'));
    try {
      const f = join(d, 'memory.pressure');
      await writeFile(
        f,
        'some avg10=12.50 avg60=1.00 avg300=0.00 total=5\nfull avg10=1.00 avg60=0 avg300=0 total=1\n',
      );
      expect(await readPsi(f)).toBe(12.5);
      expect(await readPsi(join(d, 'absent'))).toBeUndefined();
    } finally {
      await rm(d, { recursive: true, force: true });
    }
  });
});
