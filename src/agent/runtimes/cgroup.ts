// Direct cgroup v1 control: one group per container, spread over the memory, cpu, cpuacct and pids
// hierarchies (/sys/fs/cgroup/<controller>/berth/<id>). This is how the process runtime enforces hard
// limits and how every file-backed runtime (process, runc) reads usage. cgroup v2 is not handled: on the
// machines we run on the unified hierarchy holds only hugetlb (ENVIRONMENT.md), so v1 is what works.
import { constants } from 'node:fs';
import { access, mkdir, readFile, readdir, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Where the v1 hierarchies are mounted (overridable for machines that mount them elsewhere). */
export const CGROUP_ROOT = process.env.BERTH_CGROUP_ROOT ?? '/sys/fs/cgroup';

/** The parent group under which every container's group lives. */
export const CGROUP_PARENT = 'berth';

const CONTROLLERS = ['memory', 'cpu', 'cpuacct', 'pids'] as const;
type Controller = (typeof CONTROLLERS)[number];

/** CFS period: 100 ms is the kernel default, so a quota of vcpus × period is what `docker --cpus` sets. */
export const CFS_PERIOD_US = 100_000;

/** Hard limits for one group. */
export interface CgroupLimits {
  vcpus: number;
  ram: number;
}

/** Counters read from a group. */
export interface CgroupStats {
  cpuSeconds: number;
  ramBytes: number;
  peakRamBytes: number;
  /**
   * Processes the kernel OOM killer killed in this group (memory.oom_control's oom_kill). v1 counts a kill
   * in the victim's own group, not in the ancestor whose limit was hit.
   */
  oomKills: number;
  /** memory.limit_in_bytes. */
  ramLimit: number;
}

/** Why cgroup v1 cannot be used here, or null when it can. */
export async function cgroupV1Unusable(root = CGROUP_ROOT): Promise<string | null> {
  for (const c of CONTROLLERS) {
    try {
      await access(join(root, c, 'cgroup.procs'), constants.W_OK);
    } catch {
      return `cgroup v1 ${c} hierarchy not writable at ${join(root, c)}`;
    }
  }
  try {
    await access(join(root, 'cpu', 'cpu.cfs_quota_us'));
  } catch {
    return 'cgroup v1 cpu controller has no cpu.cfs_quota_us (CFS bandwidth control)';
  }
  return null;
}

/** CFS quota for a fractional CPU count; the kernel refuses quotas under 1 ms. */
export function cfsQuotaUs(vcpus: number): number {
  return Math.max(1000, Math.round(vcpus * CFS_PERIOD_US));
}

/** One container's group in the v1 hierarchies. */
export class CgroupV1 {
  constructor(
    /** Path below each hierarchy's root, e.g. "berth/c1". */
    readonly path: string,
    readonly root = CGROUP_ROOT,
  ) {}

  /** The group for container `id` under Berth's parent group. */
  static forContainer(id: string, root = CGROUP_ROOT): CgroupV1 {
    return new CgroupV1(`${CGROUP_PARENT}/${id}`, root);
  }

  dir(c: Controller): string {
    return join(this.root, c, this.path);
  }

  /** The cgroup.procs files a process writes its pid into to join the group in every controller. */
  procsFiles(): string[] {
    return CONTROLLERS.map((c) => join(this.dir(c), 'cgroup.procs'));
  }

  async create(limits: CgroupLimits): Promise<void> {
    for (const c of CONTROLLERS) await mkdir(this.dir(c), { recursive: true });
    await this.write('memory', 'memory.limit_in_bytes', limits.ram);
    // Without memsw the container could dodge its limit by swapping; not every kernel has it.
    await this.write('memory', 'memory.memsw.limit_in_bytes', limits.ram).catch(ignoreMissing);
    await this.write('cpu', 'cpu.cfs_period_us', CFS_PERIOD_US);
    await this.write('cpu', 'cpu.cfs_quota_us', cfsQuotaUs(limits.vcpus));
  }

  async exists(): Promise<boolean> {
    try {
      await access(this.dir('memory'));
      return true;
    } catch {
      return false;
    }
  }

  /** Pids of every process in the group and its sub-groups (runc puts the container in a sub-group). */
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
    await walk(this.dir('memory'));
    return out;
  }

  async stats(): Promise<CgroupStats> {
    const num = async (c: Controller, file: string): Promise<number> =>
      Number((await readFile(join(this.dir(c), file), 'utf8').catch(() => '0')).trim()) || 0;
    const oom = await readFile(join(this.dir('memory'), 'memory.oom_control'), 'utf8').catch(() => '');
    const m = /^oom_kill (\d+)$/m.exec(oom);
    return {
      cpuSeconds: (await num('cpuacct', 'cpuacct.usage')) / 1e9,
      ramBytes: await num('memory', 'memory.usage_in_bytes'),
      peakRamBytes: await num('memory', 'memory.max_usage_in_bytes'),
      oomKills: m ? Number(m[1]) : 0,
      ramLimit: await num('memory', 'memory.limit_in_bytes'),
    };
  }

  /**
   * Removes the group (sub-groups first) in every controller. The kernel refuses while a process is still
   * leaving, so this retries until `deadlineMs` passes and then reports what is left.
   */
  async remove(deadlineMs = 5000): Promise<void> {
    const until = Date.now() + deadlineMs;
    // Every hierarchy, not only ours: runc and docker also create the group in blkio, cpuset, devices...
    const hierarchies = await readdir(this.root, { withFileTypes: true }).catch(() => []);
    for (const h of hierarchies) {
      if (!h.isDirectory()) continue;
      const dir = join(this.root, h.name, this.path);
      for (;;) {
        try {
          await removeTree(dir);
          break;
        } catch (err) {
          if (Date.now() > until) throw new Error(`cannot remove cgroup ${dir}: ${(err as Error).message}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    }
  }

  private async write(c: Controller, file: string, value: number): Promise<void> {
    await writeFile(join(this.dir(c), file), String(value));
  }
}

/** SIGKILLs every process in the group until none is left (or `deadlineMs` passes), then removes it. */
export async function killCgroup(cgroup: CgroupV1, deadlineMs = 5000): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const pids = await cgroup.pids();
    if (pids.length === 0) break;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    if (Date.now() > until) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  await cgroup.remove(Math.max(0, until - Date.now()));
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

function ignoreMissing(err: NodeJS.ErrnoException): void {
  if (err.code !== 'ENOENT') throw err;
}
