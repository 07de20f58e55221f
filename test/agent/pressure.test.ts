// The pressure rule (pure) and the watcher's tick on an injected clock; its sampler and the watcher itself on
// a real cgroup (pressure-cases.ts, which the cgroup v2 guest runs too); the end-to-end test through the agent
// is test/agent-e2e/pressure.test.ts.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  chooseVictims,
  decidePressure,
  enclosingHost,
  PressureWatcher,
  readPsi,
  type PressureSample,
  type Reclaimable,
} from '../../src/agent/pressure.js';
import { cgroupsUnusable } from '../../src/agent/runtimes/cgroup.js';
import { ProcessRuntime } from '../../src/agent/runtimes/process.js';
import { itIf } from '../helpers/needs.js';
import { cleanupHandles, cleanupWorkDirs, leftovers } from './helpers.js';
import { enclosingCase, fileCacheCase, watcherCase } from './pressure-cases.js';

const MiB = 1024 * 1024;
const cgroupsMissing = await cgroupsUnusable();
/** The watcher case runs its containers on the process runtime (sandboxed, as by default). */
const processMissing = cgroupsMissing ?? (await new ProcessRuntime().available());
const limits = { capacityBytes: 1024 * MiB, headroomBytes: 64 * MiB, psiPercent: null };

describe('decidePressure', () => {
  it('is under pressure once free memory is under the headroom, not before; needs back headroom + margin', () => {
    expect(decidePressure({ ramBytes: 960 * MiB, limitBytes: 0 }, limits)).toBeNull();
    expect(
      decidePressure({ ramBytes: 961 * MiB, limitBytes: 0 }, { ...limits, marginBytes: 32 * MiB }),
    ).toEqual({
      why: 'memory pressure: 961MiB of 1024MiB in use, under 64MiB free',
      resource: 'memory',
      need: 33 * MiB,
    });
  });

  it('counts what else the enclosing limit holds (the agent in the slice, the host): the tighter one binds', () => {
    const enclosing = { name: 'cgroup slice-1', ramBytes: 980 * MiB, limitBytes: 1024 * MiB };
    // The containers alone use 900 of 1024 MiB (124 free): with the agent's 80 MiB beside them, 44 are free.
    expect(decidePressure({ ramBytes: 900 * MiB, limitBytes: 0 }, limits)).toBeNull();
    expect(
      decidePressure({ ramBytes: 900 * MiB, limitBytes: 0, enclosing }, { ...limits, marginBytes: 32 * MiB }),
    ).toEqual({
      why: 'memory pressure: 980MiB of 1024MiB in use in cgroup slice-1 (the containers 900MiB), under 64MiB free',
      resource: 'memory',
      need: (64 + 32 - 44) * MiB,
    });
    // A looser enclosing limit changes nothing.
    const host = { name: 'the host', ramBytes: 2048 * MiB, limitBytes: 24576 * MiB };
    expect(decidePressure({ ramBytes: 900 * MiB, limitBytes: 0, enclosing: host }, limits)).toBeNull();
    expect(decidePressure({ ramBytes: 961 * MiB, limitBytes: 0, enclosing: host }, limits)?.why).toBe(
      'memory pressure: 961MiB of 1024MiB in use, under 64MiB free',
    );
  });

  it("takes the sample's limit when no capacity is configured", () => {
    const l = { ...limits, capacityBytes: null };
    expect(decidePressure({ ramBytes: 100 * MiB, limitBytes: 512 * MiB }, l)).toBeNull();
    expect(decidePressure({ ramBytes: 500 * MiB, limitBytes: 512 * MiB }, l)?.why).toMatch(/of 512MiB/);
  });

  it('counts PSI only when a threshold is set; PSI says nothing of how much, so everything is needed', () => {
    const s: PressureSample = { ramBytes: 0, limitBytes: 0, psi: { memory: 3, cpu: 40 } };
    expect(decidePressure(s, limits)).toBeNull();
    expect(decidePressure(s, { ...limits, psiPercent: 50 })).toBeNull();
    expect(decidePressure(s, { ...limits, psiPercent: 25 })).toEqual({
      why: 'cpu pressure: PSI some avg10 40.0% >= 25%',
      resource: 'cpu',
      need: Infinity,
    });
  });

  it('CPU without PSI: the rate between two samples against the vcpus, only when a percentage is set', () => {
    const at = (seconds: number, ms: number): PressureSample => ({
      ramBytes: 0,
      limitBytes: 0,
      cpu: { seconds, at: ms },
    });
    const l = { ...limits, cpuPercent: 90, vcpus: 4 };
    // 3.5 vcpus of 4 (87.5%): no pressure; 3.8 (95%): pressure, needing 0.2 + a twentieth of 4 back.
    expect(decidePressure(at(13.5, 2000), l, at(10, 1000))).toBeNull();
    const p = decidePressure(at(13.8, 2000), l, at(10, 1000));
    expect(p).toMatchObject({ resource: 'cpu', why: 'cpu pressure: 3.80 of 4 vcpus in use, over 90%' });
    expect(p!.need).toBeCloseTo(0.4, 9);
    // No previous sample, no percentage, or a clock that did not move: no CPU signal.
    expect(decidePressure(at(13.8, 2000), l)).toBeNull();
    expect(decidePressure(at(13.8, 2000), { ...l, cpuPercent: null }, at(10, 1000))).toBeNull();
    expect(decidePressure(at(13.8, 1000), l, at(10, 1000))).toBeNull();
  });
});

