// Reads a container's output files from the start while they grow, until the container has ended
// and both files are drained. Polling (not fs.watch) because the files may be written by a process
// started before this agent did, on file systems where inotify misses writes.
import { open, type FileHandle } from 'node:fs/promises';
import type { OutputChunk } from './types.js';

const CHUNK = 64 * 1024;

/** The output files of a container, by stream. */
export type OutputFiles = Record<OutputChunk['stream'], string>;

/**
 * Yields the files' contents in order per stream. `ended()` is checked before each pass, so once it
 * says true, one more pass reads everything written before the container ended.
 */
export async function* tailFiles(
  files: OutputFiles,
  ended: () => Promise<boolean>,
  pollMs = 25,
): AsyncGenerator<OutputChunk> {
  const streams = ['stdout', 'stderr'] as const;
  const fds: Partial<Record<OutputChunk['stream'], FileHandle>> = {};
  const offsets = { stdout: 0, stderr: 0 };
  try {
    for (;;) {
      const finished = await ended();
      let got = false;
      for (const stream of streams) {
        let fd = fds[stream];
        if (!fd) {
          fd = await open(files[stream], 'r').catch(() => undefined);
          if (!fd) continue;
          fds[stream] = fd;
        }
        for (;;) {
          const buf = Buffer.allocUnsafe(CHUNK);
          const { bytesRead } = await fd.read(buf, 0, CHUNK, offsets[stream]);
          if (bytesRead === 0) break;
          offsets[stream] += bytesRead;
          got = true;
          yield { stream, data: buf.subarray(0, bytesRead) };
        }
      }
      if (finished) return;
      if (!got) await new Promise((r) => setTimeout(r, pollMs));
    }
  } finally {
    for (const fd of Object.values(fds)) await fd.close();
  }
}
