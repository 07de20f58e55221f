// CRIU (process checkpoint/restore) for plain containers, where `criu check` passes (issue 16 item 3).
// Debian 12's CRIU 3.17 fails `criu check` on the 6.18 kernel of our machines (the vDSO layout of kernels
// 6.13+, fixed upstream in newer CRIU) and passes on Debian 12's own 6.1 kernel (the `test` QEMU guest,
// with the netfilter and socket-diag modules loaded): there a process tree is dumped and restored, its
// count going on (test/guest/criu-case.ts). The process runtime uses it for unsandboxed containers, when the
// agent is told to (process-criu.ts).
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { diskUsage } from './du.js';
import { criuProbeKey, probePassed, recordPassed } from './probe-cache.js';
import { findExecutable } from './sandbox.js';

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

function criuRun(opts: CriuOptions, args: string[], dir: string): Promise<void> {
  const criu = opts.criu ?? 'criu';
  return new Promise((resolve, reject) => {
    execFile(criu, args, { timeout: opts.timeoutMs ?? 60_000 }, (err, _stdout, stderr) => {
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
