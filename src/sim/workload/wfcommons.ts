// WfCommons workflow instances (WfFormat, github.com/wfcommons/WfFormat; shared/traces/README.md): real
// executions of scientific workflows, as a DAG of tasks with their run times and, where recorded, cores,
// memory and CPU use. Two layouts exist:
//   1.5 and later: workflow.specification.tasks[] (id, name, parents, children) and
//                  workflow.execution.tasks[] (id, runtimeInSeconds, coreCount, avgCPU, memoryInBytes)
//   1.4 and older: workflow.tasks[] (or workflow.jobs[]) with both in one object; parents name tasks by
//                  `name`; run time in runtimeInSeconds (or runtime), cores in cores, memory in
//                  memoryInBytes (or memory, in KB).
// A task asks for what the file says it had (coreCount, memoryInBytes), or the defaults where it says
// nothing. memoryInBytes is the peak resident size and avgCPU the mean CPU use in percent: they are kept
// as the task's usage for right-sizing. Every error names the task and field.
import { WorkloadError, type Usage, type Workflow, type WorkflowTask } from './types.js';

/** What a task asks for when its file does not say. */
export interface TaskDefaults {
  vcpus: number;
  /** Bytes. */
  ram: number;
}

export const DEFAULT_TASK = { vcpus: 1, ram: 2 * 1024 ** 3 } as const satisfies TaskDefaults;

type Obj = Record<string, unknown>;

function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** True when the value looks like a WfCommons instance (a `workflow` object), whatever its version. */
export function isWfCommons(value: unknown): boolean {
  return isObject(value) && isObject(value.workflow);
}

/** The task kind right-sizing groups by: a 1.4 `category`, else the name without a trailing task number. */
function kindOf(name: string, category: unknown): string {
  if (typeof category === 'string' && category !== '') return category;
  // Pegasus names tasks "individuals_ID0000001", Makeflow "blastall_ID000002", Nextflow ids "STEP_3".
  return name.replace(/_(ID)?\d+$/, '') || name;
}

/** A finite number >= min, or undefined when absent; anything else is an error naming the field. */
function optNumber(o: Obj, key: string, at: string, min: number): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min)
    throw new WorkloadError(`${at}.${key}: expected a number >= ${min}, got ${JSON.stringify(v)}`);
  return v;
}

function idList(o: Obj, key: string, at: string): string[] {
  const v = o[key] ?? [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))
    throw new WorkloadError(`${at}.${key}: expected an array of task ids, got ${JSON.stringify(v)}`);
  return v as string[];
}

/** A task as read, before its parents are resolved to indices. */
interface RawTask {
  id: string;
  name: string;
  parents: string[];
  at: string;
  vcpus: number;
  ram: number;
  duration: number;
  usage: Usage;
}

/** Run time, resources and usage from one execution record (1.5 execution task or 1.4 task). */
function measured(
  e: Obj,
  at: string,
  d: TaskDefaults,
): Pick<RawTask, 'vcpus' | 'ram' | 'duration' | 'usage'> {
  const runtime = optNumber(e, 'runtimeInSeconds', at, 0) ?? optNumber(e, 'runtime', at, 0);
  if (runtime === undefined)
    throw new WorkloadError(`${at}.runtimeInSeconds: required (the task's run time)`);
  const cores = optNumber(e, 'coreCount', at, 0) ?? optNumber(e, 'cores', at, 0);
  const memBytes = optNumber(e, 'memoryInBytes', at, 0);
  const memKB = optNumber(e, 'memory', at, 0);
  const mem = memBytes ?? (memKB === undefined ? undefined : memKB * 1024);
  const avgCpu = optNumber(e, 'avgCPU', at, 0);
  const vcpus = cores !== undefined && cores > 0 ? Math.round(cores * 1000) / 1000 : d.vcpus;
  // A task that ran for 0 s (the file's rounding) still takes a moment: 1 ms.
  const duration = Math.max(1, Math.round(runtime * 1000));
  return {
    vcpus,
    ram: mem !== undefined && mem > 0 ? Math.round(mem) : d.ram,
    duration,
    usage: {
      cpuSeconds: avgCpu === undefined ? null : (avgCpu / 100) * (duration / 1000),
      // Some tracers write 0 where they measured nothing.
      peakRam: mem === undefined || mem === 0 ? null : Math.round(mem),
    },
  };
}

/** 1.5+: specification (the DAG) and execution (what each task took), joined by id. */
function readSplit(w: Obj, d: TaskDefaults): RawTask[] {
  const spec = w.specification;
  if (!isObject(spec) || !Array.isArray(spec.tasks) || spec.tasks.length === 0)
    throw new WorkloadError('workflow.specification.tasks: expected a non-empty array of tasks');
  const exec = w.execution;
  if (!isObject(exec) || !Array.isArray(exec.tasks))
    throw new WorkloadError(
      'workflow.execution.tasks: required (run times); a workflow without an execution cannot be simulated',
    );
  const byId = new Map<string, { e: Obj; at: string }>();
  exec.tasks.forEach((e: unknown, i) => {
    const at = `workflow.execution.tasks[${i}]`;
    if (!isObject(e) || typeof e.id !== 'string')
      throw new WorkloadError(`${at}.id: expected a task id, got ${JSON.stringify(isObject(e) ? e.id : e)}`);
    byId.set(e.id, { e, at });
  });
  return spec.tasks.map((t: unknown, i): RawTask => {
    const at = `workflow.specification.tasks[${i}]`;
    if (!isObject(t)) throw new WorkloadError(`${at}: expected an object, got ${JSON.stringify(t)}`);
    if (typeof t.id !== 'string' || t.id === '')
      throw new WorkloadError(`${at}.id: expected a non-empty string, got ${JSON.stringify(t.id)}`);
    const name = typeof t.name === 'string' && t.name !== '' ? t.name : t.id;
    const x = byId.get(t.id);
    if (x === undefined)
      throw new WorkloadError(
        `${at}: task ${JSON.stringify(t.id)} has no record in workflow.execution.tasks`,
      );
    return {
      id: t.id,
      name: kindOf(name, t.category),
      parents: idList(t, 'parents', at),
      at,
      ...measured(x.e, x.at, d),
    };
  });
}