describe('chooseVictims', () => {
  const c = (id: string, mib: number, startedAt = 0) => ({ id, size: mib * MiB, startedAt });

  it('ends the one smallest container that covers the need, not the largest', () => {
    expect(chooseVictims(100 * MiB, [c('a', 300), c('b', 120), c('c', 50)])).toEqual(['b']);
  });

  it('takes the largest first when none covers alone, the last one the smallest that covers what is left', () => {
    // 400 needed: 300 first, then 100 left, which 120 covers (not 200).
    expect(chooseVictims(400 * MiB, [c('a', 300), c('b', 120), c('c', 200), c('d', 50)])).toEqual(['a', 'b']);
  });

  it('among equals, the most recently started first', () => {
    expect(chooseVictims(10 * MiB, [c('old', 100, 1), c('new', 100, 5), c('mid', 100, 3)])).toEqual(['new']);
  });

  it('all when they do not cover the need or it is Infinity (PSI); none when nothing is needed', () => {
    expect(chooseVictims(1000 * MiB, [c('a', 300), c('b', 120)]).sort()).toEqual(['a', 'b']);
    expect(chooseVictims(Infinity, [c('a', 1), c('b', 2)]).sort()).toEqual(['a', 'b']);
    expect(chooseVictims(0, [c('a', 1)])).toEqual([]);
    expect(chooseVictims(5, [])).toEqual([]);
  });
});

describe('PressureWatcher.tick', () => {
  function setup(samples: number[], sizes: Record<string, number> = { o1: 100, o2: 100 }) {
    let t = 1000;
    const log: string[] = [];
    const victims: Reclaimable[] = Object.entries(sizes).map(([id, mib], i) => ({
      id,
      startedAt: i,
      freeze: async () => {
        t += 7; // the freeze takes 7 ms on this clock
        log.push(`freeze ${id}`);
      },
      thaw: async () => void log.push(`thaw ${id}`),
      usage: async () => ({ ramBytes: mib * MiB, vcpus: 0 }),
      reclaim: async () => void log.push(`reclaim ${id}`),
    }));
    let opportunistic = victims;
    let sampled = 0;
    const w = new PressureWatcher({
      limits: { ...limits, marginBytes: 0 },
      sample: async () => ({ ramBytes: samples[sampled++]! * MiB, limitBytes: 0 }),
      opportunistic: () => opportunistic,
      intervalMs: 10,
      now: () => t,
    });
    return { w, log, sampledCount: () => sampled, none: () => (opportunistic = []) };
  }

  it('freezes every opportunistic container, ends only as many as needed, thaws the rest', async () => {
    // 1000 of 1024 MiB in use: 40 MiB needed; o2 (60) covers it, o1 (200) and o3 (30) are thawed.
    const s = setup([100, 1000, 1000, 1100], { o1: 200, o2: 60, o3: 30 });
    expect(await s.w.tick()).toBeNull();
    const e = await s.w.tick();
    expect(e).toMatchObject({ ids: ['o2'], thawed: ['o1', 'o3'], signalAt: 1000 });
    expect(e!.frozenAt - e!.signalAt).toBe(21);
    expect(s.log.slice(0, 3)).toEqual(['freeze o1', 'freeze o2', 'freeze o3']);
    expect(s.log.slice(3).sort()).toEqual(['reclaim o2', 'thaw o1', 'thaw o3']);
    // o2 is being stopped (still listed): the same pressure is covered by what it frees; nothing more.
    const before = s.log.length;
    expect(await s.w.tick()).toBeNull();
    expect(s.log.length).toBe(before);
    // More than o2 frees (1100 MiB: 140 needed, 60 in flight): o1 (200) is ended too, o3 thawed again.
    expect(await s.w.tick()).toMatchObject({ ids: ['o1'], thawed: ['o3'] });
  });

  it('ends every one when all of them are needed, and samples nothing once none is left', async () => {
    // 1100 of 1024 MiB: 140 MiB needed, more than one 100 MiB container.
    const s = setup([100, 1100, 1100]);
    expect(await s.w.tick()).toBeNull();
    expect(await s.w.tick()).toMatchObject({ ids: ['o1', 'o2'], thawed: [] });
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

describe('enclosingHost', () => {
  it("reads the host's memory in use as MemTotal less MemAvailable; null without them", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-meminfo-'));
    try {
      const file = join(dir, 'meminfo');
      await writeFile(
        file,
        'MemTotal:        2048000 kB\nMemFree:          100000 kB\nMemAvailable:     512000 kB\n',
      );
      expect(await enclosingHost(file).read()).toEqual({
        name: 'the host',
        ramBytes: (2048000 - 512000) * 1024,
        limitBytes: 2048000 * 1024,
      });
      await writeFile(file, 'MemTotal:        2048000 kB\n');
      expect(await enclosingHost(file).read()).toBeNull();
      expect(await enclosingHost(join(dir, 'absent')).read()).toBeNull();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
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

describe('the sampler and the watcher on a real cgroup (pressure-cases.ts; also run in the cgroup v2 guest)', () => {
  afterEach(async () => {
    await cleanupHandles();
    expect(await leftovers()).toEqual([]);
    await cleanupWorkDirs();
  });
  const run = (c: typeof watcherCase) => async () => console.log(c.name, JSON.stringify(await c.run()));
  itIf(cgroupsMissing)(fileCacheCase.name, run(fileCacheCase), 60_000);
  itIf(cgroupsMissing)(enclosingCase.name, run(enclosingCase), 60_000);
  itIf(processMissing)(watcherCase.name, run(watcherCase), 120_000);
});
