// `berth ps`: container requests as a table (active ones; --all for finished too), or --json.
import type { Command } from 'commander';
import type { RequestRecord } from '../../store/records.js';
import { clientFor } from '../client.js';
import { UsageError } from '../errors.js';
import { age, shortCommand, size, table, when } from '../format.js';

/** What a person wants to see in one word: the container's state while active, the outcome when done. */
export function statusWord(r: RequestRecord): string {
  if (r.state === 'Final')
    return r.outcome === 'success' ? 'Done' : r.outcome === 'cancelled' ? 'Cancelled' : 'Failed';
  // A paused container is Running (src/store/pause.ts); a person wants to see that it does not advance.
  if (r.container_state === 'Running' && r.container_paused) return 'Paused';
  return r.container_state ?? 'Queued';
}

export function registerPs(program: Command): void {
  program
    .command('ps')
    .description('list container requests (active ones; --all for finished too)')
    .option('-a, --all', 'include finished requests')
    .option('--name <text>', 'only requests whose name contains text')
    .option('--owner <owner>', 'only this owner (admin tokens; admins see an OWNER column)')
    .option('-n, --limit <n>', 'at most n rows (default 100, max 1000)', '100')
    .option('--json', 'print JSON (one object with items and next_cursor)')
    .action(
      async (
        opts: { all?: boolean; name?: string; owner?: string; limit: string; json?: boolean },
        cmd: Command,
      ) => {
        if (!/^\d+$/.test(opts.limit) || Number(opts.limit) < 1 || Number(opts.limit) > 1000) {
          throw new UsageError(
            `--limit: expected a whole number from 1 to 1000, got ${JSON.stringify(opts.limit)}`,
          );
        }
        const client = clientFor(cmd);
        const q = new URLSearchParams({ limit: opts.limit });
        if (!opts.all) q.set('state', 'Committed');
        if (opts.name) q.set('name', opts.name);
        if (opts.owner) q.set('owner', opts.owner);
        const page = await client.request<{ items: RequestRecord[]; next_cursor: string | null }>(
          'GET',
          `/v1/requests?${q}`,
        );
        if (opts.json) {
          console.log(JSON.stringify(page, null, 2));
          return;
        }
        const now = new Date();
        // Admins see everyone's requests: name the owner. A run-after column when any row has one.
        const admin = (await client.request<{ scope: string }>('GET', '/v1/whoami')).scope === 'admin';
        const runAfter = page.items.some((r) => r.run_after !== null);
        const columns: [string, (r: RequestRecord) => string, boolean][] = [
          ['ID', (r) => r.id, true],
          ['OWNER', (r) => r.owner, admin],
          ['NAME', (r) => r.name || '-', true],
          ['STATUS', statusWord, true],
          ['PRIO', (r) => String(r.priority), true],
          ['CPUS', (r) => String(r.vcpus), true],
          ['RAM', (r) => size(r.ram), true],
          ['AGE', (r) => age(r.created_at, now), true],
          ['RUN AFTER', (r) => (r.run_after ? when(r.run_after, now) : '-'), runAfter],
          ['COMMAND', (r) => shortCommand(r.command), true],
        ];
        const shown = columns.filter(([, , on]) => on);
        console.log(
          table(
            shown.map(([h]) => h),
            page.items.map((r) => shown.map(([, cell]) => cell(r))),
          ),
        );
        if (page.next_cursor) console.error(`(more: use --limit, or --json for the cursor)`);
      },
    );
}
