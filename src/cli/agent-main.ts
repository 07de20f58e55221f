// `berth agent …` alone (bin/berth.js picks it when the first argument is `agent`): the same flags,
// options and errors as the whole CLI, without loading the other commands (the server, the store, the
// dispatcher…). A SLURM job starts a one-shot agent per container, so its start-up is on every job's path.
import { registerAgent } from './commands/agent.js';
import { newProgram, runProgram } from './program.js';

/** Runs `berth agent`; resolves to the process exit code. */
export function main(argv: string[]): Promise<number> {
  return runProgram(newProgram([registerAgent]), argv);
}
