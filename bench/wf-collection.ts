// `npm run bench -- wf-collection --dir DIR [--config FILE] [--limit N] [--timeout D] [--json]`
//
// Issue 14's "any other workflow of the WfCommons collection: ≤ 1.5 × the lower bound": every WfCommons
// file of DIR (.json, .json.gz, by name) run once through `berth sim` (the real scheduler, the given
// configuration or the default one, seed 1), one process per file with a time limit. One row per file:
// tasks, cost, lower bound, cost / lower bound, idle + boot share of the spend, p90 wait, makespan /
// critical path, and the critical-path bound (report.criticalPathBound: over 1.5 × the lower bound, no
// scheduler can meet the target on that catalog). Then a summary: how many files meet ≤ 1.5, how many
// are proven out of reach, and where the money of the rest goes; and one line per family (the file
// name's first word). A file that does not read or run gives one line naming it, and the sweep goes on.
// Progress goes to stderr.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Report } from '../src/sim/report/build.js';
import { benchArgs, opt, UsageError } from './args.js';

const OPTIONS = {
  dir: opt.text(undefined, 'a directory of WfCommons files (.json, .json.gz); required'),
  config: opt.text(undefined, 'a simulator config file (as berth sim --config); default config when absent'),
  limit: opt.int(undefined, 'run only the first N files (by name)'),
  timeout: opt.duration('10m', 'time limit of one file'),
  json: opt.flag('print JSON (rows, failures, summary)'),
};

/** The target of issue 14 for these files. */
export const TARGET = 1.5;

/** One file's figures, from its report. Money in the catalog's currency, times in seconds. */
export interface Row {
  file: string;
  tasks: number;
  cost: number;
  lowerBound: number;
  ratio: number | null;
  boot: number;
  work: number;
  idle: number;
  /** (idle + boot) / cost. */
  idleBootShare: number | null;
  waitP90: number | null;
  /** Makespan / critical path of the run. */
  makespanRatio: number | null;
  /** report.criticalPathBound: the bound, and it / the lower bound; null when the report has none. */
  pathBound: number | null;
  pathBoundOverLb: number | null;
  /** Wall time of the simulation (s), under whatever load the machine had. */
  seconds: number | null;
}

export interface Failure {
  file: string;
  message: string;
}

/** The family of a file: its name's first word ("1000genome-chameleon-2ch-100k-001.json" → "1000genome"). */
export function family(file: string): string {
  return file
    .replace(/\.gz$/i, '')
    .replace(/\.json$/i, '')
    .split('-')[0]!;
}

/** A row from one file's report (what `berth sim --json` prints under `report`). */
export function rowOf(file: string, report: Report, seconds: number | null = null): Row {
  const c = report.cost;
  const w = report.workflows?.list[0];
  return {
    file,
    tasks: report.containers.total,
    cost: c.total,
    lowerBound: c.lowerBound,
    ratio: c.ratio,
    boot: c.boot,
    work: c.work,
    idle: c.idle,
    idleBootShare: c.total > 0 ? (c.idle + c.boot) / c.total : null,
    waitP90: report.wait.p90,
    makespanRatio: w?.ratio ?? null,
    pathBound: report.criticalPathBound?.cost ?? null,
    pathBoundOverLb: report.criticalPathBound?.overLowerBound ?? null,
    seconds,
  };
}

/** Within the target: cost ≤ 1.5 × the lower bound. */
const meets = (r: Row): boolean => r.ratio !== null && r.ratio <= TARGET;
/** Proven out of reach: the critical-path bound alone is above 1.5 × the lower bound. */
const proven = (r: Row): boolean => r.pathBoundOverLb !== null && r.pathBoundOverLb > TARGET;

export interface FamilySummary {
  family: string;
  files: number;
  meet: number;
  proven: number;
  ratio: { min: number | null; median: number | null; max: number | null };
}

export interface Summary {
  files: number;
  ran: number;
  failed: number;
  meet: number;
  /** Proven out of reach by the critical-path bound. */
  proven: number;
  /** Neither: within reach as far as the bounds say, but over 1.5. */
  open: number;
  /** Over the open files: their spend and its split (boot, work, idle) as shares of it. */
  openSpend: { cost: number; boot: number | null; work: number | null; idle: number | null };
  best: Row | null;
  worst: Row | null;
  byFamily: FamilySummary[];
}

function median(sorted: number[]): number | null {
  if (sorted.length === 0) return null;
  const m = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[m]! : Math.round(((sorted[m - 1]! + sorted[m]!) / 2) * 1e4) / 1e4;
}

/** The sweep's summary from its rows and failures. */
export function summarize(rows: Row[], failures: Failure[]): Summary {
  const open = rows.filter((r) => !meets(r) && !proven(r));
  const cost = open.reduce((s, r) => s + r.cost, 0);
  const share = (f: (r: Row) => number) => (cost > 0 ? open.reduce((s, r) => s + f(r), 0) / cost : null);
  const ranked = rows.filter((r) => r.ratio !== null).sort((a, b) => a.ratio! - b.ratio!);
  const families = [...new Set(rows.map((r) => family(r.file)))].sort();
  return {
    files: rows.length + failures.length,
    ran: rows.length,
    failed: failures.length,
    meet: rows.filter(meets).length,
    proven: rows.filter(proven).length,
    open: open.length,
    openSpend: { cost, boot: share((r) => r.boot), work: share((r) => r.work), idle: share((r) => r.idle) },
    best: ranked[0] ?? null,
    worst: ranked[ranked.length - 1] ?? null,
    byFamily: families.map((f) => {
      const mine = rows.filter((r) => family(r.file) === f);
      const ratios = mine.flatMap((r) => (r.ratio === null ? [] : [r.ratio])).sort((a, b) => a - b);
      return {
        family: f,
        files: mine.length,
        meet: mine.filter(meets).length,
        proven: mine.filter(proven).length,
        ratio: { min: ratios[0] ?? null, median: median(ratios), max: ratios[ratios.length - 1] ?? null },
      };
    }),
  };
}

