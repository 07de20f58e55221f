// The docker runtime, through the Engine API on the daemon's socket (no docker CLI). Containers are
// named berth-<id> and labelled; the handle (engine-handle.ts) keeps state in the daemon, so a restarted
// agent re-attaches by name.
import { createReadStream } from 'node:fs';
import { type FileHandle } from 'node:fs/promises';
import { cgroupsUnusable, type Cgroup } from './cgroup.js';
import { DockerApi, DockerApiError, readAll } from './docker-api.js';
import { engineState, type ContainerEngine, type EngineInspect, type EngineState } from './engine-handle.js';
import { EngineRuntime } from './engine-runtime.js';
import { ImageNotFoundError, RegistryUnavailableError, RuntimeTransientError } from './errors.js';
import { classifyImage, tarballKey } from './image.js';
import { REGISTRY_NOT_FOUND, pullBounded, type PullPolicy } from './pull.js';
import type { NetworkSetting } from './sandbox.js';
import { RunSpecError, type RunSpec } from './types.js';

/** Options of the docker runtime. */
export interface DockerOptions {
  socketPath?: string;
  /** How long the daemon has to answer a request that is not a long poll (default 30 s). */
  apiTimeoutMs?: number;
  /** The cgroup under which Berth's parent group of each container is created (default `berth`). */
  cgroupParent?: string;
  /** Pull images that are not present locally (default true; false where no registry is reachable). */
  pull?: boolean;
  /** The containers' network: `none` (default: loopback only) or `host`. */
  network?: NetworkSetting;
  /** How an unreachable registry is retried (default: 3 attempts, 1 s and 4 s apart). */
  pullPolicy?: PullPolicy;
  /**
   * The agent's log limit: docker's own copy of a container's log is capped (two files of 4 times this),
   * so a container that prints without end cannot fill the daemon's disk. 0 = uncapped.
   */
  logLimitBytes?: number;
}

/**
 * docker's json-file log rotates at this many times the log limit. Generously: docker 20.10's readers lose
 * what a rotation moved (a follower started late reads only the current file), so rotation is kept for
 * containers that print far past the limit, where only a tail is kept anyway.
 */
const DOCKER_LOG_FILE_LIMITS = 4;

/** Runs containers from image names (and imported root-filesystem tarballs) with the docker daemon. */
export class DockerRuntime extends EngineRuntime {
  readonly name = 'docker';
  readonly api: DockerApi;
  protected readonly engine: DockerEngine;

  constructor(private readonly opts: DockerOptions = {}) {
    super(opts.cgroupParent);
    this.api = new DockerApi(opts.socketPath, undefined, undefined, opts.apiTimeoutMs);
    this.engine = new DockerEngine(
      this.api,
      opts.logLimitBytes ? 2 * DOCKER_LOG_FILE_LIMITS * opts.logLimitBytes : undefined,
    );
  }

  async available(): Promise<string | null> {
    try {
      await readAll(await this.api.stream({ path: '/_ping', timeoutMs: 3000 }));
    } catch (err) {
      return `docker daemon not answering at ${this.api.socketPath}: ${(err as Error).message}`;
    }
    // The parent group Berth reads usage from is a cgroupfs path; under the systemd driver docker wants a
    // slice name there instead.
    const info = await this.api.call<{ CgroupDriver?: string }>({ path: '/info' }).catch(() => null);
    if (info?.CgroupDriver && info.CgroupDriver !== 'cgroupfs')
      return (
        `docker uses the ${info.CgroupDriver} cgroup driver; Berth needs cgroupfs ` +
        '("exec-opts": ["native.cgroupdriver=cgroupfs"] in /etc/docker/daemon.json)'
      );
    return cgroupsUnusable();
  }

  protected async run(name: string, image: string, spec: RunSpec, cgroup: Cgroup): Promise<void> {
    await this.api.call({
      method: 'POST',
      path: '/containers/create',
      query: { name },
      json: {
        Image: image,
        Cmd: spec.command,
        Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
        ...(spec.cwd ? { WorkingDir: spec.cwd } : {}),
        Labels: { 'berth.container': spec.id, 'berth.workdir': spec.workDir },
        HostConfig: {
          Memory: spec.ram,
          MemorySwap: spec.ram,
          NanoCpus: Math.round(spec.vcpus * 1e9),
          CgroupParent: `/${cgroup.path}`,
          NetworkMode: this.opts.network ?? 'none',
          ...(this.opts.logLimitBytes
            ? {
                LogConfig: {
                  Type: 'json-file',
                  Config: {
                    'max-size': String(DOCKER_LOG_FILE_LIMITS * this.opts.logLimitBytes),
                    'max-file': '2',
                  },
                },
              }
            : {}),
        },
      },
    });
    await this.api.call({ method: 'POST', path: `/containers/${name}/start` });
  }

