// What every cgroup version provides to the runtimes (the `Cgroup` interface) and the parts both
// implementations share: walking a group's processes, killing them, removing the directories.
// cgroup.ts chooses the implementation for the host; cgroup-v1.ts and cgroup-v2.ts hold the version's files.
import { readFile, readdir, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** CFS period: 100 ms is the kernel default, so a quota of vcpus × period is what `docker --cpus` sets. */
export const CFS_PERIOD_US = 100_000;

/** CFS quota for a fractional CPU count; the kernel refuses quotas under 1 ms. */
export function cfsQuotaUs(vcpus: number): number {
  return Math.max(1000, Math.round(vcpus * CFS_PERIOD_US));
}

/** Hard limits for one group. */
export interface CgroupLimits {
  vcpus: number;
  /** Memory limit in bytes; swap is not allowed beyond it. */
  ram: number;
  /** Most processes (and threads) the group may hold at once; unlimited when absent. */
  pids?: number;
}

/** Counters read from a group. */
export interface CgroupStats {
  cpuSeconds: number;
  ramBytes: number;
  /** Highest memory use since the group was created (v2 before 5.19: the highest value sampled). */
  peakRamBytes: number;
  /**
   * Processes the kernel OOM killer killed. v2 counts hierarchically (a kill in a child group shows in the
   * parent); v1 counts a kill only in the victim's own group, not in the ancestor whose limit was hit.
   */
  oomKills: number;
  /** The memory limit in bytes (Infinity when none). */
  ramLimit: number;
  /**
   * Of ramBytes, the file cache on the inactive list, which the kernel drops first when the group nears its
   * limit (memory.stat: `total_inactive_file` on v1, `inactive_file` on v2; both count sub-groups). A
   * process that wrote or read files leaves it charged to the group after it is gone.
   */
  inactiveFileBytes: number;
}

/** One container's group, whatever the cgroup version. */
export interface Cgroup {
  readonly version: 1 | 2;
  /** Path below the hierarchy root(s), e.g. "berth/c1". */
  readonly path: string;
  /** Creates the group with these limits (v2: enabling the controllers in its ancestors first). */
  create(limits: CgroupLimits): Promise<void>;
  exists(): Promise<boolean>;
  /** The cgroup.procs files a process writes its pid into to join the group (v1: one per hierarchy). */
  procsFiles(): string[];
  /** Pids of every process in the group and its sub-groups (runc and the engines nest groups). */
  pids(): Promise<number[]>;
  stats(): Promise<CgroupStats>;
  /** Freezes every process of the group; resolves once the kernel reports the whole group frozen. */
  freeze(deadlineMs?: number): Promise<void>;
  /** Thaws the group; resolves once the kernel reports it running again. */
  thaw(deadlineMs?: number): Promise<void>;
  /** Whether a freeze was asked for and not undone (the kernel may still be freezing). */
  isFrozen(): Promise<boolean>;
  /** SIGKILLs every process of the group, frozen or not, until none is left or `deadlineMs` passes. */
  killAll(deadlineMs?: number): Promise<void>;
  /** Removes the group (sub-groups first), retrying while the kernel refuses because a process is leaving. */
  remove(deadlineMs?: number): Promise<void>;
  /** Every directory that makes up the group (v1: one per hierarchy), whether it exists or not. */
  dirs(): Promise<string[]>;
}

/** The parts of a group both versions share; the subclass says where its processes are listed. */
export abstract class CgroupBase {
  abstract readonly version: 1 | 2;
  constructor(
    readonly path: string,
    readonly root: string,
  ) {}

  /** The directory whose cgroup.procs files (with its sub-groups') list the group's processes. */
  protected abstract procsDir(): string;
  abstract dirs(): Promise<string[]>;
  abstract isFrozen(): Promise<boolean>;
  abstract thaw(deadlineMs?: number): Promise<void>;

  /**
   * Thaws whatever in the group is frozen, so that the SIGKILLs already sent take effect: a frozen v1 task
   * takes a fatal signal only once thawed (v2 kills it frozen). The group itself by default; v1 also walks
   * its sub-groups (a slice whose containers froze their own groups).
   */
  protected async thawForKill(deadlineMs: number): Promise<void> {
    if (await this.isFrozen()) await this.thaw(deadlineMs).catch(() => {});
  }

  async pids(): Promise<number[]> {
    const out: number[] = [];
    const walk = async (dir: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch {
        return;
      }
      const procs = await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '');
      for (const line of procs.split('\n')) if (line) out.push(Number(line));
      for (const e of entries) if (e.isDirectory()) await walk(join(dir, e.name));
    };
    await walk(this.procsDir());
    return out;
  }

  async killAll(deadlineMs = 5000): Promise<void> {
    const until = Date.now() + deadlineMs;
    for (;;) {
      const pids = await this.pids();
      if (pids.length === 0) return;
      for (const pid of pids) killQuietly(pid, 'SIGKILL');
      // The signal is already pending: a frozen process dies on thaw without running another instruction.
      await this.thawForKill(Math.max(0, until - Date.now()));
      if (Date.now() > until) return;
      await delay(10);
    }
  }

  async remove(deadlineMs = 5000): Promise<void> {
    const until = Date.now() + deadlineMs;
    for (const dir of await this.dirs()) {
      for (;;) {
        try {
          await removeTree(dir);
          break;
        } catch (err) {
          if (Date.now() > until) throw new Error(`cannot remove cgroup ${dir}: ${(err as Error).message}`);
          await delay(20);
        }
      }
    }
  }
}

/** A number read from a cgroup file; `fallback` when the file is absent or not a number ("max"). */
export async function readNumber(file: string, fallback = 0): Promise<number> {
  const text = (await readFile(file, 'utf8').catch(() => '')).trim();
  const n = Number(text);
  return text === '' || !Number.isFinite(n) ? fallback : n;
}

/** The value of `key` in a flat-keyed file (memory.events, cpu.stat, cgroup.events); 0 when absent. */
export async function readKey(file: string, key: string): Promise<number> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

export async function writeValue(file: string, value: string | number): Promise<void> {
  await writeFile(file, String(value));
}

/**
 * Polls `read` until it returns true (every millisecond at first: a freeze usually completes within a few),
 * or throws `what` after `deadlineMs`.
 */
export async function pollUntil(
  read: () => Promise<boolean>,
  deadlineMs: number,
  what: string,
): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (let step = 1; !(await read()); step = Math.min(step * 2, 20)) {
    if (Date.now() > until) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await delay(step);
  }
}

export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export function killQuietly(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

export function ignoreMissing(err: NodeJS.ErrnoException): void {
  if (err.code !== 'ENOENT') throw err;
}

async function removeTree(dir: string): Promise<void> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  for (const e of entries) if (e.isDirectory()) await removeTree(join(dir, e.name));
  await rmdir(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
}
