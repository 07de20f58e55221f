// Application-assisted checkpoints (issue 16 item 3, DESIGN §8): every container gets an empty directory,
// named by $BERTH_CHECKPOINT_DIR, inside its own writable space. When the agent reclaims it, it sends
// SIGUSR1: the application writes what it needs to continue into that directory and exits; the agent
// waits for the exit at most `checkpoint_wait`, then kills it. Whatever the directory holds when the
// container ended (and not after a success) is sent to the API as a tar archive (packed into the upload as
// it goes: tar's output is the request's body), up to `checkpoint_limit` bytes, and kept there for the
// request's next attempt (src/store/checkpoints.ts): its agent, on any instance, downloads it into its own
// $BERTH_CHECKPOINT_DIR before the container starts. The request's end (success or not) drops it on the
// server.
//
// The archive holds regular files and directories only (no links, devices or fifos the container could
// plant), packed and unpacked by GNU tar, which every Debian host has.
import { spawn } from 'node:child_process';
import { chmod, mkdir, readdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Readable } from 'node:stream';
import { counting, OverLimitError } from '../lib/counting.js';
import { retrying, type AgentClient } from './client.js';

/** The signal that asks a container to write its checkpoint and exit. */
export const CHECKPOINT_SIGNAL = 'SIGUSR1' as const;

/** The directory below the container's scratch that $BERTH_CHECKPOINT_DIR names. */
export const CHECKPOINT_SUBDIR = 'berth-checkpoint';

/**
 * The directory (in the container's own directory on the agent) where a runtime that saves whole
 * containers (Runtime.wholeState: vm) saves one on a reclaim, and where the next attempt's agent unpacks
 * it to resume it. It travels as the same tar archive as an application's checkpoint.
 */
export const WHOLE_STATE_SUBDIR = 'whole-state';

/** A container's checkpoint calls: its id and per-lock token (the API checks both). */
export interface CheckpointOwner {
  id: string;
  lockToken: string;
}

export class ApiCheckpoints {
  constructor(
    private readonly client: Pick<AgentClient, 'putCheckpoint' | 'getCheckpoint'>,
    /** The most bytes sent per checkpoint (the archive); a larger one is not kept (said in its log). */
    readonly limitBytes: number,
    /** The agent stopping: an upload or download in flight is cut off (tar killed), not retried. */
    private readonly signal?: AbortSignal,
  ) {}

  /**
   * Creates the container's checkpoint directory `into` (writable by the container: its parent, the
   * scratch, is its own), then, when its request has one (`kept`: the start order says so), fills it with
   * the kept checkpoint. Returns the archive's size, the time taken to download and unpack it and the
   * runtime that saved it whole (null: the container wrote it) when one
   * was restored, else null.
   */
  async restore(
    c: CheckpointOwner,
    into: string,
    kept: boolean,
  ): Promise<{ bytes: number; ms: number; wholeState: string | null } | null> {
    await mkdir(into, { recursive: true });
    await openUp(into);
    if (!kept) return null;
    const t0 = performance.now();
    // Unpacked as it arrives: the archive is never held whole.
    const unpack = (body: Readable) =>
      runTar(['-x', '-f', '-', '-C', into, '--no-same-owner', '--no-same-permissions'], body).then(() => {});
    const got = await retrying(() => this.client.getCheckpoint(c.id, c.lockToken, unpack, this.signal), {
      signal: this.signal,
    });
    if (got === null) return null;
    await openUp(into);
    return { bytes: got.bytes, ms: performance.now() - t0, wholeState: got.wholeState };
  }

  /**
   * Sends what `from` holds to the API for the request's next attempt (replacing an older checkpoint);
   * `reclaimed`: the container is reclaimed, so the next attempt migrates; `wholeState`: the runtime that
   * saved the container whole into `from` (absent: the container wrote it). Returns a line for the
   * container's log and whether it was kept, or null when there was nothing to keep.
   */
  async keep(
    c: CheckpointOwner,
    from: string,
    reclaimed: boolean,
    wholeState?: string,
  ): Promise<Kept | null> {
    const t0 = performance.now();
    const tree = await listTree(from);
    if (tree === null || tree.files === 0) return null;
    // The files' bytes bound the archive's from below: no need to pack what cannot be sent.
    if (tree.bytes > this.limitBytes) return overLimit(tree.bytes, this.limitBytes);
    // Packed into the upload: tar's output is the request's body as it comes (no archive file, the first
    // bytes leave as soon as tar starts). A stream is not replayable: each attempt runs tar again.
    let bytes = 0;
    try {
      await retrying(
        async () => {
          const pack = packing(from, tree.names, this.limitBytes);
          try {
            await this.client.putCheckpoint(
              c.id,
              c.lockToken,
              pack.stream,
              reclaimed,
              this.signal,
              wholeState,
            );
          } catch (err) {
            // tar's own failure cut the upload off: it is the cause (not the API's, not retried).
            throw pack.failure ?? err;
          }
          bytes = pack.bytes;
        },
        { signal: this.signal },
      );
    } catch (err) {
      if (err instanceof OverLimitError) return overLimit(err.bytes, this.limitBytes, true);
      throw err;
    }
    return {
      kept: true,
      line: `checkpoint kept: ${tree.files} file(s), ${tree.bytes} bytes (a ${bytes}-byte archive, packed and sent in ${Math.round(performance.now() - t0)} ms), for the next attempt`,
    };
  }
}

