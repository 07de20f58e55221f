// The bench runner (bench/main.ts) with a workload or configuration that does not read: one line naming
// the file and the field, exit code 2, no stack trace (the compiled runner, as `npm run bench` runs it).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { prepareWorkload } from '../../src/sim/workload/prepare.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const MAIN = join(ROOT, 'dist', 'bench', 'main.js');
const dir = mkdtempSync(join(tmpdir(), 'berth-bench-main-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const bench = (...args: string[]) =>
  spawnSync(process.execPath, [MAIN, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });

describe('bench runner, bad input', () => {
  it.each([
    [
      'an unknown workload format',
      () => ['--workload', join(dir, 'w.txt')],
      /^bench: .*w\.txt: unknown workload format/,
    ],
    [
      'a workload job that is not an object',
      () => (writeFileSync(join(dir, 'a.json'), '[1]'), ['--workload', join(dir, 'a.json')]),
      /^bench: .*a\.json: jobs\[0\]: expected an object, got 1$/,
    ],
    [
      'a configuration key of the wrong type',
      () => (
        writeFileSync(join(dir, 'c.json'), '{"scheduler":{"pair_ends":"yes"}}'),
        [
          '--workload',
          join(ROOT, 'bench/workloads/six-workflows-short.json'),
          '--config',
          join(dir, 'c.json'),
        ]
      ),
      /^bench: .*c\.json: scheduler\.pair_ends: expected true or false, got "yes"$/,
    ],
  ])('sim-gap with %s', (_, args, message) => {
    const r = bench('sim-gap', ...args());
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('bench scheduler, bad input', () => {
  it.each([
    [['--set', 'pair_ends=yes'], /^--set: pair_ends: expected true or false, got "yes"$/],
    [['--set', 'pair_ends'], /^--set: expected key=value, got "pair_ends"$/],
    [['--expected', '2'], /^--expected: expected a share from 0 to 1, got 2$/],
  ])('%j is refused naming the option', (args, message) => {
    const r = bench('scheduler', '--queued', '10', '--instances', '2', '--types', '3', ...args);
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('bench opportunistic on a workflow workload', () => {
  it('counts the workload’s tasks in its jobs column (a workflow workload has no open-loop job)', () => {
    const file = join(dir, 'one-workflow.json');
    const sarek = resolve(ROOT, '../shared/traces/workflows/sarek-dirt02-001.json.gz');
    writeFileSync(
      file,
      JSON.stringify({
        seed: 1,
        arrival: { kind: 'uniform', from: '0s', until: '10m' },
        workflows: [{ file: sarek, runs: 1 }],
      }),
    );
    const tasks = prepareWorkload(file).workflows.reduce((n, r) => n + r.workflow.tasks.length, 0);
    expect(tasks).toBeGreaterThan(0);
    const r = bench('opportunistic', '--trace', file, '--variant', 'half, any type + vacate');
    expect(r.status, r.stderr).toBe(0);
    const rows = r.stdout.split('\n').filter((l) => l.startsWith('| one-workflow.json |'));
    expect(rows).toHaveLength(2);
    for (const row of rows) expect(row.split(' | ')[1]).toBe(String(tasks));
  });
});
