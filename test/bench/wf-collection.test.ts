// The WfCommons collection bench (bench/wf-collection.ts): its rows, table and summary from given reports
// (hand-computed tiny runs), its refused options, and a sweep over a shared file and a file that does not
// read (one line naming it, the sweep goes on).
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UsageError } from '../../bench/args.js';
import { formatTable, rowOf, run, summarize, type Failure } from '../../bench/wf-collection.js';
import { buildReport } from '../../src/sim/report/build.js';
import { type } from '../dispatch/builders.js';
import { itIf } from '../helpers/needs.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const SAREK = join(ROOT, '..', 'shared', 'traces', 'workflows', 'sarek-dirt02-001.json.gz');
const dir = mkdtempSync(join(tmpdir(), 'berth-wf-collection-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const GiB = 1024 ** 3;
const T0 = Date.parse('2026-01-01T00:00:00Z');
const s = (sec: number) => T0 + sec * 1000;
// 2 vcpu, 4 GiB at 0.36/h: 0.18 per vcpu-hour, 0.0001 per second.
const small = type('small', 2, 4, 0.36, { scratch: 0 });

/**
 * One instance created at 0, ready at 60 s, destroyed at 1100 s (cost 0.11: boot 0.006, work 0.1, idle
 * 0.004) running one or two 1-vcpu tasks 100–1100 s (lower bound 0.05 or 0.1), in a workflow run of the
 * given critical path (the critical-path bound is 0.36/h × it, or the lower bound when that is larger).
 */
function report(tasks: 1 | 2, criticalPathS: number) {
  const c = (id: string) => ({
    id,
    arrival: s(0),
    start: s(100),
    end: s(1100),
    vcpus: 1,
    ram: GiB,
    scratch: 0,
    gpus: 0,
    preemptible: false,
    instance: 'i1',
  });
  return buildReport({
    policy: 'berth',
    seed: 1,
    instanceTypes: [small],
    containers: tasks === 1 ? [c('w/1/a')] : [c('w/1/a'), c('w/1/b')],
    instances: [{ id: 'i1', type: 'small', price: 0.36, created: s(0), ready: s(60), destroyed: s(1100) }],
    workflows: [
      {
        id: 'w/1',
        workflow: 'w',
        arrival: s(0),
        end: s(1100),
        criticalPath: criticalPathS * 1000,
        tasks,
        succeeded: tasks,
        outcome: 'success',
      },
    ],
  });
}

describe('wf-collection: rows and summary from given reports', () => {
  // a-1: two tasks, ratio 0.11 / 0.1 = 1.1 (meets). a-2: one task, 0.11 / 0.05 = 2.2, critical path 100 s:
  // bound max(0.05, 0.01) = the lower bound (open). b-1: one task, critical path 1000 s: bound 0.1 = 2 × the
  // lower bound (proven out of reach).
  const rows = [
    rowOf('a-1.json', report(2, 100), 1.5),
    rowOf('a-2.json', report(1, 100)),
    rowOf('b-1.json.gz', report(1, 1000)),
  ];
  const failures: Failure[] = [
    { file: 'c.json', message: 'c.json: workflow: expected a WfCommons instance' },
  ];

  it('a row: the report figures, idle + boot share, makespan / critical path, bound / lower bound', () => {
    expect(rows[0]).toEqual({
      file: 'a-1.json',
      tasks: 2,
      cost: 0.11,
      lowerBound: 0.1,
      ratio: 1.1,
      boot: 0.006,
      work: 0.1,
      idle: 0.004,
      idleBootShare: expect.closeTo(0.01 / 0.11, 12) as number,
      waitP90: 100,
      makespanRatio: 11,
      pathBound: 0.1,
      pathBoundOverLb: 1,
      seconds: 1.5,
    });
    expect(rows[1]).toMatchObject({ ratio: 2.2, pathBound: 0.05, pathBoundOverLb: 1 });
    expect(rows[2]).toMatchObject({ ratio: 2.2, pathBound: 0.1, pathBoundOverLb: 2, makespanRatio: 1.1 });
  });

  it('the summary: met, proven out of reach, open and where the open spend goes; per family', () => {
    const sum = summarize(rows, failures);
    expect(sum).toMatchObject({ files: 4, ran: 3, failed: 1, meet: 1, proven: 1, open: 1 });
    expect(sum.openSpend.cost).toBeCloseTo(0.11, 12);
    expect(sum.openSpend.boot).toBeCloseTo(0.006 / 0.11, 12);
    expect(sum.openSpend.work).toBeCloseTo(0.1 / 0.11, 12);
    expect(sum.openSpend.idle).toBeCloseTo(0.004 / 0.11, 12);
    expect(sum.best!.file).toBe('a-1.json');
    expect(sum.worst!.ratio).toBe(2.2);
    expect(sum.byFamily).toEqual([
      { family: 'a', files: 2, meet: 1, proven: 0, ratio: { min: 1.1, median: 1.65, max: 2.2 } },
      { family: 'b', files: 1, meet: 0, proven: 1, ratio: { min: 2.2, median: 2.2, max: 2.2 } },
    ]);
  });

  it('the table: one line per file, one per failure, then the counts', () => {
    const text = formatTable(rows, failures).split('\n');
    expect(text[0]).toMatch(/^file\s+tasks\s+cost\s+LB\s+cost\/LB\s+idle\+boot/);
    expect(text[1]).toMatch(
      /^a-1\.json\s+2\s+0\.1100\s+0\.1000\s+1\.100\s+9\.1 %\s+100\.0s\s+11\.000\s+1\.000\s+1\.5$/,
    );
    expect(text[4]).toBe('c.json: c.json: workflow: expected a WfCommons instance');
    expect(text).toContain(
      '4 files: 3 ran, 1 failed; 1 meet cost ≤ 1.5 × LB; 1 proven out of reach (critical-path bound > 1.5 × LB); 1 open (neither)',
    );
    expect(text).toContain("open files' spend 0.1100: boot 5.5 %, work 90.9 %, idle 3.6 %");
  });
});

describe('wf-collection: options', () => {
  const refused = async (args: string[]): Promise<string> => {
    try {
      await run(args);
    } catch (err) {
      expect(err).toBeInstanceOf(UsageError);
      return (err as UsageError).message;
    }
    throw new Error(`${args.join(' ')} was accepted`);
  };

  it.each([
    [[], /^--dir: required/],
    [['--dir', dir, '--limit', '0'], /^--limit: expected a whole number ≥ 1, got "0"/],
    [['--dir', dir, '--timeout', 'soon'], /^--timeout: expected a duration such as 90s or 10m, got "soon"/],
    [['--dir', dir, '--runs', '3'], /^Unknown option '--runs'/],
    [['--dir', join(dir, 'nowhere')], /^--dir: cannot read .*nowhere: ENOENT/],
    [['--dir', dir], /^--dir: no \.json or \.json\.gz files in /],
  ])('%j is refused, naming the option', async (args, message) => {
    expect(await refused(args)).toMatch(message);
  });
});

describe('wf-collection: a sweep', () => {
  itIf(existsSync(SAREK) ? null : `${SAREK} is absent`)(
    'a file that does not read is one line naming it; the others run (compiled bench, real berth sim)',
    () => {
      const sweep = mkdtempSync(join(dir, 'sweep-'));
      copyFileSync(SAREK, join(sweep, 'sarek-dirt02-001.json.gz'));
      writeFileSync(join(sweep, 'broken.json'), '{"workflow": {"tasks": [{"name": "x"}]}}');
      const r = spawnSync(
        process.execPath,
        [join(ROOT, 'dist', 'bench', 'main.js'), 'wf-collection', '--dir', sweep, '--json'],
        { cwd: ROOT, encoding: 'utf8', timeout: 120_000 },
      );
      expect(r.status).toBe(1);
      const out = JSON.parse(r.stdout) as ReturnType<typeof summarize> & {
        rows: ReturnType<typeof rowOf>[];
        failures: Failure[];
        summary: ReturnType<typeof summarize>;
      };
      expect(out.failures).toHaveLength(1);
      expect(out.failures[0]!.file).toBe('broken.json');
      expect(out.failures[0]!.message).toMatch(/broken\.json: workflow\.tasks\[0\]/);
      expect(out.rows.map((x) => [x.file, x.tasks])).toEqual([['sarek-dirt02-001.json.gz', 26]]);
      expect(out.summary).toMatchObject({ files: 2, ran: 1, failed: 1 });
      expect(r.stderr).toMatch(/wf-collection: 1\/2 broken\.json: failed: .*broken\.json/);
      expect(r.stderr).toMatch(/wf-collection: 2\/2 sarek-dirt02-001\.json\.gz: cost\/LB \d/);
    },
    120_000,
  );
});
