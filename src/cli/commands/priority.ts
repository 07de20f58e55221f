// `berth priority ID N`: change a request's priority (a container id means its request).
import type { Command } from 'commander';
import type { ContainerRecord, RequestRecord } from '../../store/records.js';
import { clientFor } from '../client.js';
import { UsageError } from '../errors.js';
import { idKind } from './logs.js';

export function registerPriority(program: Command): void {
  program
    .command('priority')
    .description(
      "change a request's priority: 0-1000, higher first; 0 withdraws it (not scheduled; killed if running)",
    )
    .argument('<id>', 'request (r-…) or container (c-…) id')
    .argument('<priority>', 'the new priority, 0-1000 (your token may have a lower limit)')
    .option('--json', 'print the request as JSON')
    .action(async (id: string, value: string, opts: { json?: boolean }, cmd: Command) => {
      if (!/^\d+$/.test(value) || Number(value) > 1000)
        throw new UsageError(
          `priority: expected a whole number from 0 to 1000, got ${JSON.stringify(value)}`,
        );
      const client = clientFor(cmd);
      const requestId =
        idKind(id) === 'r'
          ? id
          : (await client.request<ContainerRecord>('GET', `/v1/containers/${id}`)).request_id;
      const before = await client.request<RequestRecord>('GET', `/v1/requests/${requestId}`);
      const after = await client.request<RequestRecord>('PATCH', `/v1/requests/${requestId}`, {
        priority: Number(value),
      });
      if (opts.json) return console.log(JSON.stringify(after, null, 2));
      console.log(
        `${requestId}: priority ${before.priority} → ${after.priority}${after.priority === 0 ? ' (withdrawn: not scheduled; killed if running)' : ''}`,
      );
    });
}
