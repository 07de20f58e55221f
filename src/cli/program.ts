// The berth program without its commands: the global flags, running it, and how errors become exit codes.
// src/cli/main.ts builds it with every command; bin/berth.js builds it with the agent's alone for
// `berth agent` (a SLURM job starts one per container: it loads only what the agent needs).
import { Command, CommanderError } from 'commander';
import { ConfigError } from '../config/options.js';
import { withGlobalFlags } from './flags.js';
import { ApiError, describeApiError } from './client.js';
import { UsageError } from './errors.js';
import { printableLines } from './format.js';

/** The program with the global flags and the given commands. */
export function newProgram(registrations: ((program: Command) => void)[]): Command {
  const program = new Command('berth')
    .description('Run batch containers on machines created to fit the queue')
    .version('0.1.0')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  withGlobalFlags(program);
  for (const register of registrations) register(program);
  return program;
}

/** Runs a program; resolves to the process exit code. */
export async function runProgram(program: Command, argv: string[]): Promise<number> {
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
