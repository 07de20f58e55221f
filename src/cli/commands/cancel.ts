// `berth cancel ID...` or `berth cancel --name PATTERN | --owner USER`: cancel requests (r-…) or single
// containers (c-…). Something that has already finished is reported as such, not as an error.
//
// Exit codes: 0 when every id named (or matched) is now ended — cancelled by this command or already
// finished; 1 when any was not found or could not be cancelled; 2 for a usage error, including a --name
// or --owner selection that matches requests and was not confirmed (--yes).
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import type { ContainerRecord, RequestRecord } from '../../store/records.js';
import { ApiError, clientFor, describeApiError, type Client } from '../client.js';
import { UsageError } from '../errors.js';
import { printable, printableLines } from '../format.js';
import { idKind } from './logs.js';

interface CancelOpts {
  reason?: string;
  name?: string;
  owner?: string;
  yes?: boolean;
  json?: boolean;
}

type Outcome =
  | { id: string; result: 'cancelled' | 'already_finished'; state: string }
  | { id: string; result: 'failed'; error: string };

/** A shell-style glob (`*`, `?`) as a whole-string match; without wildcards, the exact name. */
export function globToRegExp(pattern: string): RegExp {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`, 's');
}

/** The active requests a --name/--owner selection matches (every page). */
async function selected(client: Client, opts: CancelOpts): Promise<RequestRecord[]> {
  const match = opts.name === undefined ? null : globToRegExp(opts.name);
  const out: RequestRecord[] = [];
  let cursor: string | null = null;
  do {
    const q = new URLSearchParams({ state: 'Committed', limit: '1000' });
    if (opts.owner) q.set('owner', opts.owner);
    if (cursor) q.set('cursor', cursor);
    const page: { items: RequestRecord[]; next_cursor: string | null } = await client.request(
      'GET',
      `/v1/requests?${q}`,
    );
    out.push(...page.items.filter((r) => match === null || match.test(r.name)));
    cursor = page.next_cursor;
  } while (cursor);
  return out;
}

async function cancelOne(client: Client, id: string, reason: string | undefined): Promise<Outcome> {
  const body = reason ? { reason } : {};
  try {
    if (idKind(id) === 'r') {
      const before = await client.request<RequestRecord>('GET', `/v1/requests/${id}`);
      if (before.state === 'Final')
        return { id, result: 'already_finished', state: before.outcome ?? 'Final' };
      const r = await client.request<RequestRecord>('POST', `/v1/requests/${id}/cancel`, body);
      return { id, result: 'cancelled', state: r.outcome ?? r.state };
    }
    try {
      const c = await client.request<ContainerRecord>('POST', `/v1/containers/${id}/cancel`, body);
      return { id, result: 'cancelled', state: c.state };
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'already_finished') throw err;
      const c = await client.request<ContainerRecord>('GET', `/v1/containers/${id}`);
      return { id, result: 'already_finished', state: c.state };
    }
  } catch (err) {
    if (!(err instanceof ApiError) && !(err instanceof UsageError)) throw err;
    return { id, result: 'failed', error: err instanceof ApiError ? describeApiError(err) : err.message };
  }
}

/** Asks on a terminal; anywhere else the answer is no (a script must say --yes). */
async function confirm(question: string): Promise<boolean> {
  if (!process.stdin.isTTY) return false;
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

export function registerCancel(program: Command): void {
  program
    .command('cancel')
    .description('cancel requests (r-…) or containers (c-…), or the active requests matching --name/--owner')
    .argument('[ids...]')
    .option('--reason <text>', 'why (recorded with the request)')
    .option('--name <pattern>', 'cancel the active requests whose name matches (shell glob: * and ?)')
    .option('--owner <user>', 'cancel the active requests of this owner (admin tokens; with --name: both)')
    .option('-y, --yes', 'do not ask for confirmation of a --name/--owner selection')
    .option('--json', 'print what was matched, cancelled, already finished and failed as JSON')
    .addHelpText(
      'after',
      '\nExit status: 0 when everything named is now ended (cancelled, or already finished); 1 when something\n' +
        'was not found or could not be cancelled; 2 for a usage error or an unconfirmed --name/--owner selection.',
    )
    .action(async (ids: string[], opts: CancelOpts, cmd: Command) => {
      const bySelection = opts.name !== undefined || opts.owner !== undefined;
      if (bySelection && ids.length > 0) throw new UsageError('give ids, or --name/--owner, not both');
      if (!bySelection && ids.length === 0)
        throw new UsageError('give ids to cancel, or --name PATTERN / --owner USER');
      for (const id of ids) idKind(id);
      const client = clientFor(cmd);
      let targets = ids;
      if (bySelection) {
        const what = [
          opts.name !== undefined ? `--name ${opts.name}` : '',
          opts.owner ? `--owner ${opts.owner}` : '',
        ]
          .filter(Boolean)
          .join(' ');
        const matched = await selected(client, opts);
        targets = matched.map((r) => r.id);
        if (matched.length === 0) {
          if (opts.json) console.log(JSON.stringify({ matched: [], outcomes: [] }, null, 2));
          else console.error(printable(`berth: no active request matches ${what}`));
          return;
        }
        const question = `cancel ${matched.length} active request${matched.length === 1 ? '' : 's'} matching ${what}? [y/N] `;
        if (!opts.yes && !(await confirm(printable(question))))
          throw new UsageError(
            printable(
              `${matched.length} active request${matched.length === 1 ? '' : 's'} match ${what}; not cancelled (add --yes to cancel them)`,
            ),
          );
      }
      const outcomes: Outcome[] = [];
      for (const id of targets) outcomes.push(await cancelOne(client, id, opts.reason));
      const failed = outcomes.filter((o) => o.result === 'failed').length;
      if (opts.json)
        console.log(JSON.stringify({ ...(bySelection ? { matched: targets } : {}), outcomes }, null, 2));
      else {
        for (const o of outcomes)
          if (o.result === 'failed') console.error(printableLines(`berth: ${o.id}: ${o.error}`));
          else
            console.log(
              o.result === 'cancelled' ? `${o.id}: ${o.state}` : `${o.id}: already finished (${o.state})`,
            );
        if (bySelection)
          console.error(
            `berth: cancelled ${outcomes.filter((o) => o.result === 'cancelled').length} of ${targets.length}`,
          );
      }
      if (failed > 0) (cmd as Command & { berthExitCode?: number }).berthExitCode = 1;
    });
}
