// The podman runtime, through the podman CLI (podman has no daemon to talk to). Containers are named
// berth-<id>; podman keeps their state until Berth removes them, so the same EngineHandle as docker's
// serves both a fresh start and a re-attach.
//
// Limits are set on Berth's parent cgroup (/berth/<id>, v1 or v2), not with --memory/--cpus, so that the
// group whose peak we read is the group whose limit was hit. podman 4.3 does not report OOM kills
// (State.OOMKilled stays false); on v2 the parent's memory.events counts them, on v1 the kernel counts them
// in the container's own cgroup, which podman deletes at exit: EngineHandle then infers the OOM kill from a
// SIGKILL with the peak at the limit. Every command runs with --cgroup-manager=cgroupfs, podman's default
// without systemd, so that the parent is a path on systemd hosts too (where podman would expect a slice).
// `--cgroups=no-conmon` keeps podman's monitor out of the group, so only the container is limited and measured. `--ulimit` values: root here lacks CAP_SYS_RESOURCE and the hard
// limits are below podman's defaults (ENVIRONMENT.md).
import { execFile } from 'node:child_process';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cgroupsUnusable, type Cgroup } from './cgroup.js';
import { engineState, type ContainerEngine, type EngineInspect, type EngineState } from './engine-handle.js';
import { EngineRuntime } from './engine-runtime.js';
import { ImageNotFoundError, RegistryUnavailableError, RuntimeTransientError } from './errors.js';
import { punchHole } from './du.js';
import { classifyImage, tarballKey } from './image.js';
import { REGISTRY_NOT_FOUND, pullBounded, type PullPolicy } from './pull.js';
import { isAlive, processRef } from './procfs.js';
import type { NetworkSetting } from './sandbox.js';
import { RunSpecError, type RunSpec } from './types.js';

const execFileAsync = promisify(execFile);
/** Runs the podman CLI with Berth's global options (see the top of the file). */
const exec = (
  podman: string,
  args: string[],
  opts: { timeout?: number; maxBuffer?: number; cwd?: string } = {},
): Promise<{ stdout: string; stderr: string }> =>
  execFileAsync(podman, ['--cgroup-manager', 'cgroupfs', ...args], { encoding: 'utf8', ...opts });

/** Options of the podman runtime. */
export interface PodmanOptions {
  podman?: string;
  /** The cgroup under which Berth's parent group of each container is created (default `berth`). */
  cgroupParent?: string;
  /** Pull images that are not present locally (default true). */
  pull?: boolean;
  /** How an unreachable registry is retried (default: 2 podman pulls, which retry 3 times each). */
  pullPolicy?: PullPolicy;
  /** Extra `podman run` arguments (default: the ulimits this kind of machine needs). */
  runArgs?: string[];
  /** The containers' network: `none` (default: loopback only) or `host`. */
  network?: NetworkSetting;
  /**
   * The agent's log limit. conmon's own log (container.log, in the work dir) is not capped (conmon would
   * truncate it under the reader): the copier gives back the disk of what it has copied instead.
   */
  logLimitBytes?: number;
}

/** conmon's log gives back the disk of copied bytes in steps of this much. */
const COPIED_PUNCH_STEP = 8 * 1024 * 1024;

const DEFAULT_RUN_ARGS = ['--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=32768:32768'];

/** Runs containers with podman. */
export class PodmanRuntime extends EngineRuntime {
  readonly name = 'podman';
  private readonly podman: string;
  protected readonly engine: PodmanEngine;

  constructor(private readonly opts: PodmanOptions = {}) {
    super(opts.cgroupParent);
    this.podman = opts.podman ?? process.env.BERTH_PODMAN ?? 'podman';
    this.engine = new PodmanEngine(this.podman);
  }

  async available(): Promise<string | null> {
    try {
      await exec(this.podman, ['version', '--format', '{{.Client.Version}}'], { timeout: 10_000 });
    } catch (err) {
      return `podman not usable: ${firstLine(err)}`;
    }
    return cgroupsUnusable();
  }

