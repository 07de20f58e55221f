// A container request as submitted: field-level validation and normalisation (sizes to bytes, durations
// to ms, times to Date), shared by the HTTP API and anything else that creates requests.
import { checkLabels, type Labels } from './labels.js';
import { parseDuration, parseSize, parseTime, parseVcpus, UnitError } from './units.js';

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
  cwd: string | null;
  vcpus: number;
  ram: number;
  scratch: number;
  gpus: number;
  preemptible: boolean;
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

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const TYPE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_COMMAND_BYTES = 128 * 1024;

/** The JSON a client sends (already shape-checked by the API schema, or not: this checks again). */
export type RequestInput = Record<string, unknown>;

/** Validates and normalises a request; throws ValidationError listing every bad field. */
export function normalizeRequest(input: RequestInput, prefix = ''): RequestSpec {
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
        problem: `expected a string of at most ${max} characters, got ${JSON.stringify(v)?.slice(0, 60)}`,
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
  } else if (command.reduce((n: number, c: string) => n + Buffer.byteLength(c), 0) > MAX_COMMAND_BYTES) {
    problems.push({ field: f('command'), problem: `expected at most ${MAX_COMMAND_BYTES} bytes in all` });
  } else {
    cmd = command as string[];
  }

  const env: Record<string, string> = {};
  const rawEnv = input.env;
  if (rawEnv !== undefined && rawEnv !== null) {
    if (typeof rawEnv !== 'object' || Array.isArray(rawEnv)) {
      problems.push({ field: f('env'), problem: 'expected an object of NAME: "value" strings' });
    } else {
      for (const [k, v] of Object.entries(rawEnv as Record<string, unknown>)) {
        if (!ENV_NAME.test(k))
          problems.push({
            field: f(`env.${k}`),
            problem: 'expected a variable name of letters, digits and _',
          });
        else if (typeof v !== 'string' || v.includes('\0'))
          problems.push({ field: f(`env.${k}`), problem: 'expected a string value' });
        else env[k] = v;
      }
    }
  }

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

  const image = str('image', 1024);
  const spec: RequestSpec = {
    name: str('name', 256) ?? '',
    image: image === '' ? null : image,
    command: cmd,
    env,
    cwd: str('cwd', 4096),
    vcpus: unit('vcpus', parseVcpus, REQUEST_DEFAULTS.vcpus),
    ram: unit('ram', parseSize, REQUEST_DEFAULTS.ram),
    scratch: unit('scratch', parseSize, 0),
    gpus: int('gpus', 0, 64, 0),
    preemptible: bool('preemptible', false),
    maxRunTimeMs: unit('max_run_time', parseDuration, null as number | null),
    runAfter: unit('run_after', parseTime, null as Date | null),
    instanceTypes,
    priority: int('priority', 0, 1000, REQUEST_DEFAULTS.priority),
    containerCountMax: int('container_count_max', 1, 100, REQUEST_DEFAULTS.containerCountMax),
    maxTempRetries: int('max_temp_retries', 0, 1000, REQUEST_DEFAULTS.maxTempRetries),
    retryOnFailure: bool('retry_on_failure', REQUEST_DEFAULTS.retryOnFailure),
    labels: labels.labels,
  };
  if (spec.ram === 0) problems.push({ field: f('ram'), problem: 'expected a size above 0' });
  if (spec.maxRunTimeMs === 0)
    problems.push({ field: f('max_run_time'), problem: 'expected a duration above 0' });
  if (problems.length > 0) throw new ValidationError(problems);
  return spec;
}
