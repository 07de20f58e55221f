// A container request as submitted: field-level validation and normalisation (sizes to bytes, durations
// to ms, times to Date), shared by the HTTP API and anything else that creates requests.
import { checkLabels, type Labels } from './labels.js';
import {
  formatDuration,
  formatSize,
  parseDuration,
  parseSize,
  parseTime,
  parseVcpus,
  UnitError,
} from './units.js';

/** A field-level problem, as the API reports it: {"field": "ram", "problem": "expected ..."}. */
export interface FieldProblem {
  field: string;
  problem: string;
}

/** A validation failure carrying every problem found. */
export class ValidationError extends Error {
  constructor(readonly details: FieldProblem[]) {
    super(details.map((d) => `${d.field}: ${d.problem}`).join('; '));
  }
}

/** A normalised request spec, ready for the store. */
export interface RequestSpec {
  name: string;
  image: string | null;
  command: string[];
  env: Record<string, string>;
  /** Passed to the container like env, never returned by the API (see docs/OPERATIONS.md). */
  secretEnv: Record<string, string>;
  cwd: string | null;
  vcpus: number;
  ram: number;
  scratch: number;
  gpus: number;
  preemptible: boolean;
  /** May be placed into reserved but unused capacity, and frozen/requeued when it is claimed back. */
  opportunistic: boolean;
  /** After an OOM kill, the retry asks for ram × this (≥ 1); null: the same ram. */
  ramRetryFactor: number | null;
  maxRunTimeMs: number | null;
  runAfter: Date | null;
  instanceTypes: string[] | null;
  priority: number;
  containerCountMax: number;
  maxTempRetries: number;
  retryOnFailure: boolean;
  /** Labels for cost allocation (src/model/labels.ts). */
  labels: Labels;
}

export const REQUEST_DEFAULTS = {
  vcpus: 1,
  ram: 1024 ** 3,
  priority: 500,
  containerCountMax: 3,
  maxTempRetries: 10,
  retryOnFailure: true,
} as const;

/**
 * What a request may ask for: below these no runtime can run it (each would burn every attempt on an
 * instance), above them PostgreSQL or a timer cannot hold the value. The API schema and normalizeRequest
 * both use these.
 */
export const REQUEST_LIMITS = {
  /** The kernel's smallest CPU quota: 1 ms per 100 ms period (cpu.cfs_quota_us ≥ 1000). */
  minVcpus: 0.01,
  maxVcpus: 100_000,
  /** Below this the runtimes' own processes (runc init, the shim, a shell) are OOM-killed at start. */
  minRam: 16 * 1024 ** 2,
  /** Sizes are bytes in a bigint column and a JavaScript number: exact up to 2^53 - 1. */
  maxBytes: Number.MAX_SAFE_INTEGER,
  /** max_run_time: a year. */
  maxRunTimeMs: 365 * 86_400_000,
  /** ram_retry_factor: from 1 (no growth) to 8 (a retry may ask for 8× the memory). */
  minRamRetryFactor: 1,
  maxRamRetryFactor: 8,
} as const;

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const TYPE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_COMMAND_BYTES = 128 * 1024;

/** The JSON a client sends (already shape-checked by the API schema, or not: this checks again). */
export type RequestInput = Record<string, unknown>;

export interface NormalizeOptions {
  /** Prefix for field names in problems ("requests.3."). */
  prefix?: string;
  /** The highest priority the submitter may set (a token's limit); null = 1000. */
  maxPriority?: number | null;
}

/**
 * The problem with a priority above the submitter's limit, or null. Used for submissions and for changes
 * of priority, so both refuse the same values with the same words.
 */
export function priorityProblem(
  priority: number,
  maxPriority: number | null | undefined,
  field = 'priority',
) {
  if (maxPriority === null || maxPriority === undefined || priority <= maxPriority) return null;
  return {
    field,
    problem: `expected at most ${maxPriority}: the highest priority your token may set (an admin sets it), got ${priority}`,
  };
}