const fix = (x: number | null, digits: number): string => (x === null ? '-' : x.toFixed(digits));
const pct = (x: number | null): string => (x === null ? '-' : `${(x * 100).toFixed(1)} %`);

/** The text table: one line per file, the failures, then the summary. */
export function formatTable(rows: Row[], failures: Failure[]): string {
  const head = [
    'file',
    'tasks',
    'cost',
    'LB',
    'cost/LB',
    'idle+boot',
    'wait p90',
    'makespan/CP',
    'CP bound/LB',
    'sim s',
  ];
  const body = rows.map((r) => [
    r.file,
    String(r.tasks),
    fix(r.cost, 4),
    fix(r.lowerBound, 4),
    fix(r.ratio, 3),
    pct(r.idleBootShare),
    r.waitP90 === null ? '-' : `${r.waitP90.toFixed(1)}s`,
    fix(r.makespanRatio, 3),
    fix(r.pathBoundOverLb, 3),
    fix(r.seconds, 1),
  ]);
  const widths = head.map((h, k) => Math.max(h.length, ...body.map((b) => b[k]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, k) => (k === 0 ? c.padEnd(widths[k]!) : c.padStart(widths[k]!))).join('  ');
  const s = summarize(rows, failures);
  const out = [line(head), ...body.map(line)];
  for (const f of failures) out.push(`${f.file}: ${f.message}`);
  out.push(
    '',
    `${s.files} files: ${s.ran} ran, ${s.failed} failed; ${s.meet} meet cost ≤ ${TARGET} × LB; ` +
      `${s.proven} proven out of reach (critical-path bound > ${TARGET} × LB); ${s.open} open (neither)`,
  );
  if (s.open > 0)
    out.push(
      `open files' spend ${s.openSpend.cost.toFixed(4)}: boot ${pct(s.openSpend.boot)}, work ${pct(s.openSpend.work)}, idle ${pct(s.openSpend.idle)}`,
    );
  if (s.best !== null && s.worst !== null)
    out.push(`best ${s.best.file} ${fix(s.best.ratio, 3)}; worst ${s.worst.file} ${fix(s.worst.ratio, 3)}`);
  for (const f of s.byFamily)
    out.push(
      `  ${f.family}: ${f.files} files, ${f.meet} meet, ${f.proven} proven out of reach; cost/LB min ${fix(f.ratio.min, 3)} median ${fix(f.ratio.median, 3)} max ${fix(f.ratio.max, 3)}`,
    );
  return out.join('\n');
}

/** The WfCommons files of a directory, by name. */
function filesOf(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (err) {
    throw new UsageError(
      `--dir: cannot read ${dir}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  return names.filter((n) => /\.json(\.gz)?$/i.test(n)).sort();
}

/** The last non-empty line of a child's stderr: berth's one-line error naming the file and field. */
function lastLine(text: string): string {
  const lines = text.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('sim: '));
  return lines[lines.length - 1]?.trim() ?? '';
}

export async function run(args: string[]): Promise<number> {
  const o = benchArgs('wf-collection', args, OPTIONS);
  if (o.dir === undefined) throw new UsageError('--dir: required (a directory of WfCommons files)');
  const files = filesOf(o.dir).slice(0, o.limit);
  if (files.length === 0) throw new UsageError(`--dir: no .json or .json.gz files in ${o.dir}`);
  const berth = resolve(import.meta.dirname, '..', '..', 'bin', 'berth.js');
  const scratch = mkdtempSync(join(tmpdir(), 'berth-wf-collection-'));
  const rows: Row[] = [];
  const failures: Failure[] = [];
  try {
    files.forEach((file, k) => {
      const t0 = Date.now();
      const r = spawnSync(
        process.execPath,
        [
          berth,
          'sim',
          '--workload',
          join(o.dir!, file),
          '--out',
          join(scratch, 'out'),
          '--json',
          ...(o.config === undefined ? [] : ['--config', o.config]),
        ],
        { encoding: 'utf8', timeout: o.timeout, maxBuffer: 1 << 30, killSignal: 'SIGKILL' },
      );
      const wall = (Date.now() - t0) / 1000;
      rmSync(join(scratch, 'out'), { recursive: true, force: true });
      let note: string;
      if (r.error !== undefined && (r.error as NodeJS.ErrnoException).code === 'ETIMEDOUT') {
        failures.push({ file, message: `timed out after ${o.timeout / 1000} s` });
        note = 'timed out';
      } else if (r.status !== 0) {
        const message = lastLine(r.stderr ?? '') || `exit ${r.status ?? r.signal}`;
        failures.push({ file, message });
        note = `failed: ${message}`;
      } else {
        const out = JSON.parse(r.stdout) as { report: Report; seconds?: number };
        const row = rowOf(file, out.report, out.seconds ?? null);
        rows.push(row);
        note = `cost/LB ${fix(row.ratio, 3)}`;
      }
      process.stderr.write(
        `wf-collection: ${k + 1}/${files.length} ${file}: ${note} (${wall.toFixed(1)} s)\n`,
      );
    });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  if (o.json) console.log(JSON.stringify({ rows, failures, summary: summarize(rows, failures) }, null, 2));
  else console.log(formatTable(rows, failures));
  return failures.length > 0 ? 1 : 0;
}