  protected runFailed(err: unknown, spec: RunSpec): Error {
    return classify(err, spec.image ?? '');
  }

  protected resolveImage(image: string | null): Promise<string> {
    return this.presentImage(image).catch((err: unknown) => {
      throw classify(err, image ?? '');
    });
  }

  /** The image name to create the container from; imports a root-filesystem tarball once. */
  private async presentImage(image: string | null): Promise<string> {
    const ref = classifyImage(image);
    if (ref.kind === 'none')
      throw new RunSpecError('image: the docker runtime needs an image; use the process runtime');
    if (ref.kind === 'tarball') {
      const name = `berth-rootfs:${await tarballKey(ref.path)}`;
      if (!(await this.imageExists(name))) {
        let progress: string;
        try {
          const res = await this.api.stream({
            method: 'POST',
            path: '/images/create',
            query: { fromSrc: '-', repo: name.split(':')[0]!, tag: name.split(':')[1]! },
            body: createReadStream(ref.path),
            contentType: 'application/x-tar',
            timeoutMs: 600_000,
          });
          progress = (await readAll(res)).toString();
        } catch (err) {
          // The daemon refusing the archive is the tarball's fault; not reaching the daemon is not.
          if (err instanceof DockerApiError)
            throw new ImageNotFoundError(ref.path, `docker import: ${err.message}`);
          throw err;
        }
        const failure = progressError(progress);
        if (failure) throw new ImageNotFoundError(ref.path, `docker import: ${failure}`);
      }
      return name;
    }
    if (await this.imageExists(ref.name)) return ref.name;
    if (this.opts.pull === false)
      throw new ImageNotFoundError(ref.name, 'not present on this machine (pulling is disabled)');
    await pullBounded(ref.name, () => this.pull(ref.name), this.opts.pullPolicy);
    if (!(await this.imageExists(ref.name)))
      throw new ImageNotFoundError(ref.name, 'pull finished but the image is not present');
    return ref.name;
  }

  /**
   * One pull, its failure classified by what the daemon says: the HTTP status (404: no such repository or
   * tag; 400: not a valid name; 5xx: the registry could not be reached or failed, unless its text is the
   * registry's "not found", which docker 20.10 also sends as a 500); a failure inside a 200 progress
   * stream carries only a message, read the same way.
   */
  private async pull(name: string): Promise<void> {
    const [repo, tag] = splitTag(name);
    let progress: string;
    try {
      const res = await this.api.stream({
        method: 'POST',
        path: '/images/create',
        query: { fromImage: repo, tag },
        timeoutMs: 600_000,
      });
      progress = (await readAll(res)).toString();
    } catch (err) {
      if (err instanceof DockerApiError) {
        if (err.status === 404) throw new ImageNotFoundError(name, err.message);
        if (err.status === 400) throw new ImageNotFoundError(name, `not a valid image name: ${err.message}`);
        // docker 20.10 answers a registry's "manifest unknown" with a 500 too: only the text tells.
        if (REGISTRY_NOT_FOUND.test(err.message)) throw new ImageNotFoundError(name, err.message);
        throw new RegistryUnavailableError(name, `pull: ${err.message}`);
      }
      throw err; // the daemon itself: RuntimeTransientError
    }
    const failure = progressError(progress);
    if (failure)
      throw REGISTRY_NOT_FOUND.test(failure)
        ? new ImageNotFoundError(name, failure)
        : new RegistryUnavailableError(name, `pull: ${failure}`);
  }

  private async imageExists(name: string): Promise<boolean> {
    try {
      await this.api.call({ path: `/images/${encodeURIComponent(name)}/json` });
      return true;
    } catch (err) {
      if (err instanceof DockerApiError && err.status === 404) return false;
      if (err instanceof DockerApiError && err.status === 400)
        throw new ImageNotFoundError(name, `not a valid image name: ${err.message}`);
      throw err;
    }
  }
}

