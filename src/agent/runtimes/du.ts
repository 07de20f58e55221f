// Disk usage of a directory tree, as `du` counts it (allocated blocks, hard links once), so a sparse
// file does not count as scratch it does not occupy.
import { execFile } from 'node:child_process';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

/** Bytes allocated under `dir` (0 if it does not exist). Files that vanish during the walk are skipped. */
export async function diskUsage(dir: string): Promise<number> {
  const seen = new Set<string>();
  let total = 0;
  const walk = async (path: string): Promise<void> => {
    let st;
    try {
      st = await lstat(path);
    } catch {
      return;
    }
    if (st.nlink > 1 && !st.isDirectory()) {
      const key = `${st.dev}:${st.ino}`;
      if (seen.has(key)) return;
      seen.add(key);
    }
    total += st.blocks * 512;
    if (!st.isDirectory()) return;
    let names: string[];
    try {
      names = await readdir(path);
    } catch {
      return;
    }
    for (const n of names) await walk(join(path, n));
  };
  await walk(dir);
  return total;
}

/** Disk taken by a container's output files in its work dir (stdout, stderr, an engine's container.log). */
export async function outputDiskUsage(workDir: string): Promise<number> {
  let total = 0;
  for (const f of ['stdout', 'stderr', 'container.log']) total += await diskUsage(join(workDir, f));
  return total;
}

/** Holes are punched in whole 64KiB steps. */
export const PUNCH_ALIGN = 64 * 1024;

/**
 * Frees the disk blocks of bytes [from, to) of `file` (`to` aligned down to 64KiB; the file keeps its size,
 * its offsets and every other byte; holes read as zeros). Returns where the data still on disk starts;
 * throws when the file system cannot punch holes.
 */
export async function punchHole(file: string, from: number, to: number): Promise<number> {
  const end = Math.floor(to / PUNCH_ALIGN) * PUNCH_ALIGN;
  if (end <= from) return from;
  await exec('fallocate', ['--punch-hole', '--offset', String(from), '--length', String(end - from), file]);
  return end;
}
