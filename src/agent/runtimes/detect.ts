// Choosing a runtime: by name from configuration, or the best one that works on this machine
// (DESIGN §8's order of preference: docker, podman, runc, process). A container without an image
// always runs on the process runtime.
import { DockerRuntime } from './docker.js';
import { PodmanRuntime } from './podman.js';
import { ProcessRuntime } from './process.js';
import { RuncRuntime } from './runc.js';
import type { Runtime } from './types.js';

export const RUNTIME_NAMES = ['docker', 'podman', 'runc', 'process'] as const;
/** A runtime's configuration name. */
export type RuntimeName = (typeof RUNTIME_NAMES)[number];

/** Options passed on to the runtime constructors. */
export interface RuntimeOptions {
  /** docker: pull missing images (default true). */
  pull?: boolean;
  /** runc: where unpacked root filesystems are cached. */
  imageCache?: string;
}

export function createRuntime(name: RuntimeName, opts: RuntimeOptions = {}): Runtime {
  switch (name) {
    case 'docker':
      return new DockerRuntime({ pull: opts.pull });
    case 'podman':
      return new PodmanRuntime({ pull: opts.pull });
    case 'runc':
      return new RuncRuntime(undefined, opts.imageCache);
    case 'process':
      return new ProcessRuntime();
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
  order: readonly RuntimeName[] = RUNTIME_NAMES,
  opts: RuntimeOptions = {},
): Promise<Detected> {
  const skipped: Detected['skipped'] = {};
  for (const name of order) {
    const rt = createRuntime(name, opts);
    const why = await rt.available();
    if (why === null) return { runtime: rt, skipped };
    skipped[name] = why;
  }
  return { runtime: new ProcessRuntime(), skipped };
}

/** The runtime a container runs on: no image means the process runtime, whatever was detected. */
export function runtimeFor(image: string | null, detected: Runtime, processRuntime: Runtime): Runtime {
  return image === null || image === '' ? processRuntime : detected;
}