/** The error a daemon reported inside a 200 progress stream (JSON lines), if any. */
function progressError(progress: string): string | null {
  for (const line of progress.split('\n')) {
    if (!line.trim()) continue;
    try {
      const msg = JSON.parse(line) as { error?: string; errorDetail?: { message?: string } };
      if (msg.error || msg.errorDetail) return msg.errorDetail?.message ?? msg.error ?? 'unknown error';
    } catch {
      // not JSON: not an error report
    }
  }
  return null;
}

function splitTag(name: string): [string, string] {
  const slash = name.lastIndexOf('/');
  const colon = name.lastIndexOf(':');
  return colon > slash ? [name.slice(0, colon), name.slice(colon + 1)] : [name, 'latest'];
}

/** Maps daemon errors to the classes the agent acts on: missing images are permanent, the rest transient. */
function classify(err: unknown, image: string): Error {
  // Already classified (RunSpecError, ImageNotFoundError, ImagePullError, RuntimeTransientError...).
  if (err instanceof Error && 'failureClass' in err) return err;
  if (err instanceof DockerApiError) {
    if (err.status === 404 && /image|manifest|repository/i.test(err.message))
      return new ImageNotFoundError(image, err.message);
    if (err.status === 400) return new RunSpecError(err.message);
    return new RuntimeTransientError('docker', err.message, { cause: err });
  }
  return new RuntimeTransientError('docker', (err as Error).message, { cause: err });
}

function notFoundOk(err: unknown): void {
  if (!(err instanceof DockerApiError && err.status === 404)) throw err;
}

/** The docker daemon's side of a container, over the Engine API. */
class DockerEngine implements ContainerEngine {
  readonly name = 'docker';
  readonly reportsOom = true;
  constructor(
    private readonly api: DockerApi,
    /** Both json-file logs together (HostConfig.LogConfig). */
    readonly logCapBytes?: number,
  ) {}

  async wait(container: string): Promise<void> {
    await this.api
      .call({ method: 'POST', path: `/containers/${container}/wait`, timeoutMs: 0 })
      .catch(notFoundOk);
  }

  async inspect(container: string): Promise<EngineState | null> {
    try {
      return engineState(await this.api.call<EngineInspect>({ path: `/containers/${container}/json` }));
    } catch (err) {
      if (err instanceof DockerApiError && err.status === 404) return null;
      throw err;
    }
  }

  async remove(container: string): Promise<void> {
    await this.api
      .call({ method: 'DELETE', path: `/containers/${container}`, query: { force: true, v: true } })
      .catch(notFoundOk);
  }

  async kill(container: string, sig: NodeJS.Signals): Promise<void> {
    try {
      await this.api.call({ method: 'POST', path: `/containers/${container}/kill`, query: { signal: sig } });
    } catch (err) {
      // 409: not running any more; 404: already removed. Either way there is nothing to signal.
      if (!(err instanceof DockerApiError && (err.status === 409 || err.status === 404))) throw err;
    }
  }

  async pause(container: string): Promise<void> {
    await this.api.call({ method: 'POST', path: `/containers/${container}/pause` });
  }

  async unpause(container: string): Promise<void> {
    await this.api.call({ method: 'POST', path: `/containers/${container}/unpause` });
  }

  async copyLogs(container: string, stdout: FileHandle, stderr: FileHandle, follow: boolean): Promise<void> {
    const res = await this.api.stream({
      path: `/containers/${container}/logs`,
      query: { follow, stdout: true, stderr: true },
      timeoutMs: 0,
    });
    // Multiplexed stream: 8-byte header (byte 0: 1 = stdout, 2 = stderr; bytes 4-7: big-endian length), then data.
    let buf: Buffer = Buffer.alloc(0);
    for await (const piece of res) {
      buf = buf.length ? Buffer.concat([buf, piece as Buffer]) : (piece as Buffer);
      while (buf.length >= 8) {
        const len = buf.readUInt32BE(4);
        if (buf.length < 8 + len) break;
        await (buf[0] === 2 ? stderr : stdout).write(buf.subarray(8, 8 + len));
        buf = buf.subarray(8 + len);
      }
    }
  }
}
