// Submitting a container to SLURM: its sbatch options, the batch script that runs it through the
// one-shot agent, and what an sbatch failure means. Pure.
import type { SlurmConfig } from './config.js';

const MIB = 1024 ** 2;

/** What sbatchArgs needs of a container. */
export interface SubmitSpec {
  id: string;
  vcpus: number;
  ram: number;
  scratch: number;
  gpus: number;
  instanceTypes: string[] | null;
  maxRunTimeMs: number | null;
}

export type SbatchConfig = Pick<
  SlurmConfig,
  'partition' | 'account' | 'sbatchArgs' | 'ramOverhead' | 'features' | 'timeMarginMs' | 'jobOutput'
>;

/** SLURM's nice range; negative values need operator rights and are never asked for. */
export const NICE_MAX = 2_147_483_645;

/**
 * What a job asks SLURM for (its resource options), as recorded on its node record: an allocation another
 * container may reuse when it asks for no more than this (the store's move transition compares two of them).
 * Null fields are options the job does not pass.
 */
export interface Allocation {
  cpus: number;
  mem_mib: number;
  tmp_mib: number;
  gpus: number;
  /** `--time` in minutes; null: none (the partition's default limit). */
  time_min: number | null;
  /** The container's own max_run_time (ms; null: none), which time_margin separates from `--time`. */
  run_ms: number | null;
  partition: string | null;
  account: string | null;
  constraint: string | null;
}

/**
 * A container's allocation: CPUs rounded up, ram + ram_overhead, scratch, GPUs, max_run_time + time_margin,
 * partition, account, and its instance types mapped to node features. An instance type without a feature
 * mapping is refused with a reason.
 */
export function allocationOf(
  c: SubmitSpec,
  cfg: SbatchConfig,
): { ok: true; allocation: Allocation } | { ok: false; reason: string } {
  let constraint: string | null = null;
  if (c.instanceTypes && c.instanceTypes.length > 0) {
    const missing = c.instanceTypes.filter((t) => cfg.features[t] === undefined);
    if (missing.length > 0) {
      const known = Object.keys(cfg.features);
      return {
        ok: false,
        reason:
          `instance_types: ${missing.join(', ')} ${missing.length === 1 ? 'has' : 'have'} no SLURM node feature ` +
          `in this cluster's "features" (${known.length ? `known: ${known.join(', ')}` : 'none configured'})`,
      };
    }
    constraint = [...new Set(c.instanceTypes.map((t) => cfg.features[t]!))].join('|');
  }
  return {
    ok: true,
    allocation: {
      cpus: Math.max(1, Math.ceil(c.vcpus)),
      mem_mib: Math.ceil((c.ram + cfg.ramOverhead) / MIB),
      tmp_mib: Math.ceil(c.scratch / MIB),
      gpus: c.gpus,
      time_min:
        c.maxRunTimeMs === null ? null : Math.max(1, Math.ceil((c.maxRunTimeMs + cfg.timeMarginMs) / 60_000)),
      run_ms: c.maxRunTimeMs,
      partition: cfg.partition,
      account: cfg.account,
      constraint,
    },
  };
}

/**
 * sbatch's options for a container: job name = container id, the dispatcher's marker as the comment, no
 * requeue (Berth retries), its allocation (allocationOf), then the site's extra options. The job's
 * environment is sbatch's own (submitEnvironment), not the dispatcher's.
 */
export function sbatchArgs(
  c: SubmitSpec,
  cfg: SbatchConfig,
  o: { nice: number; marker: string },
): { ok: true; args: string[]; allocation: Allocation } | { ok: false; reason: string } {
  const r = allocationOf(c, cfg);
  if (!r.ok) return r;
  const a = r.allocation;
  const args = [
    '--parsable',
    `--job-name=${c.id}`,
    `--comment=${o.marker}`,
    '--no-requeue',
    `--nice=${Math.min(NICE_MAX, Math.max(0, Math.round(o.nice)))}`,
    '--nodes=1',
    '--ntasks=1',
    `--cpus-per-task=${a.cpus}`,
    `--mem=${a.mem_mib}M`,
  ];
  if (a.tmp_mib > 0) args.push(`--tmp=${a.tmp_mib}M`);
  if (a.gpus > 0) args.push(`--gres=gpu:${a.gpus}`);
  if (a.time_min !== null) args.push(`--time=${a.time_min}`);
  if (a.partition) args.push(`--partition=${a.partition}`);
  if (a.account) args.push(`--account=${a.account}`);
  if (a.constraint !== null) args.push(`--constraint=${a.constraint}`);
  args.push(`--output=${cfg.jobOutput}`, '--chdir=/tmp', ...cfg.sbatchArgs);
  return { ok: true, args, allocation: a };
}

