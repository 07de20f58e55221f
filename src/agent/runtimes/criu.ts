// CRIU (process checkpoint/restore) for plain containers, where `criu check` passes (issue 16 item 3).
// Debian 12's CRIU 3.17 fails `criu check` on the 6.18 kernel of our machines (the vDSO layout of kernels
// 6.13+, fixed upstream in newer CRIU) and passes on Debian 12's own 6.1 kernel (the `test` QEMU guest,
// with the netfilter and socket-diag modules loaded): there a process tree is dumped and restored, its
// count going on (test/guest/criu-case.ts). The process runtime uses it for unsandboxed containers, when the
// agent is told to (process-criu.ts).
// What the process and runc runtimes' CRIU whole state share is here too: the wait for a restore the shim
// runs (awaitRestore) and the reading of a checkpoint's JSON record (readCheckpointRecord), which the vm
// runtime's machine.json uses as well (vm.ts machineRecord).
import { execFile } from 'node:child_process';
import { lstat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pollUntil } from './cgroup-common.js';
import { diskUsage } from './du.js';
import { criuProbeKey, probePassed, recordPassed } from './probe-cache.js';
import { findExecutable } from './sandbox.js';
import { RunSpecError } from './types.js';

/** How long one criu dump or restore may take unless a runtime is told otherwise. */
export const CRIU_TIMEOUT_MS = 60_000;

/** Why CRIU cannot checkpoint here (the first error line of `criu check`), or null when it can. */
export function criuUnusable(criu = 'criu', timeoutMs = 20_000): Promise<string | null> {
  return new Promise((resolve) => {
    execFile(criu, ['check'], { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (!err) return resolve(null);
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return resolve(`${criu} not found`);
      const first = `${stderr}\n${stdout}`
        .split('\n')
        .map((l) => l.trim())
        .find((l) => l !== '');
      resolve(`criu check failed: ${first ?? `exit ${String(err.code ?? err.signal)}`}`);
    });
  });
}

/**
 * The criu program `name` (on PATH, or an absolute path) as found here, or why whole-state checkpoints
 * cannot use it (not found, `criu check`'s first error). A passed check is remembered in `cache` (when
 * given) under a key of the criu binary, the kernel release and `scope` (what else decides whether the
 * runtime's dumps work: the process sandbox setting, the runc runtime), so that the next agent on the node
 * does not run it again; a failure is never remembered (probe-cache.ts).
 */
export async function probeCriu(
  name: string,
  opts: { scope: string; cache?: string | null; timeoutMs?: number },
): Promise<{ criu: string } | { why: string }> {
  const criu = await findExecutable(name);
  if (!criu) return { why: `${name} not found` };
  const key = opts.cache ? await criuProbeKey(criu, opts.scope).catch(() => null) : null;
  if (opts.cache && key && (await probePassed(opts.cache, key))) return { criu };
  const why = await criuUnusable(criu, opts.timeoutMs);
  if (why !== null) return { why };
  if (opts.cache && key) await recordPassed(opts.cache, key).catch(() => {});
  return { criu };
}

/** How criu is run (tests point `criu` at another build; the deadline scales with emulation). */
export interface CriuOptions {
  criu?: string;
  timeoutMs?: number;
  /**
   * `--shell-job`: the tree's root need not lead its session (a process container's command is the shim's
   * child, in the shim's session); a restore puts the tree in the caller's session and process group.
   */
  shellJob?: boolean;
  /** A dump's `--freeze-cgroup`: the freezer cgroup directory criu freezes the tree through (it may be frozen). */
  freezeCgroup?: string;
}

/** The options of criuDump and criuRestore that both pass on to criu. */
function commonArgs(opts: CriuOptions): string[] {
  return opts.shellJob ? ['--shell-job'] : [];
}

/**
 * Saves the process tree rooted at `pid` into the existing directory `dir` (CRIU's images, carried as they
 * are) and ends it (criu kills the tree once dumped). Throws naming criu's first error line (from its log,
 * dump.log in `dir`) when the dump failed: the tree then runs on, untouched.
 */
export async function criuDump(
  pid: number,
  dir: string,
  opts: CriuOptions = {},
): Promise<{ ms: number; bytes: number }> {
  const t0 = performance.now();
  const freeze = opts.freezeCgroup ? ['--freeze-cgroup', opts.freezeCgroup] : [];
  // criu's own limit on collecting the tree (freezing and seizing it) is 10 s unless told: under emulation
  // and load that took longer (`Timeout reached. Try to interrupt: 0`, test/guest/criu-migrate-case.ts).
  // The whole dump is bounded by timeoutMs already; its collection gets the same bound, never a tighter one.
  const collectS = Math.max(1, Math.ceil((opts.timeoutMs ?? CRIU_TIMEOUT_MS) / 1000));
  await criuRun(
    opts,
    [
      'dump',
      '--tree',
      String(pid),
      '--images-dir',
      dir,
      '--log-file',
      'dump.log',
      ...commonArgs(opts),
      ...freeze,
      ...['--timeout', String(collectS)],
    ],
    dir,
  );
  return { ms: performance.now() - t0, bytes: await diskUsage(dir) };
}

/**
 * Resumes the process tree saved in `dir` by criuDump, detached from the caller (its root is re-parented
 * as criu exits), with the pids it had. Resolves the root's pid once it runs on; throws naming criu's first
 * error line when the restore failed (its pids taken, images from another kernel or criu).
 */
