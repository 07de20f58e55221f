// `berth submit [options] -- CMD ARGS...`: submit a container request; --wait streams the output of every
// attempt and exits with the last one's exit code.
import type { Command } from 'commander';
import { parseLabelFlag } from '../../model/labels.js';
import { oomWarning } from '../../model/exit.js';
import type { ContainerRecord, RequestRecord } from '../../store/records.js';
import { clientFor, type Client } from '../client.js';
import { UsageError } from '../errors.js';
import { printableLines } from '../format.js';
import { parseWhen } from '../when.js';
import { followRequest } from './logs.js';

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

export function intFlag(name: string) {
  return (v: string) => {
    if (!/^-?\d+$/.test(v))
      throw new UsageError(`${name}: expected a whole number, got ${JSON.stringify(v)}`);
    return Number(v);
  };
}

interface SubmitOpts {
  cpus?: string;
  ram?: string;
  scratch?: string;
  gpus?: number;
  image?: string;
  priority?: number;
  preemptible?: boolean;
  opportunistic?: boolean;
  ramRetryFactor?: string;
  maxAttempts?: number;
  maxRunTime?: string;
  runAfter?: string;
  chdir?: string;
  env: string[];
  secretEnv: string[];
  instanceType: string[];
  label?: string[];
  name?: string;
  wait?: boolean;
  json?: boolean;
}

/** NAME=VALUE pairs of a repeatable flag; for --secret-env, a bare NAME takes its value from this environment. */
function pairs(flag: string, items: string[], fromEnv: boolean): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of items) {
    const i = kv.indexOf('=');
    if (i < 0 && fromEnv) {
      const v = process.env[kv];
      if (v === undefined)
        throw new UsageError(
          `${flag}: ${kv} is not set in this environment (give ${kv}=VALUE, or export it)`,
        );
      out[kv] = v;
    } else if (i <= 0) {
      throw new UsageError(
        `${flag}: expected NAME=VALUE${fromEnv ? ' or NAME' : ''}, got ${JSON.stringify(kv)}`,
      );
    } else out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}

