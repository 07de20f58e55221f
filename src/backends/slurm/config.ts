// The slurm backend's configuration file (`berth dispatch --backend slurm --config FILE`, or a file with
// "backend": "slurm"), declared with the mechanism of every option (src/config/declare.ts): each key once
// with its kind, default and meaning (docs/CONFIG.md shows the table); an error names the key, the file
// and what was expected.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultBerthBin } from '../../cloud/local/driver.js';
import { at, ConfigError, convert, listOf, opt, reuse, section, type Infer } from '../../config/declare.js';
import {
  bool,
  describe,
  duration,
  Expected,
  int,
  nullable,
  oneOf,
  size,
  text,
  url,
  type Kind,
} from '../../config/kinds.js';
import { DISPATCHER_TIMERS } from '../../dispatch/config.js';

export const AGENT_RUNTIMES = ['auto', 'docker', 'podman', 'runc', 'process'] as const;

const STANDARD_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const NAME = text('lower-case letters, digits and - (at most 32)', /^[a-z0-9][a-z0-9-]{0,31}$/, '<name>');
/** Characters SLURM and a shell script take as they are in names (partitions, accounts, features). */
const SLURM_WORD = /^[A-Za-z0-9_.:+-]{1,128}$/;

/** An object whose keys match `keyRe` and whose values are all of one kind. */
function mapWithKeys<T>(keyRe: RegExp, keyWhat: string, kind: Kind<T>): Kind<Record<string, T>> {
  return {
    type: `object of ${keyWhat} → ${kind.type}`,
    placeholder: '<json>',
    parse(v, path, ctx) {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Expected('an object');
      const out: Record<string, T> = {};
      for (const [k, x] of Object.entries(v)) {
        if (!keyRe.test(k)) throw new ConfigError(at(path, k), `expected ${keyWhat} as the key`);
        out[k] = convert(kind, x, at(path, k), ctx);
      }
      return out;
    },
  };
}

/** A list of `kind` with at least one item. */
function nonEmpty<T>(list: Kind<T[]>, what: string): Kind<T[]> {
  return {
    ...list,
    parse(v, path, ctx) {
      if (Array.isArray(v) && v.length === 0) throw new Expected(what);
      return list.parse(v, path, ctx);
    },
  };
}

/** An environment variable's value: any text without NUL or newline (empty allowed). */
const envValue: Kind<string> = {
  type: 'string',
  placeholder: '<text>',
  parse(v) {
    if (typeof v !== 'string' || /[\0\n]/.test(v)) throw new Expected('a string without NUL or newline');
    return v;
  },
};

/**
 * The reuse_allocation keys: a job SLURM has started asks, after its container, for the next container of
 * this dispatcher that fits what the job was given (docs/SLURM.md, "One allocation, several containers").
 */
export const REUSE_OPTIONS = section([
  opt({
    key: 'enabled',
    kind: bool,
    default: true,
    help: 'Whether a job that ran its container takes the next one that fits it (instead of ending).',
  }),
  opt({
    key: 'max_containers',
    field: 'maxContainers',
    kind: int(1),
    default: 100,
    help: 'Most containers one job runs (its own included); 1 is the same as `enabled: false`.',
  }),
  opt({
    key: 'max_time',
    field: 'maxTimeMs',
    kind: duration({ above0: true }),
    default: '1h',
    help:
      'A job takes no further container once it has run this long, so that it gives its CPUs back to ' +
      "SLURM's scheduling (and other users) at least this often.",
  }),
]);

export type ReuseConfig = Infer<(typeof REUSE_OPTIONS.options)[number]>;

