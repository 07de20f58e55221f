// The berth command. Each subcommand lives in src/cli/commands/NAME.ts and registers itself here.
import type { Command } from 'commander';
import { registerPlan } from './commands/plan.js';
import { registerPause } from './commands/pause.js';
import { registerAgent } from './commands/agent.js';
import { registerCancel } from './commands/cancel.js';
import { registerCatalog } from './commands/catalog.js';
import { registerCost } from './commands/cost.js';
import { registerDashboard } from './commands/dashboard.js';
import { registerInstances } from './commands/instances.js';
import { registerLogs } from './commands/logs.js';
import { registerDispatch } from './commands/dispatch.js';
import { registerUp } from './commands/up.js';
import { registerPriority } from './commands/priority.js';
import { registerPs } from './commands/ps.js';
import { registerServer } from './commands/server.js';
import { registerShow } from './commands/show.js';
import { registerSim } from './commands/sim.js';
import { registerSubmit } from './commands/submit.js';
import { registerToken } from './commands/token.js';
import { registerUsage } from './commands/usage.js';
import { registerWhy } from './commands/why.js';
import { UsageError } from './errors.js';
import { newProgram, runProgram, setExitCode } from './program.js';

/** Every command module exports a function that adds its commands to the program. */
const REGISTRATIONS: ((program: Command) => void)[] = [
  registerUp,
  registerServer,
  registerDispatch,
  registerSubmit,
  registerPs,
  registerShow,
  registerLogs,
  registerCancel,
  registerPause,
  registerPriority,
  registerToken,
  registerWhy,
  registerInstances,
  registerCost,
  registerDashboard,
  registerUsage,
  registerPlan,
  registerAgent,
  registerSim,
  registerCatalog,
];

export { UsageError, setExitCode };

export function buildProgram(): Command {
  return newProgram(REGISTRATIONS);
}

/** Runs the CLI; resolves to the process exit code. */
export function main(argv: string[]): Promise<number> {
  return runProgram(buildProgram(), argv);
}
