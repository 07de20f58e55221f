// The process runtime: the command runs as a plain host process in the container's work dir, inside a
// cgroup (v1 or v2, cgroup.ts) that holds its CPU quota and memory limit. Without permission to create cgroups it
// still runs, unlimited, and says so in the handle's warning (the agent writes it to the container log).
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { CGROUP_ROOT, cgroupAt, containerCgroup, killCgroup, probeCgroups, type Cgroup } from './cgroup.js';
import { ShimHandle, clearRunFiles, readRunState, spawnShim, writeRunState, type RunState } from './shim.js';
import { RunSpecError, validateSpec, type RunHandle, type RunSpec, type Runtime } from './types.js';

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Runs containers with no image as host processes in a cgroup. */
export class ProcessRuntime implements Runtime {
  readonly name = 'process';

  constructor(
    /** Where the cgroup hierarchies are mounted (tests point it elsewhere to run without limits). */
    private readonly cgroupRoot = CGROUP_ROOT,
  ) {}

  async available(): Promise<string | null> {
    return null; // always usable; limits depend on cgroup permission (see start's warning)
  }

  async start(spec: RunSpec): Promise<RunHandle> {
    validateSpec(spec);
    if (spec.image)
      throw new RunSpecError(`image: the process runtime runs no image, got ${JSON.stringify(spec.image)}`);
    if (spec.gpus > 0)
      throw new RunSpecError(`gpus: the process runtime cannot assign GPUs, got ${spec.gpus}`);
    const scratchDir = join(spec.workDir, 'scratch');
    await clearRunFiles(spec.workDir);
    await mkdir(scratchDir, { recursive: true });
    const host = await probeCgroups(this.cgroupRoot);
    let cgroup: Cgroup | null = null;
    let warning: string | null = null;
    if (host.unusable !== null) {
      warning = `process runtime: ${host.unusable}; running without CPU and memory limits`;
    } else {
      cgroup = containerCgroup(host, spec.id);
      await cgroup.create({ vcpus: spec.vcpus, ram: spec.ram });
    }
    const env = { PATH: DEFAULT_PATH, HOME: scratchDir, TMPDIR: scratchDir, ...spec.env };
    const startedAt = Date.now();
    let shim;
    try {
      shim = await spawnShim({
        workDir: spec.workDir,
        command: spec.command,
        env,
        cwd: spec.cwd ?? scratchDir,
        cgroupProcs: cgroup ? cgroup.procsFiles() : [],
      });
    } catch (err) {
      await cgroup?.remove();
      throw err;
    }
    const state: RunState = {
      runtime: this.name,
      id: spec.id,
      shim: shim.ref,
      startedAt,
      cgroup: cgroup?.path ?? null,
      warning,
      extra: {},
    };
    await writeRunState(spec.workDir, state);
    return new ShimHandle(state, spec.workDir, { cgroup, scratchDir }, shim.child);
  }

  async reattach(id: string, workDir: string): Promise<RunHandle | null> {
    const state = await readRunState(workDir);
    if (!state || state.runtime !== this.name || state.id !== id) return null;
    const host = await probeCgroups(this.cgroupRoot);
    const cgroup = state.cgroup && host.unusable === null ? cgroupAt(host, state.cgroup) : null;
    return new ShimHandle(state, workDir, { cgroup, scratchDir: join(workDir, 'scratch') });
  }

  async discard(id: string): Promise<void> {
    // Its processes can only be found through its cgroup; without cgroups a lost start cannot be traced.
    const host = await probeCgroups(this.cgroupRoot);
    if (host.unusable !== null) return;
    await killCgroup(containerCgroup(host, id));
  }
}