/** Every key of the slurm backend's config, with its default and meaning. */
export const SLURM_OPTIONS = section([
  opt({
    key: 'backend',
    kind: oneOf(['slurm'] as const),
    default: 'slurm',
    defaultText: '`"cloud"` (the cloud config)',
    help: 'Must be `"slurm"` for this backend (or pass `--backend slurm`).',
  }),
  opt({
    key: 'cluster',
    kind: NAME,
    default: 'slurm',
    help: "Berth's name for this cluster: nodes are recorded under it; the dispatcher is `cluster/tag`.",
  }),
  opt({
    key: 'tag',
    kind: NAME,
    default: 'default',
    help: 'Dispatcher tag: one live dispatcher per cluster/tag; its jobs carry `--comment=berth:CLUSTER/TAG`.',
  }),
  opt({
    key: 'partition',
    kind: nullable(text('a partition name (or a comma-separated list)', /^[A-Za-z0-9_.,-]{1,256}$/)),
    default: null,
    defaultText: "SLURM's default",
    help: '`--partition` of every job (a comma-separated list is allowed).',
  }),
  opt({
    key: 'account',
    kind: nullable(text('an account name', SLURM_WORD)),
    default: null,
    help: '`--account` of every job.',
  }),
  opt({
    key: 'sbatch_args',
    field: 'sbatchArgs',
    kind: listOf(text('an sbatch option starting with - or --', /^--?[A-Za-z]/)),
    default: [],
    help: 'Extra sbatch options for every job, e.g. `["--qos=berth", "--exclude=login1"]`.',
  }),
  opt({
    key: 'ram_overhead',
    field: 'ramOverhead',
    kind: size,
    default: '256MiB',
    help: "Added to a container's ram for `--mem`: the one-shot agent and the runtime run in the job too.",
  }),
  opt({
    key: 'features',
    kind: mapWithKeys(/^[A-Za-z0-9_.:-]{1,64}$/, 'an instance type name', text('a feature name', SLURM_WORD)),
    default: {},
    help:
      'Instance type name → SLURM node feature. A container that names instance types runs with ' +
      '`--constraint=F1|F2…`; one naming a type not listed here is cancelled (perm).',
  }),
  opt({
    key: 'time_margin',
    field: 'timeMarginMs',
    kind: duration(),
    default: '5m',
    help:
      "Added to a container's max_run_time for `--time`, so that Berth's own limit (which reports the " +
      'exit) fires before SLURM kills the job.',
  }),
  opt({
    key: 'api_url',
    field: 'apiUrl',
    kind: nullable(url(['http', 'https'], 'http://berth.example:8470')),
    default: null,
    defaultText: 'the process option `api_url`',
    help: 'The API URL the one-shot agents on the compute nodes use.',
  }),
  opt({
    key: 'agent_command',
    field: 'agentCommand',
    kind: nonEmpty(listOf(text('a non-empty string', /^\S/)), 'a non-empty list of strings'),
    default: () => [process.execPath, defaultBerthBin()],
    defaultText: "this node binary and this package's `bin/berth.js`",
    help:
      'How a compute node runs `berth`, e.g. `["/usr/bin/node", "/opt/berth/bin/berth.js"]` (absolute ' +
      'paths: jobs start with an empty environment).',
  }),
  opt({
    key: 'agent_runtime',
    field: 'agentRuntime',
    kind: oneOf(AGENT_RUNTIMES),
    default: 'auto',
    help: "The one-shot agent's runtime.",
  }),
  opt({
    key: 'agent_kill_grace',
    field: 'agentKillGraceMs',
    kind: duration(),
    default: '10s',
    help: "SIGTERM → SIGKILL grace for a container being stopped; keep it 11 s below SLURM's KillWait (30 s by default; docs/SLURM.md).",
  }),
  opt({
    key: 'agent_ping_wait',
    field: 'agentPingWaitMs',
    kind: duration({ above0: true, max: '60s' }),
    default: '10s',
    help: "The one-shot agent's long poll.",
  }),
  opt({
    key: 'agent_env',
    field: 'agentEnv',
    kind: mapWithKeys(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name', envValue),
    default: { PATH: STANDARD_PATH },
    defaultText: '`{"PATH": "/usr/local/sbin:…:/bin"}`',
    help: "The job's environment besides SLURM's variables (sbatch runs with only these: the dispatcher's own environment never reaches a job).",
  }),
  opt({
    key: 'work_dir',
    field: 'workDir',
    kind: text('an absolute path', /^\/[^\0\n']*$/, '<path>'),
    default: '/tmp/berth-slurm',
    help: "Where the one-shot agent keeps a container's files on the compute node (one dir per container, removed after).",
  }),
  opt({
    key: 'job_output',
    field: 'jobOutput',
    kind: text('an absolute path (SLURM filename patterns allowed)', /^\/[^\0\n]*$/, '<path>'),
    default: '/dev/null',
    help: "sbatch `--output` for the agent's own lines (container logs go to Berth), e.g. `/var/log/berth/%j.out`.",
  }),
  opt({
    key: 'max_jobs',
    field: 'maxJobs',
    kind: int(1),
    default: 10_000,
    help: "Most SLURM jobs of this dispatcher at once (pending and running); keep it under the site's MaxSubmitJobs.",
  }),
  opt({
    key: 'reuse_allocation',
    field: 'reuseAllocation',
    kind: REUSE_OPTIONS,
    default: {},
    help: 'One allocation, several containers: the keys below.',
  }),
  opt({
    key: 'nice_spread',
    field: 'niceSpread',
    kind: int(1),
    default: 100,
    help: 'Room left between priority bands when jobs are reniced: more means fewer `scontrol update` calls.',
  }),
  opt({
    key: 'lower_nice',
    field: 'lowerNice',
    kind: bool,
    default: () => process.getuid?.() === 0,
    defaultText: 'true when running as root',
    help:
      'Whether the dispatcher may lower a nice value (SLURM allows that to operators and admins only); ' +
      'without it nice values only grow.',
  }),
  opt({
    key: 'submit_concurrency',
    field: 'submitConcurrency',
    kind: int(1),
    default: 4,
    help: 'sbatch processes at once.',
  }),
  opt({
    key: 'tick_interval',
    field: 'tickIntervalMs',
    kind: duration(),
    default: '1s',
    help: 'A pass (squeue, reconcile, submit) at least this often, besides the queue notifications.',
  }),
  reuse(DISPATCHER_TIMERS.option('node_lost_after'), {
    help: 'A running container whose agent has not pinged for this long is cancelled (temp) and its job cancelled.',
  }),
  reuse(DISPATCHER_TIMERS.option('dispatcher_lost_after'), {
    help: 'Another dispatcher of the cluster silent this long loses its unsubmitted locks.',
  }),
  opt({
    key: 'submit_grace',
    field: 'submitGraceMs',
    kind: duration(),
    default: '30s',
    help: 'After a restart, a Locked container with no SLURM job is unlocked after this long (an sbatch of the previous process may still be landing).',
  }),
  opt({
    key: 'orphan_grace',
    field: 'orphanGraceMs',
    kind: duration(),
    default: '60s',
    help: 'A running job whose container has ended (its agent stops it) is cancelled after this long.',
  }),
  opt({
    key: 'command_timeout',
    field: 'commandTimeoutMs',
    kind: duration({ above0: true }),
    default: '30s',
    help: 'Time limit of one sbatch, squeue, scancel or scontrol call.',
  }),
  opt({
    key: 'slurm_bin',
    field: 'slurmBin',
    kind: nullable(text('an absolute path', /^\/\S*$/, '<path>')),
    default: null,
    defaultText: 'the PATH',
    help: 'Directory of sbatch, squeue, scancel and scontrol.',
  }),
]).documented('SLURM backend config file');

/** The validated configuration of one slurm dispatcher. */
export type SlurmConfig = Infer<(typeof SLURM_OPTIONS.options)[number]>;

/** Parses a slurm backend config object; keys left out take their defaults. */
export function parseSlurmConfig(value: unknown): SlurmConfig {
  return SLURM_OPTIONS.parse(value);
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

/** Reads and parses a config file (none: every default); `overrides` (e.g. from flags) win over the file. */
export function loadSlurmConfig(path: string | null, overrides: Record<string, unknown> = {}): SlurmConfig {
  let value: unknown = {};
  if (path) {
    try {
      value = JSON.parse(readFileSync(path, 'utf8'));
    } catch (err) {
      throw new ConfigError('', `cannot read a JSON slurm config: ${(err as Error).message}`, { file: path });
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      throw new ConfigError('', `expected a JSON object, got ${describe(value)}`, { file: path });
  }
  try {
    return parseSlurmConfig({ ...(value as object), ...overrides });
  } catch (err) {
    if (err instanceof ConfigError && path) throw err.from({ file: path });
    throw err;
  }
}

/** The path of a SLURM command (in slurm_bin, else found on the PATH). */
export function slurmCommand(cfg: Pick<SlurmConfig, 'slurmBin'>, name: string): string {
  return cfg.slurmBin ? join(cfg.slurmBin, name) : name;
}
