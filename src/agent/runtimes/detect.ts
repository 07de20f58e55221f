// Choosing a runtime: by name from configuration, or the best one that works on this machine
// (DESIGN §8's order of preference: docker, podman, runc, process). A container without an image
// always runs on the process runtime.
import { DockerRuntime } from './docker.js';
import { PodmanRuntime } from './podman.js';
import { ProcessRuntime, type ProcessRuntimeOptions } from './process.js';
import { RuncRuntime, type RuncCriuOptions } from './runc.js';
import { VmRuntime, type VmRuntimeOptions } from './vm.js';
import type { NetworkSetting } from './sandbox.js';
import { NoImageRuntimeError } from './errors.js';
import type { RunHandle, RunSpec, Runtime } from './types.js';

export const RUNTIME_NAMES = ['docker', 'podman', 'runc', 'process', 'vm'] as const;
/** A runtime's configuration name. */
export type RuntimeName = (typeof RUNTIME_NAMES)[number];
/**
 * What `auto` tries, in order. The vm runtime is only ever chosen by name: a guest per container costs
 * seconds of boot and its own memory, a price for checkpoints the operator decides to pay.
 */
export const DETECT_ORDER: readonly RuntimeName[] = ['docker', 'podman', 'runc', 'process'];

/** Options passed on to the runtime constructors. */
export interface RuntimeOptions {
  /** docker: pull missing images (default true). */
  pull?: boolean;
  /** runc: where unpacked root filesystems are cached. */
  imageCache?: string;
  /** Every runtime: the containers' network, `none` (own namespace, loopback only; default) or `host`. */
  network?: NetworkSetting;
  /** docker, podman: the cap on the engine's own copy of a container's log (the agent's log limit). */
  logLimitBytes?: number;
  /** Every runtime: the cgroup under which containers' groups are created (default `berth`). */
  cgroupParent?: string;
  /** vm: the guest image and the accelerator (its `cgroupParent` is the one above). */
  vm?: Omit<VmRuntimeOptions, 'cgroupParent'>;
  /** runc: its CRIU whole state (`runc_criu`). */
  runc?: RuncCriuOptions;
  /** process: the sandbox and what it must hide (its `network` and `cgroupParent` are the ones above). */
  process?: Omit<ProcessRuntimeOptions, 'network' | 'cgroupParent'>;
}

export function createRuntime(name: RuntimeName, opts: RuntimeOptions = {}): Runtime {
  switch (name) {
    case 'docker':
      return new DockerRuntime({
        pull: opts.pull,
        network: opts.network,
        logLimitBytes: opts.logLimitBytes,
        cgroupParent: opts.cgroupParent,
      });
    case 'podman':
      return new PodmanRuntime({
        pull: opts.pull,
        network: opts.network,
        logLimitBytes: opts.logLimitBytes,
        cgroupParent: opts.cgroupParent,
      });
    case 'runc':
      return new RuncRuntime(
        undefined,
        opts.imageCache,
        undefined,
        opts.network,
        opts.cgroupParent,
        opts.runc,
      );
    case 'process':
      return new ProcessRuntime(undefined, {
        ...opts.process,
        network: opts.network,
        cgroupParent: opts.cgroupParent,
      });
    case 'vm':
      return new VmRuntime({ ...opts.vm, cgroupParent: opts.cgroupParent });
    default:
      throw new Error(`runtime: expected one of ${RUNTIME_NAMES.join(', ')}, got ${JSON.stringify(name)}`);
  }
}

/** The detection outcome: the chosen runtime and why each better one was passed over. */
export interface Detected {
  runtime: Runtime;
  skipped: Partial<Record<RuntimeName, string>>;
}

/** The first usable runtime in preference order (process is always usable). */
export async function detectRuntime(
  order: readonly RuntimeName[] = DETECT_ORDER,
  opts: RuntimeOptions = {},
): Promise<Detected> {
  const skipped: Detected['skipped'] = {};
  for (const name of order) {
    const rt = createRuntime(name, opts);
    const why = await rt.available();
    if (why === null) return { runtime: rt, skipped };
    skipped[name] = why;
  }
  return { runtime: createRuntime('process', opts), skipped };
}

/** The runtime a container runs on: no image means the process runtime, whatever was detected. */
export function runtimeFor(image: string | null, detected: Runtime, processRuntime: Runtime): Runtime {
  return image === null || image === '' ? processRuntime : detected;
}

/**
 * Stands in for the image runtime on a node where none works: every start is refused (perm) naming why
 * each image runtime was passed over, so an image request fails at once instead of being retried here.
 */
export class NoImageRuntime implements Runtime {
  readonly name = 'image';
  constructor(private readonly why: string) {}
  async available(): Promise<string | null> {
    return `no image runtime${this.why ? ` (${this.why})` : ''}`;
  }
  async start(spec: RunSpec): Promise<RunHandle> {
    throw new NoImageRuntimeError(
      `image ${JSON.stringify(spec.image)}: this node has no runtime for images (docker, podman or runc)` +
        (this.why ? `: ${this.why}` : ''),
    );
  }
  async reattach(): Promise<RunHandle | null> {
    return null;
  }
  async discard(): Promise<void> {}
}
