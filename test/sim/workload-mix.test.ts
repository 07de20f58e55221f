// Workflow mixes: which workflows, how many runs, when they start (seeded).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { seededRng } from '../../src/model/clock.js';
import { loadWorkload } from '../../src/sim/workload/load.js';
import { parseMix, startTimes } from '../../src/sim/workload/mix.js';
import { WorkloadError, type Workflow } from '../../src/sim/workload/types.js';
import { parseWfCommons } from '../../src/sim/workload/wfcommons.js';
import { diamond } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-mix-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const read = (file: string): Workflow => parseWfCommons(diamond(), file.replace(/\.json$/, ''));

describe('start times', () => {
  it('fixed: the given times, sorted', () => {
    expect(startTimes({ kind: 'fixed', at: [3000, 1000] }, 2, seededRng(1))).toEqual([1000, 3000]);
  });

  it('none: every run at 0', () => {
    expect(startTimes(null, 3, seededRng(1))).toEqual([0, 0, 0]);
  });

  it('uniform: inside the window, sorted, the same for the same stream', () => {
    const a = startTimes({ kind: 'uniform', from: 1000, until: 86_400_000 }, 500, seededRng(7));
    expect(a).toEqual(startTimes({ kind: 'uniform', from: 1000, until: 86_400_000 }, 500, seededRng(7)));
    expect(a).not.toEqual(startTimes({ kind: 'uniform', from: 1000, until: 86_400_000 }, 500, seededRng(8)));
    expect(a).toEqual([...a].sort((x, y) => x - y));
    expect(Math.min(...a)).toBeGreaterThanOrEqual(1000);
    expect(Math.max(...a)).toBeLessThan(86_400_000);
  });

  it('poisson: increasing, first after `from`, mean gap near the mean interval', () => {
    const n = 4000;
    const t = startTimes({ kind: 'poisson', from: 60_000, meanInterval: 600_000 }, n, seededRng(3));
    expect(t[0]).toBeGreaterThan(60_000);
    for (let i = 1; i < n; i++) expect(t[i]).toBeGreaterThanOrEqual(t[i - 1]!);
    // 4,000 exponential gaps: the mean is within 5 % of 10 minutes (a fixed draw; 3+ standard errors).
    expect((t[n - 1]! - 60_000) / n / 600_000).toBeGreaterThan(0.95);
    expect((t[n - 1]! - 60_000) / n / 600_000).toBeLessThan(1.05);
  });
});

describe('parseMix', () => {
  it('expands entries into runs sorted by start, numbered per workflow across entries', () => {
    const runs = parseMix(
      {
        seed: 5,
        priority: 300,
        workflows: [
          { file: 'a.json', runs: 2, arrival: { kind: 'fixed', at: ['1h', '10m'] } },
          { file: 'b.json', arrival: { kind: 'fixed', at: ['30m'] }, preemptible: true, priority: 900 },
          { file: 'a.json', runs: 1 },
        ],
      },
      read,
    );
    expect(runs.map((r) => [r.id, r.arrival, r.priority, r.preemptible])).toEqual([
      ['a/3', 0, 300, false],
      ['a/1', 600_000, 300, false],
      ['b/1', 1_800_000, 900, true],
      ['a/2', 3_600_000, 300, false],
    ]);
  });

  it('the same mix and seed give the same runs; another seed other times', () => {
    const mix = (seed: number) => ({
      seed,
      arrival: { kind: 'uniform', until: '1d' },
      workflows: [{ file: 'a.json', runs: 20 }],
    });
    const times = (seed: number) => parseMix(mix(seed), read).map((r) => r.arrival);
    expect(times(1)).toEqual(times(1));
    expect(times(1)).not.toEqual(times(2));
  });

  it('task_defaults reach the reader', () => {
    const seen: unknown[] = [];
    parseMix(
      {
        task_defaults: { vcpus: 2, ram: '4GiB' },
        workflows: [{ file: 'a.json' }, { file: 'a.json', task_defaults: { ram: '1GiB' } }],
      },
      (file, d) => {
        seen.push(d);
        return read(file);
      },
    );
    expect(seen).toEqual([
      { vcpus: 2, ram: 4 * 1024 ** 3 },
      { vcpus: 2, ram: 1024 ** 3 },
    ]);
  });

  it('rejects bad mixes, naming the key', () => {
    const bad = (v: unknown): string => {
      try {
        parseMix(v, read);
      } catch (err) {
        expect(err).toBeInstanceOf(WorkloadError);
        return (err as Error).message;
      }
      throw new Error('expected an error');
    };
    expect(bad({ workflows: [] })).toMatch(/^workflows: expected a non-empty array/);
    expect(bad({ workflows: [{ file: 'a.json', runs: 0 }] })).toBe(
      'workflows[0].runs: expected a whole number from 1 to 1000000, got 0',
    );
    expect(bad({ workflows: [{ file: 'a.json', runs: 3, arrival: { kind: 'fixed', at: ['0s'] } }] })).toBe(
      'workflows[0].runs: 3 runs but 1 fixed start times',
    );
    expect(bad({ workflows: [{ file: 'a.json', arrival: { kind: 'poisson' } }] })).toBe(
      'workflows[0].arrival.mean_interval: required for kind poisson',
    );
    expect(bad({ arrival: { kind: 'weibull' }, workflows: [{ file: 'a.json' }] })).toBe(
      'arrival.kind: expected fixed, uniform or poisson, got "weibull"',
    );
    expect(bad({ arrival: { kind: 'uniform', from: '2h', until: '1h' }, workflows: [{ file: 'a' }] })).toBe(
      'arrival.until: expected a time after "from"',
    );
    expect(bad({ workflows: [{ file: 'a.json', rnus: 2 }] })).toMatch(/^workflows\[0\]\.rnus: unknown key/);
    expect(bad({ workflows: [{ file: 'a.json' }], sed: 1 })).toMatch(/^sed: unknown key/);
    expect(bad({ workflows: [{ file: 'a.json', priority: 0 }] })).toMatch(
      /^workflows\[0\]\.priority: expected/,
    );
    expect(bad({ workflows: [{ file: 'a.json', task_defaults: { ram: '4 gigs' } }] })).toMatch(
      /^workflows\[0\]\.task_defaults\.ram: expected a size/,
    );
    expect(bad({ workflows: [{ runs: 1 }] })).toMatch(/^workflows\[0\]\.file: expected the path/);
  });

  it('loadWorkload reads a mix file, with workflow files relative to it (each read once)', () => {
    writeFileSync(join(dir, 'd.json'), JSON.stringify(diamond()));
    const mixFile = join(dir, 'mix.json');
    writeFileSync(
      mixFile,
      JSON.stringify({ workflows: [{ file: 'd.json', runs: 2 }, { file: './d.json' }] }),
    );
    const w = loadWorkload(mixFile);
    expect(w.jobs).toEqual([]);
    expect(w.workflows.map((r) => r.id)).toEqual(['d/1', 'd/2', 'd/3']);
    expect(w.workflows[0]!.workflow).toBe(w.workflows[2]!.workflow);
    writeFileSync(mixFile, JSON.stringify({ workflows: [{ file: 'missing.json' }] }));
    expect(() => loadWorkload(mixFile)).toThrow(
      new RegExp(`^${mixFile}: workflows\\[0\\]\\.file: .*cannot read`),
    );
  });
});