/** A word for a POSIX shell, single-quoted. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

const SECRET_EOF = 'BERTH_BOOTSTRAP_SECRET';

/**
 * The batch script (sent to sbatch on its stdin, never written to a file here): it execs the one-shot agent
 * for the container. The node's one-time bootstrap secret reaches the agent on its stdin through a
 * here-document, so it is never in a command line or an environment (both visible to other users of the
 * node); SLURM keeps a job's script readable only by its owner and SLURM's administrators, and the secret
 * is void once the agent registered.
 */
export function batchScript(o: {
  containerId: string;
  nodeId: string;
  secret: string;
  apiUrl: string;
  cfg: Pick<
    SlurmConfig,
    'agentCommand' | 'agentRuntime' | 'agentKillGraceMs' | 'agentPingWaitMs' | 'workDir'
  >;
  marker: string;
}): string {
  if (!/^[A-Za-z0-9_-]+$/.test(o.secret)) throw new Error('bootstrap secret: unexpected characters');
  const { cfg } = o;
  const argv = [
    ...cfg.agentCommand,
    'agent',
    '--once',
    o.containerId,
    '--api-url',
    o.apiUrl,
    '--node-id',
    o.nodeId,
    '--work-dir',
    `${cfg.workDir.replace(/\/+$/, '')}/${o.containerId}`,
    '--runtime',
    cfg.agentRuntime,
    '--kill-grace',
    `${Math.round(cfg.agentKillGraceMs)}ms`,
    '--ping-wait',
    `${Math.round(cfg.agentPingWaitMs)}ms`,
    '--bootstrap-secret-file',
    '-',
  ];
  return [
    '#!/bin/sh',
    `# Berth container ${o.containerId} (${o.marker}): runs it through the one-shot agent.`,
    `exec ${argv.map(shellQuote).join(' ')} <<'${SECRET_EOF}'`,
    o.secret,
    SECRET_EOF,
    '',
  ].join('\n');
}

/**
 * The environment sbatch runs with, which is also the job's (sbatch's default --export=ALL): SLURM's own
 * variables (SLURM_CONF and the like) and agent_env, nothing else of the dispatcher's (its database URL,
 * tokens). `--export=NONE` would do the same but makes slurmd build a login environment for every job
 * (`su - USER`), which is slow and runs the user's profile.
 */
export function submitEnvironment(
  dispatcherEnv: NodeJS.ProcessEnv,
  agentEnv: Record<string, string>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(dispatcherEnv))
    if (v !== undefined && (k.startsWith('SLURM_') || k.startsWith('SBATCH_'))) out[k] = v;
  return { ...out, ...agentEnv };
}

/** What an sbatch failure means for the container. */
export type SbatchFailure =
  /** SLURM can never run it as asked: the container is cancelled (perm) with SLURM's words. */
  | { kind: 'perm'; message: string }
  /** SLURM (or the machine) may take it later: the container stays Locked and is submitted again. */
  | { kind: 'temp'; message: string };

/** SLURM's answers that mean no node of the partition can ever run the request. */
const PERM = [
  /Requested node configuration is not available/i,
  /can not be satisfied/i,
  /Invalid feature specification/i,
  /Invalid generic resource/i,
  /Invalid partition name/i,
  /Invalid account/i,
  /Invalid qos/i,
  /Requested time limit is invalid/i,
  /Node count specification invalid/i,
  /Requested partition configuration not available/i,
];

/** Classifies an sbatch failure by SLURM's message (SLURM gives no machine-readable code). */
export function classifySbatchError(stderr: string): SbatchFailure {
  const lines = stderr
    .split('\n')
    .map((l) => l.replace(/^sbatch: (error: )?/, '').trim())
    .filter((l) => l !== '');
  const message = lines.join('; ').slice(0, 2000) || 'sbatch failed without a message';
  return PERM.some((re) => re.test(stderr)) ? { kind: 'perm', message } : { kind: 'temp', message };
}

/** The job id in `sbatch --parsable` output ("123" or "123;cluster"). */
export function parseJobId(stdout: string): string | null {
  const m = /^(\d+)(;\S+)?\s*$/.exec(stdout.trim());
  return m ? m[1]! : null;
}
