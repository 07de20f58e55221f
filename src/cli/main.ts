// The berth command. Each subcommand lives in src/cli/commands/NAME.ts and registers itself here.
import { Command, CommanderError } from 'commander';
import { registerPlan } from './commands/plan.js';
import { registerPause } from './commands/pause.js';
import { registerAgent } from './commands/agent.js';
import { ConfigError } from '../config/options.js';
import { withGlobalFlags } from './flags.js';
import { ApiError, describeApiError } from './client.js';
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
import { printableLines } from './format.js';

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

export { UsageError };

export function buildProgram(): Command {
  const program = new Command('berth')
    .description('Run batch containers on machines created to fit the queue')
    .version('0.1.0')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  withGlobalFlags(program);
  for (const register of REGISTRATIONS) register(program);
  return program;
}

/** Runs the CLI; resolves to the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  let code = 0;
  program.hook('postAction', (_this, action) => {
    const c = (action as Command & { berthExitCode?: number }).berthExitCode;
    if (typeof c === 'number') code = c;
  });
  try {
    await program.parseAsync(argv);
    return code;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    // Messages may quote what the user (or another user) typed: printed safe for the terminal.
    if (err instanceof UsageError) {
      console.error(printableLines(`berth: ${err.message}`));
      return err.exitCode;
    }
    if (err instanceof ApiError) {
      console.error(printableLines(`berth: ${describeApiError(err)}`));
      return err.status >= 500 ? 1 : 2;
    }
    if (err instanceof ConfigError) {
      console.error(printableLines(`berth: configuration: ${err.message}`));
      return 2;
    }
    throw err;
  }
}

/** Sets the exit code of the running command (commands that exit with a container's code). */
export function setExitCode(cmd: Command, code: number): void {
  (cmd as Command & { berthExitCode?: number }).berthExitCode = code;
}
