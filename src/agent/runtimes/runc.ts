// The runc runtime: an OCI bundle whose rootfs is an overlay of the image's unpacked root filesystem
// (shared, read-only, from the cache) and the container's own writable layer (work dir's scratch/, so
// scratch usage is the size of what the container wrote). `runc run --keep` runs under the shim, so the
// exit code lands in the work dir and the cgroup survives the exit long enough to read usage from it.
import { execFile } from 'node:child_process';
import { access, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  cgroupAt,
  cgroupsUnusable,
  CGROUP_PARENT,
  containerCgroup,
  killCgroup,
  probeCgroups,
  requireContainerCgroup,
} from './cgroup.js';
import { CRIU_TIMEOUT_MS, awaitRestore, probeCriu } from './criu.js';
import { ImageNotFoundError, RuntimeTransientError } from './errors.js';
import { classifyImage, ensureRootfs } from './image.js';
import { ociConfig } from './oci.js';
import { descendants } from './procfs.js';
import {
  RESTORED_FILE,
  RUNC_CRIU_RUN_FILES,
  adoptProcesses,
  piped,
  restoreCommand,
  restoreLog,
  runcError,
  runcCheckpointRecord,
  saveRunc,
  unpackScratch,
  type RuncParams,
} from './runc-criu.js';
import type { NetworkSetting } from './sandbox.js';
import {
  ShimHandle,
  clearRunFiles,
  readRunState,
  spawnShim,
  writeRunState,
  type RunState,
  type ShimHooks,
} from './shim.js';
import {
  RunSpecError,
  validateSpec,
  type RunHandle,
  type RunSpec,
  type Runtime,
  type WholeState,
} from './types.js';

const exec = promisify(execFile);

/** The runc runtime's CRIU whole state (runc-criu.ts): off unless `criu` is set. */
export interface RuncCriuOptions {
  /** The criu program runc checkpoints and restores with (`runc_criu`); unset: no whole state. */
  criu?: string | null;
  /** How long one checkpoint or restore may take (default CRIU_TIMEOUT_MS; tests scale it). */
  criuTimeoutMs?: number;
  /** Where a passed `criu check` is remembered between agents on this node (`<file>.runc-criu`); none: not. */
  probeCache?: string | null;
}

/**
 * Why a runc container with a network namespace of its own is not saved whole: CRIU (Debian 12's 3.17)
 * locks a dumped network namespace with iptables-restore, which fails where iptables is not installed (and
 * runc 1.1 gives CRIU no other way: a CRIU configuration file naming `network-lock nftables` makes its RPC
 * mode die), and dumping the namespace itself failed in the guest even past the lock (docs/RUNTIMES.md).
 */
export const RUNC_CRIU_NETWORK =
  "container network none: CRIU cannot dump a container's own network namespace here (its iptables " +
  'lock and netlink dump fail); runc whole state needs container_network host';

/** The runc container's name, its bundle and overlay paths in a work dir (run.json's extra). */
function paths(id: string, workDir: string): Record<'name' | 'bundle' | 'rootfs' | 'ovlWork', string> {
  const bundle = join(workDir, 'bundle');
  return {
    name: `berth-${id}`,
    bundle,
    rootfs: join(bundle, 'rootfs'),
    ovlWork: join(workDir, '.overlay-work'),
  };
}

/** Runs containers from root-filesystem tarballs with runc. */
export class RuncRuntime implements Runtime {
  readonly name = 'runc';

  constructor(
    private readonly runc = process.env.BERTH_RUNC ?? 'runc',
    private readonly imageCache?: string,
    /** runc's state directory (its --root default for root). */
    private readonly stateRoot = '/run/runc',
    /** The containers' network: `none` (default: own namespace, loopback only) or `host`. */
    private readonly network: NetworkSetting = 'none',
    /** The cgroup under which containers' groups are created. */
    private readonly cgroupParent = CGROUP_PARENT,
    private readonly criuOpts: RuncCriuOptions = {},
  ) {}

  /**
   * CRIU whole-state checkpoints (runc-criu.ts): set by probeWholeState() when they work here, i.e. with
   * the `criu` option and `criu check` passing.
   */
  wholeState?: WholeState;
  private wholeProbe: Promise<string | null> | null = null;
  /** The criu program as the probe found it (set when it passed). */
  private criuPath: string | null = null;

