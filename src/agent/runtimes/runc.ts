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
import { ImageNotFoundError, RuntimeTransientError } from './errors.js';
import { classifyImage, ensureRootfs } from './image.js';
import { ociConfig } from './oci.js';
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
import { RunSpecError, validateSpec, type RunHandle, type RunSpec, type Runtime } from './types.js';

const exec = promisify(execFile);

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
  ) {}

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
    const lower = await ensureRootfs(ref.path, this.imageCache);
    const name = `berth-${spec.id}`;
    const bundle = join(spec.workDir, 'bundle');
    const upper = join(spec.workDir, 'scratch');
    const ovlWork = join(spec.workDir, '.overlay-work');
    const rootfs = join(bundle, 'rootfs');
    for (const d of [rootfs, upper, ovlWork]) await mkdir(d, { recursive: true });
    await clearRunFiles(spec.workDir);
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
    const cgroup = await requireContainerCgroup(spec.id, this.cgroupParent);
    const config = ociConfig({
      args: spec.command,
      env: spec.env,
      cwd: spec.cwd ?? '/',
      hostname: spec.id.slice(0, 63),
      cgroupsPath: `/${cgroup.path}`,
      vcpus: spec.vcpus,
      ram: spec.ram,
      network: this.network,
    });
    await writeFile(join(bundle, 'config.json'), JSON.stringify(config));
    const startedAt = Date.now();
    const extra = { name, bundle, rootfs, ovlWork };
    let shim;
    try {
      shim = await spawnShim({
        workDir: spec.workDir,
        command: [this.runc, 'run', '--keep', '--bundle', bundle, name],
        env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' },
        cwd: spec.workDir,
        cgroupProcs: [], // runc and the shim stay outside: the container's limit is for the container only
      });
    } catch (err) {
      await this.release(extra);
      throw new RuntimeTransientError(this.name, `cannot start the shim: ${(err as Error).message}`, {
        cause: err,
      });
    }
    const state: RunState = {
      runtime: this.name,
      id: spec.id,
      shim: shim.ref,
      startedAt,
      cgroup: cgroup.path,
      warning: null,
      extra,
    };
    await writeRunState(spec.workDir, state);
    return new ShimHandle(state, spec.workDir, await this.hooks(state, spec.workDir), shim.child);
  }

  async reattach(id: string, workDir: string): Promise<RunHandle | null> {
    const state = await readRunState(workDir);
    if (!state || state.runtime !== this.name || state.id !== id) return null;
    return new ShimHandle(state, workDir, await this.hooks(state, workDir));
  }

  async discard(id: string, workDir: string): Promise<void> {
    const host = await probeCgroups();
    if (host.unusable === null) await killCgroup(containerCgroup(host, id, this.cgroupParent));
    const bundle = join(workDir, 'bundle');
    await this.release({
      name: `berth-${id}`,
      bundle,
      rootfs: join(bundle, 'rootfs'),
      ovlWork: join(workDir, '.overlay-work'),
    });
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
