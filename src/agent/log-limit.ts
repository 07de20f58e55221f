// The per-container log limit (issue 10 item 4) and the disk its output takes on the instance.
//
// A container may print without end (`yes`), and nothing it prints may block it, fill the instance's disk
// or the database, or keep its exit waiting while gigabytes are shipped. So, for a limit L (`berth agent
// --log-limit`, declared in src/config/options.ts):
//   head   the first L/2 bytes of stdout and stderr together are shipped as they come;
//   tail   past that, only the last L/4 of each of stdout and stderr is kept, and shipped when the container
//          ends (a rolling tail: older bytes are dropped as newer ones arrive);
//   note   the container's system stream says when the limit was reached and how much each stream lost.
// At the exit at most L is left to ship, so the exit is reported soon after the container ends.
//
// The runtimes write the output to files (the container never waits for the agent); the agent gives the
// disk space of what it no longer needs (shipped and acknowledged, or dropped) back by punching holes in
// the files (`fallocate --punch-hole`: offsets stay valid, blocks are freed), so a container's output takes
// about as much disk as it has unshipped, and that counts against its scratch limit (see Usage.outputBytes).
import { open } from 'node:fs/promises';
import { PROCESS_OPTIONS } from '../config/options.js';
import { PUNCH_ALIGN } from './runtimes/du.js';

export { punchHole } from './runtimes/du.js';

/** The default limit (bytes stored per container): the declared default of --log-limit. */
export const DEFAULT_LOG_LIMIT = PROCESS_OPTIONS.defaultOf('log_limit');

/** How a limit splits (bytes); null = no limit. */
export interface LogShares {
  /** Shipped as it comes, stdout and stderr together. */
  head: number;
  /** Kept of each of stdout and stderr past the head, shipped at the end. */
  tail: number;
}

export function logShares(limitBytes: number): LogShares | null {
  if (!(limitBytes > 0)) return null;
  return { head: Math.floor(limitBytes / 2), tail: Math.floor(limitBytes / 4) };
}

/** Past the head, less than one character's worth left: the head is used up. */
export const HEAD_SLACK = 4;

/**
 * Where the kept tail of a stream starts: `size - tail` (never before `offset`), moved to just after the
 * next newline within 64KiB so the tail starts with a whole line (and a whole character).
 */
export async function tailStart(file: string, offset: number, size: number, tail: number): Promise<number> {
  const from = Math.max(offset, size - tail);
  if (from <= offset) return offset;
  const fh = await open(file, 'r');
  try {
    const buf = Buffer.allocUnsafe(Math.min(64 * 1024, size - from));
    const { bytesRead } = await fh.read(buf, 0, buf.length, from);
    const nl = buf.subarray(0, bytesRead).indexOf(0x0a);
    return nl >= 0 ? from + nl + 1 : from;
  } finally {
    await fh.close();
  }
}

/**
 * Disk space is given back in steps of at least this much (each step is one `fallocate` process): 8MiB, or
 * less for a container with a small scratch limit, so shipped output waiting for its step never takes more
 * than a sixteenth of the scratch it counts against.
 */
export function punchStep(scratchBytes: number): number {
  const max = 8 * 1024 * 1024;
  return scratchBytes > 0 ? Math.max(PUNCH_ALIGN, Math.min(max, Math.floor(scratchBytes / 16))) : max;
}
