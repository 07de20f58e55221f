// The berth command. Each subcommand lives in src/cli/commands/NAME.ts and registers itself here.
import { Command, CommanderError } from 'commander';
import { registerPlan } from './commands/plan.js';

/** Every command module exports a function that adds its commands to the program. */
const REGISTRATIONS: ((program: Command) => void)[] = [registerPlan];

/** Errors a command throws for the user: printed without a stack, exit code 2 by default. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
  }
}

export function buildProgram(): Command {
  const program = new Command('berth')
    .description('Run batch containers on machines created to fit the queue')
    .version('0.1.0')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
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
    if (err instanceof UsageError) {
      console.error(`berth: ${err.message}`);
      return err.exitCode;
    }
    throw err;
  }
}

/** Sets the exit code of the running command (commands that exit with a container's code). */
export function setExitCode(cmd: Command, code: number): void {
  (cmd as Command & { berthExitCode?: number }).berthExitCode = code;
}
