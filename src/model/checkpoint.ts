// The wire of containers' checkpoints between agents and the API (issue 16): shared by the API's routes
// (src/api/routes/checkpoints.ts) and the agent's client, with no dependency of either.

/** The checkpoint's media type: a POSIX tar archive of the container's $BERTH_CHECKPOINT_DIR. */
export const CHECKPOINT_TYPE = 'application/x-tar';

/** The header carrying the container's per-lock token on the checkpoint calls. */
export const LOCK_TOKEN_HEADER = 'x-berth-lock-token';

/**
 * The header of a checkpoint's download naming the runtime that saved the container whole (the `whole`
 * query parameter of its upload); absent when the container wrote the checkpoint itself.
 */
export const WHOLE_STATE_HEADER = 'x-berth-whole-state';

/** A runtime's name, as the `whole` parameter and WHOLE_STATE_HEADER carry it. */
export const RUNTIME_NAME_PATTERN = '^[a-z][a-z0-9-]{0,31}$';

/** Why an archive of `bytes` bytes cannot be a tar archive (512-byte blocks, at least 2), or null. */
export function notTarLength(bytes: number): string | null {
  if (bytes < 1024 || bytes % 512 !== 0)
    return `expected a tar archive (a whole number of 512-byte blocks, at least 2), got ${bytes} bytes`;
  return null;
}

/** Why an archive starting with `head` (its first 512 bytes at least) is not a tar archive, or null. */
export function notTarHead(head: Buffer): string | null {
  if (head.subarray(257, 262).toString('latin1') !== 'ustar')
    return 'expected a tar archive: its first header has no "ustar" magic';
  return null;
}

/** Why `data` is not a tar archive (ustar or GNU: 512-byte blocks, the magic at 257), or null. */
export function notTar(data: Buffer): string | null {
  return notTarLength(data.length) ?? notTarHead(data);
}
