// The process runtime: the command runs from the host's own programs, in a sandbox (sandbox.ts: its own
// namespaces, a read-only view of the host's system directories, its work dir the only writable host
// directory, a uid of its own), inside a cgroup (v1 or v2, cgroup.ts) that holds its CPU quota and memory
// limit. Without permission to create cgroups it still runs, unlimited, and says so in the handle's warning
// (the agent writes it to the container log). Without a usable sandbox it refuses to run anything, unless
// the operator chose `sandbox: 'none'` (then the command is a plain host process: unsafe, see
// docs/SECURITY.md).
import { chmod, chown, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CGROUP_ROOT, cgroupAt, containerCgroup, killCgroup, probeCgroups, type Cgroup } from './cgroup.js';
import { RuntimeTransientError } from './errors.js';
import { probeSandbox, sandboxPlan, type NetworkSetting, type SandboxSetting } from './sandbox.js';
import { ShimHandle, clearRunFiles, readRunState, spawnShim, writeRunState, type RunState } from './shim.js';
import {
  RunSpecError,
  validateSpec,
  type PreparedStart,
  type RunHandle,
  type RunSpec,
  type Runtime,
} from './types.js';

/** The sandbox's options file in the work dir (0600; the shim removes it once bwrap has it open). */
const SANDBOX_ARGS = 'sandbox.args';

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** What the shim runs, with which environment, where. */
interface ShimCommand {
  command: string[];
  env: Record<string, string>;
  cwd: string;
  fd3File?: string;
}

/** How the process runtime isolates containers. */
export interface ProcessRuntimeOptions {
  /** `bwrap` (default) or `none`: no isolation at all (the operator's explicit, unsafe choice). */
  sandbox?: SandboxSetting;
  /** The sandbox's network: `none` (default; loopback only) or `host`. */
  network?: NetworkSetting;
  /** Host paths the sandbox must hide even where it shows the tree they are in (BERTH_HOME, agent dir). */
  hide?: string[];
  /** bwrap executable (default `bwrap` on PATH; `berth agent --bwrap`). */
  bwrap?: string;
  /** The cgroup under which containers' groups are created (default `berth`). */
  cgroupParent?: string;
  /** Where a passed sandbox probe is remembered between agents on this node (probe-cache.ts); none: not. */
  probeCache?: string | null;
}

/** Runs containers with no image as sandboxed host processes in a cgroup. */
export class ProcessRuntime implements Runtime {
  readonly name = 'process';

  constructor(
    /** Where the cgroup hierarchies are mounted (tests point it elsewhere to run without limits). */
    private readonly cgroupRoot = CGROUP_ROOT,
    private readonly opts: ProcessRuntimeOptions = {},
  ) {}

  get sandbox(): SandboxSetting {
    return this.opts.sandbox ?? 'bwrap';
  }

  /** null when containers can run here; limits depend on cgroup permission (see start's warning). */
  async available(): Promise<string | null> {
    if (this.sandbox === 'none') return null;
    const tools = await probeSandbox(this.opts.bwrap, this.opts.probeCache ?? null);
    return typeof tools === 'string'
      ? `${tools}; image-less containers are refused (the unsafe alternative: process sandbox "none")`
      : null;
  }

  async start(spec: RunSpec): Promise<RunHandle> {
    return (await this.prepare(spec)).start();
  }

  /** Checks, scratch dir, cgroup and sandbox plan; the shim's spawn is left to the PreparedStart. */
  async prepare(spec: RunSpec): Promise<PreparedStart> {
    validateSpec(spec);
    if (spec.image)
      throw new RunSpecError(`image: the process runtime runs no image, got ${JSON.stringify(spec.image)}`);
    if (spec.gpus > 0)
      throw new RunSpecError(`gpus: the process runtime cannot assign GPUs, got ${spec.gpus}`);
    const why = await this.available();
    if (why) throw new RuntimeTransientError(this.name, why);
    const scratchDir = join(spec.workDir, 'scratch');
    await clearRunFiles(spec.workDir);
    await mkdir(scratchDir, { recursive: true });
    const host = await probeCgroups(this.cgroupRoot);
    let cgroup: Cgroup | null = null;
    let warning: string | null = null;
    if (host.unusable !== null) {
      warning = `process runtime: ${host.unusable}; running without CPU and memory limits`;
    } else {
      cgroup = containerCgroup(host, spec.id, this.opts.cgroupParent);
      await cgroup.create({ vcpus: spec.vcpus, ram: spec.ram });
    }
    let args: ShimCommand;
    try {
      args = await this.command(spec, scratchDir);
    } catch (err) {
      await cgroup?.remove();
      throw err;
    }
    if (this.sandbox === 'none')
      warning = [
        warning,
        'process runtime: no sandbox (configured "none"): the container runs as a host process',
      ]
        .filter(Boolean)
        .join('; ');
    /** What prepare made, removed when the start fails or is abandoned. */
    const undo = async () => {
      if (args.fd3File) await rm(args.fd3File, { force: true });
      await cgroup?.remove();
    };
    return {
      start: async () => {
        const startedAt = Date.now();
        let shim;
        try {
          shim = await spawnShim({
            workDir: spec.workDir,
            cgroupProcs: cgroup ? cgroup.procsFiles() : [],
            ...args,
          });
        } catch (err) {
          await undo();
          throw err;
        }
        const state: RunState = {
          runtime: this.name,
          id: spec.id,
          shim: shim.ref,
          startedAt,
          cgroup: cgroup?.path ?? null,
          sandboxed: args.fd3File !== undefined,
          warning,
          extra: {},
        };
        await writeRunState(spec.workDir, state);
        return new ShimHandle(state, spec.workDir, { cgroup, scratchDir }, shim.child);
      },
      abandon: async () => {
        await undo().catch(() => {});
        await rm(scratchDir, { recursive: true, force: true }).catch(() => {});
      },
    };
  }

  /** What the shim runs: the command in its sandbox, or (sandbox "none") the bare command. */
  private async command(spec: RunSpec, scratchDir: string): Promise<ShimCommand> {
    const env = { PATH: DEFAULT_PATH, HOME: scratchDir, TMPDIR: scratchDir, ...spec.env };
    const cwd = spec.cwd ?? scratchDir;
    if (this.sandbox === 'none') return { command: spec.command, env, cwd };
    const tools = await probeSandbox(this.opts.bwrap, this.opts.probeCache ?? null);
    if (typeof tools === 'string') throw new RuntimeTransientError(this.name, tools);
    const plan = await sandboxPlan(tools, {
      id: spec.id,
      command: spec.command,
      env,
      cwd,
      workDir: scratchDir,
      network: this.opts.network ?? 'none',
      hide: this.opts.hide ?? [],
    });
    if (plan.uid !== null) await chown(scratchDir, plan.uid, plan.uid);
    await chmod(scratchDir, 0o700);
    const fd3File = join(spec.workDir, SANDBOX_ARGS);
    await writeFile(fd3File, plan.options, { mode: 0o600 });
    // The shim (root) runs with a fixed environment: the container's (LD_PRELOAD...) reaches only the sandbox.
    return { command: plan.argv, env: { PATH: DEFAULT_PATH }, cwd: spec.workDir, fd3File };
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
    await killCgroup(containerCgroup(host, id, this.opts.cgroupParent));
  }
}
