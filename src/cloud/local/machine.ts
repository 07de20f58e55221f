// A machine emulated on this host: a detached process tree (own session, like a VM that outlives whoever
// created it) in its own cgroup slice sized to its type and, optionally, its own network namespace. The
// local driver's instances are such machines, and so are the EC2 emulator's booted instances.
import { spawn } from 'node:child_process';
import { open, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { cgroupAt, probeCgroups, type Cgroup } from '../../agent/runtimes/cgroup.js';
import { createRuntime, RUNTIME_NAMES } from '../../agent/runtimes/detect.js';
import { isAlive, processRef, type ProcessRef } from '../../agent/runtimes/procfs.js';
import { createNetns, netnsExec, removeNetns, type NetnsLink } from './netns.js';

/** Where in a machine's slice its own processes (the agent) run, and where its containers' groups go. */
export const slicePaths = (slice: string): { agent: string; containers: string } => ({
  agent: `${slice}/agent`,
  containers: `${slice}/containers`,
});

/**
 * A machine's isolation: its cgroup slice (null without limits), the leaf its processes run in (cgroup v2
 * allows no processes in a group with children: the agent's leaf sits beside its containers' groups), and
 * its network namespace (null: the host's).
 */
export interface MachineSlots {
  cgroup: Cgroup | null;
  agentGroup: Cgroup | null;
  netns: NetnsLink | null;
}

/**
 * Creates the machine's cgroup slice (at `cgroupPath`, sized to vcpus and ram) and network namespace, as
 * asked; on failure nothing is left.
 */
export async function createMachineSlots(
  id: string,
  size: { vcpus: number; ram: number },
  o: { cgroupPath: string | null; netns: boolean; routes?: string[] },
): Promise<MachineSlots> {
  let cgroup: Cgroup | null = null;
  let agentGroup: Cgroup | null = null;
  let netns: NetnsLink | null = null;
  try {
    if (o.cgroupPath) {
      const host = await probeCgroups();
      cgroup = cgroupAt(host, o.cgroupPath);
      await cgroup.create(size);
      // The agent's leaf, under the slice's limits (it sets none of its own).
      agentGroup = cgroupAt(host, slicePaths(cgroup.path).agent);
      await agentGroup.create(size);
    }
    if (o.netns) netns = await createNetns(id, o.routes ?? []);
  } catch (err) {
    await agentGroup?.remove().catch(() => {});
    await cgroup?.remove().catch(() => {});
    throw err;
  }
  return { cgroup, agentGroup, netns };
}

const sh = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Starts `script` (sh) detached inside the machine's slots; stdout and stderr go to `logFile`. Returns the
 * process (its group holds everything it starts that does not leave it; the cgroup holds the rest).
 */
export async function startMachineProcess(
  slots: MachineSlots,
  o: { script: string; logFile: string; env: NodeJS.ProcessEnv; cwd: string },
): Promise<ProcessRef> {
  // The wrapper joins the slice's agent leaf first, so that everything it starts is accounted there.
  const join_ = ((slots.agentGroup ?? slots.cgroup)?.procsFiles() ?? [])
    .map((f) => `echo $$ > ${sh(f)} || exit 125`)
    .join('; ');
  const script = `${join_ || ':'}; ${o.script}`;
  // nsenter changes only the network namespace (`ip netns exec` would also remount /sys, hiding cgroups).
  const argv = slots.netns ? [...netnsExec(slots.netns), '/bin/sh', '-c', script] : ['/bin/sh', '-c', script];
  const log = await open(o.logFile, 'a', 0o600);
  try {
    const child = spawn(argv[0]!, argv.slice(1), {
      detached: true, // own session and process group: survives its creator, like a VM
      stdio: ['ignore', log.fd, log.fd],
      env: o.env,
      cwd: o.cwd,
    });
    const pid = await new Promise<number>((res, rej) => {
      child.once('spawn', () => res(child.pid!));
      child.once('error', rej);
    });
    child.unref();
    return (await processRef(pid)) ?? { pid, startTicks: -1 };
  } finally {
    await log.close();
  }
}

/** What stopMachine needs to know of a machine (as its owner recorded it). */
export interface MachineRecord {
  process: ProcessRef | null;
  /** Path of its cgroup slice (below the root, or in every v1 hierarchy), or null. */
  cgroup: string | null;
  netns?: NetnsLink | null;
  /** Its directory, removed at the end. */
  dir: string;
}

/**
 * Stops everything a machine runs: its process group (SIGTERM, then SIGKILL after `graceMs`), the
 * containers an agent left under `containersDir` (each runtime finds its own), every process left in its
 * slice and namespace; then removes the slice, the namespace and the directory. Idempotent.
 */
export async function stopMachine(
  m: MachineRecord,
  o: { containersDir: string; graceMs: number },
): Promise<void> {
  const p = m.process;
  if (p && (await isAlive(p))) {
    killQuietly(-p.pid, 'SIGTERM');
    const until = Date.now() + o.graceMs;
    while ((await isAlive(p)) && Date.now() < until) await new Promise((r) => setTimeout(r, 25));
    if (await isAlive(p)) killQuietly(-p.pid, 'SIGKILL');
    while (await isAlive(p)) await new Promise((r) => setTimeout(r, 10));
    killQuietly(-p.pid, 'SIGKILL'); // anything left in its group (only when we saw it alive: pids are reused)
  }
  // Every process left in the slice, the containers' included (they nest in it), frozen or not: at once,
  // whatever records the agent left.
  const slice = m.cgroup ? cgroupAt(await probeCgroups(), m.cgroup) : null;
  await slice?.killAll(2000);
  // Then each runtime reaps its own containers (runc's state and mounts, docker and podman containers),
  // which also removes their cgroups.
  const cgroupParent = m.cgroup ? slicePaths(m.cgroup).containers : undefined;
  for (const cid of await readdir(o.containersDir).catch(() => [] as string[])) {
    const runDir = join(o.containersDir, cid, 'run');
    for (const name of RUNTIME_NAMES) {
      const rt = createRuntime(name, { cgroupParent });
      const h = await rt.reattach(cid, runDir).catch(() => null);
      if (!h) continue;
      await h.signal('SIGKILL').catch(() => {});
      // Bounded, and the timer cleared: a pending 15 s timer would keep a stopping `berth up` alive.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        h.wait().catch(() => {}),
        new Promise((r) => (timer = setTimeout(r, 15_000))),
      ]).finally(() => clearTimeout(timer));
      break;
    }
  }
  if (slice) {
    await slice.killAll(2000);
    await slice.remove();
  }
  // Only now that its processes are gone (removeNetns also kills any left inside).
  if (m.netns) await removeNetns(m.netns);
  await rm(m.dir, { recursive: true, force: true });
}

export function killQuietly(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}
