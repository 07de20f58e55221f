// CRIU whole-state checkpoints of unsandboxed process containers (issue 16 item 3; docs/RUNTIMES.md "CRIU").
//
// Where the agent is told to use CRIU (`process_criu`), the process sandbox is `none` and `criu check`
// passes, a reclaimed process container is dumped by CRIU instead of being asked (SIGUSR1) for its own
// checkpoint, and its next attempt, on any such instance, resumes it where it stood:
// - The command runs under a wrapper shell (WRAPPER) that is the root of the dumped tree: it records its
//   pid, and writes the command's exit code to a file on its fd 4 — a restored tree's code cannot come
//   from the shim, whose command is then `criu restore` (criu exits 0 whatever the tree's code).
// - save: the scratch dir is copied into the checkpoint, then `criu dump --shell-job` ends the tree (the
//   shim records a kill; the handle's wait() reports "checkpointed to DIR" instead).
// - restore, in another work dir: the container's cgroup as a start makes it, then the shim runs
//   RESTORE_SCRIPT: `criu restore --shell-job` in the foreground until the tree ends, the new work dir's
//   stdout, stderr and exit-code file handed over with `--inherit-fd` in place of the old ones, and the old
//   work dir's path a symlink to the new one while criu restores (the tree's cwd cannot be remapped).
//   Restored processes keep their pids: where one is taken, the restore fails and the runner starts afresh.
import { cp, lstat, mkdir, readFile, rm, rmdir, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { CgroupV1, type Cgroup } from './cgroup.js';
import {
  awaitRestore,
  criuDump,
  criuError,
  isAbsolutePath,
  isPositiveInteger,
  readCheckpointRecord,
} from './criu.js';
import { diskUsage } from './du.js';
import { ShimHandle } from './shim.js';
import type { RunHandle } from './types.js';

/** The wrapper's files in the work dir: its pid (the dumped tree's root), and the command's exit code. */
export const CRIU_ROOT_FILE = 'criu.root';
const CODE_FILE = 'criu.code';
/** Written by `criu restore --pidfile` once the tree runs on; its log. */
const RESTORED_FILE = 'criu.restored';
const RESTORE_LOG = 'criu-restore.log';
/** What a start or restore in a work dir removes first (clearRunFiles). */
export const CRIU_RUN_FILES = [CRIU_ROOT_FILE, CODE_FILE, RESTORED_FILE, RESTORE_LOG] as const;

/** In the checkpoint directory: where the container ran; CRIU's images; its scratch. */
const RECORD = 'process.json';
const IMAGES = 'images';
const SCRATCH = 'scratch';

// $1 the work dir; then the command. Traps (not ignores: the command gets the default actions) the signals
// the agent sends the container, so that the wrapper outlives them and reports the command's code. The
// wrapper's own stderr is /dev/null (sh reports a command killed by a signal there: "Killed"), the
// command's the container's (fd 5 meanwhile). A trapped signal interrupts `wait`, so the wrapper waits
// again while the command is there (a zombie too: the next wait reaps it and gives its status).
const WRAPPER = `w=$1; shift; echo $$ >"$w/${CRIU_ROOT_FILE}"; exec 4>"$w/${CODE_FILE}" 5>&2 2>/dev/null
trap : HUP TERM USR1 USR2
"$@" 2>&5 4>&- 5>&- & p=$!
while :; do wait $p; c=$?; [ $c -gt 128 ] && kill -0 $p 2>/dev/null && continue; break; done
echo $c >&4; exit $c`;

// $1 the new work dir, $2 the old one, $3 criu, $4 the images; the shim runs it (its child), criu is its
// child, the restored tree criu's. Its exit code is the command's (written by the restored WRAPPER), else
// criu's. The inherit-fd keys are the old paths without their leading '/'. criu's work dir (-W: its
// statistics, which it writes after the pid file) is the new work dir, not the images' dir: the runner
// removes the checkpoint once the pid file is there, and a late `stats-restore` in it made that removal
// fail once (ENOTEMPTY, the guest's migration case).
const RESTORE_SCRIPT = `w=$1; old=\${2#/}; criu=$3; images=$4
exec 7>>"$w/stdout" 8>>"$w/stderr" 9>"$w/${CODE_FILE}"
"$criu" restore --shell-job --manage-cgroups=ignore --images-dir "$images" -W "$w" -o "$w/${RESTORE_LOG}" \\
  --pidfile "$w/${RESTORED_FILE}" --inherit-fd "fd[7]:$old/stdout" --inherit-fd "fd[8]:$old/stderr" \\
  --inherit-fd "fd[9]:$old/${CODE_FILE}"
c=$?; read -r code <"$w/${CODE_FILE}"; exit "\${code:-$c}"`;

/** The command under the wrapper (a start where CRIU whole state is on). */
export function criuWrapped(command: string[], workDir: string): string[] {
  return ['/bin/sh', '-c', WRAPPER, 'berth-criu', workDir, ...command];
}

/** A CRIU start's limits (run.json's extra; a restore's cgroup gets its own attempt's: WholeState.restore). */
export interface Limits {
  vcpus: number;
  ram: number;
}

/** What save() records beside CRIU's images. */
interface SavedRecord {
  workDir: string;
  root: number;
}

/**
 * Saves the running (or frozen) process container `handle` into `dir` and ends it: its scratch dir is
 * copied, then CRIU dumps the wrapper's tree (through its cgroup's freezer when it has one). Throws, the
 * container untouched, when the copy or the dump failed.
 */
export async function saveProcess(
  handle: RunHandle,
  dir: string,
  opts: { criu: string; timeoutMs: number },
): Promise<{ ms: number; bytes: number }> {
  if (!(handle instanceof ShimHandle) || handle.runtime !== 'process')
    throw new Error(`not a process container: ${handle.id} (${handle.runtime})`);
  const t0 = performance.now();
  const { workDir, cgroup, extra } = handle.facts;
  const root = Number((await readFile(join(workDir, CRIU_ROOT_FILE), 'utf8').catch(() => '')).trim());
  if (!(root > 0) || !extra.limits)
    throw new Error(`${handle.id} was not started for CRIU (no ${CRIU_ROOT_FILE} or limits)`);
  await mkdir(join(dir, IMAGES), { recursive: true });
  const rec: SavedRecord = { workDir, root };
  await writeFile(join(dir, RECORD), JSON.stringify(rec));
  await cp(join(workDir, 'scratch'), join(dir, SCRATCH), { recursive: true, preserveTimestamps: true });
  await handle.movedTo(dir);
  try {
    await criuDump(root, join(dir, IMAGES), {
      criu: opts.criu,
      timeoutMs: opts.timeoutMs,
      shellJob: true,
      freezeCgroup: await freezerDir(cgroup),
    });
  } catch (err) {
    await handle.movedTo(null);
    throw err;
  }
  // The tree is gone; the shim, in the same group, records its end once thawed.
  await handle.thaw();
  return { ms: performance.now() - t0, bytes: await diskUsage(dir) };
}

/**
 * The freezer directory criu freezes the tree through (already frozen by a reclaim): the group's on v2,
 * its freezer hierarchy's on v1 (untried: the guest where criu works is v2); none without a cgroup.
 */
async function freezerDir(cgroup: Cgroup | null): Promise<string | undefined> {
  if (!cgroup || !(await cgroup.exists())) return undefined;
  return cgroup instanceof CgroupV1 ? cgroup.dir('freezer') : (await cgroup.dirs())[0];
}

/** save()'s record in `dir`, checked; throws a RunSpecError naming what is wrong. */
export function checkpointRecord(dir: string): Promise<SavedRecord> {
  return readCheckpointRecord<SavedRecord>(dir, RECORD, 'process', {
    workDir: [isAbsolutePath, 'an absolute path'],
    root: [isPositiveInteger, 'a pid'],
  });
}

/**
 * Readies the work dir `workDir` for a restore of the checkpoint `dir`: its scratch back, the wrapper's pid
 * file (pids are kept), and a symlink at the old work dir's path to the new one. Returns what the shim
 * runs, and `cleanUp`, which removes the symlink (and the directories made for it) once criu restored.
 */
export async function restoreSetup(
  workDir: string,
  dir: string,
  rec: SavedRecord,
  criu: string,
): Promise<{ command: string[]; cleanUp: () => Promise<void> }> {
  if (rec.workDir === workDir) throw new Error(`checkpoint: restoring in its own work dir ${workDir}`);
  await cp(join(dir, SCRATCH), join(workDir, 'scratch'), { recursive: true, preserveTimestamps: true });
  await writeFile(join(workDir, CRIU_ROOT_FILE), `${rec.root}\n`);
  if (await lstat(rec.workDir).catch(() => null))
    throw new Error(
      `checkpoint: its old work dir ${rec.workDir} exists on this instance (CRIU restores its paths)`,
    );
  const made = await mkdir(dirname(rec.workDir), { recursive: true });
  await symlink(workDir, rec.workDir);
  const cleanUp = async () => {
    await rm(rec.workDir, { force: true });
    // The directories mkdir made (from `made` down), deepest first, each only if empty.
    for (let d = dirname(rec.workDir); made !== undefined; d = dirname(d))
      if (
        !(await rmdir(d).then(
          () => true,
          () => false,
        )) ||
        d === made
      )
        break;
  };
  return {
    command: [
      '/bin/sh',
      '-c',
      RESTORE_SCRIPT,
      'berth-criu-restore',
      workDir,
      rec.workDir,
      criu,
      join(dir, IMAGES),
    ],
    cleanUp,
  };
}

/**
 * Resolves once criu restored the tree (it writes its pid file then); throws naming criu's first error
 * (from its log) when the restore ended first (the shim wrote an exit code) or took over `deadlineMs`.
 */
export function awaitProcessRestore(workDir: string, deadlineMs: number): Promise<void> {
  return awaitRestore(workDir, {
    pidFile: RESTORED_FILE,
    log: join(workDir, RESTORE_LOG),
    prefix: 'criu restore failed',
    deadline: Date.now() + deadlineMs,
    timeoutMs: deadlineMs,
    explain: ({ log, stderr }) => criuError(`${log}\n${stderr}`),
  });
}
