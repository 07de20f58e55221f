// Scheduling-quality gates (docs/SIMULATOR.md, "Quality gates"): fixed workloads, run with a fixed seed,
// whose cost / lower bound must not rise more than `tolerance` (2 %) above the figure recorded in a
// checked-in file. Runs are deterministic (same seed, same bytes), so a figure moves only when the code
// does. CI runs them as a test (test/sim/quality-gates.test.ts); `berth sim gates --update` records new
// figures after a deliberate change.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { at, ConfigError, listOf, opt, section, type Infer } from '../config/declare.js';
import { int, nullable, num, optional, text } from '../config/kinds.js';
import { defaultSimConfig, loadSimConfig } from './config.js';
import type { Report } from './report/build.js';
import { runSimulation } from './run.js';
import { prepareWorkload } from './workload/prepare.js';

/** A recorded figure: a number >= 0, or null until first recorded. */
const figure = nullable(num(0));

/** One gate: a workload and its recorded figures. Paths are relative to the gates file. */
const GATE = section([
  opt({ key: 'name', kind: text(), help: "The gate's name (unique in the file)." }),
  opt({ key: 'workload', kind: text(), help: 'The workload file, relative to the gates file.' }),
  opt({
    key: 'limit_jobs',
    field: 'limitJobs',
    kind: nullable(int(1)),
    default: null,
    help: 'Keep the first N jobs (or workflow runs).',
  }),
  opt({
    key: 'config',
    kind: nullable(text()),
    default: null,
    defaultText: 'the defaults',
    help: 'A simulator configuration file, relative to the gates file.',
  }),
  opt({ key: 'seed', kind: int(0), default: 1, help: "The run's seed." }),
  opt({
    key: 'cost_ratio',
    field: 'costRatio',
    kind: figure,
    default: null,
    help: 'The recorded cost / lower bound (the gated figure); null until first recorded.',
  }),
  opt({
    key: 'wait_p90',
    field: 'waitP90',
    kind: figure,
    default: null,
    help: 'Recorded for the reader, not gated: p90 queue wait (s).',
  }),
  opt({
    key: 'idle_share',
    field: 'idleShare',
    kind: figure,
    default: null,
    help: 'Recorded for the reader, not gated: the idle share of the cost.',
  }),
]);

export type Gate = Infer<(typeof GATE.options)[number]>;

const GATE_FILE = section(
  [
    opt({ key: 'about', kind: optional(text()), help: 'What the file is, for the reader.' }),
    opt({
      key: 'tolerance',
      kind: num(0, { max: 1, what: 'a fraction from 0 to 1 such as 0.02' }),
      default: 0.02,
      help: 'Largest allowed rise of cost / lower bound over the recorded figure, as a fraction.',
    }),
    opt({ key: 'gates', kind: listOf(GATE, 'a non-empty array of gates'), help: 'The gates.' }),
  ],
  (f, path) => {
    if (f.gates.length === 0) throw new ConfigError(at(path, 'gates'), 'expected a non-empty array of gates');
    const names = new Set<string>();
    f.gates.forEach((g, i) => {
      if (names.has(g.name))
        throw new ConfigError(at(path, `gates[${i}].name`), `duplicate name ${JSON.stringify(g.name)}`);
      names.add(g.name);
    });
  },
);

export interface GateFile {
  /** Largest allowed rise of cost / lower bound over the recorded figure, as a fraction (0.02). */
  tolerance: number;
  gates: Gate[];
}

/** Reads and validates a gates file; a ConfigError names the file and the key. */
export function loadGates(path: string): GateFile {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ConfigError('', `cannot read a JSON gates file: ${(err as Error).message}`, { file: path });
  }
  try {
    const { tolerance, gates } = GATE_FILE.parse(value);
    return { tolerance, gates };
  } catch (err) {
    if (err instanceof ConfigError) throw err.from({ file: path });
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