export function buildRequestBody(
  opts: SubmitOpts,
  argv: string[],
  now = new Date(),
): Record<string, unknown> {
  if (argv.length === 0)
    throw new UsageError('no command: give it after --, e.g. berth submit --cpus 2 -- echo hi');
  const env = pairs('--env', opts.env, false);
  const secretEnv = pairs('--secret-env', opts.secretEnv ?? [], true);
  const body: Record<string, unknown> = { command: argv };
  if (opts.cpus !== undefined) body.vcpus = /^\d+(\.\d+)?$/.test(opts.cpus) ? Number(opts.cpus) : opts.cpus;
  if (opts.ram !== undefined) body.ram = /^\d+$/.test(opts.ram) ? Number(opts.ram) : opts.ram;
  if (opts.scratch !== undefined)
    body.scratch = /^\d+$/.test(opts.scratch) ? Number(opts.scratch) : opts.scratch;
  if (opts.gpus !== undefined) body.gpus = opts.gpus;
  if (opts.image !== undefined) body.image = opts.image;
  if (opts.priority !== undefined) body.priority = opts.priority;
  if (opts.preemptible) body.preemptible = true;
  if (opts.opportunistic) body.opportunistic = true;
  if (opts.ramRetryFactor !== undefined) {
    // A number goes to the API as one (which checks its range); anything else is refused here.
    if (!/^\d+(\.\d+)?$/.test(opts.ramRetryFactor))
      throw new UsageError(
        `--ram-retry-factor: expected a number such as 2 or 1.5, got ${JSON.stringify(opts.ramRetryFactor)}`,
      );
    body.ram_retry_factor = Number(opts.ramRetryFactor);
  }
  if (opts.maxAttempts !== undefined) body.container_count_max = opts.maxAttempts;
  if (opts.maxRunTime !== undefined) body.max_run_time = opts.maxRunTime;
  if (opts.runAfter !== undefined) body.run_after = parseWhen(opts.runAfter, now).toISOString();
  if (opts.chdir !== undefined) body.cwd = opts.chdir;
  if (opts.instanceType.length > 0) body.instance_types = opts.instanceType;
  if (opts.name !== undefined) body.name = opts.name;
  if (Object.keys(env).length > 0) body.env = env;
  if (Object.keys(secretEnv).length > 0) body.secret_env = secretEnv;
  if (opts.label && opts.label.length > 0) {
    const labels: Record<string, string> = {};
    for (const flag of opts.label) {
      try {
        const [k, v] = parseLabelFlag(flag);
        labels[k] = v;
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
    }
    body.labels = labels;
  }
  return body;
}

/**
 * Follows a request's containers (every retry included) until it is Final; returns the exit code to use.
 * `signal` stops following (the request keeps running).
 */
export async function waitForRequest(client: Client, id: string, signal?: AbortSignal): Promise<number> {
  const req = await followRequest(client, id, signal);
  const c = await client.request<ContainerRecord>('GET', `/v1/containers/${req.container_id}`);
  // The final reason words the exit (OOM included: model/exit.ts); a success with an OOM kill warns.
  if (req.outcome !== 'success')
    console.error(printableLines(`berth: ${id}: ${req.outcome}: ${req.final_reason ?? ''}`));
  const warning = oomWarning(c.exit_code, c.oom_killed);
  if (req.outcome === 'success' && warning) console.error(printableLines(`berth: ${id}: ${warning}`));
  if (c.exit_code !== null) return c.exit_code;
  return req.outcome === 'success' ? 0 : 1;
}

/** Exit code of `submit --wait` stopped by Ctrl-C: the shell's for SIGINT. */
export const DETACHED_EXIT_CODE = 130;

/**
 * Waits like waitForRequest; Ctrl-C (`stop` aborted) detaches, saying that the request keeps running and what
 * to do.
 */
async function waitDetachable(client: Client, id: string, stop: AbortSignal): Promise<number> {
  try {
    return await waitForRequest(client, id, stop);
  } catch (err) {
    if (!stop.aborted) throw err;
    console.error(
      `berth: stopped following; ${id} keeps running. Follow it again with \`berth logs -f ${id}\`, ` +
        `cancel it with \`berth cancel ${id}\`.`,
    );
    return DETACHED_EXIT_CODE;
  }
}

/** Ctrl-C aborts the returned signal instead of ending the process, until `dispose()`. */
function ctrlCAborts(): { signal: AbortSignal; dispose(): void } {
  const stop = new AbortController();
  const onSigint = () => stop.abort(new Error('interrupted'));
  process.once('SIGINT', onSigint);
  return { signal: stop.signal, dispose: () => process.off('SIGINT', onSigint) };
}

export function registerSubmit(program: Command): void {
  program
    .command('submit')
    .description('submit a container request: berth submit [options] -- CMD ARGS...')
    .usage('[options] -- CMD [ARGS...]')
    .option('--cpus <n>', 'CPUs (fractions allowed, at least 0.01), default 1')
    .option('--ram <size>', 'memory, e.g. 4GiB or 512MiB (at least 16MiB), default 1GiB')
    .option('--scratch <size>', 'scratch disk, e.g. 10GiB, default 0')
    .option('--gpus <n>', 'GPUs, default 0', intFlag('--gpus'))
    .option(
      '--image <image>',
      'docker image, or a root-filesystem tarball path; default none (a plain process)',
    )
    .option(
      '--priority <p>',
      'priority 0-1000, higher first, default 500 (0: held, not scheduled until raised with `berth priority`; a token may have a lower limit)',
      intFlag('--priority'),
    )
    .option('--preemptible', 'may run on preemptible (spot) instances')
    .option(
      '--opportunistic',
      'may run in capacity other containers reserve but do not use; frozen, then requeued, when they claim it back',
    )
    .option(
      '--ram-retry-factor <f>',
      'after an OOM kill, retry with ram × f (1 to 8; capped by the largest instance type), default: same ram',
    )
    .option(
      '--max-attempts <n>',
      'attempts before giving up on non-zero exits, default 3',
      intFlag('--max-attempts'),
    )
    .option('--max-run-time <duration>', 'kill it after this long, e.g. 2h (at most 365d)')
    .option(
      '--run-after <time>',
      'do not start before: +20m, +2h (from now), "2026-11-23 08:00" (local time), 08:00 (the next one), or RFC 3339',
    )
    .option('--chdir <dir>', 'working directory inside the container (an absolute path)')
    .option('--env <NAME=VALUE>', 'environment variable (repeatable)', collect, [])
    .option(
      '--secret-env <NAME[=VALUE]>',
      'environment variable whose value is never shown back or logged (repeatable; NAME alone takes the value from your environment, so it stays out of your shell history)',
      collect,
      [],
    )
    .option('--instance-type <name>', 'allowed instance type (repeatable), default any', collect, [])
    .option('--name <name>', 'a name to find it by')
    .option(
      '--label <KEY=VALUE>',
      'a label for cost reports and instance tags, e.g. team=genomics (repeatable)',
      collect,
      [],
    )
    .option(
      '--wait',
      'stream the output of every attempt and exit with its exit code (Ctrl-C detaches: exit 130)',
    )
    .option('--json', 'print the created request as JSON')
    .argument('[command...]', 'the command and its arguments, after --')
    .action(async (argv: string[], opts: SubmitOpts, cmd: Command) => {
      const client = clientFor(cmd);
      const req = await client.request<RequestRecord>('POST', '/v1/requests', buildRequestBody(opts, argv));
      // Ctrl-C is taken over before the id is printed: whoever reads the id may interrupt at once (a
      // handler installed after the print left a window in which Ctrl-C killed the process instead).
      const ctrlC = opts.wait ? ctrlCAborts() : null;
      try {
        if (opts.json) console.log(JSON.stringify(req, null, 2));
        else console.log(req.id);
        if (ctrlC) {
          const code = await waitDetachable(client, req.id, ctrlC.signal);
          (cmd as Command & { berthExitCode?: number }).berthExitCode = code;
        }
      } finally {
        ctrlC?.dispose();
      }
    });
}
