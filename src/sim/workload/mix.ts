// A workflow mix (docs/SIMULATOR.md, "Workflow mixes"): which WfCommons workflows to run, how many runs
// of each, and when each run starts (fixed times, uniform over a window, or a Poisson process), seeded so
// the same file always gives the same runs.
//
//   {"seed": 1, "arrival": {"kind": "uniform", "from": "0s", "until": "1d"},
//    "workflows": [{"file": "../shared/traces/workflows/rnaseq-dirt02-001.json.gz", "runs": 7},
//                  {"file": "blast.json.gz", "runs": 3, "arrival": {"kind": "poisson", "mean_interval": "2h"}}]}
//
// Files are relative to the mix file. Every error names the key ("workflows[2].runs: ...").
import { exponential } from '../../cloud/sim/distribution.js';
import { namedRng, type Rng } from '../../model/clock.js';
import { parseAt, parseDuration, parseSize, parseVcpus } from '../../model/units.js';
import { sortByArrival, WorkloadError, type Workflow, type WorkflowRun } from './types.js';
import { DEFAULT_TASK, type TaskDefaults } from './wfcommons.js';

/** When the runs of one mix entry start. */
export type Arrival =
  | { kind: 'fixed'; at: number[] }
  | { kind: 'uniform'; from: number; until: number }
  | { kind: 'poisson'; from: number; meanInterval: number };

/** Reads one workflow file with the given task defaults (the caller caches and names errors). */
export type WorkflowReader = (file: string, defaults: TaskDefaults) => Workflow;

type Obj = Record<string, unknown>;

const MIX_KEYS = ['seed', 'arrival', 'task_defaults', 'priority', 'preemptible', 'workflows'];
const ENTRY_KEYS = ['file', 'runs', 'arrival', 'task_defaults', 'priority', 'preemptible'];

/** True when the value looks like a mix (a `workflows` array) rather than jobs or one workflow. */
export function isMix(value: unknown): boolean {
  return typeof value === 'object' && value !== null && 'workflows' in value;
}

function object(v: unknown, at: string): Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new WorkloadError(`${at}: expected an object, got ${JSON.stringify(v)}`);
  return v as Obj;
}

function onlyKeys(o: Obj, at: string, allowed: string[]): void {
  for (const k of Object.keys(o))
    if (!allowed.includes(k))
      throw new WorkloadError(
        `${at === '' ? k : `${at}.${k}`}: unknown key; expected one of ${allowed.join(', ')}`,
      );
}

function unit<T>(at: string, parse: (v: unknown) => T, v: unknown): T {
  return parseAt(at, parse, v, WorkloadError);
}

function wholeNumber(v: unknown, at: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    throw new WorkloadError(`${at}: expected a whole number from ${min} to ${max}, got ${JSON.stringify(v)}`);
  return v;
}

function bool(v: unknown, at: string): boolean {
  if (typeof v !== 'boolean')
    throw new WorkloadError(`${at}: expected true or false, got ${JSON.stringify(v)}`);
  return v;
}

function arrival(v: unknown, at: string): Arrival {
  const o = object(v, at);
  const dur = (k: string, dflt?: number): number => {
    if (o[k] === undefined) {
      if (dflt === undefined) throw new WorkloadError(`${at}.${k}: required for kind ${String(o.kind)}`);
      return dflt;
    }
    return unit(`${at}.${k}`, parseDuration, o[k]);
  };
  switch (o.kind) {
    case 'fixed': {
      onlyKeys(o, at, ['kind', 'at']);
      if (!Array.isArray(o.at) || o.at.length === 0)
        throw new WorkloadError(`${at}.at: expected a non-empty array of start times such as ["0s", "1h"]`);
      return { kind: 'fixed', at: o.at.map((x, i) => unit(`${at}.at[${i}]`, parseDuration, x)) };
    }
    case 'uniform': {
      onlyKeys(o, at, ['kind', 'from', 'until']);
      const from = dur('from', 0);
      const until = dur('until');
      if (until <= from) throw new WorkloadError(`${at}.until: expected a time after "from"`);
      return { kind: 'uniform', from, until };
    }
    case 'poisson': {
      onlyKeys(o, at, ['kind', 'from', 'mean_interval']);
      const meanInterval = dur('mean_interval');
      if (meanInterval <= 0) throw new WorkloadError(`${at}.mean_interval: expected a duration above zero`);
      return { kind: 'poisson', from: dur('from', 0), meanInterval };
    }
    default:
      throw new WorkloadError(
        `${at}.kind: expected fixed, uniform or poisson, got ${JSON.stringify(o.kind)}`,
      );
  }
}

