// `berth show ID`: a request (with its attempts) or a container (with its events), for people or --json.
import type { Command } from 'commander';
import type { ContainerRecord, RequestRecord } from '../../store/records.js';
import { clientFor, type Client } from '../client.js';
import { UsageError } from '../errors.js';
import { shortCommand, size } from '../format.js';
import { formatMoney } from '../../model/cost.js';
import { formatDuration } from '../../model/units.js';
import type { ContainerCost } from '../../store/cost.js';
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

function containerLines(c: ContainerRecord, cost?: ContainerCost): string[] {
  return [
    `  ${c.id}  attempt ${c.attempt}  ${c.state}${c.failure_class ? ` (${c.failure_class})` : ''}`,
    ...(c.exit_code !== null
      ? [`    exit code: ${c.exit_code}${c.oom_killed ? ' (OOM-killed)' : ''}`]
      : c.oom_killed
        ? ['    OOM-killed']
        : []),
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
  console.log(
    [
      `request ${req.id}${req.name ? ` (${req.name})` : ''}: ${statusWord(req)}`,
      `  owner: ${req.owner}   priority: ${req.priority}   created: ${new Date(req.created_at).toISOString()}`,
      `  command: ${shortCommand(req.command, 200)}`,
      `  image: ${req.image ?? '(none: a process)'}`,
      `  resources: ${req.vcpus} CPUs, ${size(req.ram)} RAM, ${size(req.scratch)} scratch, ${req.gpus} GPUs${req.preemptible ? ', preemptible' : ''}`,
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
      ...containers.flatMap((c) => containerLines(c, costOf.get(c.id))),
    ].join('\n'),
  );
}

async function showContainer(client: Client, id: string, json: boolean): Promise<void> {
  const c = await client.request<ContainerRecord>('GET', `/v1/containers/${id}`);
  const events = (await client.request<{ items: Event[] }>('GET', `/v1/containers/${id}/events`)).items;
  if (json) {
    console.log(JSON.stringify({ ...c, events }, null, 2));
    return;
  }
  console.log(
    [
      `container ${c.id} of request ${c.request_id}`,
      ...containerLines(c),
      `  resources: ${c.vcpus} CPUs, ${size(c.ram)} RAM, priority ${c.priority}, locked ${c.lock_count} times`,
      'events:',
      ...events.map((e) => `  ${new Date(e.at).toISOString()}  ${e.message}`),
    ].join('\n'),
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
