// `berth why ID`: why a container (or a request's current container) waits, or what happened to it. Facts
// in the data come first (priority 0, a run-after or retry backoff still in the future, placed on an
// instance, ended); the dispatcher's status text explains the rest (limits, types, queue position).
import type { Command } from 'commander';
import { describeExit } from '../../model/exit.js';
import { formatDuration } from '../../model/units.js';
import type { ContainerRecord, RequestRecord } from '../../store/records.js';
import { clientFor } from '../client.js';
import { printableLines } from '../format.js';
import { containerOf } from './logs.js';

const at = (t: Date | string, now: Date) => {
  const d = new Date(t);
  return `${d.toISOString()} (in ${formatDuration(Math.max(0, d.getTime() - now.getTime()))})`;
};

/** Why the container waits or how it ended, in one line, from its record and its request's. */
export function explain(c: ContainerRecord, req: RequestRecord, now: Date): string {
  switch (c.state) {
    case 'Queued':
    case 'Locked': {
      // The slurm backend's placements (slurm-job-ID) wait in SLURM's queue: its status says why.
      if (c.instance_id?.startsWith('slurm-') && c.scheduling_status)
        return `${c.state}: ${c.scheduling_status}`;
      if (c.instance_id) return `${c.state}, placed on instance ${c.instance_id}; its agent is starting it`;
      if (c.priority === 0)
        return `${c.state}: not scheduled: priority is 0 (raise it with \`berth priority ${req.id} N\`)`;
      const after = c.run_after ? new Date(c.run_after) : null;
      if (after && after.getTime() > now.getTime()) {
        const asked = req.run_after ? new Date(req.run_after).getTime() : null;
        return asked !== null && asked >= after.getTime()
          ? `${c.state}: waits until ${at(after, now)} (run-after)`
          : `${c.state}: retry backoff until ${at(after, now)} (attempt ${c.attempt}, after an infrastructure failure)`;
      }
      return `${c.state}: ${c.scheduling_status ?? 'waiting for the dispatcher (no status yet: is `berth dispatch` or `berth up` running?)'}`;
    }
    case 'Running':
      return `Running on instance ${c.instance_id} since ${new Date(c.started_at!).toISOString()}`;
    case 'Complete':
      return `Complete, ${describeExit(c.exit_code, c.oom_killed)}`;
    case 'Cancelled':
      return `Cancelled (${c.failure_class}): ${c.runtime_status ?? ''}`;
  }
}

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
      const req = await client.request<RequestRecord>('GET', `/v1/requests/${c.request_id}`);
      const why = explain(c, req, new Date());
      if (opts.json)
        return console.log(
          JSON.stringify(
            { id: c.id, state: c.state, why, status: c.scheduling_status, instance: c.instance_id },
            null,
            2,
          ),
        );
      console.log(printableLines(`${c.id}: ${why}`));
    });
}
