// `berth cancel ID...`: cancel requests (r-…) or single containers (c-…).
import type { Command } from 'commander';
import { ApiError, clientFor, describeApiError } from '../client.js';
import { UsageError } from '../errors.js';

export function registerCancel(program: Command): void {
  program
    .command('cancel')
    .description('cancel requests (r-…) or containers (c-…)')
    .argument('<ids...>')
    .option('--reason <text>', 'why (recorded with the request)')
    .action(async (ids: string[], opts: { reason?: string }, cmd: Command) => {
      const client = clientFor(cmd);
      let failed = 0;
      for (const id of ids) {
        try {
          if (id.startsWith('r-')) {
            const r = await client.request<{ state: string; outcome: string | null }>(
              'POST',
              `/v1/requests/${id}/cancel`,
              opts.reason ? { reason: opts.reason } : {},
            );
            console.log(`${id}: ${r.state === 'Final' ? (r.outcome ?? 'final') : r.state}`);
          } else if (id.startsWith('c-')) {
            const c = await client.request<{ state: string }>(
              'POST',
              `/v1/containers/${id}/cancel`,
              opts.reason ? { reason: opts.reason } : {},
            );
            console.log(`${id}: ${c.state}`);
          } else
            throw new UsageError(
              `expected a request id (r-…) or a container id (c-…), got ${JSON.stringify(id)}`,
            );
        } catch (err) {
          if (!(err instanceof ApiError) && !(err instanceof UsageError)) throw err;
          failed++;
          console.error(`berth: ${id}: ${err instanceof ApiError ? describeApiError(err) : err.message}`);
        }
      }
      if (failed > 0) (cmd as Command & { berthExitCode?: number }).berthExitCode = 1;
    });
}
