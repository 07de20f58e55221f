// The process runtime: the command runs from the host's own programs, in a sandbox (sandbox.ts: its own
// namespaces, a read-only view of the host's system directories, its work dir the only writable host
// directory, a uid of its own), inside a cgroup (v1 or v2, cgroup.ts) that holds its CPU quota and memory
// limit. Without permission to create cgroups it still runs, unlimited, and says so in the handle's warning
// (the agent writes it to the container log). Without a usable sandbox it refuses to run anything, unless
// the operator chose `sandbox: 'none'` (then the command is a plain host process: unsafe, see
// docs/SECURITY.md).
import { chmod, chown, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CRIU_TIMEOUT_MS, probeCriu } from './criu.js';
import {
  CRIU_RUN_FILES,
  checkpointRecord,
  criuWrapped,
  awaitProcessRestore,
  restoreSetup,
  saveProcess,
  type Limits,
} from './process-criu.js';
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
  type WholeState,
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
  /**
   * The criu program that saves whole unsandboxed containers on a reclaim (process-criu.ts), where the
   * sandbox is `none` and `criu check` passes; unset: none are (the application-assisted checkpoint).
   */
  criu?: string | null;
  /** How long one criu dump or restore may take (default 60 s; tests scale it under emulation). */
  criuTimeoutMs?: number;
}

/** The file beside the sandbox probe's cache that remembers a passed `criu check` (probe-cache.ts). */
const CRIU_PROBE_SUFFIX = '.criu';

/** Runs containers with no image as sandboxed host processes in a cgroup. */
export class ProcessRuntime implements Runtime {
  readonly name = 'process';

  /**
   * CRIU whole-state checkpoints (process-criu.ts): set by probeWholeState() when they work here, i.e.
   * with the `criu` option, the sandbox `none`, and `criu check` passing.
   */
  wholeState?: WholeState;
  private wholeProbe: Promise<string | null> | null = null;
  /** The criu program as the probe found it on PATH (set when it passed). */
  private criuPath: string | null = null;

  constructor(
    /** Where the cgroup hierarchies are mounted (tests point it elsewhere to run without limits). */
    private readonly cgroupRoot = CGROUP_ROOT,
    private readonly opts: ProcessRuntimeOptions = {},
  ) {}

  /**
   * Why containers are not saved whole here (the agent logs it), or null when they are: then wholeState is
   * set. Probed once per runtime; a passed `criu check` is remembered beside the sandbox probe's cache,
   * keyed by the criu binary, the kernel release and the sandbox setting.
   */
  probeWholeState(): Promise<string | null> {
    this.wholeProbe ??= this.probeWholeStateNow().then((why) => {
      if (why === null) {
        const criu = this.criuPath!;
        this.wholeState = {
          save: (handle, dir) => saveProcess(handle, dir, { criu, timeoutMs: this.criuTimeoutMs }),
          restore: (spec, dir) => this.restore(spec, dir),
        };
      }
      return why;
    });
    return this.wholeProbe;
  }

  private async probeWholeStateNow(): Promise<string | null> {
    const name = this.opts.criu;
    if (!name) return 'not asked for (process_criu unset)';
    if (this.sandbox !== 'none')
      return `process sandbox ${this.sandbox}: CRIU saves only unsandboxed containers (process sandbox "none")`;
    const cache = this.opts.probeCache ? `${this.opts.probeCache}${CRIU_PROBE_SUFFIX}` : null;
    const found = await probeCriu(name, { scope: this.sandbox, cache, timeoutMs: this.opts.criuTimeoutMs });
    if ('why' in found) return found.why;
    this.criuPath = found.criu;
    return null;
  }

