// `berth token create|list|revoke`: API tokens (admin).
import type { Command } from 'commander';
import { clientFor } from '../client.js';
import { UsageError } from '../errors.js';
import { table } from '../format.js';
import { intFlag } from './submit.js';

interface TokenInfo {
  id: number;
  prefix: string;
  scope: string;
  owner: string;
  description: string;
  maxPriority: number | null;
  createdAt: string;
  revokedAt: string | null;
}

export function registerToken(program: Command): void {
  const token = program.command('token').description('manage API tokens (needs an admin token)');
  token
    .command('create')
    .description('create a token; its secret is printed once')
    .requiredOption('--scope <scope>', 'admin, user or dispatcher (node tokens come from agent registration)')
    .option('--owner <name>', 'who it belongs to (default: the scope name)')
    .option('--description <text>', 'a note')
    .option(
      '--max-priority <n>',
      'the highest priority this token may give a request (0-1000; default: no limit)',
      intFlag('--max-priority'),
    )
    .option('--json', 'print JSON')
    .action(
      async (
        opts: { scope: string; owner?: string; description?: string; maxPriority?: number; json?: boolean },
        cmd: Command,
      ) => {
        if (!['admin', 'user', 'dispatcher'].includes(opts.scope)) {
          throw new UsageError(
            `--scope: expected admin, user or dispatcher, got ${JSON.stringify(opts.scope)}`,
          );
        }
        const res = await clientFor(cmd).request<{ token: string; info: TokenInfo }>('POST', '/v1/tokens', {
          scope: opts.scope,
          owner: opts.owner ?? opts.scope,
          ...(opts.description ? { description: opts.description } : {}),
          ...(opts.maxPriority !== undefined ? { max_priority: opts.maxPriority } : {}),
        });
        if (opts.json) console.log(JSON.stringify(res, null, 2));
        else console.log(res.token);
      },
    );
  token
    .command('list')
    .description('list tokens (never their secrets)')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const res = await clientFor(cmd).request<{ items: TokenInfo[] }>('GET', '/v1/tokens');
      if (opts.json) return console.log(JSON.stringify(res, null, 2));
      console.log(
        table(
          ['ID', 'PREFIX', 'SCOPE', 'OWNER', 'MAX PRIO', 'CREATED', 'REVOKED', 'DESCRIPTION'],
          res.items.map((t) => [
            String(t.id),
            `${t.prefix}…`,
            t.scope,
            t.owner,
            t.maxPriority === null ? '-' : String(t.maxPriority),
            t.createdAt,
            t.revokedAt ?? '-',
            t.description,
          ]),
        ),
      );
    });
  token
    .command('revoke')
    .description('revoke a token by id')
    .argument('<id>')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      if (!/^\d+$/.test(id))
        throw new UsageError(
          `expected a token id (a number, see berth token list), got ${JSON.stringify(id)}`,
        );
      await clientFor(cmd).request('DELETE', `/v1/tokens/${id}`);
      console.log(`revoked token ${id}`);
    });
}
