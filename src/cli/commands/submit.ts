// `berth submit [options] -- CMD ARGS...`: submit a container request; --wait streams its logs and exits
// with its exit code.
import type { Command } from 'commander';
import { parseLabelFlag } from '../../model/labels.js';
import type { RequestRecord } from '../../store/records.js';
import { clientFor, type Client } from '../client.js';
import { UsageError } from '../errors.js';
import { followLogs } from './logs.js';

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function intFlag(name: string) {
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
  maxAttempts?: number;
  maxRunTime?: string;
  runAfter?: string;
  env: string[];
  instanceType: string[];
  label?: string[];
  name?: string;
  wait?: boolean;
  json?: boolean;
}

export function buildRequestBody(opts: SubmitOpts, argv: string[]): Record<string, unknown> {
  if (argv.length === 0)
    throw new UsageError('no command: give it after --, e.g. berth submit --cpus 2 -- echo hi');
  const env: Record<string, string> = {};
  for (const kv of opts.env) {
    const i = kv.indexOf('=');
    if (i <= 0) throw new UsageError(`--env: expected NAME=VALUE, got ${JSON.stringify(kv)}`);
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  const body: Record<string, unknown> = { command: argv };
  if (opts.cpus !== undefined) body.vcpus = /^\d+(\.\d+)?$/.test(opts.cpus) ? Number(opts.cpus) : opts.cpus;
  if (opts.ram !== undefined) body.ram = /^\d+$/.test(opts.ram) ? Number(opts.ram) : opts.ram;
  if (opts.scratch !== undefined)
    body.scratch = /^\d+$/.test(opts.scratch) ? Number(opts.scratch) : opts.scratch;
  if (opts.gpus !== undefined) body.gpus = opts.gpus;
  if (opts.image !== undefined) body.image = opts.image;
  if (opts.priority !== undefined) body.priority = opts.priority;
  if (opts.preemptible) body.preemptible = true;
  if (opts.maxAttempts !== undefined) body.container_count_max = opts.maxAttempts;
  if (opts.maxRunTime !== undefined) body.max_run_time = opts.maxRunTime;
  if (opts.runAfter !== undefined) body.run_after = opts.runAfter;
  if (opts.instanceType.length > 0) body.instance_types = opts.instanceType;
  if (opts.name !== undefined) body.name = opts.name;
  if (Object.keys(env).length > 0) body.env = env;
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

/** Follows a request's containers (retries included) until it is Final; returns the exit code to use. */
export async function waitForRequest(client: Client, id: string): Promise<number> {
  let req = await client.request<RequestRecord>('GET', `/v1/requests/${id}`);
  const followed = new Set<string>();
  while (req.state !== 'Final' || (req.container_id && !followed.has(req.container_id))) {
    const cid = req.container_id!;
    if (!followed.has(cid)) {
      followed.add(cid);
      await followLogs(client, cid);
    }
    req = await client.request<RequestRecord>('GET', `/v1/requests/${id}`);
    if (req.state !== 'Final' && followed.has(req.container_id!)) {
      // the container ended but the request has not moved on yet (retry being queued)
      await new Promise((r) => setTimeout(r, 200));
    } else if (req.state !== 'Final') {
      console.error(
        `berth: ${id}: retrying as ${req.container_id} (attempt ${req.attempts + req.temp_failures + 1})`,
      );
    }
  }
  const c = await client.request<{
    exit_code: number | null;
    state: string;
    oom_killed: boolean | null;
    runtime_status: string | null;
  }>('GET', `/v1/containers/${req.container_id}`);
  if (req.outcome !== 'success')
    console.error(
      `berth: ${id}: ${req.outcome}: ${req.final_reason ?? ''}${c.oom_killed ? ' (OOM-killed)' : ''}`,
    );
  if (c.exit_code !== null) return c.exit_code;
  return req.outcome === 'success' ? 0 : 1;
}

export function registerSubmit(program: Command): void {
  program
    .command('submit')
    .description('submit a container request: berth submit [options] -- CMD ARGS...')
    .usage('[options] -- CMD [ARGS...]')
    .option('--cpus <n>', 'CPUs (fractions allowed), default 1')
    .option('--ram <size>', 'memory, e.g. 4GiB or 512MiB, default 1GiB')
    .option('--scratch <size>', 'scratch disk, e.g. 10GiB, default 0')
    .option('--gpus <n>', 'GPUs, default 0', intFlag('--gpus'))
    .option(
      '--image <image>',
      'docker image, or a root-filesystem tarball path; default none (a plain process)',
    )
    .option('--priority <p>', 'priority 1-1000 (higher first), default 500', intFlag('--priority'))
    .option('--preemptible', 'may run on preemptible (spot) instances')
    .option(
      '--max-attempts <n>',
      'attempts before giving up on non-zero exits, default 3',
      intFlag('--max-attempts'),
    )
    .option('--max-run-time <duration>', 'kill it after this long, e.g. 2h')
    .option('--run-after <time>', 'do not start before this RFC 3339 time')
    .option('--env <NAME=VALUE>', 'environment variable (repeatable)', collect, [])
    .option('--instance-type <name>', 'allowed instance type (repeatable), default any', collect, [])
    .option('--name <name>', 'a name to find it by')
    .option(
      '--label <KEY=VALUE>',
      'a label for cost reports and instance tags, e.g. team=genomics (repeatable)',
      collect,
      [],
    )
    .option('--wait', 'stream its logs and exit with its exit code')
    .option('--json', 'print the created request as JSON')
    .argument('[command...]', 'the command and its arguments, after --')
    .action(async (argv: string[], opts: SubmitOpts, cmd: Command) => {
      const client = clientFor(cmd);
      const req = await client.request<RequestRecord>('POST', '/v1/requests', buildRequestBody(opts, argv));
      if (opts.json) console.log(JSON.stringify(req, null, 2));
      else console.log(req.id);
      if (opts.wait) {
        const code = await waitForRequest(client, req.id);
        (cmd as Command & { berthExitCode?: number }).berthExitCode = code;
      }
    });
}