  /**
   * Why containers are not saved whole here (the agent logs it), or null when they are: then wholeState is
   * set. Probed once per runtime; a passed `criu check` is remembered beside the probe cache.
   */
  probeWholeState(): Promise<string | null> {
    this.wholeProbe ??= this.probeWholeStateNow().then((why) => {
      if (why === null) {
        const criu = this.criuPath!;
        this.wholeState = {
          save: (handle, dir) =>
            saveRunc(handle, dir, { runc: this.runc, criu, timeoutMs: this.criuTimeoutMs }),
          restore: (spec, dir) => this.restore(spec, dir),
        };
      }
      return why;
    });
    return this.wholeProbe;
  }

  private async probeWholeStateNow(): Promise<string | null> {
    const name = this.criuOpts.criu;
    if (!name) return 'not asked for (runc_criu unset)';
    if (this.network !== 'host') return RUNC_CRIU_NETWORK;
    const runcWhy = await this.available();
    if (runcWhy) return runcWhy;
    const cache = this.criuOpts.probeCache ? `${this.criuOpts.probeCache}.runc-criu` : null;
    const found = await probeCriu(name, { scope: 'runc', cache, timeoutMs: this.criuOpts.criuTimeoutMs });
    if ('why' in found) return found.why;
    this.criuPath = found.criu;
    return null;
  }

  private get criuTimeoutMs(): number {
    return this.criuOpts.criuTimeoutMs ?? CRIU_TIMEOUT_MS;
  }

  async available(): Promise<string | null> {
    if (process.getuid?.() !== 0) return 'runc runtime needs root (overlay mounts, cgroups)';
    try {
      await exec(this.runc, ['--version']);
    } catch {
      return `${this.runc} not found (apt-get install runc)`;
    }
    return cgroupsUnusable();
  }

  async start(spec: RunSpec): Promise<RunHandle> {
    const image = rootfsOf(spec);
    const criu = this.criuOpts.criu ? (await this.probeWholeState()) === null : false;
    const params: RuncParams = {
      image,
      args: spec.command,
      env: spec.env,
      cwd: spec.cwd ?? '/',
      vcpus: spec.vcpus,
      ram: spec.ram,
      network: this.network,
    };
    const extra = paths(spec.id, spec.workDir);
    const run = [this.runc, 'run', '--keep', '--bundle', extra.bundle, extra.name];
    return this.launch(spec.id, spec.workDir, params, {
      // Whole state: runc's stdio are pipes (runc-criu.ts), the params kept for a restore's config.
      command: criu ? piped(run, spec.workDir) : run,
      extra: criu ? { ...extra, criu: JSON.stringify(params) } : extra,
    });
  }

  /**
   * A start's or restore's bundle: the work dir without an earlier run's files, the overlay of the image
   * and `scratch/` mounted (a restore fills scratch/ first: `fill`), config.json for `params`, and the shim
   * running `command`. Throws, leaving nothing mounted, when a step failed.
   */
  private async launch(
    id: string,
    workDir: string,
    params: RuncParams,
    run: { command: string[]; extra: Record<string, string>; fill?: (scratch: string) => Promise<void> },
  ): Promise<ShimHandle> {
    const lower = await ensureRootfs(params.image, this.imageCache);
    const { name, bundle, rootfs, ovlWork } = paths(id, workDir);
    const upper = join(workDir, 'scratch');
    await clearRunFiles(workDir, RUNC_CRIU_RUN_FILES);
    if (run.fill) {
      await rm(upper, { recursive: true, force: true });
      await mkdir(upper, { recursive: true });
      await run.fill(upper);
    }
    for (const d of [rootfs, upper, ovlWork]) await mkdir(d, { recursive: true });
    // A container of the same name left by a crashed agent would make `runc run` refuse. (Checked first:
    // `runc delete` costs ~8 ms, a tenth of a start.)
    if (
      await access(join(this.stateRoot, name)).then(
        () => true,
        () => false,
      )
    )
      await exec(this.runc, ['delete', '--force', name]).catch(() => {});
    try {
      await exec('mount', [
        '-t',
        'overlay',
        'overlay',
        '-o',
        `lowerdir=${lower},upperdir=${upper},workdir=${ovlWork}`,
        rootfs,
      ]);
    } catch (err) {
      throw new RuntimeTransientError(
        this.name,
        `cannot mount the container's overlay: ${(err as Error).message}`,
      );
    }
    // runc creates the group itself (on v2 it also delegates the controllers down the path).
    const cgroup = await requireContainerCgroup(id, this.cgroupParent);
    const config = ociConfig({
      args: params.args,
      env: params.env,
      cwd: params.cwd,
      hostname: id.slice(0, 63),
      cgroupsPath: `/${cgroup.path}`,
      vcpus: params.vcpus,
      ram: params.ram,
      network: params.network,
    });
    await writeFile(join(bundle, 'config.json'), JSON.stringify(config));
    const startedAt = Date.now();
    let shim;
    try {
      shim = await spawnShim({
        workDir,
        command: run.command,
        env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' },
        cwd: workDir,
        cgroupProcs: [], // runc and the shim stay outside: the container's limit is for the container only
      });
    } catch (err) {
      await this.release(run.extra);
      throw new RuntimeTransientError(this.name, `cannot start the shim: ${(err as Error).message}`, {
        cause: err,
      });
    }
    const state: RunState = {
      runtime: this.name,
      id,
      shim: shim.ref,
      startedAt,
      cgroup: cgroup.path,
      warning: null,
      extra: run.extra,
    };
    await writeRunState(workDir, state);
    return new ShimHandle(state, workDir, await this.hooks(state, workDir), shim.child);
  }

