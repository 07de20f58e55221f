// cgroup v2: one unified hierarchy (/sys/fs/cgroup/<path>), as current cloud images mount it (Debian 12,
// Ubuntu 22.04+, Amazon Linux 2023). Its rules differ from v1's:
// - a controller works in a group only when every ancestor lists it in cgroup.subtree_control;
// - "no internal processes": a non-root group whose subtree_control enables controllers holds no
//   processes itself, so processes only ever join leaf groups (Berth's per-container groups);
// - the freezer is not a controller: every non-root group has cgroup.freeze, and cgroup.events says
//   when the freeze is complete ("frozen 1"); a frozen process still dies of SIGKILL;
// - memory.events counts OOM kills hierarchically, memory.peak exists from Linux 5.19 on.
import { constants } from 'node:fs';
import { access, mkdir, readFile } from 'node:fs/promises';
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

/** Controllers Berth's groups need (memory and cpu) and uses when the kernel has them (pids). */
const REQUIRED = ['memory', 'cpu'] as const;
const WANTED = [...REQUIRED, 'pids'] as const;

/** Why the v2 hierarchy at `root` cannot hold Berth's groups, or null when it can. */
export async function v2Unusable(root: string): Promise<string | null> {
  const available = await controllers(join(root, 'cgroup.controllers'));
  const missing = REQUIRED.filter((c) => !available.includes(c));
  if (missing.length) return `cgroup v2 at ${root} lacks the ${missing.join(' and ')} controller`;
  try {
    await access(join(root, 'cgroup.subtree_control'), constants.W_OK);
  } catch {
    return `cgroup v2 at ${root} is not writable (cgroup.subtree_control)`;
  }
  return null;
}

/** Options of a v2 group (tests use them to take the paths older kernels take). */
export interface CgroupV2Options {
  /** Read memory.peak when the kernel has it (5.19+); false samples memory.current as older kernels must. */
  memoryPeak?: boolean;
}

/** One group in the unified hierarchy. */
export class CgroupV2 extends CgroupBase implements Cgroup {
  readonly version = 2 as const;
  /** Highest memory.current seen by stats(), the peak where the kernel keeps none. */
  private sampledPeak = 0;

  constructor(
    path: string,
    root: string,
    private readonly opts: CgroupV2Options = {},
  ) {
    super(path, root);
  }

  get dir(): string {
    return join(this.root, this.path);
  }

  protected procsDir(): string {
    return this.dir;
  }

  procsFiles(): string[] {
    return [join(this.dir, 'cgroup.procs')];
  }

  async create(limits: CgroupLimits): Promise<void> {
    // Each ancestor is created and delegates the controllers to its children, from the root down.
    const parts = this.path.split('/').filter(Boolean);
    let dir = this.root;
    for (const part of parts) {
      await enableControllers(dir);
      dir = join(dir, part);
      await mkdir(dir).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
    }
    await writeValue(join(this.dir, 'memory.max'), limits.ram);
    // No swap on top of the limit (v1's memsw = ram); absent without swap accounting, which is the same.
    await writeValue(join(this.dir, 'memory.swap.max'), 0).catch(ignoreMissing);
    await writeValue(join(this.dir, 'cpu.max'), `${cfsQuotaUs(limits.vcpus)} ${CFS_PERIOD_US}`);
    if (limits.pids !== undefined) await writeValue(join(this.dir, 'pids.max'), limits.pids);
  }

  async exists(): Promise<boolean> {
    return access(this.dir).then(
      () => true,
      () => false,
    );
  }

  async stats(): Promise<CgroupStats> {
    const ramBytes = await readNumber(join(this.dir, 'memory.current'));
    this.sampledPeak = Math.max(this.sampledPeak, ramBytes);
    const peak = this.opts.memoryPeak === false ? NaN : await readNumber(join(this.dir, 'memory.peak'), NaN);
    return {
      cpuSeconds: (await readKey(join(this.dir, 'cpu.stat'), 'usage_usec')) / 1e6,
      ramBytes,
      peakRamBytes: Number.isNaN(peak) ? this.sampledPeak : peak,
      oomKills: await readKey(join(this.dir, 'memory.events'), 'oom_kill'),
      ramLimit: await readNumber(join(this.dir, 'memory.max'), Infinity),
      inactiveFileBytes: await readKey(join(this.dir, 'memory.stat'), 'inactive_file'),
    };
  }

  async freeze(deadlineMs = 5000): Promise<void> {
    await writeValue(join(this.dir, 'cgroup.freeze'), 1);
    await pollUntil(
      async () => (await this.frozenEvent()) === 1,
      deadlineMs,
      `cgroup ${this.path} to freeze`,
    );
  }

  async thaw(deadlineMs = 5000): Promise<void> {
    await writeValue(join(this.dir, 'cgroup.freeze'), 0);
    await pollUntil(async () => (await this.frozenEvent()) === 0, deadlineMs, `cgroup ${this.path} to thaw`);
  }

  async isFrozen(): Promise<boolean> {
    return (await readNumber(join(this.dir, 'cgroup.freeze'))) === 1;
  }

  private frozenEvent(): Promise<number> {
    return readKey(join(this.dir, 'cgroup.events'), 'frozen');
  }

  override async killAll(deadlineMs = 5000): Promise<void> {
    // cgroup.kill (Linux 5.14+) kills the whole subtree at once, frozen or not, and races no fork.
    await writeValue(join(this.dir, 'cgroup.kill'), 1).catch(() => {});
    await super.killAll(deadlineMs);
  }

  async dirs(): Promise<string[]> {
    return [this.dir];
  }
}

async function controllers(file: string): Promise<string[]> {
  return (await readFile(file, 'utf8').catch(() => '')).split(/\s+/).filter(Boolean);
}

/** Delegates Berth's controllers from `dir` to its children (each one written alone: one may be absent). */
async function enableControllers(dir: string): Promise<void> {
  const enabled = await controllers(join(dir, 'cgroup.subtree_control'));
  const available = await controllers(join(dir, 'cgroup.controllers'));
  for (const c of WANTED) {
    if (enabled.includes(c) || !available.includes(c)) continue;
    await writeValue(join(dir, 'cgroup.subtree_control'), `+${c}`).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EBUSY')
        throw new Error(
          `cannot enable the ${c} controller below ${dir}: the group holds processes of its own ` +
            '(cgroup v2 allows controllers only in groups whose processes live in child groups)',
          { cause: err },
        );
      throw err;
    });
  }
}