function taskDefaults(v: unknown, at: string, base: TaskDefaults): TaskDefaults {
  const o = object(v, at);
  onlyKeys(o, at, ['vcpus', 'ram']);
  return {
    vcpus: o.vcpus === undefined ? base.vcpus : unit(`${at}.vcpus`, parseVcpus, o.vcpus),
    ram: o.ram === undefined ? base.ram : unit(`${at}.ram`, parseSize, o.ram),
  };
}

/** Start times (ms after the workload's start) of `runs` runs, drawn from the entry's own stream. */
export function startTimes(a: Arrival | null, runs: number, rng: Rng): number[] {
  if (a === null) return new Array<number>(runs).fill(0);
  switch (a.kind) {
    case 'fixed':
      return [...a.at].sort((x, y) => x - y);
    case 'uniform': {
      const out: number[] = [];
      for (let i = 0; i < runs; i++) out.push(Math.round(a.from + rng() * (a.until - a.from)));
      return out.sort((x, y) => x - y);
    }
    case 'poisson': {
      const out: number[] = [];
      let t = a.from;
      for (let i = 0; i < runs; i++) {
        t += exponential(a.meanInterval, rng);
        out.push(Math.round(t));
      }
      return out;
    }
  }
}

/**
 * Validates a mix and expands it into workflow runs sorted by start time. `read` loads a workflow file
 * (relative paths are the caller's business: it knows the mix file's directory).
 */
export function parseMix(value: unknown, read: WorkflowReader): WorkflowRun[] {
  const m = object(value, 'mix');
  onlyKeys(m, '', MIX_KEYS);
  const seed = m.seed === undefined ? 1 : wholeNumber(m.seed, 'seed', 0, 2 ** 32 - 1);
  const defaultArrival = m.arrival === undefined ? null : arrival(m.arrival, 'arrival');
  const defaults =
    m.task_defaults === undefined
      ? DEFAULT_TASK
      : taskDefaults(m.task_defaults, 'task_defaults', DEFAULT_TASK);
  const priority = m.priority === undefined ? 500 : wholeNumber(m.priority, 'priority', 1, 1000);
  const preemptible = m.preemptible === undefined ? false : bool(m.preemptible, 'preemptible');
  if (!Array.isArray(m.workflows) || m.workflows.length === 0)
    throw new WorkloadError('workflows: expected a non-empty array of {"file": ..., "runs": N}');

  const runs: WorkflowRun[] = [];
  const numbered = new Map<string, number>();
  m.workflows.forEach((v: unknown, i) => {
    const at = `workflows[${i}]`;
    const e = object(v, at);
    onlyKeys(e, at, ENTRY_KEYS);
    if (typeof e.file !== 'string' || e.file === '')
      throw new WorkloadError(
        `${at}.file: expected the path of a WfCommons file, got ${JSON.stringify(e.file)}`,
      );
    const arr = e.arrival === undefined ? defaultArrival : arrival(e.arrival, `${at}.arrival`);
    const fixedCount = arr?.kind === 'fixed' ? arr.at.length : undefined;
    const count = e.runs === undefined ? (fixedCount ?? 1) : wholeNumber(e.runs, `${at}.runs`, 1, 1_000_000);
    if (fixedCount !== undefined && fixedCount !== count)
      throw new WorkloadError(`${at}.runs: ${count} runs but ${fixedCount} fixed start times`);
    const d =
      e.task_defaults === undefined
        ? defaults
        : taskDefaults(e.task_defaults, `${at}.task_defaults`, defaults);
    let wf: Workflow;
    try {
      wf = read(e.file, d);
    } catch (err) {
      if (err instanceof WorkloadError) throw new WorkloadError(`${at}.file: ${err.message}`);
      throw err;
    }
    const p = e.priority === undefined ? priority : wholeNumber(e.priority, `${at}.priority`, 1, 1000);
    const pre = e.preemptible === undefined ? preemptible : bool(e.preemptible, `${at}.preemptible`);
    for (const t of startTimes(arr, count, namedRng(seed, `mix-entry-${i}`))) {
      const k = (numbered.get(wf.name) ?? 0) + 1;
      numbered.set(wf.name, k);
      runs.push({ id: `${wf.name}/${k}`, workflow: wf, arrival: t, priority: p, preemptible: pre });
    }
  });
  return sortByArrival(runs);
}