  private get criuTimeoutMs(): number {
    return this.opts.criuTimeoutMs ?? CRIU_TIMEOUT_MS;
  }

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
    const criu = this.opts.criu ? (await this.probeWholeState()) === null : false;
    const { cgroup, warning } = await this.runDir(spec.id, spec.workDir, spec);
    let args: ShimCommand;
    try {
      args = await this.command(spec, scratchDir);
    } catch (err) {
      await cgroup?.remove();
      throw err;
    }
    // Whole state: the command under CRIU's wrapper, the limits kept for a restore's cgroup.
    if (criu) args.command = criuWrapped(args.command, spec.workDir);
    const limits: Limits = { vcpus: spec.vcpus, ram: spec.ram };
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
          extra: criu ? { limits: JSON.stringify(limits) } : {},
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

  /**
   * A start's (or restore's) work dir without an earlier run's files, its scratch dir, and its cgroup (none
   * without permission: the warning says so).
   */
  private async runDir(
    id: string,
    workDir: string,
    limits: Limits,
  ): Promise<{ cgroup: Cgroup | null; warning: string | null }> {
    await clearRunFiles(workDir, CRIU_RUN_FILES);
    await mkdir(join(workDir, 'scratch'), { recursive: true });
    const host = await probeCgroups(this.cgroupRoot);
    let cgroup: Cgroup | null = null;
    const warnings: string[] = [];
    if (host.unusable !== null) {
      warnings.push(`process runtime: ${host.unusable}; running without CPU and memory limits`);
    } else {
      cgroup = containerCgroup(host, id, this.opts.cgroupParent);
      await cgroup.create({ vcpus: limits.vcpus, ram: limits.ram });
    }
    if (this.sandbox === 'none')
      warnings.push('process runtime: no sandbox (configured "none"): the container runs as a host process');
    return { cgroup, warning: warnings.length ? warnings.join('; ') : null };
  }

  /**
   * Resumes a container saved by wholeState.save (process-criu.ts) as `spec`'s, in its work dir: its cgroup
   * as a start makes it (with `spec`'s limits, not the saved run's), the shim running `criu restore` in the
   * foreground, run.json as for a start (so a new agent re-attaches to it). Resolves once the tree runs on;
   * throws, leaving nothing behind, when criu could not restore it (a pid taken here, another kernel).
   */
  private async restore(spec: RunSpec, dir: string): Promise<RunHandle> {
    validateSpec(spec);
    const { id, workDir } = spec;
    const why = await this.probeWholeState();
    if (why) throw new RuntimeTransientError(this.name, `no CRIU whole state: ${why}`);
    const rec = await checkpointRecord(dir);
    const limits: Limits = { vcpus: spec.vcpus, ram: spec.ram };
    const startedAt = Date.now();
    const { cgroup, warning } = await this.runDir(id, workDir, limits);
    let setup: Awaited<ReturnType<typeof restoreSetup>> | null = null;
    let handle: ShimHandle | null = null;
    try {
      setup = await restoreSetup(workDir, dir, rec, this.criuPath!);
      const shim = await spawnShim({
        workDir,
        cgroupProcs: cgroup ? cgroup.procsFiles() : [],
        command: setup.command,
        env: { PATH: DEFAULT_PATH },
        cwd: workDir,
      });
      const state: RunState = {
        runtime: this.name,
        id,
        shim: shim.ref,
        startedAt,
        cgroup: cgroup?.path ?? null,
        // The shim's child and grandchild are the restore's wrapper and criu: signals skip them.
        sandboxed: true,
        warning,
        extra: { limits: JSON.stringify(limits) },
      };
      await writeRunState(workDir, state);
      handle = new ShimHandle(state, workDir, { cgroup, scratchDir: join(workDir, 'scratch') }, shim.child);
      await awaitProcessRestore(workDir, this.criuTimeoutMs);
      return handle;
    } catch (err) {
      if (handle) {
        await handle.signal('SIGKILL').catch(() => {});
        await handle.wait().catch(() => {});
      } else await cgroup?.remove().catch(() => {});
      throw err;
    } finally {
      await setup?.cleanUp().catch(() => {});
    }
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