/** What became of a checkpoint: the line for the container's log. */
export interface Kept {
  kept: boolean;
  line: string;
}

/** `atLeast`: packing stopped when the archive passed the limit, after `bytes` bytes. */
const overLimit = (bytes: number, limit: number, atLeast = false): Kept => ({
  kept: false,
  line: `checkpoint of ${atLeast ? 'at least ' : ''}${bytes} bytes not kept: over the checkpoint limit of ${limit} bytes`,
});

/** One run of tar packing a checkpoint, its archive read from `stream` as tar writes it. */
interface Packing {
  /**
   * The archive. It ends only once tar exited with success, so an upload is never complete with part of
   * an archive; it fails (and the upload is cut off) when tar fails or the archive passes the limit.
   * Destroying it kills tar.
   */
  stream: Readable;
  /** The archive's bytes read so far. */
  readonly bytes: number;
  /** Why packing failed on its own (tar's error, OverLimitError: the archive passed the limit), or null. */
  failure: Error | null;
}

/** Starts GNU tar packing `names` (below `from`; regular files and directories, parents first). */
function packing(from: string, names: string[], limit: number): Packing {
  const child = spawn(
    'tar',
    [
      '-c',
      '-f',
      '-',
      '-C',
      from,
      '--no-recursion',
      '--numeric-owner',
      '--owner=0',
      '--group=0',
      '--null',
      '-T',
      '-',
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  // Counted on the way: past the limit, it fails before passing the bytes on (and tar is killed).
  const stream = counting(limit);
  const p: Packing = {
    stream,
    get bytes() {
      return stream.bytes;
    },
    failure: null,
  };
  const err: Buffer[] = [];
  const fail = (e: Error) => {
    p.failure ??= e;
    stream.destroy(e);
  };
  stream.on('error', (e) => {
    if (e instanceof OverLimitError) p.failure ??= e;
  });
  child.stderr.on('data', (b: Buffer) => err.push(b));
  child.stdout.pipe(stream, { end: false });
  child.on('error', fail);
  child.on('close', (code, sig) => {
    if (stream.destroyed) return;
    if (code === 0) stream.end();
    else
      fail(
        new Error(`tar -c failed (${code ?? sig}): ${Buffer.concat(err).toString().trim().slice(0, 500)}`),
      );
  });
  // Whoever ends it early (a failure, the request refused or cut off): tar is not left running.
  stream.on('close', () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  child.stdin.on('error', () => {}); // tar exiting early: its exit code says why
  child.stdin.end(Buffer.from(names.map((n) => `${n}\0`).join('')));
  return p;
}

/**
 * The regular files and directories below `dir` (names relative to it, parents first), with the files'
 * count and bytes; null when `dir` does not exist.
 */
export async function listTree(
  dir: string,
): Promise<{ names: string[]; files: number; bytes: number } | null> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true, recursive: true });
  } catch {
    return null;
  }
  const names: string[] = [];
  let files = 0;
  let bytes = 0;
  for (const e of entries) {
    const path = join(e.parentPath, e.name);
    if (e.isFile()) {
      files++;
      bytes += (await stat(path)).size;
    } else if (!e.isDirectory()) continue;
    names.push(relative(dir, path));
  }
  names.sort();
  return { names, files, bytes };
}

/**
 * Runs GNU tar (unpacking) with `input` on its stdin; resolves with its stdout, rejects with its stderr
 * (or with the input stream's own error, which ends tar).
 */
function runTar(args: string[], input: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn('tar', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.stdin.on('error', () => {}); // tar exiting early: its exit code says why
    child.on('close', (code) => {
      if (code === 0) resolve(Buffer.concat(out));
      else
        reject(
          new Error(`tar ${args[0]} failed (${code}): ${Buffer.concat(err).toString().trim().slice(0, 500)}`),
        );
    });
    input.on('error', (e) => {
      child.kill('SIGKILL');
      reject(e);
    });
    input.pipe(child.stdin);
  });
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
