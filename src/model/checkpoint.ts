// The wire of containers' checkpoints between agents and the API (issue 16): shared by the API's routes
// (src/api/routes/checkpoints.ts) and the agent's client, with no dependency of either.

/** The checkpoint's media type: a POSIX tar archive of the container's $BERTH_CHECKPOINT_DIR. */
export const CHECKPOINT_TYPE = 'application/x-tar';

/** The header carrying the container's per-lock token on the checkpoint calls. */
export const LOCK_TOKEN_HEADER = 'x-berth-lock-token';

/** Why `data` is not a tar archive (ustar or GNU: 512-byte blocks, the magic at 257), or null. */
export function notTar(data: Buffer): string | null {
  if (data.length < 1024 || data.length % 512 !== 0)
    return `expected a tar archive (a whole number of 512-byte blocks, at least 2), got ${data.length} bytes`;
  if (data.subarray(257, 262).toString('latin1') !== 'ustar')
    return 'expected a tar archive: its first header has no "ustar" magic';
  return null;
}
