// `berth why ID`: why a container (or a request's current container) waits, in the scheduler's words.
import type { Command } from 'commander';
import type { ContainerRecord } from '../../store/records.js';
import { clientFor } from '../client.js';
import { containerOf } from './logs.js';

export function registerWhy(program: Command): void {
  program
    .command('why')
    .description('say why a container waits (or what happened to it)')
    .argument('<id>', 'request (r-…) or container (c-…) id')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
      const client = clientFor(cmd);
      const c = await client.request<ContainerRecord>(
        'GET',
        `/v1/containers/${await containerOf(client, id)}`,
      );
      if (opts.json)
        return console.log(
          JSON.stringify(
            { id: c.id, state: c.state, status: c.scheduling_status, instance: c.instance_id },
            null,
            2,
          ),
        );
      switch (c.state) {
        case 'Queued':
        case 'Locked':
          // The slurm backend's placements (slurm-job-ID) wait in SLURM's queue: its status says why.
          if (c.instance_id?.startsWith('slurm-') && c.scheduling_status)
            console.log(`${c.id}: ${c.state}: ${c.scheduling_status}`);
          else if (c.instance_id)
            console.log(`${c.id}: ${c.state}, placed on instance ${c.instance_id}; its agent is starting it`);
          else
            console.log(
              `${c.id}: ${c.state}: ${c.scheduling_status ?? 'waiting for the dispatcher (no status yet: is `berth dispatch` or `berth up` running?)'}`,
            );
          break;
        case 'Running':
          console.log(
            `${c.id}: Running on instance ${c.instance_id} since ${new Date(c.started_at!).toISOString()}`,
          );
          break;
        case 'Complete':
          console.log(`${c.id}: Complete, exit code ${c.exit_code}${c.oom_killed ? ' (OOM-killed)' : ''}`);
          break;
        case 'Cancelled':
          console.log(`${c.id}: Cancelled (${c.failure_class}): ${c.runtime_status ?? ''}`);
          break;
      }
    });
}