/** Validates and normalises a request; throws ValidationError listing every bad field. */
export function normalizeRequest(input: RequestInput, opts: NormalizeOptions = {}): RequestSpec {
  const { prefix = '', maxPriority = null } = opts;
  const problems: FieldProblem[] = [];
  const f = (name: string) => `${prefix}${name}`;
  const unit = <T>(name: string, parse: (v: unknown) => T, fallback: T): T => {
    const v = input[name];
    if (v === undefined || v === null) return fallback;
    try {
      return parse(v);
    } catch (err) {
      problems.push({ field: f(name), problem: err instanceof UnitError ? err.message : String(err) });
      return fallback;
    }
  };
  const int = (name: string, min: number, max: number, fallback: number): number => {
    const v = input[name];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
      problems.push({
        field: f(name),
        problem: `expected a whole number from ${min} to ${max}, got ${JSON.stringify(v)}`,
      });
      return fallback;
    }
    return v;
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const v = input[name];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'boolean') {
      problems.push({ field: f(name), problem: `expected true or false, got ${JSON.stringify(v)}` });
      return fallback;
    }
    return v;
  };
  const str = (name: string, max: number): string | null => {
    const v = input[name];
    if (v === undefined || v === null) return null;
    if (typeof v !== 'string' || v.length > max || v.includes('\0')) {
      problems.push({
        field: f(name),
        problem: `expected a string of at most ${max} characters without NUL, got ${JSON.stringify(v)?.slice(0, 60)}`,
      });
      return null;
    }
    return v;
  };
  const envMap = (name: string): Record<string, string> => {
    const out: Record<string, string> = {};
    const raw = input[name];
    if (raw === undefined || raw === null) return out;
    if (typeof raw !== 'object' || Array.isArray(raw)) {
      problems.push({ field: f(name), problem: 'expected an object of NAME: "value" strings' });
      return out;
    }
    for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
      if (!ENV_NAME.test(k))
        problems.push({
          field: f(`${name}.${k}`),
          problem: 'expected a variable name of letters, digits and _ (not starting with a digit)',
        });
      else if (typeof v !== 'string' || v.includes('\0'))
        problems.push({ field: f(`${name}.${k}`), problem: 'expected a string value without NUL' });
      else out[k] = v;
    }
    return out;
  };

  const ramRetryFactor = (): number | null => {
    const v = input.ram_retry_factor;
    if (v === undefined || v === null) return null;
    const { minRamRetryFactor: lo, maxRamRetryFactor: hi } = REQUEST_LIMITS;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi) {
      problems.push({
        field: f('ram_retry_factor'),
        problem: `expected a number from ${lo} to ${hi} (the retry after an OOM kill asks for ram × it), got ${JSON.stringify(v)}`,
      });
      return null;
    }
    return v;
  };

  const command = input.command;
  let cmd: string[] = [];
  if (
    !Array.isArray(command) ||
    command.length === 0 ||
    !command.every((c) => typeof c === 'string' && !c.includes('\0'))
  ) {
    problems.push({
      field: f('command'),
      problem: 'expected a non-empty array of strings (argv), e.g. ["echo", "hi"]',
    });
  } else if (command[0] === '') {
    problems.push({ field: f('command.0'), problem: 'expected the program to run, got an empty string' });
  } else if (command.reduce((n: number, c: string) => n + Buffer.byteLength(c), 0) > MAX_COMMAND_BYTES) {
    problems.push({ field: f('command'), problem: `expected at most ${MAX_COMMAND_BYTES} bytes in all` });
  } else {
    cmd = command as string[];
  }

  const env = envMap('env');
  const secretEnv = envMap('secret_env');
  for (const k of Object.keys(secretEnv))
    if (k in env)
      problems.push({ field: f(`secret_env.${k}`), problem: 'is also in env: give each variable once' });

  let instanceTypes: string[] | null = null;
  const it = input.instance_types;
  if (it !== undefined && it !== null) {
    if (
      !Array.isArray(it) ||
      it.length === 0 ||
      !it.every((t) => typeof t === 'string' && TYPE_NAME.test(t))
    ) {
      problems.push({
        field: f('instance_types'),
        problem: 'expected a non-empty array of instance type names',
      });
    } else instanceTypes = [...new Set(it as string[])].sort();
  }

  const labels = checkLabels(input.labels, f('labels'));
  problems.push(...labels.problems);

  const cwd = str('cwd', 4096);
  if (cwd !== null && !cwd.startsWith('/'))
    problems.push({
      field: f('cwd'),
      problem: `expected an absolute path (starting with /), got ${JSON.stringify(cwd).slice(0, 60)}`,
    });
  const image = str('image', 1024);
  const explicitPriority = input.priority !== undefined && input.priority !== null;
  const spec: RequestSpec = {
    name: str('name', 256) ?? '',
    image: image === '' ? null : image,
    command: cmd,
    env,
    secretEnv,
    cwd: cwd === '' ? null : cwd,
    vcpus: unit('vcpus', parseVcpus, REQUEST_DEFAULTS.vcpus),
    ram: unit('ram', parseSize, REQUEST_DEFAULTS.ram),
    scratch: unit('scratch', parseSize, 0),
    gpus: int('gpus', 0, 64, 0),
    preemptible: bool('preemptible', false),
    opportunistic: bool('opportunistic', false),
    ramRetryFactor: ramRetryFactor(),
    maxRunTimeMs: unit('max_run_time', parseDuration, null as number | null),
    runAfter: unit('run_after', parseTime, null as Date | null),
    instanceTypes,
    priority: int('priority', 0, 1000, Math.min(REQUEST_DEFAULTS.priority, maxPriority ?? 1000)),
    containerCountMax: int('container_count_max', 1, 100, REQUEST_DEFAULTS.containerCountMax),
    maxTempRetries: int('max_temp_retries', 0, 1000, REQUEST_DEFAULTS.maxTempRetries),
    retryOnFailure: bool('retry_on_failure', REQUEST_DEFAULTS.retryOnFailure),
    labels: labels.labels,
  };
  const L = REQUEST_LIMITS;
  if (spec.vcpus < L.minVcpus || spec.vcpus > L.maxVcpus)
    problems.push({
      field: f('vcpus'),
      problem: `expected from ${L.minVcpus} to ${L.maxVcpus} CPUs (the smallest CPU share the kernel enforces is ${L.minVcpus}), got ${JSON.stringify(input.vcpus)}`,
    });
  if (spec.ram < L.minRam)
    problems.push({
      field: f('ram'),
      problem: `expected at least ${formatSize(L.minRam)} (less cannot start a container), got ${JSON.stringify(input.ram)}`,
    });
  if (spec.maxRunTimeMs !== null && (spec.maxRunTimeMs <= 0 || spec.maxRunTimeMs > L.maxRunTimeMs))
    problems.push({
      field: f('max_run_time'),
      problem: `expected a duration above 0 and at most ${formatDuration(L.maxRunTimeMs)}, got ${JSON.stringify(input.max_run_time)}`,
    });
  if (explicitPriority) {
    const p = priorityProblem(spec.priority, maxPriority, f('priority'));
    if (p) problems.push(p);
  }
  if (problems.length > 0) throw new ValidationError(problems);
  return spec;
}