export async function criuRestore(dir: string, opts: CriuOptions = {}): Promise<number> {
  const pidFile = join(dir, 'restored.pid');
  await criuRun(
    opts,
    [
      'restore',
      '--restore-detached',
      '--images-dir',
      dir,
      '--log-file',
      'restore.log',
      '--pidfile',
      pidFile,
      ...commonArgs(opts),
    ],
    dir,
  );
  return Number((await readFile(pidFile, 'utf8')).trim());
}

/**
 * criu's first `Error` line in its log text (and stderr), without the log's timestamp and the pid of the
 * restoring task that logged it (`(00.061) 1: Error …`), or null.
 */
export function criuError(text: string): string | null {
  return (
    text
      .split('\n')
      .map((l) => l.trim().replace(/^\(\s*\d+\.\d+\)\s*(\d+:\s*)?/, ''))
      .find((l) => /^Error/.test(l)) ?? null
  );
}

/** How awaitRestore() finds a restore's end and explains its failure. */
export interface RestoreWait {
  /** The pid file, in the work dir, the restore writes once the tree runs on. */
  pidFile: string;
  /** The restore's log (criu's, or runc's CRIU log), absolute. */
  log: string;
  /** What the error starts with (`criu restore failed`, `runc restore failed`). */
  prefix: string;
  /** When to give up (epoch ms), and the timeout it stands for (named in the error). */
  deadline: number;
  timeoutMs: number;
  /**
   * Why the restore failed, from its log and the work dir's stderr (`ended`: it ended without restoring,
   * else it took too long), or null for the default: `ended (exit N) without restoring: <the last line of
   * stderr, else of the log>`, or `not done in <timeoutMs> ms`.
   */
  explain: (out: { log: string; stderr: string; ended: boolean }) => string | null;
}

/**
 * Resolves once a restore the shim runs in `workDir` (criu's or runc's, in the foreground) wrote its pid
 * file; throws `<prefix>: <why>` when the restore ended first (the shim wrote its exit file) or the deadline
 * passed.
 */
export async function awaitRestore(workDir: string, w: RestoreWait): Promise<void> {
  const exists = (f: string) =>
    lstat(join(workDir, f)).then(
      () => true,
      () => false,
    );
  let ended = false;
  // `read` never throws: pollUntil rejects only when the deadline passed.
  const done = await pollUntil(
    async () => (await exists(w.pidFile)) || (ended = await exists('exit')),
    Math.max(0, w.deadline - Date.now()),
    'the restore',
  ).then(
    () => true,
    () => false,
  );
  if (done && !ended) return;
  const read = (file: string) => readFile(file, 'utf8').catch(() => '');
  const log = await read(w.log);
  const stderr = await read(join(workDir, 'stderr'));
  const last = (t: string) => t.trim().split('\n').pop() ?? '';
  const why =
    w.explain({ log, stderr, ended }) ??
    (ended
      ? `ended (exit ${(await read(join(workDir, 'exit'))).trim()}) without restoring: ${last(stderr) || last(log) || 'no log'}`
      : `not done in ${w.timeoutMs} ms`);
  throw new Error(`${w.prefix}: ${why}`);
}

/** What a checkpoint record's field must be: a check of its value, and what it expects (named in errors). */
export type FieldRule = readonly [ok: (v: unknown) => boolean, expected: string];

/** Field checks the runtimes' records share. */
export const isAbsolutePath = (v: unknown): boolean => typeof v === 'string' && v.startsWith('/');
export const isPositiveInteger = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) > 0;
export const isPositiveNumber = (v: unknown): boolean => typeof v === 'number' && v > 0 && Number.isFinite(v);

/**
 * A checkpoint's JSON record `file` in `dir` (what a runtime's save wrote beside CRIU's images), each of
 * its fields checked by `rules` in their order. Throws a RunSpecError naming the file and what is wrong:
 * missing (not a `kind` checkpoint), not JSON, or the first wrong field, what it expects and what it holds
 * (a record that is not an object has every field missing). Fields without a rule are kept as they are.
 * (Checked by hand, as validateSpec does: the agent's bundle carries no schema library.)
 */
export async function readCheckpointRecord<R>(
  dir: string,
  file: string,
  kind: string,
  rules: { readonly [K in keyof R]-?: FieldRule },
): Promise<R> {
  const text = await readFile(join(dir, file), 'utf8').catch(() => null);
  const bad = (why: string): never => {
    throw new RunSpecError(`checkpoint: ${why}`);
  };
  if (text === null) return bad(`${file} missing (not a ${kind} checkpoint)`);
  let r: unknown;
  try {
    r = JSON.parse(text);
  } catch {
    return bad(`${file}: expected JSON`);
  }
  const rec = (typeof r === 'object' && r !== null ? r : {}) as Record<string, unknown>;
  for (const [field, [ok, expected]] of Object.entries<FieldRule>(rules))
    if (!ok(rec[field])) bad(`${file} ${field}: expected ${expected}, got ${JSON.stringify(rec[field])}`);
  return rec as R;
}

function criuRun(opts: CriuOptions, args: string[], dir: string): Promise<void> {
  const criu = opts.criu ?? 'criu';
  return new Promise((resolve, reject) => {
    execFile(criu, args, { timeout: opts.timeoutMs ?? CRIU_TIMEOUT_MS }, (err, _stdout, stderr) => {
      if (!err) return resolve();
      void readFile(join(dir, args.includes('dump') ? 'dump.log' : 'restore.log'), 'utf8')
        .catch(() => '')
        .then((log) => {
          const first = criuError(`${log}\n${stderr}`);
          reject(new Error(`criu ${args[0]} failed: ${first ?? `exit ${String(err.code ?? err.signal)}`}`));
        });
    });
  });
}
