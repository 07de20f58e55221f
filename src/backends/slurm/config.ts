// The slurm backend's configuration file (`berth dispatch --backend slurm --config FILE`, or a file with
// "backend": "slurm"): every key declared once below with its default and meaning (docs/SLURM.md shows
// the table), validated with an error that names the key and what was expected.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultBerthBin } from '../../cloud/local/driver.js';
import { parseDuration, parseSize, UnitError } from '../../model/units.js';

export const AGENT_RUNTIMES = ['auto', 'docker', 'podman', 'runc', 'process'] as const;

/** The validated configuration of one slurm dispatcher. */
export interface SlurmConfig {
  backend: 'slurm';
  cluster: string;
  tag: string;
  partition: string | null;
  account: string | null;
  sbatchArgs: string[];
  ramOverhead: number;
  features: Record<string, string>;
  timeMarginMs: number;
  apiUrl: string | null;
  agentCommand: string[];
  agentRuntime: (typeof AGENT_RUNTIMES)[number];
  agentKillGraceMs: number;
  agentPingWaitMs: number;
  agentEnv: Record<string, string>;
  workDir: string;
  jobOutput: string;
  maxJobs: number;
  niceSpread: number;
  lowerNice: boolean;
  submitConcurrency: number;
  tickIntervalMs: number;
  nodeLostAfterMs: number;
  dispatcherLostAfterMs: number;
  submitGraceMs: number;
  orphanGraceMs: number;
  commandTimeoutMs: number;
  slurmBin: string | null;
}

export class SlurmConfigError extends Error {}

const STANDARD_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const NAME = /^[a-z0-9][a-z0-9-]{0,31}$/;
/** Characters SLURM and a shell script take as they are in names (partitions, accounts, features). */
const SLURM_WORD = /^[A-Za-z0-9_.:+-]{1,128}$/;

type Parse<T> = (v: unknown, fail: (expected: string) => never) => T;

interface Key<F extends keyof SlurmConfig = keyof SlurmConfig> {
  key: string;
  field: F;
  /** The default as the docs show it. */
  shown: string;
  help: string;
  dflt: () => unknown;
  parse: Parse<SlurmConfig[F]>;
}

const str =
  (re: RegExp, what: string): Parse<string> =>
  (v, fail) =>
    typeof v === 'string' && re.test(v) ? v : fail(what);
const orNull =
  <T>(p: Parse<T>): Parse<T | null> =>
  (v, fail) =>
    v === null ? null : p(v, fail);
const duration: Parse<number> = (v, fail) => {
  try {
    return parseDuration(v);
  } catch (err) {
    return fail(err instanceof UnitError ? err.expected : String(err));
  }
};
const wholeAtLeast =
  (min: number): Parse<number> =>
  (v, fail) =>
    typeof v === 'number' && Number.isInteger(v) && v >= min ? v : fail(`a whole number ≥ ${min}`);
const stringList =
  (re: RegExp, what: string): Parse<string[]> =>
  (v, fail) =>
    Array.isArray(v) && v.every((x) => typeof x === 'string' && re.test(x))
      ? [...(v as string[])]
      : fail(what);
const stringMap =
  (keyRe: RegExp, valueRe: RegExp, what: string): Parse<Record<string, string>> =>
  (v, fail) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail(what);
    const out: Record<string, string> = {};
    for (const [k, x] of Object.entries(v)) {
      if (!keyRe.test(k) || typeof x !== 'string' || !valueRe.test(x))
        return fail(`${what} (bad entry "${k}")`);
      out[k] = x;
    }
    return out;
  };

const key = <F extends keyof SlurmConfig>(k: Key<F>): Key => k as unknown as Key;

