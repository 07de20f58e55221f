// CRIU whole-state checkpoints of runc containers (issue 16 item 3; docs/RUNTIMES.md "CRIU"), with
// `runc checkpoint` and `runc restore`, where the agent is told to (`runc_criu`) and `criu check` passes.
// - The container's stdio are pipes (PIPED): the shim's command is a wrapper `sh` that runs runc with its
//   stdin, stdout and stderr pipes, `cat` copying the two outputs into the work dir's files. runc records
//   them in the images (descriptors.json: `pipe:[inode]`), and `runc restore` hands its own fds 0-2 to CRIU
//   in their place: the restore's wrapper gives it new pipes into the new work dir's files. (A file of the
//   work dir, as a plain start gives it, lies outside the container's mount namespace, where CRIU cannot
//   look its mount up: so it failed for the sandboxed process container; not tried with runc.)
// - save: the container's writable layer (its overlay's upper dir, `scratch/`) is archived by GNU tar into
//   the checkpoint (whiteouts and xattrs kept; the transfer carries regular files only), then `runc
//   checkpoint` dumps the (frozen) container and ends it: runc deletes it and its cgroup, `runc
//   run` exits, and the handle's wait() reports "checkpointed to DIR". A failed checkpoint leaves it as it was.
// - restore, in another work dir: the writable layer unpacked into the new scratch dir, the overlay mounted
//   as a start mounts it, config.json made as a start makes it (from the record: the container's command and
//   limits, its new id's cgroup), then the shim runs the wrapper around `runc restore --bundle NEW`, which
//   stays in the foreground until the container ends and exits with its code, as `runc run` does. CRIU
//   puts the processes back in their old cgroup path; adoptProcesses() moves them into the new cgroup.
// - Only containers in the host's network (`container_network host`): see RUNC_CRIU_NETWORK (runc.ts).
import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Cgroup } from './cgroup.js';
import {
  criuError,
  isAbsolutePath,
  isPositiveInteger,
  isPositiveNumber,
  readCheckpointRecord,
  type FieldRule,
} from './criu.js';
import { diskUsage } from './du.js';
import type { NetworkSetting } from './sandbox.js';
import { ShimHandle } from './shim.js';
import type { RunHandle } from './types.js';

const exec = promisify(execFile);

/** The wrapper's file in the work dir: runc's exit code (the container's). */
const CODE_FILE = 'runc.code';
/** Written by `runc restore --pid-file` once the container runs on. */
export const RESTORED_FILE = 'runc.restored';
/** What a start or restore in a work dir removes first (clearRunFiles). */
export const RUNC_CRIU_RUN_FILES = [CODE_FILE, RESTORED_FILE] as const;

/** In the checkpoint directory: the record, CRIU's images, the writable layer, runc's and CRIU's logs. */
const RECORD = 'runc.json';
const IMAGES = 'images';
const UPPER_TAR = 'scratch.tar';
const WORK = 'work';

// $1 the work dir; then the runc command. runc's stdout goes to pipe A (fd 3, to the outer cat: the
// wrapper's stdout, the work dir's `stdout`), its stderr to pipe B (to the inner cat: the wrapper's stderr),
// its stdin is an empty pipe. The wrapper exits with runc's code (the container's), kept in CODE_FILE.
const PIPED = `w=$1; shift
: | { { { "$@"; echo $? >"$w/${CODE_FILE}"; } 2>&1 1>&3 3>&- | cat >&2 3>&-; } 3>&1 | cat; }
read -r c <"$w/${CODE_FILE}" 2>/dev/null; exit "\${c:-125}"`;

/** `command` (a runc run or restore) with pipes for its stdio, under the wrapper. */
export function piped(command: string[], workDir: string): string[] {
  return ['/bin/sh', '-c', PIPED, 'berth-runc-criu', workDir, ...command];
}

/** What a restore rebuilds the container's config.json from (recorded at the start, in run.json's extra). */
export interface RuncParams {
  /** The root-filesystem tarball (the overlay's lower dir is its unpacked copy on each instance). */
  image: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  vcpus: number;
  ram: number;
  network: NetworkSetting;
}

/** What save() records beside the images: where the container ran, and its params. */
export interface RuncRecord extends RuncParams {
  workDir: string;
  /** Its cgroup path below the hierarchy roots (where CRIU puts the restored processes: runc.ts). */
  cgroup: string;
}

