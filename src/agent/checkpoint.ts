// Application-assisted checkpoints (issue 16 item 3, DESIGN §8): every container gets an empty directory,
// named by $BERTH_CHECKPOINT_DIR, inside its own writable space. When the agent reclaims it, it sends
// SIGUSR1: the application writes what it needs to continue into that directory and exits; the agent
// waits for the exit at most `checkpoint_wait`, then kills it. Whatever the directory holds when the
// container ended (and not after a success) is kept in the checkpoint store under the container's
// request, up to `checkpoint_limit` bytes, and the next attempt of the request finds it in its own
// $BERTH_CHECKPOINT_DIR before it starts. A success removes the kept checkpoint.
//
// The store is a directory the request's next attempt can reach: on local instances (one host), the
// agents' shared `checkpoint_store`. Instances on different hosts need the API to carry it (not done:
// docs/RUNTIMES.md).
import { chmod, cp, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';

/** The signal that asks a container to write its checkpoint and exit. */
export const CHECKPOINT_SIGNAL = 'SIGUSR1' as const;

/** The directory below the container's scratch that $BERTH_CHECKPOINT_DIR names. */
export const CHECKPOINT_SUBDIR = 'berth-checkpoint';

const REQUEST_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export class CheckpointStore {
  constructor(
    readonly root: string,
    /** The most bytes kept per request; a larger checkpoint is dropped (said in the container's log). */
    readonly limitBytes: number,
  ) {}

  private dir(requestId: string): string {
    if (!REQUEST_RE.test(requestId))
      throw new Error(`request id: expected an id, got ${JSON.stringify(requestId)}`);
    return join(this.root, requestId);
  }

  /**
   * Creates the container's checkpoint directory `into` (writable by the container: its parent, the
   * scratch, is its own) holding the request's kept checkpoint, if any. Returns whether one was restored.
   */
  async restore(requestId: string, into: string): Promise<boolean> {
    await mkdir(into, { recursive: true });
    const kept = this.dir(requestId);
    const found = await stat(kept).then(
      (s) => s.isDirectory(),
      () => false,
    );
    if (found) await cp(kept, into, { recursive: true, force: true });
    await openUp(into);
    return found;
  }

  /**
   * Keeps what `from` holds for the request's next attempt (replacing an older checkpoint). Returns a line
   * for the container's log, or null when there was nothing to keep.
   */
  async keep(requestId: string, from: string): Promise<string | null> {
    const bytes = await treeBytes(from);
    if (bytes === null || bytes.files === 0) return null;
    if (bytes.bytes > this.limitBytes)
      return `checkpoint of ${bytes.bytes} bytes not kept: over the checkpoint limit of ${this.limitBytes} bytes`;
    const dest = this.dir(requestId);
    const tmp = `${dest}.tmp-${process.pid}-${Date.now()}`;
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    await cp(from, tmp, { recursive: true, force: true, verbatimSymlinks: true });
    await rm(dest, { recursive: true, force: true });
    await rename(tmp, dest);
    return `checkpoint kept: ${bytes.files} file(s), ${bytes.bytes} bytes, for the next attempt`;
  }

  /** Removes the request's checkpoint (it succeeded). */
  async forget(requestId: string): Promise<void> {
    await rm(this.dir(requestId), { recursive: true, force: true });
  }
}

/** Files and bytes below `dir` (regular files only); null when it does not exist. */
async function treeBytes(dir: string): Promise<{ files: number; bytes: number } | null> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true, recursive: true });
  } catch {
    return null;
  }
  let files = 0;
  let bytes = 0;
  for (const e of entries)
    if (e.isFile()) {
      files++;
      bytes += (await stat(join(e.parentPath, e.name))).size;
    }
  return { files, bytes };
}

/**
 * The container runs under another uid in its sandbox: its checkpoint directory and the files restored
 * into it must be writable by it. Safe: the scratch above it is the container's alone (0700).
 */
async function openUp(dir: string): Promise<void> {
  await chmod(dir, 0o777);
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true }))
    await chmod(join(e.parentPath, e.name), e.isDirectory() ? 0o777 : 0o666);
}