  protected async run(name: string, image: string, spec: RunSpec, cgroup: Cgroup): Promise<void> {
    const args = ['run', '--detach', '--name', name, '--label', `berth.container=${spec.id}`];
    args.push('--cgroup-parent', `/${cgroup.path}`, '--cgroups', 'no-conmon');
    args.push('--network', this.opts.network ?? 'none');
    args.push('--log-driver', 'k8s-file', '--log-opt', `path=${join(spec.workDir, 'container.log')}`);
    args.push(...(this.opts.runArgs ?? DEFAULT_RUN_ARGS));
    if (spec.cwd) args.push('--workdir', spec.cwd);
    for (const [k, v] of Object.entries(spec.env)) args.push('--env', `${k}=${v}`);
    args.push(image, ...spec.command);
    // In the container's own directory: conmon, which podman leaves running beside the container, writes
    // an `oom` marker into its working directory when the container is OOM-killed (it was the agent's).
    await exec(this.podman, args, { timeout: 120_000, cwd: spec.workDir });
  }

  protected runFailed(err: unknown): Error {
    return new RuntimeTransientError(this.name, `podman run failed: ${firstLine(err)}`, { cause: err });
  }

  protected async resolveImage(image: string | null): Promise<string> {
    const ref = classifyImage(image);
    if (ref.kind === 'none')
      throw new RunSpecError('image: the podman runtime needs an image; use the process runtime');
    if (ref.kind === 'tarball') {
      const name = `localhost/berth-rootfs:${await tarballKey(ref.path)}`;
      if (!(await this.imageExists(name))) {
        try {
          await exec(this.podman, ['import', '--quiet', ref.path, name], { timeout: 600_000 });
        } catch (err) {
          throw new ImageNotFoundError(ref.path, `podman import failed: ${firstLine(err)}`);
        }
      }
      return name;
    }
    if (await this.imageExists(ref.name)) return ref.name;
    if (this.opts.pull === false)
      throw new ImageNotFoundError(ref.name, 'not present on this machine (pulling is disabled)');
    // podman's CLI exits 125 for every pull failure: only its message tells a missing image (or a name
    // that resolves to no registry) from a registry it could not reach (which podman itself retries 3 times).
    await pullBounded(
      ref.name,
      async () => {
        try {
          await exec(this.podman, ['pull', '--quiet', ref.name], { timeout: 600_000 });
        } catch (err) {
          const msg = lastErrorLine(err);
          throw REGISTRY_NOT_FOUND.test(msg)
            ? new ImageNotFoundError(ref.name, msg)
            : new RegistryUnavailableError(ref.name, `podman pull: ${msg}`);
        }
      },
      this.opts.pullPolicy ?? { delaysMs: [1000] },
    );
    return ref.name;
  }

  private async imageExists(name: string): Promise<boolean> {
    try {
      await exec(this.podman, ['image', 'exists', name]);
      return true;
    } catch (err) {
      if ((err as { code?: number }).code === 1) return false;
      const msg = lastErrorLine(err);
      if (REGISTRY_NOT_FOUND.test(msg)) throw new ImageNotFoundError(name, `not a valid image name: ${msg}`);
      throw new RuntimeTransientError(this.name, `podman image exists failed: ${firstLine(err)}`, {
        cause: err,
      });
    }
  }
}

/** podman's side of a container, over its CLI. */
class PodmanEngine implements ContainerEngine {
  readonly name = 'podman';
  readonly reportsOom = false;
  constructor(private readonly podman: string) {}

  async wait(container: string): Promise<void> {
    await exec(this.podman, ['wait', container]).catch(async (err) => {
      if ((await this.inspect(container)) !== null) throw err; // gone is fine: inspect reports it
    });
  }

  async inspect(container: string): Promise<EngineState | null> {
    let out: string;
    try {
      ({ stdout: out } = await exec(this.podman, ['container', 'inspect', '--format', 'json', container], {
        maxBuffer: 16 << 20,
      }));
    } catch (err) {
      if (/no such container/i.test(String((err as { stderr?: string }).stderr))) return null;
      throw new RuntimeTransientError(this.name, `podman inspect failed: ${firstLine(err)}`, { cause: err });
    }
    const [ins] = JSON.parse(out) as EngineInspect[];
    return ins ? engineState(ins) : null;
  }

