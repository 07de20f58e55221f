// Direct cgroup control: one group per container (berth/<id>), on cgroup v1 or v2, whichever the host
// mounts. This is how the process runtime enforces hard limits, how every runtime reads usage (process
// and runc from the container's group, docker and podman from a parent group that outlives the engine's
// own), and how process and runc freeze a container. The runtimes ask for limits, stats and freezing
// through the `Cgroup` interface and never see the version.
//
// Which version: the filesystem type of the root (statfs): cgroup2 mounted there is v2 (a v2-only host);
// otherwise the v1 controller hierarchies below it (a v1 or "hybrid" host, whose unified hierarchy at
// <root>/unified holds no controllers Berth needs).
import { statfs } from 'node:fs/promises';
import type { Cgroup } from './cgroup-common.js';
import { CgroupV1, v1Unusable } from './cgroup-v1.js';
import { CgroupV2, v2Unusable, type CgroupV2Options } from './cgroup-v2.js';

export {
  CFS_PERIOD_US,
  cfsQuotaUs,
  type Cgroup,
  type CgroupLimits,
  type CgroupStats,
} from './cgroup-common.js';
export { CgroupV1 } from './cgroup-v1.js';
export { CgroupV2 } from './cgroup-v2.js';

/** Where the cgroup hierarchies are mounted (overridable for machines that mount them elsewhere). */
export const CGROUP_ROOT = process.env.BERTH_CGROUP_ROOT ?? '/sys/fs/cgroup';

/**
 * The parent group under which every container's group lives by default (the agent's `cgroup_parent`; the
 * local driver nests it in the instance's slice).
 */
export const CGROUP_PARENT = 'berth';

const CGROUP2_SUPER_MAGIC = 0x63677270;

/** What a host's cgroups are: a usable version, or why there is none. */
export type CgroupHost =
  | { root: string; version: 1 | 2; unusable: null }
  | { root: string; version: 1 | 2 | null; unusable: string };

const probes = new Map<string, Promise<CgroupHost>>();

/** The cgroup version mounted at `root` and whether Berth can create groups there (probed once per root). */
export function probeCgroups(root = CGROUP_ROOT): Promise<CgroupHost> {
  let p = probes.get(root);
  if (!p) {
    p = probe(root);
    probes.set(root, p);
  }
  return p;
}

async function probe(root: string): Promise<CgroupHost> {
  const type = await statfs(root).then(
    (s) => s.type,
    () => null,
  );
  if (type === null) return { root, version: null, unusable: `no cgroup filesystem at ${root}` };
  if (type === CGROUP2_SUPER_MAGIC) {
    const why = await v2Unusable(root);
    return why ? { root, version: 2, unusable: why } : { root, version: 2, unusable: null };
  }
  const why = await v1Unusable(root);
  return why ? { root, version: 1, unusable: why } : { root, version: 1, unusable: null };
}

/** Why no cgroup can be created under `root`, or null when it can. */
export async function cgroupsUnusable(root = CGROUP_ROOT): Promise<string | null> {
  return (await probeCgroups(root)).unusable;
}

/** The group at `path` (below the root) on a host whose cgroups are usable. */
export function cgroupAt(host: CgroupHost, path: string, opts: CgroupV2Options = {}): Cgroup {
  if (host.unusable !== null) throw new Error(`cgroups unusable: ${host.unusable}`);
  return host.version === 2 ? new CgroupV2(path, host.root, opts) : new CgroupV1(path, host.root);
}

/** The group of container `id` under `parent`. */
export function containerCgroup(host: CgroupHost, id: string, parent = CGROUP_PARENT): Cgroup {
  return cgroupAt(host, `${parent}/${id}`);
}

/** Probes `root` and returns the group of container `id`; throws (with the reason) when cgroups are unusable. */
export async function requireContainerCgroup(
  id: string,
  parent = CGROUP_PARENT,
  root = CGROUP_ROOT,
): Promise<Cgroup> {
  return containerCgroup(await probeCgroups(root), id, parent);
}

/** SIGKILLs every process in the group until none is left (or `deadlineMs` passes), then removes it. */
export async function killCgroup(cgroup: Cgroup, deadlineMs = 5000): Promise<void> {
  const until = Date.now() + deadlineMs;
  await cgroup.killAll(deadlineMs);
  await cgroup.remove(Math.max(0, until - Date.now()));
}
