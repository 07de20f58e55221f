import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { parseJsonWorkload, parseJsonWorkloadText } from '../../src/sim/workload/json.js';
import { loadWorkload } from '../../src/sim/workload/load.js';
import { WorkloadError } from '../../src/sim/workload/types.js';

const GiB = 1024 ** 3;

describe('JSON workloads', () => {
  it('parses jobs with human units, fills defaults, and sorts by arrival (stable)', () => {
    const w = parseJsonWorkload({
      jobs: [
        {
          id: 'late',
          arrival: '2m',
          vcpus: 2,
          ram: '4GiB',
          duration: '1h30m',
          priority: 900,
          preemptible: true,
        },
        { arrival: 30, vcpus: '0.5', ram: 512 * 1024 ** 2, duration: 45, scratch: '10GiB', gpus: 1 },
        { arrival: '30s', vcpus: 1, ram: '1GiB', duration: '1s' },
      ],
    });
    expect(w.jobs).toEqual([
      {
        id: 'j2',
        arrival: 30_000,
        vcpus: 0.5,
        ram: 512 * 1024 ** 2,
        scratch: 10 * GiB,
        gpus: 1,
        duration: 45_000,
        priority: 500,
        preemptible: false,
      },
      {
        id: 'j3',
        arrival: 30_000,
        vcpus: 1,
        ram: GiB,
        scratch: 0,
        gpus: 0,
        duration: 1000,
        priority: 500,
        preemptible: false,
      },
      {
        id: 'late',
        arrival: 120_000,
        vcpus: 2,
        ram: 4 * GiB,
        scratch: 0,
        gpus: 0,
        duration: 5_400_000,
        priority: 900,
        preemptible: true,
      },
    ]);
    expect(w.skipped).toEqual({ malformed: 0, cancelled: 0, zeroRuntime: 0 });
  });

  it('keeps a name and recorded usage for right-sizing', () => {
    const w = parseJsonWorkload([
      { arrival: 0, vcpus: 4, ram: '8GiB', duration: '1m', name: 'align', cpu_seconds: 90, peak_ram: '3GiB' },
      { arrival: 0, vcpus: 1, ram: '1GiB', duration: '1m', cpu_seconds: 30 },
      { arrival: 0, vcpus: 1, ram: '1GiB', duration: '1m' },
    ]);
    expect(w.jobs[0]).toMatchObject({ name: 'align', usage: { cpuSeconds: 90, peakRam: 3 * GiB } });
    expect(w.jobs[1]!.usage).toEqual({ cpuSeconds: 30, peakRam: null });
    expect(w.jobs[2]).not.toHaveProperty('usage');
    expect(w.workflows).toEqual([]);
  });

  it('accepts a bare array', () => {
    expect(parseJsonWorkload([{ arrival: 0, vcpus: 1, ram: '1GiB', duration: '1m' }]).jobs).toHaveLength(1);
  });

  const ok = { arrival: 0, vcpus: 1, ram: '1GiB', duration: '1m' };
  it.each([
    [
      { jobs: [{ ...ok, ram: '4 gigs' }] },
      'jobs[0].ram: expected a size such as 4GiB, 512MiB or a number of bytes, got "4 gigs"',
    ],
    [
      { jobs: [ok, { ...ok, vcpus: 0 }] },
      'jobs[1].vcpus: expected a positive number of CPUs such as 1, 0.5 or 16, got 0',
    ],
    [{ jobs: [{ ...ok, duration: 'soon' }] }, /^jobs\[0\]\.duration: expected a duration such as 90s/],
    [{ jobs: [{ ...ok, duration: 0 }] }, 'jobs[0].duration: expected a duration above zero, got 0'],
    [{ jobs: [{ ...ok, arrival: -5 }] }, /^jobs\[0\]\.arrival: expected a duration/],
    [{ jobs: [{ ...ok, gpus: 1.5 }] }, 'jobs[0].gpus: expected a whole number >= 0, got 1.5'],
    [
      { jobs: [{ ...ok, priority: 1001 }] },
      'jobs[0].priority: expected a whole number from 1 to 1000, got 1001',
    ],
    [{ jobs: [{ ...ok, preemptible: 'yes' }] }, 'jobs[0].preemptible: expected true or false, got "yes"'],
    [{ jobs: [{ ...ok, memory: '1GiB' }] }, /^jobs\[0\]: unknown field "memory"; expected id, arrival/],
    [{ jobs: [{ vcpus: 1, ram: '1GiB', duration: '1m' }] }, 'jobs[0].arrival: required'],
    [
      {
        jobs: [
          { ...ok, id: 'a' },
          { ...ok, id: 'a' },
        ],
      },
      'jobs[1].id: duplicate id "a"',
    ],
    [{ jobs: [{ ...ok, id: 7 }] }, 'jobs[0].id: expected a non-empty string, got 7'],
    [{ jobs: [{ ...ok, name: '' }] }, 'jobs[0].name: expected a non-empty string, got ""'],
    [
      { jobs: [{ ...ok, cpu_seconds: -1 }] },
      'jobs[0].cpu_seconds: expected a number of CPU seconds >= 0, got -1',
    ],
    [{ jobs: [{ ...ok, peak_ram: 'lots' }] }, /^jobs\[0\]\.peak_ram: expected a size/],
    [{ jobs: [42] }, 'jobs[0]: expected an object, got 42'],
    [{ jobs: {} }, /^jobs: expected an array of jobs/],
    [{ job: [] }, 'unknown field "job"; expected "jobs"'],
    ['x', /^jobs: expected an array of jobs/],
  ])('rejects %j with a message naming the field', (input, message) => {
    expect(() => parseJsonWorkload(input)).toThrow(WorkloadError);
    expect(() => parseJsonWorkload(input)).toThrow(message);
  });

  it('reports invalid JSON as a WorkloadError', () => {
    expect(() => parseJsonWorkloadText('{"jobs": [')).toThrow(/^not valid JSON: /);
  });

  describe('files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-json-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    it('loads .json and .json.gz, and names the file in errors', () => {
      const text = JSON.stringify({ jobs: [ok] });
      writeFileSync(join(dir, 'w.json'), text);
      writeFileSync(join(dir, 'w.json.gz'), gzipSync(text));
      expect(loadWorkload(join(dir, 'w.json')).jobs).toHaveLength(1);
      expect(loadWorkload(join(dir, 'w.json.gz'))).toEqual(loadWorkload(join(dir, 'w.json')));
      writeFileSync(join(dir, 'bad.json'), JSON.stringify({ jobs: [{ ...ok, ram: 'lots' }] }));
      expect(() => loadWorkload(join(dir, 'bad.json'))).toThrow(/bad\.json: jobs\[0\]\.ram: expected a size/);
    });
  });
});