/** CRIU's first error in its log text `log`, else runc's own message (its last error in `stderr`), or null. */
export function runcError(log: string, stderr: string): string | null {
  const msgs = [...stderr.matchAll(/msg="((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!.replace(/\\n/g, ' '));
  const plain = stderr.trim().split('\n').pop()?.trim();
  return criuError(log) ?? msgs.pop() ?? (plain || null);
}

/**
 * Saves the running (or frozen) runc container `handle` into `dir` and ends it: its writable layer is
 * archived, then `runc checkpoint` dumps it. Throws naming runc's or CRIU's error, the container as it
 * was, when the archive or the checkpoint failed.
 */
export async function saveRunc(
  handle: RunHandle,
  dir: string,
  opts: { runc: string; criu: string; timeoutMs: number },
): Promise<{ ms: number; bytes: number }> {
  if (!(handle instanceof ShimHandle) || handle.runtime !== 'runc')
    throw new Error(`not a runc container: ${handle.id} (${handle.runtime})`);
  const t0 = performance.now();
  const { workDir, extra, cgroup } = handle.facts;
  if (!extra.criu || !extra.name || !cgroup)
    throw new Error(`${handle.id} was not started for CRIU (runc_criu was off at its start)`);
  await mkdir(dir, { recursive: true });
  const rec: RuncRecord = { workDir, cgroup: cgroup.path, ...(JSON.parse(extra.criu) as RuncParams) };
  await writeFile(join(dir, RECORD), JSON.stringify(rec));
  await exec('tar', [
    ...['--xattrs', '--xattrs-include=*', '--numeric-owner', '-cpf', join(dir, UPPER_TAR)],
    ...['-C', join(workDir, 'scratch'), '.'],
  ]);
  await handle.movedTo(dir);
  try {
    await exec(
      opts.runc,
      [
        ...['--criu', opts.criu, 'checkpoint'],
        ...['--image-path', join(dir, IMAGES), '--work-path', join(dir, WORK), extra.name],
      ],
      { timeout: opts.timeoutMs },
    );
  } catch (err) {
    await handle.movedTo(null);
    const log = await readFile(join(dir, WORK, 'dump.log'), 'utf8').catch(() => '');
    const why = runcError(log, (err as { stderr?: string }).stderr ?? '') ?? (err as Error).message;
    throw new Error(`runc checkpoint failed: ${why}`);
  }
  await rm(join(dir, WORK), { recursive: true, force: true });
  return { ms: performance.now() - t0, bytes: await diskUsage(dir) };
}

/** save()'s record in `dir`, checked; throws a RunSpecError naming what is wrong. */
export function runcCheckpointRecord(dir: string): Promise<RuncRecord> {
  const abs: FieldRule = [isAbsolutePath, 'an absolute path'];
  return readCheckpointRecord<RuncRecord>(dir, RECORD, 'runc', {
    workDir: abs,
    cgroup: [
      (v) => typeof v === 'string' && /^(?!.*(^|\/)\.\.?(\/|$))[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/.test(v),
      'a cgroup path such as berth/c1',
    ],
    image: abs,
    args: [
      (v) => Array.isArray(v) && v.length > 0 && v.every((a) => typeof a === 'string'),
      'a non-empty list of strings',
    ],
    env: [
      (v) =>
        typeof v === 'object' &&
        v !== null &&
        !Array.isArray(v) &&
        Object.values(v).every((x) => typeof x === 'string'),
      'an object of strings',
    ],
    cwd: abs,
    vcpus: [isPositiveNumber, 'a number > 0'],
    ram: [isPositiveInteger, 'bytes > 0'],
    network: [(v) => v === 'none' || v === 'host', '"none" or "host"'],
  });
}

/**
 * Moves every process of `from` (where CRIU restored them) into `to` until none is left, then removes
 * `from`. A process that forks meanwhile leaves its child in `from`: the next round moves it.
 */
export async function adoptProcesses(from: Cgroup, to: Cgroup, deadlineMs = 5000): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (let pids = await from.pids(); pids.length > 0; pids = await from.pids()) {
    if (Date.now() > until) throw new Error(`cannot move the restored processes out of ${from.path}`);
    for (const pid of pids) for (const f of to.procsFiles()) await writeFile(f, `${pid}\n`).catch(() => {});
  }
  await from.remove(deadlineMs);
}

/** Unpacks the checkpoint's writable layer into `scratch` (an empty directory). */
export async function unpackScratch(dir: string, scratch: string): Promise<void> {
  await exec('tar', [
    ...['--xattrs', '--xattrs-include=*', '--numeric-owner', '-xpf', join(dir, UPPER_TAR)],
    ...['-C', scratch],
  ]);
}

/** The `runc restore` command (under piped()) of checkpoint `dir` as container `name` from `bundle`. */
export function restoreCommand(
  runc: string,
  criu: string,
  dir: string,
  bundle: string,
  name: string,
  workDir: string,
): string[] {
  return piped(
    [
      // The tasks stay in the cgroup runc put CRIU in, the new container's (with its limits); CRIU's own
      // restore of the dumped cgroups would recreate the old container's path and put them there.
      ...[runc, '--criu', criu, 'restore'],
      ...['--image-path', join(dir, IMAGES), '--work-path', join(dir, WORK), '--bundle', bundle],
      ...['--pid-file', join(workDir, RESTORED_FILE), name],
    ],
    workDir,
  );
}

/** Where the restore writes CRIU's log (its first error names why a restore failed). */
export function restoreLog(dir: string): string {
  return join(dir, WORK, 'restore.log');
}