/** 1.4 and older: one list; parents refer to tasks by name (by id where a file does so). */
function readFlat(w: Obj, d: TaskDefaults): RawTask[] {
  const key = Array.isArray(w.tasks) ? 'tasks' : 'jobs';
  const list = w[key];
  if (!Array.isArray(list) || list.length === 0)
    throw new WorkloadError(
      'workflow: expected specification and execution (WfFormat 1.5) or a non-empty tasks array (1.4)',
    );
  const raw = list.map((t: unknown, i): RawTask & { ref: string } => {
    const at = `workflow.${key}[${i}]`;
    if (!isObject(t)) throw new WorkloadError(`${at}: expected an object, got ${JSON.stringify(t)}`);
    if (typeof t.name !== 'string' || t.name === '')
      throw new WorkloadError(`${at}.name: expected a non-empty string, got ${JSON.stringify(t.name)}`);
    const id = typeof t.id === 'string' && t.id !== '' ? t.id : t.name;
    return {
      id,
      ref: t.name,
      name: kindOf(t.name, t.category),
      parents: idList(t, 'parents', at),
      at,
      ...measured(t, at, d),
    };
  });
  // Parents name tasks by `name`; translate them to ids (an id is accepted as well).
  const idOfRef = new Map<string, string>();
  for (const t of raw) idOfRef.set(t.id, t.id);
  for (const t of raw) idOfRef.set(t.ref, t.id);
  return raw.map(({ ref: _ref, ...t }) => ({ ...t, parents: t.parents.map((p) => idOfRef.get(p) ?? p) }));
}

/**
 * Orders tasks so that parents come first (Kahn's algorithm, ties in file order), resolves parents to
 * indices, and computes the critical path. Unknown parents, duplicate ids and cycles are errors.
 */
function toWorkflow(name: string, raw: RawTask[]): Workflow {
  const index = new Map<string, number>();
  raw.forEach((t, i) => {
    if (index.has(t.id)) throw new WorkloadError(`${t.at}.id: duplicate task id ${JSON.stringify(t.id)}`);
    index.set(t.id, i);
  });
  const parents = raw.map((t) =>
    [
      ...new Set(
        t.parents.map((p, k) => {
          const j = index.get(p);
          if (j === undefined)
            throw new WorkloadError(`${t.at}.parents[${k}]: unknown task ${JSON.stringify(p)}`);
          return j;
        }),
      ),
    ].sort((a, b) => a - b),
  );
  const children: number[][] = raw.map(() => []);
  parents.forEach((ps, i) => ps.forEach((p) => children[p]!.push(i)));

  const waiting = parents.map((ps) => ps.length);
  const order: number[] = [];
  for (let i = 0; i < raw.length; i++) if (waiting[i] === 0) order.push(i);
  for (let k = 0; k < order.length; k++)
    for (const c of children[order[k]!]!) if (--waiting[c]! === 0) order.push(c);
  if (order.length < raw.length) {
    const stuck = raw.find((_, i) => waiting[i]! > 0)!;
    throw new WorkloadError(`${stuck.at}: task ${JSON.stringify(stuck.id)} is on a cycle of parents`);
  }

  const position = new Map(order.map((old, pos) => [old, pos]));
  const tasks = order.map((old): WorkflowTask => {
    const t = raw[old]!;
    return {
      id: t.id,
      name: t.name,
      parents: parents[old]!.map((p) => position.get(p)!),
      children: children[old]!.map((c) => position.get(c)!).sort((a, b) => a - b),
      vcpus: t.vcpus,
      ram: t.ram,
      duration: t.duration,
      usage: t.usage,
    };
  });
  return { name, tasks, criticalPath: criticalPath(tasks) };
}

/** The longest path of run times (ms) through tasks in topological order: the least makespan possible. */
export function criticalPath(tasks: WorkflowTask[]): number {
  const finish = new Array<number>(tasks.length).fill(0);
  let longest = 0;
  tasks.forEach((t, i) => {
    let ready = 0;
    for (const p of t.parents) ready = Math.max(ready, finish[p]!);
    finish[i] = ready + t.duration;
    longest = Math.max(longest, finish[i]!);
  });
  return longest;
}

/**
 * Reads a WfCommons instance (any schema version from 1.0) as a workflow named `name`. Throws
 * WorkloadError naming the task and field of the first problem.
 */
export function parseWfCommons(
  value: unknown,
  name: string,
  defaults: TaskDefaults = DEFAULT_TASK,
): Workflow {
  if (!isObject(value) || !isObject(value.workflow))
    throw new WorkloadError('workflow: expected a WfCommons instance with a "workflow" object');
  const w = value.workflow;
  const raw = isObject(w.specification) ? readSplit(w, defaults) : readFlat(w, defaults);
  return toWorkflow(name, raw);
}

/** The workflow name of a file: its base name without .json / .json.gz. */
export function workflowName(path: string): string {
  const base = path.split(/[\\/]/).pop() ?? path;
  return base.replace(/\.gz$/i, '').replace(/\.json$/i, '') || base;
}
