// Scheduling-quality gates (docs/SIMULATOR.md, "Quality gates"): fixed workloads, run with a fixed seed,
// whose cost / lower bound must not rise more than `tolerance` (2 %) above the figure recorded in a
// checked-in file. Runs are deterministic (same seed, same bytes), so a figure moves only when the code
// does. CI runs them as a test (test/sim/quality-gates.test.ts); `berth sim gates --update` records new
// figures after a deliberate change.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { defaultSimConfig, loadSimConfig } from './config.js';
import type { Report } from './report/build.js';
import { runSimulation } from './run.js';
import { prepareWorkload } from './workload/prepare.js';

/** One gate: a workload and its recorded figures. Paths are relative to the gates file. */
export interface Gate {
  name: string;
  workload: string;
  /** Keep the first N jobs (or workflow runs). */
  limitJobs: number | null;
  /** A simulator configuration file; null = the defaults. */
  config: string | null;
  seed: number;
  /** The recorded cost / lower bound (the gated figure); null until first recorded. */
  costRatio: number | null;
  /** Recorded for the reader, not gated: p90 queue wait (s) and the idle share of the cost. */
  waitP90: number | null;
  idleShare: number | null;
}

export interface GateFile {
  /** Largest allowed rise of cost / lower bound over the recorded figure, as a fraction (0.02). */
  tolerance: number;
  gates: Gate[];
}

/** A gates file that cannot be used; the message names the key. */
export class GateFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GateFileError';
  }
}

type Obj = Record<string, unknown>;

function obj(v: unknown, at: string): Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new GateFileError(`${at}: expected an object, got ${JSON.stringify(v)}`);
  return v as Obj;
}

function figure(v: unknown, at: string): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
    throw new GateFileError(`${at}: expected a number >= 0 or null, got ${JSON.stringify(v)}`);
  return v;
}

const GATE_KEYS = [
  'name',
  'workload',
  'limit_jobs',
  'config',
  'seed',
  'cost_ratio',
  'wait_p90',
  'idle_share',
];

function gate(v: unknown, at: string): Gate {
  const o = obj(v, at);
  for (const k of Object.keys(o))
    if (!GATE_KEYS.includes(k))
      throw new GateFileError(`${at}.${k}: unknown key; expected one of ${GATE_KEYS.join(', ')}`);
  const str = (k: string, required: boolean): string | null => {
    const x = o[k];
    if (x === undefined || x === null) {
      if (required) throw new GateFileError(`${at}.${k}: required`);
      return null;
    }
    if (typeof x !== 'string' || x === '')
      throw new GateFileError(`${at}.${k}: expected a non-empty string, got ${JSON.stringify(x)}`);
    return x;
  };
  const whole = (k: string, dflt: number | null): number | null => {
    const x = o[k];
    if (x === undefined || x === null) return dflt;
    if (typeof x !== 'number' || !Number.isSafeInteger(x) || x < 0)
      throw new GateFileError(`${at}.${k}: expected a whole number >= 0, got ${JSON.stringify(x)}`);
    return x;
  };
  const limitJobs = whole('limit_jobs', null);
  if (limitJobs === 0) throw new GateFileError(`${at}.limit_jobs: expected a whole number >= 1, got 0`);
  return {
    name: str('name', true)!,
    workload: str('workload', true)!,
    limitJobs,
    config: str('config', false),
    seed: whole('seed', 1)!,
    costRatio: figure(o.cost_ratio, `${at}.cost_ratio`),
    waitP90: figure(o.wait_p90, `${at}.wait_p90`),
    idleShare: figure(o.idle_share, `${at}.idle_share`),
  };
}

/** Reads and validates a gates file. */
export function loadGates(path: string): GateFile {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new GateFileError(`${path}: cannot read a JSON gates file: ${(err as Error).message}`);
  }
  try {
    const o = obj(value, 'gates file');
    for (const k of Object.keys(o))
      if (k !== 'tolerance' && k !== 'gates' && k !== 'about')
        throw new GateFileError(`${k}: unknown key; expected about, tolerance, gates`);
    const tolerance = o.tolerance ?? 0.02;
    if (typeof tolerance !== 'number' || !(tolerance >= 0 && tolerance < 1))
      throw new GateFileError(
        `tolerance: expected a fraction from 0 to 1 such as 0.02, got ${JSON.stringify(o.tolerance)}`,
      );
    if (!Array.isArray(o.gates) || o.gates.length === 0)
      throw new GateFileError('gates: expected a non-empty array of gates');
    const gates = o.gates.map((g, i) => gate(g, `gates[${i}]`));
    const names = new Set<string>();
    gates.forEach((g, i) => {
      if (names.has(g.name))
        throw new GateFileError(`gates[${i}].name: duplicate name ${JSON.stringify(g.name)}`);
      names.add(g.name);
    });
    return { tolerance, gates };
  } catch (err) {
    if (err instanceof GateFileError) throw new GateFileError(`${path}: ${err.message}`);
    throw err;
  }
}

/** What one gate measured. */
export interface GateFigures {
  costRatio: number | null;
  waitP90: number | null;
  idleShare: number | null;
}

/** Runs one gate's workload (paths relative to `baseDir`) with the real scheduler. */
export async function measureGate(
  g: Gate,
  baseDir: string,
): Promise<{ report: Report; figures: GateFigures }> {
  const config = g.config === null ? defaultSimConfig() : loadSimConfig(resolve(baseDir, g.config));
  const { jobs, workflows } = prepareWorkload(resolve(baseDir, g.workload), {
    ...(g.limitJobs === null ? {} : { limit: g.limitJobs }),
  });
  const { report } = await runSimulation({ jobs, workflows, config, seed: g.seed, policy: 'berth' });
  return {
    report,
    figures: {
      costRatio: report.cost.ratio,
      waitP90: report.wait.p90,
      idleShare:
        report.cost.total > 0 ? Math.round((report.cost.idle / report.cost.total) * 10_000) / 10_000 : null,
    },
  };
}

/** The verdict on one gate: the change of cost / lower bound against the recorded figure. */
export interface Verdict {
  /** measured / recorded − 1; null when either is missing. */
  change: number | null;
  /** Within tolerance (or nothing recorded yet). */
  ok: boolean;
}

export function judge(recorded: number | null, measured: number | null, tolerance: number): Verdict {
  if (recorded === null || measured === null) return { change: null, ok: recorded === null };
  const change = measured / recorded - 1;
  // A hair of slack for the recorded figure's rounding (4 decimals).
  return { change, ok: measured <= recorded * (1 + tolerance) + 1e-9 };
}

/** Rewrites the gates file with new figures, keeping everything else as it was. */
export function recordGates(path: string, figures: Map<string, GateFigures>): void {
  const raw = JSON.parse(readFileSync(path, 'utf8')) as { gates: Array<Record<string, unknown>> };
  for (const g of raw.gates) {
    const f = figures.get(g.name as string);
    if (f === undefined) continue;
    g.cost_ratio = f.costRatio;
    g.wait_p90 = f.waitP90;
    g.idle_share = f.idleShare;
  }
  writeFileSync(path, `${JSON.stringify(raw, null, 2)}\n`);
}

/** The directory gate paths are relative to. */
export function gatesDir(path: string): string {
  return dirname(resolve(path));
}