  /**
   * Resumes a container saved by wholeState.save (runc-criu.ts) as `spec`'s, in its work dir: its bundle as
   * a start makes it (its writable layer from the checkpoint, its limits `spec`'s, its new id's cgroup), the
   * shim running `runc restore` in the foreground, run.json as for a start (a new agent re-attaches to it,
   * a later reclaim saves it again). Resolves once it runs on; throws, making nothing, when the checkpoint
   * is of another image or command than `spec`'s, and, leaving nothing behind (no runc container, cgroup,
   * mount or scratch), when runc or CRIU could not restore it.
   */
  private async restore(spec: RunSpec, dir: string): Promise<RunHandle> {
    const { id, workDir } = spec;
    const image = rootfsOf(spec);
    const rec = await runcCheckpointRecord(dir);
    if (rec.image !== image)
      throw new RunSpecError(`checkpoint: saved from the image ${rec.image}, this attempt runs ${image}`);
    if (rec.args.length !== spec.command.length || rec.args.some((a, i) => a !== spec.command[i]))
      throw new RunSpecError(
        `checkpoint: saved running ${JSON.stringify(rec.args)}, this attempt runs ${JSON.stringify(spec.command)}`,
      );
    if (rec.workDir === workDir) throw new Error(`checkpoint: restoring in its own work dir ${workDir}`);
    if (rec.network !== this.network)
      throw new Error(
        `checkpoint: saved with container network ${rec.network}, this agent's is ${this.network}`,
      );
    const why = await this.probeWholeState();
    if (why) throw new RuntimeTransientError(this.name, `no CRIU whole state: ${why}`);
    // CRIU (3.17, with runc 1.1) puts the restored processes back in the cgroup path they were dumped from,
    // whatever cgroup runc made for the new container: that path must be free here, and they are moved from
    // it into the new container's cgroup (with its limits) as soon as they run, and it is removed.
    const host = await probeCgroups();
    if (host.unusable !== null) throw new RuntimeTransientError(this.name, host.unusable);
    const dumped = cgroupAt(host, rec.cgroup);
    if (await dumped.exists())
      throw new Error(
        `checkpoint: its old cgroup ${rec.cgroup} exists on this instance (CRIU restores into it)`,
      );
    // The limits are this attempt's request, not the saved run's (RunSpec's doc in types.ts).
    const { workDir: _old, cgroup: _cgroup, ...saved } = rec;
    const params: RuncParams = { ...saved, vcpus: spec.vcpus, ram: spec.ram };
    const extra = { ...paths(id, workDir), criu: JSON.stringify(params) };
    const t0 = Date.now();
    let handle: ShimHandle | null = null;
    try {
      handle = await this.launch(id, workDir, params, {
        command: restoreCommand(this.runc, this.criuPath!, dir, extra.bundle, extra.name, workDir),
        extra,
        fill: (scratch) => unpackScratch(dir, scratch),
      });
      // CRIU's first error, else runc's last line, when it ended; none when it took too long.
      await awaitRestore(workDir, {
        pidFile: RESTORED_FILE,
        log: restoreLog(dir),
        prefix: 'runc restore failed',
        deadline: t0 + this.criuTimeoutMs,
        timeoutMs: this.criuTimeoutMs,
        explain: ({ log, stderr, ended }) =>
          ended ? (runcError(log, stderr) ?? 'ended without restoring (no log)') : null,
      });
      await adoptProcesses(dumped, handle.facts.cgroup!);
      return handle;
    } catch (err) {
      if (handle) {
        // runc restore (outside the container's cgroup) and what it started, then the container's end.
        const shim = (await readRunState(workDir))?.shim.pid;
        for (const pid of shim ? await descendants(shim) : []) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // gone
          }
        }
        await handle.signal('SIGKILL').catch(() => {});
        await handle.wait().catch(() => {});
      } else await this.release(extra).catch(() => {});
      await rm(join(workDir, 'scratch'), { recursive: true, force: true }).catch(() => {});
      await dumped.killAll().catch(() => {});
      await dumped.remove().catch(() => {});
      throw err;
    }
  }

  async reattach(id: string, workDir: string): Promise<RunHandle | null> {
    const state = await readRunState(workDir);
    if (!state || state.runtime !== this.name || state.id !== id) return null;
    return new ShimHandle(state, workDir, await this.hooks(state, workDir));
  }

  async discard(id: string, workDir: string): Promise<void> {
    const host = await probeCgroups();
    if (host.unusable === null) await killCgroup(containerCgroup(host, id, this.cgroupParent));
    await this.release(paths(id, workDir));
  }

  private async hooks(state: RunState, workDir: string): Promise<ShimHooks> {
    const host = await probeCgroups();
    return {
      cgroup: state.cgroup && host.unusable === null ? cgroupAt(host, state.cgroup) : null,
      scratchDir: join(workDir, 'scratch'),
      ready: () => this.running(state.extra.name!),
      finalize: () => this.release(state.extra),
    };
  }

  /** Whether runc reports the container running: created, and its command started (or already ended). */
  private async running(name: string): Promise<boolean> {
    const out = await exec(this.runc, ['state', name]).then(
      (r) => r.stdout,
      () => '',
    );
    const status = (JSON.parse(out || '{}') as { status?: string }).status;
    return status === 'running' || status === 'paused' || status === 'stopped';
  }

  /** Deletes the runc container (and with it runc's cgroups) and unmounts the rootfs. */
  private async release(extra: Record<string, string>): Promise<void> {
    const { name, bundle, rootfs, ovlWork } = extra as Record<
      'name' | 'bundle' | 'rootfs' | 'ovlWork',
      string
    >;
    // Independent (the container's mount namespace is gone), so both at once: each is a process start.
    const deleted = exec(this.runc, ['delete', '--force', name]).catch(() => {});
    let unmounted = await exec('umount', [rootfs]).then(
      () => true,
      () => false,
    );
    await deleted;
    // Busy: detach it now and let the kernel free it later. Either way nothing is mounted below the
    // bundle when it is removed, so the removal cannot reach into the shared image.
    if (!unmounted)
      unmounted = await exec('umount', ['-l', rootfs]).then(
        () => true,
        (err: Error) => (!/mounted|mount point/.test(err.message) ? false : true),
      );
    if (unmounted) await rm(bundle, { recursive: true, force: true });
    await rm(ovlWork, { recursive: true, force: true });
  }
}

/**
 * The root-filesystem tarball `spec` runs (a start's and a restore's), its spec checked for this runtime;
 * throws a RunSpecError (or ImageNotFoundError for an image name) naming what is wrong.
 */
function rootfsOf(spec: RunSpec): string {
  validateSpec(spec);
  if (spec.gpus > 0) throw new RunSpecError(`gpus: the runc runtime cannot assign GPUs, got ${spec.gpus}`);
  const ref = classifyImage(spec.image);
  if (ref.kind === 'none')
    throw new RunSpecError('image: the runc runtime needs an image; use the process runtime');
  if (ref.kind === 'name')
    throw new ImageNotFoundError(
      ref.name,
      'the runc runtime runs root-filesystem tarballs (/path/rootfs.tar[.gz]), not image names',
    );
  if (/[,:]/.test(spec.workDir))
    throw new RunSpecError(
      `workDir: expected a path without ',' or ':' (overlay options), got ${spec.workDir}`,
    );
  return ref.path;
}
