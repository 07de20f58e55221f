// result.json: the final ExitInfo of a container, written once by whichever handle collected the exit,
// so that a later wait() (or a new agent) returns the same answer without asking the runtime again.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { OncePerKey } from './once.js';
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
export function collectOnce(workDir: string, collect: () => Promise<ExitInfo>): Promise<ExitInfo> {
  return collectors.run(workDir, async () => (await readSavedResult(workDir)) ?? collect());
}

/** Exit collectors running in this process, by work dir (one map for every runtime: work dirs are unique). */
const collectors = new OncePerKey<ExitInfo>();

/**
 * Resolves once `ended()` says so: woken at once by `exited` (the child this process started ended), else
 * polled every 50 ms (a process started by an earlier agent; the timer also keeps the event loop alive).
 */
export async function pollUntilEnded(
  ended: () => Promise<boolean>,
  exited: () => Promise<unknown> | null,
): Promise<void> {
  while (!(await ended()))
    await Promise.race([exited() ?? new Promise(() => {}), new Promise((r) => setTimeout(r, 50))]);
}

export async function saveResult(workDir: string, info: ExitInfo): Promise<void> {
  await writeFile(join(workDir, 'result.json'), JSON.stringify(info), { mode: 0o600 });
}