/** Every key of the slurm backend's config, with its default and meaning. */
export const SLURM_KEYS: Key[] = [
  key({
    key: 'backend',
    field: 'backend',
    shown: '`"cloud"`',
    help: 'Must be `"slurm"` for this backend (or pass `--backend slurm`).',
    dflt: () => 'slurm',
    parse: (v, fail) => (v === 'slurm' ? 'slurm' : fail('"slurm"')),
  }),
  key({
    key: 'cluster',
    field: 'cluster',
    shown: '`slurm`',
    help: "Berth's name for this cluster: nodes are recorded under it; the dispatcher is `cluster/tag`.",
    dflt: () => 'slurm',
    parse: str(NAME, 'lower-case letters, digits and - (at most 32)'),
  }),
  key({
    key: 'tag',
    field: 'tag',
    shown: '`default`',
    help: 'Dispatcher tag: one live dispatcher per cluster/tag; its jobs carry `--comment=berth:CLUSTER/TAG`.',
    dflt: () => 'default',
    parse: str(NAME, 'lower-case letters, digits and - (at most 32)'),
  }),
  key({
    key: 'partition',
    field: 'partition',
    shown: "SLURM's default",
    help: '`--partition` of every job (a comma-separated list is allowed).',
    dflt: () => null,
    parse: orNull(str(/^[A-Za-z0-9_.,-]{1,256}$/, 'a partition name (or a comma-separated list)')),
  }),
  key({
    key: 'account',
    field: 'account',
    shown: 'none',
    help: '`--account` of every job.',
    dflt: () => null,
    parse: orNull(str(SLURM_WORD, 'an account name')),
  }),
  key({
    key: 'sbatch_args',
    field: 'sbatchArgs',
    shown: '`[]`',
    help: 'Extra sbatch options for every job, e.g. `["--qos=berth", "--exclude=login1"]`.',
    dflt: () => [],
    parse: stringList(/^--?[A-Za-z]/, 'a list of sbatch options, each starting with - or --'),
  }),
  key({
    key: 'ram_overhead',
    field: 'ramOverhead',
    shown: '`256MiB`',
    help: "Added to a container's ram for `--mem`: the one-shot agent and the runtime run in the job too.",
    dflt: () => 256 * 1024 ** 2,
    parse: (v, fail) => {
      try {
        return parseSize(v);
      } catch (err) {
        return fail(err instanceof UnitError ? err.expected : String(err));
      }
    },
  }),
  key({
    key: 'features',
    field: 'features',
    shown: '`{}`',
    help:
      'Instance type name → SLURM node feature. A container that names instance types runs with ' +
      '`--constraint=F1|F2…`; one naming a type not listed here is cancelled (perm).',
    dflt: () => ({}),
    parse: stringMap(/^[A-Za-z0-9_.:-]{1,64}$/, SLURM_WORD, 'an object of instance type → feature name'),
  }),
  key({
    key: 'time_margin',
    field: 'timeMarginMs',
    shown: '`5m`',
    help:
      "Added to a container's max_run_time for `--time`, so that Berth's own limit (which reports the " +
      'exit) fires before SLURM kills the job.',
    dflt: () => 300_000,
    parse: duration,
  }),
  key({
    key: 'api_url',
    field: 'apiUrl',
    shown: 'the global `api_url`',
    help: 'The API URL the one-shot agents on the compute nodes use.',
    dflt: () => null,
    parse: orNull(str(/^https?:\/\/\S+$/, 'an http(s) URL')),
  }),
  key({
    key: 'agent_command',
    field: 'agentCommand',
    shown: "this node binary and this package's `bin/berth.js`",
    help: 'How a compute node runs `berth` (absolute paths: jobs start with an empty environment).',
    dflt: () => [process.execPath, defaultBerthBin()],
    parse: (v, fail) =>
      stringList(/^\S/, 'a non-empty list of strings, e.g. ["/usr/bin/node", "/opt/berth/bin/berth.js"]')(
        v,
        fail,
      ).length > 0
        ? (v as string[])
        : fail('a non-empty list of strings'),
  }),
  key({
    key: 'agent_runtime',
    field: 'agentRuntime',
    shown: '`auto`',
    help: `The one-shot agent's runtime: ${AGENT_RUNTIMES.join(', ')}.`,
    dflt: () => 'auto',
    parse: (v, fail) =>
      (AGENT_RUNTIMES as readonly unknown[]).includes(v)
        ? (v as SlurmConfig['agentRuntime'])
        : fail(`one of ${AGENT_RUNTIMES.join(', ')}`),
  }),
  key({
    key: 'agent_kill_grace',
    field: 'agentKillGraceMs',
    shown: '`10s`',
    help: "SIGTERM → SIGKILL grace for a container being stopped; keep it below SLURM's KillWait (30 s).",
    dflt: () => 10_000,
    parse: duration,
  }),
  key({
    key: 'agent_ping_wait',
    field: 'agentPingWaitMs',
    shown: '`10s`',
    help: "The one-shot agent's long poll (at most 60s).",
    dflt: () => 10_000,
    parse: (v, fail) => {
      const ms = duration(v, fail);
      return ms <= 60_000 ? ms : fail('a duration of at most 60s');
    },
  }),
  key({
    key: 'agent_env',
    field: 'agentEnv',
    shown: '`{"PATH": "/usr/local/sbin:…:/bin"}`',
    help: "The job's environment besides SLURM's variables (sbatch runs with only these: the dispatcher's own environment never reaches a job).",
    dflt: () => ({ PATH: STANDARD_PATH }),
    parse: stringMap(/^[A-Za-z_][A-Za-z0-9_]*$/, /^[^\0\n]*$/, 'an object of NAME → value'),
  }),
  key({
    key: 'work_dir',
    field: 'workDir',
    shown: '`/tmp/berth-slurm`',
    help: "Where the one-shot agent keeps a container's files on the compute node (one dir per container, removed after).",
    dflt: () => '/tmp/berth-slurm',
    parse: str(/^\/[^\0\n']*$/, 'an absolute path'),
  }),
  key({
    key: 'job_output',
    field: 'jobOutput',
    shown: '`/dev/null`',
    help: "sbatch `--output` for the agent's own lines (container logs go to Berth), e.g. `/var/log/berth/%j.out`.",
    dflt: () => '/dev/null',
    parse: str(/^\/[^\0\n]*$/, 'an absolute path (SLURM filename patterns allowed)'),
  }),
  key({
    key: 'max_jobs',
    field: 'maxJobs',
    shown: '`10000`',
    help: "Most SLURM jobs of this dispatcher at once (pending and running); keep it under the site's MaxSubmitJobs.",
    dflt: () => 10_000,
    parse: wholeAtLeast(1),
  }),
  key({
    key: 'nice_spread',
    field: 'niceSpread',
    shown: '`100`',
    help: 'Room left between priority bands when jobs are reniced: more means fewer `scontrol update` calls.',
    dflt: () => 100,
    parse: wholeAtLeast(1),
  }),
  key({
    key: 'lower_nice',
    field: 'lowerNice',
    shown: 'true when running as root',
    help:
      'Whether the dispatcher may lower a nice value (SLURM allows that to operators and admins only); ' +
      'without it nice values only grow.',
    dflt: () => process.getuid?.() === 0,
    parse: (v, fail) => (typeof v === 'boolean' ? v : fail('true or false')),
  }),
  key({
    key: 'submit_concurrency',
    field: 'submitConcurrency',
    shown: '`4`',
    help: 'sbatch processes at once.',
    dflt: () => 4,
    parse: wholeAtLeast(1),
  }),
  key({
    key: 'tick_interval',
    field: 'tickIntervalMs',
    shown: '`1s`',
    help: 'A pass (squeue, reconcile, submit) at least this often, besides the queue notifications.',
    dflt: () => 1000,
    parse: duration,
  }),
  key({
    key: 'node_lost_after',
    field: 'nodeLostAfterMs',
    shown: '`60s`',
    help: 'A running container whose agent has not pinged for this long is cancelled (temp) and its job cancelled.',
    dflt: () => 60_000,
    parse: duration,
  }),
  key({
    key: 'dispatcher_lost_after',
    field: 'dispatcherLostAfterMs',
    shown: '`60s`',
    help: 'Another dispatcher of the cluster silent this long loses its unsubmitted locks.',
    dflt: () => 60_000,
    parse: duration,
  }),
  key({
    key: 'submit_grace',
    field: 'submitGraceMs',
    shown: '`30s`',
    help: 'After a restart, a Locked container with no SLURM job is unlocked after this long (an sbatch of the previous process may still be landing).',
    dflt: () => 30_000,
    parse: duration,
  }),
  key({
    key: 'orphan_grace',
    field: 'orphanGraceMs',
    shown: '`60s`',
    help: 'A running job whose container has ended (its agent stops it) is cancelled after this long.',
    dflt: () => 60_000,
    parse: duration,
  }),
  key({
    key: 'command_timeout',
    field: 'commandTimeoutMs',
    shown: '`30s`',
    help: 'Time limit of one sbatch, squeue, scancel or scontrol call.',
    dflt: () => 30_000,
    parse: duration,
  }),
  key({
    key: 'slurm_bin',
    field: 'slurmBin',
    shown: 'the PATH',
    help: 'Directory of sbatch, squeue, scancel and scontrol.',
    dflt: () => null,
    parse: orNull(str(/^\/\S*$/, 'an absolute path')),
  }),
];

/** Parses a slurm backend config object; keys left out take their defaults. */
export function parseSlurmConfig(value: unknown, source = 'slurm config'): SlurmConfig {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new SlurmConfigError(`${source}: expected a JSON object`);
  const o = value as Record<string, unknown>;
  const byKey = new Map(SLURM_KEYS.map((k) => [k.key, k]));
  for (const k of Object.keys(o))
    if (!byKey.has(k))
      throw new SlurmConfigError(
        `${source}: ${k}: unknown key for the slurm backend (known: ${[...byKey.keys()].join(', ')})`,
      );
  const out: Record<string, unknown> = {};
  for (const k of SLURM_KEYS) {
    const fail = (expected: string): never => {
      throw new SlurmConfigError(
        `${source}: ${k.key}: expected ${expected}, got ${JSON.stringify(o[k.key])}`,
      );
    };
    out[k.field] = o[k.key] === undefined ? k.dflt() : k.parse(o[k.key], fail);
  }
  return out as unknown as SlurmConfig;
}

/** The backend a dispatch config file asks for ("backend" key; cloud when absent or unreadable here). */
export function configuredBackend(path: string | null): string {
  if (!path) return 'cloud';
  try {
    const v = JSON.parse(readFileSync(path, 'utf8')) as { backend?: unknown };
    return typeof v.backend === 'string' ? v.backend : 'cloud';
  } catch {
    return 'cloud'; // the cloud config loader reports the file's problem
  }
}

/** Reads and parses a config file; `overrides` (e.g. from flags) win over the file. */
export function loadSlurmConfig(path: string | null, overrides: Record<string, unknown> = {}): SlurmConfig {
  let value: Record<string, unknown> = {};
  if (path) {
    try {
      value = JSON.parse(readFileSync(path, 'utf8'));
    } catch (err) {
      throw new SlurmConfigError(`${path}: ${(err as Error).message}`);
    }
  }
  return parseSlurmConfig({ ...value, ...overrides }, path ?? 'slurm config');
}

/** The path of a SLURM command (in slurm_bin, else found on the PATH). */
export function slurmCommand(cfg: Pick<SlurmConfig, 'slurmBin'>, name: string): string {
  return cfg.slurmBin ? join(cfg.slurmBin, name) : name;
}

/** The config keys as a Markdown table (docs/SLURM.md). */
export function slurmKeysMarkdown(): string {
  return [
    '| key | default | meaning |',
    '|---|---|---|',
    ...SLURM_KEYS.map((k) => `| \`${k.key}\` | ${k.shown} | ${k.help} |`),
  ].join('\n');
}
