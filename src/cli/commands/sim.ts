// `berth sim`: run a workload through the real dispatcher on the simulated cloud and virtual clock
// (DESIGN §10), write report.json and report.html, print a summary; `berth sim compare A B` prints two
// reports side by side.
import type { Command } from 'commander';
import { POLICIES } from '../../sim/policy-names.js';
import type { GatesOpts } from './sim-gates.js';
import type { PackOpts } from './sim-pack.js';
import type { SimOpts } from './sim-run.js';

// The implementation (simulator, scheduler, report) is loaded only when the command runs, so that other
// commands (the agent above all) do not carry it in memory.
export function registerSim(program: Command): void {
  const sim = program
    .command('sim')
    .description('simulate a workload with the real scheduler on a simulated cloud (virtual time)')
    .option(
      '--workload <file>',
      'workload: SWF trace (.swf[.gz]), or JSON (.json[.gz]): jobs, a WfCommons workflow or a workflow mix',
    )
    .option('--config <file>', 'simulator configuration (JSON; docs/SIMULATOR.md)')
    .option('--seed <n>', 'seed of every random choice', '1')
    .option('--policy <name>', `scheduling policy: ${POLICIES.join(', ')}`, 'berth')
    .option('--limit-jobs <n>', 'use only the first N jobs')
    .option('--time-scale <f>', 'multiply arrival times and run times (0.5 = twice as fast)')
    .option('--out <dir>', 'directory for report.json and report.html')
    .option('--json', 'print the report and run statistics as JSON instead of the summary')
    .option('--wait-causes', "break the waits down by what the scheduler's statuses said (report.waitCauses)")
    .action(async (opts: SimOpts) => (await import('./sim-run.js')).runCommand(opts));
  sim
    .command('gates')
    .description('run the scheduling-quality gates; fail when cost / lower bound regressed')
    .option('--file <file>', 'the gates file', 'bench/sim-gates.json')
    .option('--update', 'record the measured figures in the file instead of judging them')
    .action(async (opts: GatesOpts, cmd: Command) =>
      (await import('./sim-gates.js')).gatesCommand(opts, cmd),
    );
  sim
    .command('pack <workload>')
    .description('what a clairvoyant offline packer pays for a workload, against the cost lower bound')
    .option('--config <file>', 'simulator configuration: its catalog, billing and boot time (mean)')
    .option(
      '--method <order>',
      'arrival (jobs in arrival order), decreasing (first fit decreasing) or wait (arrival order, a job may wait for room up to --max-wait); decreasing clairvoyant only',
      'arrival',
    )
    .option('--max-wait <duration>', 'method wait: the longest a job may wait for room', '60s')
    .option('--lookahead <duration>', 'size new instances for jobs arriving this far ahead', '0s')
    .option(
      '--estimates <kind>',
      "run times the packer decides by: exact, requested (SWF field 9), user or size (median of the last 32 finished jobs of the same user / size), step (median of the job's step over the workload) or none (a constant)",
      'exact',
    )
    .option('--json', 'print the figures as JSON')
    .action(async (workload: string, _opts: PackOpts, cmd: Command) =>
      // --config and --json are also `berth sim`'s options, which commander gives to the parent.
      (await import('./sim-pack.js')).packCommand(workload, cmd.optsWithGlobals<PackOpts>()),
    );
  sim
    .command('compare <a> <b>')
    .description('print two report.json files side by side')
    .action(async (a: string, b: string) => (await import('./sim-run.js')).compareCommand(a, b));
}
