// `berth plan --snapshot FILE`: one scheduler pass on a JSON snapshot (DESIGN §6.4). Placeholder until
// the scheduler lands; registered so the CLI's shape is fixed.
import type { Command } from 'commander';

export function registerPlan(program: Command): void {
  program
    .command('plan')
    .description('run one scheduler pass on a JSON snapshot and print the actions (dry run)')
    .requiredOption('--snapshot <file>', 'snapshot file (DESIGN §6.4 format), or - for standard input')
    .action(() => {
      throw new Error('berth plan: the scheduler is not built yet');
    });
}
