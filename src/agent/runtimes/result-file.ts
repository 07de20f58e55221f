// result.json: the final ExitInfo of a container, written once by whichever handle collected the exit,
// so that a later wait() (or a new agent) returns the same answer without asking the runtime again.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { OncePerKey } from './once.js';
import type { ExitInfo } from './types.js';

/** The saved exit of the container in `workDir`, or null when none was saved yet. */
export async function readSavedResult(workDir: string): Promise<ExitInfo | null> {
  const text = await readFile(join(workDir, 'result.json'), 'utf8').catch(() => null);
  return text ? (JSON.parse(text) as ExitInfo) : null;
}

/**
 * The exit of the container in `workDir`: the saved one, else what `collect` learns (and saves); one
 * collection per work dir at a time in this process, however many handles wait.
 */
export function collectOnce(
  collectors: OncePerKey<ExitInfo>,
  workDir: string,
  collect: () => Promise<ExitInfo>,
): Promise<ExitInfo> {
  return collectors.run(workDir, async () => (await readSavedResult(workDir)) ?? collect());
}

export async function saveResult(workDir: string, info: ExitInfo): Promise<void> {
  await writeFile(join(workDir, 'result.json'), JSON.stringify(info), { mode: 0o600 });
}
