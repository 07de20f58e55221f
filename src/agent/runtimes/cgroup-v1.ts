// cgroup v1: one directory per controller hierarchy (/sys/fs/cgroup/<controller>/<path>). The machines
// Berth was first built on mount v1 (with an empty unified hierarchy beside it: "hybrid").
import { constants } from 'node:fs';
import { access, mkdir, readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CFS_PERIOD_US,
  CgroupBase,
  cfsQuotaUs,
  ignoreMissing,
  pollUntil,
  readKey,
  readNumber,
  writeValue,
  type Cgroup,
  type CgroupLimits,
  type CgroupStats,
} from './cgroup-common.js';

/** The hierarchies a container's processes join. */
export const V1_CONTROLLERS = ['memory', 'cpu', 'cpuacct', 'pids', 'freezer'] as const;
type Controller = (typeof V1_CONTROLLERS)[number];

/** Why the v1 hierarchies under `root` cannot hold Berth's groups, or null when they can. */
export async function v1Unusable(root: string): Promise<string | null> {
  for (const c of V1_CONTROLLERS) {
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

/** One group in the v1 hierarchies. */
export class CgroupV1 extends CgroupBase implements Cgroup {
  readonly version = 1 as const;

  dir(c: Controller): string {
    return join(this.root, c, this.path);
  }

  protected procsDir(): string {
    return this.dir('memory');
  }

  procsFiles(): string[] {
    return V1_CONTROLLERS.map((c) => join(this.dir(c), 'cgroup.procs'));
  }

  async create(limits: CgroupLimits): Promise<void> {
    for (const c of V1_CONTROLLERS) await mkdir(this.dir(c), { recursive: true });
    await writeValue(join(this.dir('memory'), 'memory.limit_in_bytes'), limits.ram);
    // Without memsw the container could dodge its limit by swapping; not every kernel has it.
    await writeValue(join(this.dir('memory'), 'memory.memsw.limit_in_bytes'), limits.ram).catch(
      ignoreMissing,
    );
    await writeValue(join(this.dir('cpu'), 'cpu.cfs_period_us'), CFS_PERIOD_US);
    await writeValue(join(this.dir('cpu'), 'cpu.cfs_quota_us'), cfsQuotaUs(limits.vcpus));
    if (limits.pids !== undefined) await writeValue(join(this.dir('pids'), 'pids.max'), limits.pids);
  }

  async exists(): Promise<boolean> {
    return access(this.dir('memory')).then(
      () => true,
      () => false,
    );
  }

  async stats(): Promise<CgroupStats> {
    const mem = (file: string): Promise<number> => readNumber(join(this.dir('memory'), file));
    return {
      cpuSeconds: (await readNumber(join(this.dir('cpuacct'), 'cpuacct.usage'))) / 1e9,
      ramBytes: await mem('memory.usage_in_bytes'),
      peakRamBytes: await mem('memory.max_usage_in_bytes'),
      oomKills: await readKey(join(this.dir('memory'), 'memory.oom_control'), 'oom_kill'),
      ramLimit: await readNumber(join(this.dir('memory'), 'memory.limit_in_bytes'), Infinity),
      inactiveFileBytes: await readKey(join(this.dir('memory'), 'memory.stat'), 'total_inactive_file'),
    };
  }

  async freeze(deadlineMs = 5000): Promise<void> {
    const file = join(this.dir('freezer'), 'freezer.state');
    // FREEZING means a task has not stopped yet. Writing FROZEN again retries it (kernel freezer docs); a
    // group that stays FREEZING (seen here with a container's init just after it exec'ed) is thawed and
    // frozen afresh every 100 ms, which is also what runc does.
    let since = Date.now();
    await pollUntil(
      async () => {
        if ((await this.freezerState()) === 'FROZEN') return true;
        if (Date.now() - since > 100) {
          await writeValue(file, 'THAWED');
          since = Date.now();
        }
        await writeValue(file, 'FROZEN');
        return (await this.freezerState()) === 'FROZEN';
      },
      deadlineMs,
      `cgroup ${this.path} to freeze`,
    );
  }

  async thaw(deadlineMs = 5000): Promise<void> {
    await writeValue(join(this.dir('freezer'), 'freezer.state'), 'THAWED');
    await pollUntil(
      async () => (await this.freezerState()) === 'THAWED',
      deadlineMs,
      `cgroup ${this.path} to thaw`,
    );
  }

  async isFrozen(): Promise<boolean> {
    const s = await this.freezerState();
    return s === 'FROZEN' || s === 'FREEZING';
  }

  private async freezerState(): Promise<string> {
    return (await readFile(join(this.dir('freezer'), 'freezer.state'), 'utf8').catch(() => 'THAWED')).trim();
  }

  protected override async thawForKill(deadlineMs: number): Promise<void> {
    // A sub-group frozen on its own (a container's group in an instance's slice) stays frozen when its
    // parent is not: thaw every one, bottom-up, each as a group of its own.
    const walk = async (path: string): Promise<void> => {
      const entries = await readdir(join(this.root, 'freezer', path), { withFileTypes: true }).catch(
        () => [],
      );
      for (const e of entries) if (e.isDirectory()) await walk(`${path}/${e.name}`);
      const group = new CgroupV1(path, this.root);
      if (await group.isFrozen()) await group.thaw(deadlineMs).catch(() => {});
    };
    await walk(this.path);
  }

  async dirs(): Promise<string[]> {
    // Every hierarchy, not only ours: runc and docker also create the group in blkio, cpuset, devices...
    const hierarchies = await readdir(this.root, { withFileTypes: true }).catch(() => []);
    return hierarchies.filter((h) => h.isDirectory()).map((h) => join(this.root, h.name, this.path));
  }
}
