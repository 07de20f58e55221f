// `berth cost`: what work cost, grouped by owner, request, name, instance type or label (docs/COST.md).
import type { Command } from 'commander';
import { formatMoney, startOfDayUtc } from '../../model/cost.js';
import { formatDuration, parseDuration } from '../../model/units.js';
import type { CostSummary } from '../../store/cost.js';
import { clientFor } from '../client.js';
import { UsageError } from '../errors.js';
import { table } from '../format.js';

/** `--since`: an RFC 3339 time, `today` (since 00:00 UTC), or a duration meaning that long ago (24h, 7d). */
export function sinceTime(v: string, now: Date): string {
  if (v === 'today') return startOfDayUtc(now).toISOString();
  if (/^\d{4}-\d{2}-\d{2}T/.test(v)) return v;
  try {
    return new Date(now.getTime() - parseDuration(v)).toISOString();
  } catch {
    throw new UsageError(
      `--since: expected a time (2026-01-01T00:00:00Z), today, or a duration ago such as 24h or 7d, got ${JSON.stringify(v)}`,
    );
  }
}

/** `--by`: owner, request, name, type, label:KEY (or label=KEY). */
function byFlag(v: string): string {
  const by = v.replace(/^label=/, 'label:');
  if (!/^(owner|request|name|type|label:.+)$/.test(by))
    throw new UsageError(`--by: expected owner, request, name, type or label:KEY, got ${JSON.stringify(v)}`);
  return by;
}

export function printCost(s: CostSummary): void {
  const head = s.by.startsWith('label:') ? s.by.slice('label:'.length).toUpperCase() : s.by.toUpperCase();
  console.log(
    `cost ${s.from ? `since ${new Date(s.from).toISOString()}` : 'of all time'} until ${new Date(s.to).toISOString()}, by ${s.by}`,
  );
  console.log(
    table(
      [head, 'COST', 'RUN', 'BOOT/IDLE', 'CONTAINERS', 'REQUESTS', 'RUN TIME'],
      [
        ...s.groups.map((g) => [
          g.key,
          formatMoney(g.cost),
          formatMoney(g.direct),
          formatMoney(g.overhead),
          String(g.containers),
          String(g.requests),
          formatDuration(g.run_seconds * 1000),
        ]),
        ['total', formatMoney(s.total), '', '', '', '', ''],
      ],
    ),
  );
  if (s.group_count > s.groups.length)
    console.error(`(${s.group_count - s.groups.length} more groups in the total: use --limit)`);
  if (s.instances) {
    const types = s.instances.by_type
      .map((t) => `${t.type} ${formatMoney(t.cost)} (${t.instances} × ${t.hours.toFixed(2)} h)`)
      .join(', ');
    console.log(
      `instances: ${formatMoney(s.instances.cost)}${types ? ` = ${types}` : ''}; ran no container: ${formatMoney(s.instances.unattributed)}`,
    );
  }
}

export function registerCost(program: Command): void {
  program
    .command('cost')
    .description('what work cost: by owner, request, name, instance type or label (a user sees their own)')
    .option(
      '--since <time>',
      'from this time: RFC 3339, today (00:00 UTC), or a duration ago (24h, 7d); default all time',
    )
    .option('--until <time>', 'up to this RFC 3339 time (default now)')
    .option('--by <what>', 'owner, request, name (numbered series together), type, or label:KEY', 'owner')
    .option('--owner <owner>', 'only this owner (admin tokens)')
    .option('-n, --limit <n>', 'at most n groups (default 100)', '100')
    .option('--json', 'print JSON')
    .action(
      async (
        opts: { since?: string; until?: string; by: string; owner?: string; limit: string; json?: boolean },
        cmd: Command,
      ) => {
        if (!/^\d+$/.test(opts.limit) || Number(opts.limit) < 1 || Number(opts.limit) > 10_000)
          throw new UsageError(
            `--limit: expected a whole number from 1 to 10000, got ${JSON.stringify(opts.limit)}`,
          );
        const q = new URLSearchParams({ by: byFlag(opts.by), limit: opts.limit });
        if (opts.since) q.set('since', sinceTime(opts.since, new Date()));
        if (opts.until) q.set('until', opts.until);
        if (opts.owner) q.set('owner', opts.owner);
        const s = await clientFor(cmd).request<CostSummary>('GET', `/v1/cost?${q}`);
        if (opts.json) console.log(JSON.stringify(s, null, 2));
        else printCost(s);
      },
    );
}
