// What the docker and podman runtimes share: a container named berth-<id>, limited by Berth's parent cgroup
// (/berth/<id>), created by the engine (docker's API, podman's CLI), recorded in run.json for a restarted
// agent and followed by EngineHandle. A runtime supplies only what differs: how an image is made present
// and how a container is created and started.
import { requireContainerCgroup, type Cgroup } from './cgroup.js';
import {
  discardEngine,
  EngineHandle,
  reattachEngine,
  recordEngineRun,
  type ContainerEngine,
} from './engine-handle.js';
import { clearRunFiles } from './shim.js';
import { RunSpecError, validateSpec, type RunHandle, type RunSpec, type Runtime } from './types.js';

/** A runtime over a container engine (docker, podman). */
export abstract class EngineRuntime implements Runtime {
  abstract readonly name: string;
  protected abstract readonly engine: ContainerEngine;

  protected constructor(private readonly cgroupParent: string | undefined) {}

  abstract available(): Promise<string | null>;

  /** The image name to create the container from, pulled or imported as needed; its failures classified. */
  protected abstract resolveImage(image: string | null): Promise<string>;

  /** Creates and starts container `name` from `image` under `cgroup`; throws what the engine said. */
  protected abstract run(name: string, image: string, spec: RunSpec, cgroup: Cgroup): Promise<void>;

  /** The error a failed run() becomes (the classes the agent acts on). */
  protected abstract runFailed(err: unknown, spec: RunSpec): Error;

  async start(spec: RunSpec): Promise<RunHandle> {
    validateSpec(spec);
    if (spec.gpus > 0) throw new RunSpecError(`gpus: GPU containers are not supported yet, got ${spec.gpus}`);
    const image = await this.resolveImage(spec.image);
    const name = `berth-${spec.id}`;
    await clearRunFiles(spec.workDir);
    await this.engine.remove(name); // a leftover of a crashed earlier attempt would block the name
    const cgroup = await requireContainerCgroup(spec.id, this.cgroupParent);
    await cgroup.create({ vcpus: spec.vcpus, ram: spec.ram });
    try {
      await this.run(name, image, spec, cgroup);
    } catch (err) {
      await this.engine.remove(name).catch(() => {});
      await cgroup.remove().catch(() => {});
      throw this.runFailed(err, spec);
    }
    await recordEngineRun(this.name, spec.id, spec.workDir);
    return new EngineHandle(this.engine, spec.id, spec.workDir, cgroup);
  }

  reattach(id: string, workDir: string): Promise<RunHandle | null> {
    return reattachEngine(this.engine, id, workDir, this.cgroupParent);
  }

  discard(id: string): Promise<void> {
    return discardEngine(this.engine, id, this.cgroupParent);
  }
}
