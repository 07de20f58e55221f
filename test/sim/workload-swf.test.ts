import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { loadWorkload } from '../../src/sim/workload/load.js';
import { decodeMaybeGzip, parseSwf } from '../../src/sim/workload/swf.js';
import { WorkloadError } from '../../src/sim/workload/types.js';
import { itIf } from '../helpers/needs.js';

const GiB = 1024 ** 3;
const TRACES = fileURLToPath(new URL('../../../shared/traces/', import.meta.url));
const KTH = join(TRACES, 'KTH-SP2-1996-2.1-cln.swf.gz');
const LUBLIN = join(TRACES, 'lublin_256.swf.gz');
const missing = (p: string) => (existsSync(p) ? null : `${p} not found (shared/ must sit beside the repo)`);

// Hand-written: fields are job, submit, wait, run, alloc, cpu, usedKB, reqProcs, reqTime, reqKB, status, ...
const SAMPLE = `; Version: 2.2
; a header comment
 1  100 5  60  4 -1       -1  4 100       -1 1 1 1 -1 -1 -1 -1 -1
 2  110 0  30 -1 -1       -1  2 100  1048576 1 1 1 -1 -1 -1 -1 -1
 3  120 0   0  1 -1       -1  1 100       -1 1 1 1 -1 -1 -1 -1 -1
 4  130 0  50  1 -1       -1  1 100       -1 5 1 1 -1 -1 -1 -1 -1
 5  140 0  50  2 -1   524288  2 100  2097152 0 1 1 -1 -1 -1 -1 -1
 6  150 0  xx  2 -1       -1  2 100       -1 1 1 1 -1 -1 -1 -1 -1
 7  160 0  10
 8  105 0  20 -1 -1       -1 -1 100       -1 1 1 1 -1 -1 -1 -1 -1
 9  101 0  25  1 -1       -1  1 100       -1 1 1 1 -1 -1 -1 -1 -1
`;

describe('SWF parsing (hand-written trace)', () => {
  it('maps fields to jobs: processors → vcpus, memory per processor → ram, offsets from the first submit', () => {
    const w = parseSwf(SAMPLE);
    expect(w.jobs.map((j) => j.id)).toEqual(['1', '9', '2', '5']);
    expect(w.jobs[0]).toEqual({
      id: '1',
      arrival: 0,
      vcpus: 4,
      ram: 4 * 2 * GiB, // no memory recorded: the default 2 GiB per vcpu
      scratch: 0,
      gpus: 0,
      duration: 60_000,
      priority: 500,
      preemptible: false,
      user: '1', // field 12
      requestedTime: 100_000, // field 9
    });
    // Job 2: no allocated processors, so the requested 2; requested memory 1 GiB per processor.
    expect(w.jobs[2]).toMatchObject({ id: '2', arrival: 10_000, vcpus: 2, ram: 2 * GiB, duration: 30_000 });
    // Job 5: requested memory (2 GiB/proc) is preferred over used (0.5 GiB/proc); status 0 (failed) still ran.
    expect(w.jobs[3]).toMatchObject({ id: '5', arrival: 40_000, ram: 4 * GiB });
    expect(w.skipped).toEqual({ malformed: 3, cancelled: 1, zeroRuntime: 1 });
    expect(w.skippedExamples).toEqual([
      'line 5: zero run time',
      'line 6: cancelled (status 5)',
      'line 8: expected 18 numeric fields, got a non-number',
      'line 9: expected 18 numeric fields, got 4',
      'line 10: unknown processors',
    ]);
  });

  it('options: used memory, time scaling, default ram ratio, limit, priority', () => {
    const w = parseSwf(SAMPLE, {
      memory: 'used',
      arrivalScale: 0.5,
      durationScale: 2,
      ramPerVcpu: GiB,
      priority: 900,
      preemptible: true,
    });
    const j5 = w.jobs.find((j) => j.id === '5')!;
    expect(j5).toMatchObject({
      arrival: 20_000,
      duration: 100_000,
      ram: GiB,
      priority: 900,
      preemptible: true,
    });
    expect(w.jobs.find((j) => j.id === '1')!.ram).toBe(4 * GiB);
    const two = parseSwf(SAMPLE, { limit: 2 });
    expect(two.jobs.map((j) => j.id)).toEqual(['1', '2']);
  });

  it('application number (field 14) names a job; fields 6 and 7 are its usage, per processor', () => {
    const w = parseSwf(
      ' 1 0 0 100 4 80 524288 4 100 -1 1 1 1 7 -1 -1 -1 -1\n 2 0 0 100 2 -1 -1 2 100 -1 1 1 1 -1 -1 -1 -1 -1\n',
    );
    expect(w.jobs[0]).toMatchObject({ name: 'exe-7', usage: { cpuSeconds: 320, peakRam: 2 * GiB } });
    expect(w.jobs[1]).not.toHaveProperty('name');
    expect(w.jobs[1]).not.toHaveProperty('usage');
  });

  it('requested time (field 9) and user (field 12) are kept; -1 leaves them out; time scales with run time', () => {
    const text =
      ' 1 0 0 100 4 -1 -1 4 300 -1 1 42 1 -1 -1 -1 -1 -1\n 2 0 0 100 2 -1 -1 2 -1 -1 1 -1 1 -1 -1 -1 -1 -1\n';
    const w = parseSwf(text, { durationScale: 0.5 });
    expect(w.jobs[0]).toMatchObject({ user: '42', requestedTime: 150_000, duration: 50_000 });
    expect(w.jobs[1]).not.toHaveProperty('user');
    expect(w.jobs[1]).not.toHaveProperty('requestedTime');
  });

  it('rejects bad options naming them', () => {
    expect(() => parseSwf(SAMPLE, { arrivalScale: 0 })).toThrow(
      'arrivalScale: expected a positive number, got 0',
    );
    expect(() => parseSwf(SAMPLE, { limit: -1 })).toThrow(/^limit:/);
    expect(() => parseSwf(SAMPLE, { priority: 0 })).toThrow(/^priority:/);
    expect(() => parseSwf(SAMPLE, { memory: 'peak' as never })).toThrow(/^memory:/);
  });

  describe('files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-swf-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('reads plain and gzipped files identically', () => {
      writeFileSync(join(dir, 'a.swf'), SAMPLE);
      writeFileSync(join(dir, 'a.swf.gz'), gzipSync(SAMPLE));
      const plain = loadWorkload(join(dir, 'a.swf'));
      expect(plain.jobs).toHaveLength(4);
      expect(loadWorkload(join(dir, 'a.swf.gz'))).toEqual(plain);
    });

    it('names the file in errors', () => {
      expect(() => loadWorkload(join(dir, 'none.swf'))).toThrow(WorkloadError);
      expect(() => loadWorkload(join(dir, 'none.swf'))).toThrow(/none\.swf: cannot read/);
      expect(() => loadWorkload(join(dir, 'a.txt'))).toThrow(/a\.txt: unknown workload format/);
    });
  });
});