  async remove(container: string): Promise<void> {
    await exec(this.podman, ['rm', '--force', '--time', '0', '--ignore', container]).catch(() => {});
  }

  async kill(container: string, sig: NodeJS.Signals): Promise<void> {
    // Fails when the container is no longer running: nothing to signal then.
    await exec(this.podman, ['kill', '--signal', sig, container]).catch(() => {});
  }

  async pause(container: string): Promise<void> {
    await exec(this.podman, ['pause', container]);
  }

  async unpause(container: string): Promise<void> {
    await exec(this.podman, ['unpause', container]);
  }

  /**
   * Reads conmon's k8s-file log (placed in the work dir at `run`) directly: `podman logs --follow` skips
   * lines under load. Follows until the container stopped and conmon, which writes the log, is gone.
   */
  async copyLogs(container: string, stdout: FileHandle, stderr: FileHandle, follow: boolean): Promise<void> {
    const { stdout: text } = await exec(this.podman, [
      'container',
      'inspect',
      '--format',
      '{{.HostConfig.LogConfig.Path}} {{.State.ConmonPid}}',
      container,
    ]);
    const [path, conmonText] = text.trim().split(' ');
    const conmon = conmonText && Number(conmonText) > 0 ? await processRef(Number(conmonText)) : null;
    let stopped = !follow;
    const waiting = follow ? this.wait(container).finally(() => (stopped = true)) : null;
    waiting?.catch(() => {});
    const fd = await open(path!, 'r');
    try {
      let offset = 0;
      let punched = 0; // Infinity once the file system refused a punch
      let rest: Buffer = Buffer.alloc(0);
      for (;;) {
        const ended = !follow || (stopped && !(conmon && (await isAlive(conmon))));
        // What is copied is no longer needed in conmon's log: give its disk back (the copy is the record).
        if (follow && offset - punched >= COPIED_PUNCH_STEP)
          punched = await punchHole(path!, punched, offset).catch(() => Infinity);
        const buf = Buffer.allocUnsafe(256 * 1024);
        const { bytesRead } = await fd.read(buf, 0, buf.length, offset);
        offset += bytesRead;
        if (bytesRead > 0) {
          // Split at the last newline in bytes, so a multi-byte character is never cut in two.
          const data = Buffer.concat([rest, buf.subarray(0, bytesRead)]);
          const cut = data.lastIndexOf(0x0a);
          rest = cut < 0 ? data : data.subarray(cut + 1);
          if (cut >= 0)
            for (const line of data.subarray(0, cut).toString('utf8').split('\n')) {
              const entry = parseK8sLine(line);
              if (entry) await (entry.stream === 'stderr' ? stderr : stdout).write(entry.data);
            }
          continue;
        }
        if (ended) return;
        await new Promise((r) => setTimeout(r, 25));
      }
    } finally {
      await fd.close();
    }
  }
}

/** One line of the k8s-file log format: "<time> <stdout|stderr> <F|P> <content>" (P: no newline yet). */
export function parseK8sLine(line: string): { stream: 'stdout' | 'stderr'; data: string } | null {
  const a = line.indexOf(' ');
  const b = line.indexOf(' ', a + 1);
  const c = line.indexOf(' ', b + 1);
  if (a < 0 || b < 0) return null;
  const stream = line.slice(a + 1, b);
  if (stream !== 'stdout' && stream !== 'stderr') return null;
  const tag = c < 0 ? line.slice(b + 1) : line.slice(b + 1, c);
  const content = c < 0 ? '' : line.slice(c + 1);
  return { stream, data: tag === 'P' ? content : `${content}\n` };
}

/** The last "Error: ..." line of a failed podman command (its warnings come first), or its first line. */
function lastErrorLine(err: unknown): string {
  const text = ((err as { stderr?: string }).stderr ?? '').trim();
  const errors = text.split('\n').filter((l) => l.startsWith('Error: '));
  return errors.length ? errors[errors.length - 1]!.slice('Error: '.length) : firstLine(err);
}

function firstLine(err: unknown): string {
  const e = err as { stderr?: string; message?: string };
  return ((e.stderr ?? '').trim() || (e.message ?? String(err))).split('\n')[0]!;
}
