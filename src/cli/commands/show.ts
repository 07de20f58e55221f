// `berth show ID`: a request (with its attempts) or a container (with its events), for people or --json.
import type { Command } from 'commander';
import { describeExit } from '../../model/exit.js';
import type { ContainerRecord, RequestRecord } from '../../store/records.js';
import { clientFor, type Client } from '../client.js';
import { UsageError } from '../errors.js';
import { printable, shortCommand, size, when } from '../format.js';
import { formatMoney } from '../../model/cost.js';
import { formatDuration } from '../../model/units.js';
import type { ContainerCost } from '../../store/cost.js';
import { pauseWord } from './pause.js';
import { statusWord } from './ps.js';

interface Event {
  at: string;
  kind: string;
  message: string;
}

function usageLine(c: ContainerRecord): string {
  if (!c.usage) return '-';
  const u = c.usage;
  return `peak memory ${size(u.peak_ram)} of ${size(c.ram)} requested, CPU time ${u.cpu_seconds.toFixed(2)}s, wall ${formatDuration(u.wall_ms)}`;
}

function costLine(k: ContainerCost): string {
  return `    cost: ${formatMoney(k.cost)} (${formatMoney(k.direct)} running: ${Math.round(k.share * 100)}% of a ${k.type} at ${formatMoney(k.price)}/h for ${formatDuration(k.run_seconds * 1000)}; ${formatMoney(k.overhead)} its instance's boot and idle time)`;
}

function containerLines(c: ContainerRecord, now: Date, cost?: ContainerCost): string[] {
  const waits = (c.state === 'Queued' || c.state === 'Locked') && c.run_after && new Date(c.run_after) > now;
  return [
    `  ${c.id}  attempt ${c.attempt}  ${c.state}${c.failure_class ? ` (${c.failure_class})` : ''}${pauseWord(c) ? ` (${pauseWord(c)})` : ''}`,
    ...(waits ? [`    not before: ${when(c.run_after!, now)}`] : []),
    ...(c.exit_code !== null || c.oom_killed ? [`    ${describeExit(c.exit_code, c.oom_killed)}`] : []),
    ...(c.runtime_status ? [`    reason: ${c.runtime_status}`] : []),
    ...(c.instance_id ? [`    instance: ${c.instance_id}${c.node_id ? ` (node ${c.node_id})` : ''}`] : []),
    ...(c.usage ? [`    usage: ${usageLine(c)}`] : []),
    ...(cost ? [costLine(cost)] : []),
  ];
}

async function showRequest(client: Client, id: string, json: boolean): Promise<void> {
  const req = await client.request<RequestRecord>('GET', `/v1/requests/${id}`);
  const containers = (
    await client.request<{ items: ContainerRecord[] }>('GET', `/v1/containers?request_id=${id}&limit=1000`)
  ).items.reverse();
  const cost = await client.request<{ cost: number; items: ContainerCost[] }>(
    'GET',
    `/v1/requests/${id}/cost`,
  );
  const costOf = new Map(cost.items.map((k) => [k.container, k]));
  if (json) {
    console.log(
      JSON.stringify(
        {
          ...req,
          cost: cost.cost,
          containers: containers.map((c) => ({ ...c, cost: costOf.get(c.id) ?? null })),
        },
        null,
        2,
      ),
    );
    return;
  }
  const env = Object.entries(req.env).map(([k, v]) => `${k}=${v}`);
  const secret = req.secret_env_keys.map((k) => `${k}=(secret, not shown)`);
  const now = new Date();
  console.log(
    [
      `request ${req.id}${req.name ? ` (${req.name})` : ''}: ${statusWord(req)}`,
      `  owner: ${req.owner}   priority: ${req.priority}${req.priority === 0 ? ' (withdrawn: not scheduled)' : ''}   created: ${new Date(req.created_at).toISOString()}`,
      ...(req.run_after ? [`  run after: ${when(req.run_after, now)}`] : []),
      `  command: ${shortCommand(req.command, 200)}`,
      `  image: ${req.image ?? '(none: a process)'}`,
      ...(req.cwd ? [`  working directory: ${req.cwd}`] : []),
      ...(env.length + secret.length > 0 ? [`  env: ${[...env, ...secret].join(' ')}`] : []),
      `  resources: ${req.vcpus} CPUs, ${size(req.ram)} RAM, ${size(req.scratch)} scratch, ${req.gpus} GPUs${req.preemptible ? ', preemptible' : ''}${req.opportunistic ? ', opportunistic' : ''}`,
      ...(req.ram_retry_factor !== null && req.ram_retry_factor !== undefined
        ? [`  after an OOM kill: retried with ram × ${req.ram_retry_factor}`]
        : []),
      `  attempts: ${req.attempts} of ${req.container_count_max}, infrastructure retries: ${req.temp_failures} of ${req.max_temp_retries}`,
      ...(req.state === 'Final' ? [`  outcome: ${req.outcome}: ${req.final_reason ?? ''}`] : []),
      ...(Object.keys(req.labels ?? {}).length > 0
        ? [
            `  labels: ${Object.entries(req.labels)
              .map(([k, v]) => `${k}=${v}`)
              .join(' ')}`,
          ]
        : []),
      `  cost: ${formatMoney(cost.cost)}${req.state === 'Final' ? '' : ' so far'} (all attempts; docs/COST.md)`,
      `containers:`,
      ...containers.flatMap((c) => containerLines(c, now, costOf.get(c.id))),
    ]
      .map(printable)
      .join('\n'),
  );
}

async function showContainer(client: Client, id: string, json: boolean): Promise<void> {
  const c = await client.request<
    ContainerRecord & { checkpoint?: { bytes: number; at: string; container_id: string } | null }
  >('GET', `/v1/containers/${id}`);
  const events = (await client.request<{ items: Event[] }>('GET', `/v1/containers/${id}/events`)).items;
  if (json) {
    console.log(JSON.stringify({ ...c, events }, null, 2));
    return;
  }
  console.log(
    [
      `container ${c.id} of request ${c.request_id}`,
      ...containerLines(c, new Date()),
      `  resources: ${c.vcpus} CPUs, ${size(c.ram)} RAM, priority ${c.priority}, locked ${c.lock_count} times`,
      ...(c.checkpoint
        ? [
            `  checkpoint: ${size(c.checkpoint.bytes)} kept ${new Date(c.checkpoint.at).toISOString()} by ${c.checkpoint.container_id}`,
          ]
        : []),
      'events:',
      ...events.map((e) => `  ${new Date(e.at).toISOString()}  ${e.message}`),
    ]
      .map(printable)
      .join('\n'),
  );
}

export function registerShow(program: Command): void {
  program
    .command('show')
    .description('show a request (r-…) with its attempts, or a container (c-…) with its events')
    .argument('<id>')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
      const client = clientFor(cmd);
      if (id.startsWith('r-')) await showRequest(client, id, !!opts.json);
      else if (id.startsWith('c-')) await showContainer(client, id, !!opts.json);
      else
        throw new UsageError(
          `expected a request id (r-…) or a container id (c-…), got ${JSON.stringify(id)}`,
        );
    });
}