describe('SWF parsing (shared traces)', () => {
  itIf(missing(KTH))('reads the head of the KTH SP2 trace', () => {
    const w = loadWorkload(KTH, { limit: 1000 });
    expect(w.jobs).toHaveLength(1000);
    // First job in the file: job 15, submitted at 599850 s, 4 processors, 3477 s.
    expect(w.jobs[0]).toMatchObject({ id: '15', arrival: 0, vcpus: 4, duration: 3_477_000 });
    for (const j of w.jobs) {
      expect(j.vcpus).toBeGreaterThanOrEqual(1);
      expect(j.vcpus).toBeLessThanOrEqual(100);
      expect(j.duration).toBeGreaterThan(0);
    }
    for (let i = 1; i < w.jobs.length; i++)
      expect(w.jobs[i]!.arrival).toBeGreaterThanOrEqual(w.jobs[i - 1]!.arrival);
  });

  itIf(missing(KTH))('reads the whole KTH trace: every record is a job or a counted skip', () => {
    // The cleaned file holds 27,992 records (its header's MaxRecords, 28,476, predates the cleaning).
    const records = decodeMaybeGzip(readFileSync(KTH))
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.startsWith(';')).length;
    const w = loadWorkload(KTH);
    const s = w.skipped;
    expect(w.jobs.length + s.malformed + s.cancelled + s.zeroRuntime).toBe(records);
    expect(records).toBe(27_992);
    expect(w.jobs.length).toBe(27_992);
  });

  itIf(missing(LUBLIN))('reads the head of the Lublin synthetic trace', () => {
    const w = loadWorkload(LUBLIN, { limit: 100 });
    expect(w.jobs).toHaveLength(100);
    expect(w.jobs[0]).toMatchObject({ id: '1', arrival: 0, vcpus: 16, duration: 12_072_000 });
    expect(w.jobs[1]).toMatchObject({ id: '2', arrival: 76_000, vcpus: 1 });
  });
});
