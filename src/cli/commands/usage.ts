// `berth usage`: right-sizing per request name (or owner) — what completed containers asked for, what
// they used, what to ask for instead and the resource-hours it would free. From the API (recorded usage)
// or, with --report, from a simulation's report.json (the traces' usage); the same rule either way
// (src/model/rightsize.ts).
import type { Command } from 'commander';
import type { RightSizing } from '../../model/rightsize.js';
import { parseTime, UnitError } from '../../model/units.js';
import { clientFor } from '../client.js';
import { UsageError } from '../errors.js';
import { size, table } from '../format.js';

interface UsageOpts {
  by: string;
  owner?: string;
  since?: string;
  report?: string;
  json?: boolean;
}

const num = (x: number, digits = 2): string => String(Math.round(x * 10 ** digits) / 10 ** digits);
const range = (min: number, max: number, f: (x: number) => string): string =>
  min === max ? f(min) : `${f(min)}-${f(max)}`;
const saved = (hours: number, share: number | null): string =>
  `${num(hours, 3)}${share === null ? '' : ` (${Math.round(share * 100)}%)`}`;

/** The right-sizing table: one row per group. */
export function usageTable(items: RightSizing[], by: string): string {
  return table(
    [
      by.toUpperCase(),
      'DONE',
      'CPUS ASKED',
      'USED MEAN/P95',
      'SUGGEST',
      'CPU-H SAVED',
      'RAM ASKED',
      'PEAK',
      'SUGGEST',
      'GIB-H SAVED',
    ],
    items.map((r) => [
      r.key || '(unnamed)',
      String(r.containers),
      ...(r.cpu === null
        ? ['-', 'not recorded', '-', '-']
        : [
            range(r.cpu.asked.min, r.cpu.asked.max, (x) => num(x, 3)),
            `${num(r.cpu.used.mean)}/${num(r.cpu.used.p95)}`,
            num(r.cpu.suggested),
            saved(r.cpu.savedHours, r.cpu.savedShare),
          ]),
      ...(r.ram === null
        ? ['-', 'not recorded', '-', '-']
        : [
            range(r.ram.asked.min, r.ram.asked.max, size),
            size(r.ram.used.max),
            size(r.ram.suggested),
            saved(r.ram.savedGiBHours, r.ram.savedShare),
          ]),
    ]),
  );
}

export function registerUsage(program: Command): void {
  program
    .command('usage')
    .description('right-sizing: what completed containers asked for and used, per request name (or owner)')
    .option('--by <group>', 'group by name or owner', 'name')
    .option('--owner <owner>', "only this owner's containers (admin tokens)")
    .option('--since <time>', 'only containers finished since this RFC 3339 time')
    .option('--report <file>', "a simulation's report.json instead of the API (groups by name)")
    .option('--json', 'print JSON')
    .action(async (opts: UsageOpts, cmd: Command) => {
      if (opts.by !== 'name' && opts.by !== 'owner')
        throw new UsageError(`--by: expected name or owner, got ${JSON.stringify(opts.by)}`);
      if (opts.since !== undefined) {
        try {
          parseTime(opts.since);
        } catch (err) {
          if (err instanceof UnitError) throw new UsageError(`--since: ${err.message}`);
          throw err;
        }
      }
      let out: { by: string; items: RightSizing[]; lowerBound?: { asked: number; rightSized: number } };
      if (opts.report !== undefined) {
        if (opts.by !== 'name' || opts.owner !== undefined || opts.since !== undefined)
          throw new UsageError(
            '--report: a simulation report groups by name only (no --by owner, --owner, --since)',
          );
        // Loaded only here: other commands (the agent above all) do not carry the simulator's code.
        const { readReport } = await import('../../sim/report/files.js');
        let r;
        try {
          r = readReport(opts.report);
        } catch (err) {
          throw new UsageError((err as Error).message);
        }
        if (r.rightSizing === null || r.rightSizing === undefined)
          throw new UsageError(`${opts.report}: the run's workload recorded no usage (CPU time or memory)`);
        out = { by: 'name', ...r.rightSizing };
      } else {
        const q = new URLSearchParams({ by: opts.by });
        if (opts.owner !== undefined) q.set('owner', opts.owner);
        if (opts.since !== undefined) q.set('since', opts.since);
        out = await clientFor(cmd).request<{ by: string; items: RightSizing[] }>('GET', `/v1/usage?${q}`);
      }
      const print = (text: string): void => void process.stdout.write(`${text}\n`);
      if (opts.json) return print(JSON.stringify(out, null, 2));
      if (out.items.length === 0) return print('no completed containers');
      print(usageTable(out.items, out.by));
      if (out.lowerBound !== undefined)
        print(
          `cost lower bound as asked ${num(out.lowerBound.asked, 4)}, right-sized ${num(out.lowerBound.rightSized, 4)}`,
        );
    });
}
