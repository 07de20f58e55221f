// Disk usage of a directory tree, as `du` counts it (allocated blocks, hard links once), so a sparse
// file does not count as scratch it does not occupy.
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

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
