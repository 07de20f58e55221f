// `berth plan --snapshot FILE`: one scheduler pass on a JSON snapshot (DESIGN §6.4), printed as JSON.
// A dry run: nothing is locked, created or destroyed.
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { UsageError } from '../main.js';

async function readInput(file: string): Promise<string> {
  if (file !== '-') {
    try {
      return await readFile(file, 'utf8');
    } catch (err) {
      throw new UsageError(
        `cannot read snapshot ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export function registerPlan(program: Command): void {
  program
    .command('plan')
    .description('run one scheduler pass on a JSON snapshot and print the actions (dry run)')
    .requiredOption('--snapshot <file>', 'snapshot file (DESIGN §6.4 format), or - for standard input')
    .option('--pretty', 'indent the JSON output')
    .action(async (opts: { snapshot: string; pretty?: boolean }) => {
      // Loaded here, not at the top: every other command (the agent above all) would carry it in memory.
      const { plan } = await import('../../dispatch/scheduler/plan.js');
      const { parseSnapshotText, planToJson, SnapshotError } =
        await import('../../dispatch/snapshot-json.js');
      const text = await readInput(opts.snapshot);
      let snapshot;
      try {
        snapshot = parseSnapshotText(text);
      } catch (err) {
        if (err instanceof SnapshotError) throw new UsageError(`snapshot ${opts.snapshot}: ${err.message}`);
        throw err;
      }
      process.stdout.write(planToJson(plan(snapshot), opts.pretty === true) + '\n');
    });
}
