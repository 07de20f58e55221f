// Berth's own JSON workload format (docs/SIMULATOR.md):
//   {"jobs": [{"id": "j1", "arrival": "90s", "vcpus": 2, "ram": "4GiB", "duration": "10m", ...}]}
// or a bare array of jobs. Sizes and durations take the same human strings as the rest of Berth.
// Every problem is reported with the field's path ("jobs[3].ram: expected ..."); unknown fields are
// rejected so a typo does not silently fall back to a default.
import { parseAt, parseDuration, parseSize, parseVcpus } from '../../model/units.js';
import { sortByArrival, WorkloadError, type Workload, type WorkloadJob } from './types.js';

const JOB_FIELDS = [
  'id',
  'arrival',
  'vcpus',
  'ram',
  'scratch',
  'gpus',
  'duration',
  'priority',
  'preemptible',
  'name',
  'cpu_seconds',
  'peak_ram',
];
const REQUIRED = ['arrival', 'vcpus', 'ram', 'duration'];

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Runs a unit parser and prefixes its error with the field path. */
function field<T>(path: string, parse: (v: unknown) => T, value: unknown): T {
  return parseAt(path, parse, value, WorkloadError);
}

function job(v: unknown, i: number, seen: Set<string>): WorkloadJob {
  const at = `jobs[${i}]`;
  if (!isObject(v)) throw new WorkloadError(`${at}: expected an object, got ${JSON.stringify(v)}`);
  const unknown = Object.keys(v).filter((k) => !JOB_FIELDS.includes(k));
  if (unknown.length > 0)
    throw new WorkloadError(
      `${at}: unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')}; expected ${JOB_FIELDS.join(', ')}`,
    );
  for (const k of REQUIRED) if (v[k] === undefined) throw new WorkloadError(`${at}.${k}: required`);

  const id = v.id === undefined ? `j${i + 1}` : v.id;
  if (typeof id !== 'string' || id === '')
    throw new WorkloadError(`${at}.id: expected a non-empty string, got ${JSON.stringify(v.id)}`);
  if (seen.has(id)) throw new WorkloadError(`${at}.id: duplicate id ${JSON.stringify(id)}`);
  seen.add(id);

  const gpus = v.gpus ?? 0;
  if (typeof gpus !== 'number' || !Number.isInteger(gpus) || gpus < 0)
    throw new WorkloadError(`${at}.gpus: expected a whole number >= 0, got ${JSON.stringify(v.gpus)}`);
  const priority = v.priority ?? 500;
  if (typeof priority !== 'number' || !Number.isInteger(priority) || priority < 1 || priority > 1000)
    throw new WorkloadError(
      `${at}.priority: expected a whole number from 1 to 1000, got ${JSON.stringify(v.priority)}`,
    );
  const preemptible = v.preemptible ?? false;
  if (typeof preemptible !== 'boolean')
    throw new WorkloadError(
      `${at}.preemptible: expected true or false, got ${JSON.stringify(v.preemptible)}`,
    );
  const duration = field(`${at}.duration`, parseDuration, v.duration);
  if (duration <= 0)
    throw new WorkloadError(
      `${at}.duration: expected a duration above zero, got ${JSON.stringify(v.duration)}`,
    );

  if (v.name !== undefined && (typeof v.name !== 'string' || v.name === ''))
    throw new WorkloadError(`${at}.name: expected a non-empty string, got ${JSON.stringify(v.name)}`);
  const cpuSeconds = v.cpu_seconds ?? null;
  if (
    cpuSeconds !== null &&
    (typeof cpuSeconds !== 'number' || !Number.isFinite(cpuSeconds) || cpuSeconds < 0)
  )
    throw new WorkloadError(
      `${at}.cpu_seconds: expected a number of CPU seconds >= 0, got ${JSON.stringify(v.cpu_seconds)}`,
    );
  const peakRam = v.peak_ram === undefined ? null : field(`${at}.peak_ram`, parseSize, v.peak_ram);

  return {
    id,
    arrival: field(`${at}.arrival`, parseDuration, v.arrival),
    vcpus: field(`${at}.vcpus`, parseVcpus, v.vcpus),
    ram: field(`${at}.ram`, parseSize, v.ram),
    scratch: field(`${at}.scratch`, parseSize, v.scratch ?? 0),
    gpus,
    duration,
    priority,
    preemptible,
    ...(v.name === undefined ? {} : { name: v.name }),
    ...(cpuSeconds === null && peakRam === null ? {} : { usage: { cpuSeconds, peakRam } }),
  };
}

/** Validates a parsed JSON value as a workload. Throws WorkloadError naming the first bad field. */
export function parseJsonWorkload(value: unknown): Workload {
  let list: unknown;
  if (Array.isArray(value)) list = value;
  else if (isObject(value)) {
    const unknown = Object.keys(value).filter((k) => k !== 'jobs');
    if (unknown.length > 0)
      throw new WorkloadError(
        `unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')}; expected "jobs"`,
      );
    list = value.jobs;
  }
  if (!Array.isArray(list))
    throw new WorkloadError(
      `jobs: expected an array of jobs (or {"jobs": [...]}), got ${JSON.stringify(list ?? value)}`,
    );
  const seen = new Set<string>();
  const jobs = list.map((v, i) => job(v, i, seen));
  return {
    jobs: sortByArrival(jobs),
    workflows: [],
    skipped: { malformed: 0, cancelled: 0, zeroRuntime: 0 },
    skippedExamples: [],
  };
}

/** Parses JSON text; a syntax error is a WorkloadError. */
export function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new WorkloadError(`not valid JSON: ${(err as Error).message}`);
  }
}

/** Parses JSON text as a workload; a syntax error is a WorkloadError too. */
export function parseJsonWorkloadText(text: string): Workload {
  return parseJsonWorkload(parseJsonText(text));
}
